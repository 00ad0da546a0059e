import type { Claim, RequestEncoded } from "../../ApprovalStore.js"

/**
 * Whether a request row meets a claim, judged at the claim's time: pending, and not yet warned, or
 * within or past its deadline. The memory driver's claim; the SQL driver's check of a row it holds
 * before it folds a claim into its write (the statement then judges the row as it is).
 */
export const meets = (claim: Claim, row: RequestEncoded): boolean => {
  if (row.status !== "pending") return false
  switch (claim._tag) {
    case "Unwarned":
      return row.warnedAt === undefined
    case "BeforeDeadline":
      return row.expiresAt > claim.at
    case "PastDeadline":
      return row.expiresAt <= claim.at
  }
}
