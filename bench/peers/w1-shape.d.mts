// Types of w1-shape.mjs for bench/w1.ts, which takes its workload from there.
import type { MatchInput, PolicyInput } from "@tool-gate/core/Policy"

export declare const toolNames: ReadonlyArray<string>
export declare const policyInput: PolicyInput
export declare const makeCalls: (count: number) => Array<MatchInput>
