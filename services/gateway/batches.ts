/**
 * Recording a batch of entries (`entry.recordMany`): every entry validated, decided and appended as
 * `entry.record` does it (entries.ts), each its own event and its own result, a refusal naming its field
 * within the batch. The appends are pipelined, sent in the batch's order; the batch waits whole
 * (`Overloaded`) under back-pressure unless every entry of it is already recorded.
 */
import { Effect, Result } from "effect"
import type { RequestOf, ResponseOf } from "../../contracts/api.ts"
import {
  type ApiError,
  BatchTooLarge,
  IdempotencyConflict,
  InvalidState,
  ValidationError,
} from "../../contracts/errors.ts"
import type { EventOf } from "../../contracts/events.ts"
import { decodeRequestValue, encodeError, validationErrorOf } from "../platform/api/serve.ts"
import type { BackPressure } from "./back-pressure.ts"
import type { Entries } from "./entries.ts"
import type { GatewaySettingsShape } from "./settings.ts"
import type { Writes } from "./writes.ts"

/** Appends of one batch in flight at once: each entry has a subject of its own, so none waits for another's ack. */
const BATCH_APPEND_WINDOW = 64

type RecordManyResult = ResponseOf<"recordMany">["results"][number]

/** An item's field, as the batch names it: `entries.<index>.<field>`. */
const itemField = (index: number, field: string) =>
  field === "(body)" ? `entries.${index}` : `entries.${index}.${field}`

/** A refusal of one entry of a batch, its field named within the batch. */
const inItem = (index: number, error: ApiError): ApiError => {
  switch (error._tag) {
    case "ValidationError":
      return new ValidationError({
        field: itemField(index, error.field),
        reason: error.reason,
        issues: error.issues.map((i) => ({ field: itemField(index, i.field), reason: i.reason })),
      })
    case "InvalidState":
      return new InvalidState({ field: itemField(index, error.field), reason: error.reason })
    case "IdempotencyConflict":
      return new IdempotencyConflict({ field: itemField(index, error.field), reason: error.reason })
    default:
      return error
  }
}

/** The refusal of one entry as the wire carries every refusal: its fields and its message. */
const refusedItem = (index: number, error: ApiError): RecordManyResult => ({
  index,
  ok: false,
  error: encodeError(inItem(index, error)) as unknown as ApiError,
})

export const makeBatches = (
  settings: GatewaySettingsShape,
  backPressure: BackPressure,
  { knownView }: Writes,
  { decideEntry, appendEntry, firstRecord }: Entries,
) => {
  /**
   * A batch: every entry validated, decided and appended as `entry.record` does it, each its own event
   * (so each is stored whole or not at all), and answered in its own result. The appends are pipelined,
   * sent in the batch's order, so the log holds the entries in that order unless an append is retried.
   */
  const recordMany = Effect.fn("Gateway.recordMany")(function* (agentId: string, request: RequestOf<"recordMany">) {
    const size = request.entries.length
    if (size > settings.maxBatchEntries)
      return yield* Effect.fail(new BatchTooLarge({ field: "entries", size, limit: settings.maxBatchEntries }))
    const view = yield* knownView(agentId)
    const results: Array<RecordManyResult | undefined> = Array.from({ length: size })
    const decided: Array<{
      readonly index: number
      readonly request: RequestOf<"recordEntry">
      readonly entryId: string
      readonly event: EventOf<"EntryRecorded">
    }> = []
    request.entries.forEach((item, index) => {
      const decoded = decodeRequestValue("recordEntry", item)
      if (!decoded.ok) {
        results[index] = refusedItem(index, validationErrorOf(decoded.issues))
        return
      }
      const { entryId, decision } = decideEntry(agentId, view, decoded.value)
      if (!decision.ok) results[index] = refusedItem(index, decision.error)
      else decided.push({ index, request: decoded.value, entryId, event: decision.event })
    })
    const overloaded = decided.length > 0 ? yield* backPressure.check(agentId) : null
    if (overloaded !== null) {
      // Only a batch whose every entry is already recorded (a retry after a lost reply) is answered now.
      for (const item of decided) {
        const first = item.request.requestId === undefined ? null : yield* firstRecord(agentId, item.entryId)
        if (first === null) return yield* Effect.fail(overloaded)
      }
    }
    const appended = yield* Effect.forEach(
      decided,
      (item) => Effect.result(appendEntry(agentId, item.request, item.entryId, item.event)),
      { concurrency: BATCH_APPEND_WINDOW },
    )
    let seq = 0
    appended.forEach((result, i) => {
      const { index } = decided[i]!
      if (Result.isFailure(result)) {
        results[index] = refusedItem(index, result.failure)
        return
      }
      seq = Math.max(seq, result.success.seq)
      results[index] = { index, ok: true, ...result.success }
    })
    return { results: results as RecordManyResult[], seq } satisfies ResponseOf<"recordMany">
  })

  return { recordMany }
}
