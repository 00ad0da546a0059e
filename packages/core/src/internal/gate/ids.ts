/** Fresh ids for the records the gate creates: random, prefixed by what they name. */
import { RequestId } from "../../ApprovalRequest.js"
import { SessionApprovalId } from "../../SessionApproval.js"

const newId = (prefix: string): string => `${prefix}_${crypto.randomUUID()}`

/** The id of a new approval request. */
export const requestId = (): RequestId => RequestId.make(newId("req"))

/** The id of a new session approval. */
export const sessionApprovalId = (): SessionApprovalId => SessionApprovalId.make(newId("sa"))
