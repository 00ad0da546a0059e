import { Effect } from "effect"
import * as fs from "node:fs"
import * as Policy from "@tool-gate/core/Policy"
const a = Effect.runSync(Policy.fromYaml(fs.readFileSync("examples/policy.yaml", "utf8")))
const b = Effect.runSync(Policy.fromJson(fs.readFileSync("examples/policy.json", "utf8")))
console.log(a.version, b.version, a.warnings, b.warnings)
