/** Fresh ids for the records the gate creates: random, prefixed by what they name. */
import type { RequestId } from "../../ApprovalRequest.js"
import type { SessionApprovalId } from "../../SessionApproval.js"

const newId = (prefix: string): string => `${prefix}_${crypto.randomUUID()}`

/** The id of a new approval request. */
export const requestId = (): RequestId => newId("req") as RequestId

/** The id of a new session approval. */
export const sessionApprovalId = (): SessionApprovalId => newId("sa") as SessionApprovalId
