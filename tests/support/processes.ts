/** A command run to its end in a process of its own: its output and exit code. */
export interface Ended {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** Runs `command` to its end, reading both outputs while it runs (a full pipe would stall it). */
export const runToEnd = async (
  command: ReadonlyArray<string>,
  options: { readonly cwd?: string; readonly env?: Record<string, string | undefined> } = {}
): Promise<Ended> => {
  const child = Bun.spawn([...command], { ...options, stdout: "pipe", stderr: "pipe", stdin: "ignore" })
  const [stdout, stderr, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited
  ])
  return { code, stdout, stderr }
}
