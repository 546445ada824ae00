/**
 * A write is applied once however late its retry: after JetStream's dedupe
 * window has passed and the views' memory of recent event ids has moved on,
 * a retry with the same request id is answered as the first attempt was,
 * and nothing is stored or applied again. A retry with the same request id
 * and a different body is refused with a typed error.
 */
import { Kvm } from "@nats-io/kv"
import { connect } from "@nats-io/transport-node"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { OperationName, RequestOf, ResponseOf } from "../../contracts/api.ts"
import { REQUEST_BUCKET } from "../../contracts/buckets.ts"
import type { EventOf } from "../../contracts/events.ts"
import { agentStepSubject } from "../../contracts/subjects.ts"
import { viewSnapshot } from "../../domain/agent-view.ts"
import {
  ledgerFromLog,
  ledgerKey,
  type PendingRequest,
  requestBody,
  type SettledRequest,
} from "../../domain/requests.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { appendEvents, lastSeq, readLog } from "../support/log.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

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
      {
        operation: "recordEntry",
        request: { requestId: "rec-1", origin: "USER", content: "The lease on the flat ends in May." },
      },
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
          call("recordEntry", {
            requestId: `filler-${i + j}`,
            origin: "INTERNAL",
            content: `Note ${i + j} on the flat search.`,
          }),
        ),
      )
    }
    await new Promise((r) => setTimeout(r, DEDUPE_WINDOW_MS + 1_000))

    const seqBefore = await lastSeq(system.server.url)
    const viewBefore = viewSnapshot((await system.liveView(AGENT, seqBefore))!)

    const retries: unknown[] = []
    for (const w of writes) retries.push(await call(w.operation, w.request as never))

    const expected = originals.map((reply, i) =>
      writes[i]!.operation === "recordEntry" ? { ...(reply as object), duplicate: true } : reply,
    )
    expect(retries).toEqual(expected)
    expect(await lastSeq(system.server.url)).toBe(seqBefore)
    expect(viewSnapshot((await system.liveView(AGENT, seqBefore))!)).toEqual(viewBefore)
    // A registration retried is answered with the registration it made.
    await expect(call("registerAgent", { requestId: "reg-1", role: "main" })).resolves.toMatchObject({ seq: 1 })
  })

  it("finds in the ledger what the log says each write was answered (the ledger is rebuildable from the log)", async () => {
    const fromLog = ledgerFromLog((await readLog(system.server.url)).filter((r) => r.event.agentId === AGENT))
    const nc = await connect({ servers: system.server.url })
    try {
      const kv = await new Kvm(nc).open(REQUEST_BUCKET)
      const live = new Map<string, SettledRequest>()
      for await (const key of await kv.keys(`${AGENT}.>`)) {
        const entry = await kv.get(key)
        if (entry?.operation === "PUT") live.set(key, entry.json<SettledRequest>())
      }
      // The eight writes other than the record and the registration (a record's ledger is its entry's subject;
      // a registration is exactly-once by its subject, its answer is kept but not rebuilt).
      expect(fromLog.size).toBe(8)
      expect([...fromLog.keys()].sort()).toEqual([...live.keys()].filter((k) => !k.includes(".registerAgent.")).sort())
      for (const [key, rebuilt] of fromLog)
        expect({ seq: rebuilt.seq, reply: rebuilt.reply }, key).toEqual({
          seq: live.get(key)!.seq,
          reply: live.get(key)!.reply,
        })
    } finally {
      await nc.close()
    }
  })

  it("with the same request id and a different body is refused, naming the field, and writes nothing", async () => {
    const seqBefore = await lastSeq(system.server.url)
    const recorded = await call("recordEntry", {
      requestId: "rec-1",
      origin: "USER",
      content: "The lease on the flat ends in June.",
    }).catch((e) => e)
    expect(recorded).toMatchObject({ _tag: "IdempotencyConflict", field: "content" })
    const begun = await call("beginStep", { requestId: "begin-1", stepId: "s2" }).catch((e) => e)
    expect(begun).toMatchObject({ _tag: "IdempotencyConflict", field: "requestId" })
    expect(await lastSeq(system.server.url)).toBe(seqBefore)
  })

  it("a duplicate record answers the stored entry's tokens and timestamp, not the retry's", async () => {
    const first = await call("recordEntry", {
      requestId: "stamped-1",
      origin: "USER",
      content: "Viewing on Tuesday at noon.",
      timestamp: 1_700_000_000_000,
    })
    const again = await call("recordEntry", {
      requestId: "stamped-1",
      origin: "USER",
      content: "Viewing on Tuesday at noon.",
    })
    expect(again).toEqual({ ...first, duplicate: true })
  })
})

describe("a retry of an attempt that died before answering", () => {
  /** Leaves the ledger as an attempt that reserved `request` and then died would. */
  const reserveAsDeadAttempt = async (agentId: string, request: RequestOf<"beginStep">, at: number) => {
    const view = (await system.liveView(agentId))!
    const pending: PendingRequest = {
      state: "pending",
      operation: "beginStep",
      body: requestBody(request),
      eventId: `${agentId}:beginStep:${request.requestId}`,
      subject: agentStepSubject(agentId),
      afterSeq: view.lastSeq,
      at,
    }
    const nc = await connect({ servers: system.server.url })
    try {
      const kv = await new Kvm(nc).open(REQUEST_BUCKET)
      await kv.create(ledgerKey(agentId, view.registeredSeq, "beginStep", request.requestId!), JSON.stringify(pending))
    } finally {
      await nc.close()
    }
  }
  const started = async (agentId: string) =>
    (await readLog(system.server.url, agentStepSubject(agentId))).filter((r) => r.event._tag === "StepStarted")

  it("after storing its event is answered from that event, and nothing is stored again", async () => {
    const agentId = "died-after-append"
    await system.client.call(agentId, "registerAgent", { role: "main" })
    const request = { requestId: "begin-lost", stepId: "s1" }
    await reserveAsDeadAttempt(agentId, request, Date.now())
    const event: EventOf<"StepStarted"> = {
      _tag: "StepStarted",
      v: 1,
      eventId: `${agentId}:beginStep:begin-lost`,
      agentId,
      at: Date.now(),
      causationId: "begin-lost",
      correlationId: null,
      stepId: "s1",
      focus: null,
    }
    const seq = await appendEvents(system.server.url, [event])
    await new Promise((r) => setTimeout(r, DEDUPE_WINDOW_MS + 500))
    await expect(system.client.call(agentId, "beginStep", request)).resolves.toEqual({ stepId: "s1", seq })
    await expect(system.client.call(agentId, "beginStep", request)).resolves.toEqual({ stepId: "s1", seq })
    expect((await started(agentId)).map((r) => r.seq)).toEqual([seq])
  })

  it("before storing anything is taken over and applied once", async () => {
    const agentId = "died-before-append"
    await system.client.call(agentId, "registerAgent", { role: "main" })
    const request = { requestId: "begin-dead", stepId: "s1" }
    await reserveAsDeadAttempt(agentId, request, Date.now() - 60_000)
    const reply = await system.client.call(agentId, "beginStep", request)
    await new Promise((r) => setTimeout(r, DEDUPE_WINDOW_MS + 500))
    await expect(system.client.call(agentId, "beginStep", request)).resolves.toEqual(reply)
    expect((await started(agentId)).map((r) => r.seq)).toEqual([reply.seq])
  })
})

describe("a copy sent while the first attempt is still being answered", () => {
  it("gets the first attempt's answer, not 'still being processed', and a different body is refused", async () => {
    const agentId = "copy-in-flight"
    await system.client.call(agentId, "registerAgent", { role: "main" })
    for (let i = 0; i < 4; i++)
      await system.client.call(agentId, "recordEntry", { origin: "USER", content: `Fact ${i} about the harbour.` })
    // No retries of its own: whatever a copy is answered is what this client sees.
    const once = await WorkingMemoryClient.connect({ servers: system.server.url, timeoutMs: 10_000, attempts: 1 })
    try {
      // Builds of one agent take turns on its step subject: the last one is in flight while its copies arrive.
      const ahead = Array.from({ length: 12 }, (_, i) =>
        once.call(agentId, "buildContext", { requestId: `ahead-${i}` }),
      )
      const target = { requestId: "impatient" }
      const copies = await Promise.allSettled([
        once.call(agentId, "buildContext", target),
        once.call(agentId, "buildContext", target),
        once.call(agentId, "buildContext", { ...target, limit: 500 }),
      ])
      await Promise.all(ahead)
      const [first, copy, other] = copies
      expect(first).toMatchObject({ status: "fulfilled" })
      expect(copy).toMatchObject({ status: "fulfilled" })
      if (first.status !== "fulfilled" || copy.status !== "fulfilled") return
      expect(copy.value.seq).toBe(first.value.seq)
      expect(copy.value.items).toEqual(first.value.items)
      expect(other).toMatchObject({ status: "rejected", reason: { _tag: "IdempotencyConflict", field: "requestId" } })
      const reads = (await readLog(system.server.url, agentStepSubject(agentId))).filter(
        (r) => r.event._tag === "EntriesRead",
      )
      expect(reads).toHaveLength(13)
    } finally {
      await once.close()
    }
  })
})
