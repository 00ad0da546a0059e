/**
 * Fresh ids for the records the gate creates: random, prefixed by what they name. Well formed by
 * construction, so not validated again.
 */
import { RequestId } from "../../ApprovalRequest.js"
import { SessionApprovalId } from "../../SessionApproval.js"

const newId = (prefix: string): string => `${prefix}_${crypto.randomUUID()}`

/** The id of a new approval request. */
export const requestId = (): RequestId => RequestId.make(newId("req"), { disableValidation: true })

/** The id of a new session approval. */
export const sessionApprovalId = (): SessionApprovalId =>
  SessionApprovalId.make(newId("sa"), { disableValidation: true })
