/**
 * Drives load through the SDK the way a careful client does: every write
 * carries an explicit request id; when the SDK gives up (no answer after its
 * own attempts) or the service says Unavailable / NotCaughtUp, the call is
 * retried with the very same request id, and counted.
 */
import type { OperationName, RequestOf, ResponseOf } from "../../../contracts/api.ts"
import { NoResponse, type WorkingMemoryClient } from "../../../sdk/client.ts"
import { sleep } from "./audit.ts"

export interface CallStats {
  /** Calls the SDK gave up on (NoResponse) and the test sent again with the same request id. */
  noResponse: number
  /** Refusals that say "try again": Unavailable, NotCaughtUp. */
  retryableRefusals: number
  /** Any other failure: the scenario fails on these. */
  failures: Array<{ readonly operation: string; readonly error: string }>
}

export const newStats = (): CallStats => ({ noResponse: 0, retryableRefusals: 0, failures: [] })

const tagOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null ? ((error as { _tag?: unknown })._tag as string | undefined) : undefined

/** Calls until answered, resending the same body (same request id); gives up after `deadlineMs`. */
export const callUntilAnswered = async <O extends OperationName>(
  client: WorkingMemoryClient,
  agentId: string,
  operation: O,
  request: RequestOf<O>,
  stats: CallStats,
  deadlineMs = 120_000,
): Promise<ResponseOf<O> | undefined> => {
  const deadline = Date.now() + deadlineMs
  while (true) {
    try {
      return await client.call(agentId, operation, request)
    } catch (error) {
      const tag = tagOf(error)
      if (error instanceof NoResponse) stats.noResponse++
      else if (tag === "Unavailable" || tag === "NotCaughtUp") stats.retryableRefusals++
      else {
        stats.failures.push({ operation, error: `${tag ?? ""} ${String(error)}` })
        return undefined
      }
      if (Date.now() > deadline) {
        stats.failures.push({ operation, error: `still unanswered after ${deadlineMs} ms: ${String(error)}` })
        return undefined
      }
      await sleep(100)
    }
  }
}

/** Runs `work` over the items with at most `concurrency` in flight. */
export const pool = async <A>(
  items: ReadonlyArray<A>,
  concurrency: number,
  work: (item: A, index: number) => Promise<void>,
): Promise<void> => {
  let next = 0
  const lanes = Array.from({ length: Math.min(concurrency, items.length) }, async () => {
    while (next < items.length) {
      const index = next++
      await work(items[index]!, index)
    }
  })
  await Promise.all(lanes)
}

const SENTENCES = [
  "The supplier confirmed the shipment leaves on Tuesday.",
  "Remember that the client prefers short written updates.",
  "Budget review moved to the afternoon meeting.",
  "The test suite found two flaky cases in the parser.",
  "We agreed to ship the beta to ten pilot users first.",
  "Marketing wants the launch copy by Friday noon.",
  "The on-call rotation changes next week.",
  "A customer asked whether exports support CSV.",
]

/** A plausible entry body, different for each index. */
export const contentFor = (i: number): string =>
  `Note ${i}: ${SENTENCES[i % SENTENCES.length]} ${SENTENCES[(i * 7 + 3) % SENTENCES.length]}`

export const percentile = (xs: ReadonlyArray<number>, p: number): number => {
  if (xs.length === 0) return 0
  const sorted = Float64Array.from(xs).sort()
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)))
  return sorted[rank - 1]!
}
