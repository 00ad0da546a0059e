/**
 * W2 on LangGraph JS: a one-node graph whose node asks for approval with `interrupt()` before it
 * runs the tool, compiled with the SQLite checkpointer (`SqliteSaver`, on a better-sqlite3 file in
 * WAL mode). `invoke` runs until the interrupt, checkpointed (pause); the answer travels in
 * `Command({ resume })`, so LangGraph has no separate approve step (the decision is durable once
 * the resume's checkpoint commits); `invoke(new Command({ resume }))` re-runs the node from its
 * start, `interrupt()` returns the decision and the tool runs (resume). No model: the graph is the
 * agent's tool step alone.
 */
import { Annotation, Command, END, interrupt, START, StateGraph } from "@langchain/langgraph"
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite"
import { join } from "node:path"
import { openDatabase, report, runW2, tempDir, version } from "./lib.mjs"

const State = Annotation.Root({
  call: Annotation(),
  result: Annotation()
})

let ran = 0
const checkpointer = new SqliteSaver(openDatabase(join(tempDir(), "langgraph.db")))
const graph = new StateGraph(State)
  .addNode("tool", async (state) => {
    const decision = interrupt({ tool: state.call.name, args: state.call.args })
    if (decision?.approved !== true) return { result: "denied" }
    ran++
    return { result: `ran ${state.call.args.command}` }
  })
  .addEdge(START, "tool")
  .addEdge("tool", END)
  .compile({ checkpointer })

const config = (id) => ({ configurable: { thread_id: id } })

const pause = async (id) => {
  const result = await graph.invoke({ call: { name: "bash", args: { command: `make ${id}` } } }, config(id))
  if (result.__interrupt__?.length !== 1) throw new Error(`${id}: no interrupt`)
}

const approve = async () => {}

const resume = async (id) => {
  const before = ran
  const result = await graph.invoke(new Command({ resume: { approved: true } }), config(id))
  if (ran === before || result.result !== `ran make ${id}`) throw new Error(`${id}: the approved tool did not run`)
}

report(
  await runW2({
    peer: "langgraph",
    versions: [
      version("@langchain/langgraph"),
      version("@langchain/langgraph-checkpoint-sqlite"),
      version("better-sqlite3")
    ],
    notes: "interrupt() + Command({ resume }) with SqliteSaver; the decision travels in the resume (no approve write)",
    pause,
    approve,
    resume
  })
)
