/**
 * A write is applied once however late its retry: after JetStream's dedupe
 * window has passed and the views' memory of recent event ids has moved on,
 * a retry with the same request id is answered as the first attempt was,
 * and nothing is stored or applied again. A retry with the same request id
 * and a different body is refused with a typed error.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { OperationName, RequestOf, ResponseOf } from "../contracts/api.ts"
import { viewSnapshot } from "../domain/agent-view.ts"
import { lastSeq } from "./support/log.ts"
import { startTestSystem, type TestSystem } from "./support/system.ts"

const DEDUPE_WINDOW_MS = 1_500

let system: TestSystem
beforeAll(async () => {
  system = await startTestSystem({ dedupeWindowMs: DEDUPE_WINDOW_MS }, { fade: false, memory: false })
})
afterAll(async () => system?.stop())

const AGENT = "late-retry"
const call = <O extends OperationName>(operation: O, request: RequestOf<O>): Promise<ResponseOf<O>> =>
  system.client.call(AGENT, operation, request)

describe("a retry after the dedupe window and the views' memory of event ids", () => {
  it("is answered as the original, for every write, and nothing is applied twice", async () => {
    await call("registerAgent", { requestId: "reg-1", role: "main" })
    const writes: Array<{ readonly operation: OperationName; readonly request: Record<string, unknown> }> = [
      { operation: "recordEntry", request: { requestId: "rec-1", origin: "USER", content: "The lease on the flat ends in May." } },
      { operation: "beginStep", request: { requestId: "begin-1", stepId: "s1" } },
      { operation: "buildContext", request: { requestId: "build-1", stepId: "s1" } },
      { operation: "referenceEntries", request: { requestId: "ref-1", stepId: "s1", entryIds: ["rec-1"] } },
      { operation: "setFocus", request: { requestId: "focus-1", focus: { task: "find a new flat" } } },
      { operation: "endStep", request: { requestId: "end-1", stepId: "s1" } },
      { operation: "retuneBudget", request: { requestId: "retune-1", budget: 9_000 } },
      { operation: "enterHyperfocus", request: { requestId: "hyper-1" } },
      { operation: "exitHyperfocus", request: { requestId: "calm-1" } },
    ]
    const originals: unknown[] = []
    for (const w of writes) originals.push(await call(w.operation, w.request as never))

    // More events of this agent than its view remembers ids of (at most 1 024, two generations of 512), then past the dedupe window.
    const filler = 1_100
    for (let i = 0; i < filler; i += 40) {
      await Promise.all(
        Array.from({ length: Math.min(40, filler - i) }, (_, j) =>
          call("recordEntry", { requestId: `filler-${i + j}`, origin: "INTERNAL", content: `Note ${i + j} on the flat search.` }),
        ),
      )
    }
    await new Promise((r) => setTimeout(r, DEDUPE_WINDOW_MS + 1_000))

    const seqBefore = await lastSeq(system.server.url)
    const viewBefore = viewSnapshot((await system.liveView(AGENT, seqBefore))!)

    const retries: unknown[] = []
    for (const w of writes) retries.push(await call(w.operation, w.request as never))

    const expected = originals.map((reply, i) => (writes[i]!.operation === "recordEntry" ? { ...(reply as object), duplicate: true } : reply))
    expect(retries).toEqual(expected)
    expect(await lastSeq(system.server.url)).toBe(seqBefore)
    expect(viewSnapshot((await system.liveView(AGENT, seqBefore))!)).toEqual(viewBefore)
    // A registration retried is answered with the registration it made.
    await expect(call("registerAgent", { requestId: "reg-1", role: "main" })).resolves.toMatchObject({ seq: 1 })
  })

  it("with the same request id and a different body is refused, naming the field, and writes nothing", async () => {
    const seqBefore = await lastSeq(system.server.url)
    const recorded = await call("recordEntry", { requestId: "rec-1", origin: "USER", content: "The lease on the flat ends in June." }).catch((e) => e)
    expect(recorded).toMatchObject({ _tag: "IdempotencyConflict", field: "content" })
    const begun = await call("beginStep", { requestId: "begin-1", stepId: "s2" }).catch((e) => e)
    expect(begun).toMatchObject({ _tag: "IdempotencyConflict", field: "requestId" })
    expect(await lastSeq(system.server.url)).toBe(seqBefore)
  })

  it("a duplicate record answers the stored entry's tokens and timestamp, not the retry's", async () => {
    const first = await call("recordEntry", { requestId: "stamped-1", origin: "USER", content: "Viewing on Tuesday at noon.", timestamp: 1_700_000_000_000 })
    const again = await call("recordEntry", { requestId: "stamped-1", origin: "USER", content: "Viewing on Tuesday at noon." })
    expect(again).toEqual({ ...first, duplicate: true })
  })
})
