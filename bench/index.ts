/**
 * `npm run bench`: every workload this build can run, several runs each, medians reported
 * against the targets in ../shared/DESIGN.md. Each run is a fresh process so one run's JIT and
 * heap do not flatter the next.
 */
const RUNS = 3

const workloads = [
  { name: "W1 pure evaluator", file: "bench/w1.ts", target: 1_000_000 },
  { name: "W1 ToolGate service", file: "bench/w1Service.ts", target: 300_000 }
]

const runOnce = async (file: string) => {
  const child = Bun.spawn([process.execPath, file], { stdout: "pipe", stderr: "inherit" })
  const out = await new Response(child.stdout).text()
  if ((await child.exited) !== 0) throw new Error(`${file} failed`)
  return JSON.parse(out.trim().split("\n").pop()!) as { decisionsPerSec: number; p50ns: number; p99ns: number }
}

const median = (xs: Array<number>) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

console.log(`| workload | decisions/s (median of ${RUNS}) | p50 ns | p99 ns | target | met |`)
console.log("| --- | --- | --- | --- | --- | --- |")
for (const w of workloads) {
  const runs = []
  for (let i = 0; i < RUNS; i++) runs.push(await runOnce(w.file))
  const rate = median(runs.map((r) => r.decisionsPerSec))
  console.log(
    `| ${w.name} | ${rate.toLocaleString("en-US")} | ${median(runs.map((r) => r.p50ns))} | ${
      median(runs.map((r) => r.p99ns))
    } | ${w.target.toLocaleString("en-US")} | ${rate >= w.target ? "yes" : "no"} |`
  )
}
