/**
 * `entry.recordMany`: a batch of entries, each recorded as `entry.record` records it and answered in its
 * own result. An entry refused alone leaves the others recorded; a batch retried with the same request
 * ids after its reply was lost appends nothing twice; a batch above WM_MAX_BATCH_ENTRIES is refused whole.
 */
import { connect, createInbox, type NatsConnection } from "@nats-io/transport-node"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { BatchTooLarge, IdempotencyConflict, ValidationError } from "../../contracts/errors.ts"
import { apiSubject, entrySubject } from "../../contracts/subjects.ts"
import { eventually } from "../support/eventually.ts"
import { lastSeq, readLog } from "../support/log.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

let system: TestSystem
let nc: NatsConnection
beforeAll(async () => {
  system = await startTestSystem({}, { fade: false, memory: false })
  nc = await connect({ servers: system.server.url })
}, 60_000)
afterAll(async () => {
  await nc?.close()
  await system?.stop()
})

/** Every EntryRecorded of the agent in the log, by entry id: how many, and at which sequences. */
const recordedOf = async (agentId: string) => {
  const recorded = new Map<string, number[]>()
  for (const { seq, event } of await readLog(system.server.url))
    if (event._tag === "EntryRecorded" && event.agentId === agentId)
      recorded.set(event.entryId, [...(recorded.get(event.entryId) ?? []), seq])
  return recorded
}

describe("entry.recordMany", () => {
  it("records every valid entry in the batch's order and refuses the others each in its own result", async () => {
    const agent = system.client.agent("batch-mixed")
    await agent.register({ role: "main" })
    const answer = await agent.recordMany([
      { requestId: "t-0", origin: "USER", content: "We land in Lisbon on the 3rd of June.", timestamp: 1_000 },
      { requestId: "t-1", origin: "USER", content: "   \n " },
      { requestId: "t-2", origin: "INTERNAL", content: "Check step-free hotels.", timestamp: 2_000, tags: ["trip"] },
      { requestId: "t-3", origin: "NOBODY" as never, content: "An origin the API does not have." },
      { requestId: "t-4", origin: "ADVISOR", content: "The user sounds rushed.", extra: true } as never,
      { requestId: "t-2", origin: "INTERNAL", content: "Another text under a request id already used." },
      { requestId: "t-6", origin: "USER", content: "x".repeat(64 * 1024 + 1) },
      { requestId: "t-7", origin: "USER", content: "My partner uses a wheelchair.", timestamp: 3_000 },
    ])
    expect(answer.results.map((r) => [r.index, r.ok])).toEqual([
      [0, true],
      [1, false],
      [2, true],
      [3, false],
      [4, false],
      [5, false],
      [6, false],
      [7, true],
    ])
    const refusal = (index: number) => {
      const result = answer.results[index]!
      if (result.ok) throw new Error(`entry ${index} was recorded`)
      return result.error
    }
    expect(refusal(1)).toBeInstanceOf(ValidationError)
    expect(refusal(1)).toMatchObject({ field: "entries.1.content" })
    expect(refusal(3)).toMatchObject({ _tag: "ValidationError", field: "entries.3.origin" })
    expect(refusal(4)).toMatchObject({ _tag: "ValidationError", field: "entries.4.extra" })
    expect(refusal(5)).toBeInstanceOf(IdempotencyConflict)
    expect(refusal(5)).toMatchObject({ field: "entries.5.content" })
    expect(refusal(6)).toMatchObject({ _tag: "ValidationError", field: "entries.6.content" })

    const recorded = answer.results.filter((r) => r.ok)
    expect(recorded.map((r) => r.entryId)).toEqual(["t-0", "t-2", "t-7"])
    expect(recorded.every((r) => !r.duplicate && r.tokens > 0)).toBe(true)
    // Appended in the batch's order; the batch's seq is the last of them.
    const seqs = recorded.map((r) => r.seq)
    expect([...seqs].sort((a, b) => a - b)).toEqual(seqs)
    expect(answer.seq).toBe(seqs.at(-1))
    expect(agent.lastSeq).toBe(answer.seq)

    const inLog = await recordedOf("batch-mixed")
    expect([...inLog.keys()].sort()).toEqual(["t-0", "t-2", "t-7"])
    expect([...inLog.values()].every((s) => s.length === 1)).toBe(true)
    const view = await agent.view()
    expect(view.entries.map((e) => e.id)).toEqual(["t-0", "t-2", "t-7"])
    expect(view.entries.find((e) => e.id === "t-2")?.tags).toEqual(["trip"])
  })

  it("is answered as it was when retried with the same request ids after the reply was lost, and appends nothing twice", async () => {
    const agentId = "batch-lost-reply"
    await system.client.agent(agentId).register({ role: "main" })
    const entries = Array.from({ length: 120 }, (_, i) => ({
      requestId: `turn-${i}`,
      origin: i % 2 === 0 ? "USER" : "INTERNAL",
      content: `Turn ${i} of the imported conversation about the Lisbon trip.`,
      timestamp: 1_700_000_000_000 + i * 1_000,
    }))
    const request = { entries: [...entries, { requestId: "bad", origin: "USER", content: "" }] }
    // The first attempt is sent with a reply subject nobody listens on: it is served, and its answer lost.
    nc.publish(apiSubject(agentId, "entry.recordMany"), JSON.stringify(request), { reply: createInbox() })
    const stored = await eventually(
      "the first attempt's entries in the log",
      async () => {
        const inLog = await recordedOf(agentId)
        return inLog.size === entries.length ? inLog : undefined
      },
      30_000,
      50,
    )
    const before = await lastSeq(system.server.url)

    const retry = await system.client.call(agentId, "recordMany", request)
    expect(await lastSeq(system.server.url)).toBe(before)
    expect(retry.results).toHaveLength(entries.length + 1)
    for (const [i, entry] of entries.entries()) {
      expect(retry.results[i]).toMatchObject({
        index: i,
        ok: true,
        entryId: entry.requestId,
        timestamp: entry.timestamp,
        seq: stored.get(entry.requestId)![0],
        duplicate: true,
      })
    }
    expect(retry.results[entries.length]).toMatchObject({
      index: entries.length,
      ok: false,
      error: { _tag: "ValidationError", field: `entries.${entries.length}.content` },
    })
    expect(retry.seq).toBe(Math.max(...[...stored.values()].flat()))
    // And once more: still one EntryRecorded per entry, each on its own subject.
    await system.client.call(agentId, "recordMany", request)
    const after = await recordedOf(agentId)
    expect([...after.values()].every((s) => s.length === 1)).toBe(true)
    expect(after).toEqual(stored)
    const first = await readLog(system.server.url, entrySubject(agentId, "turn-0"))
    expect(first).toHaveLength(1)
  })

  it("answers entries already recorded by entry.record as duplicates and records the rest", async () => {
    const agent = system.client.agent("batch-after-record")
    await agent.register({ role: "main" })
    const single = await agent.record({ requestId: "r-1", origin: "USER", content: "Book the tram tickets." })
    const answer = await agent.recordMany([
      { requestId: "r-1", origin: "USER", content: "Book the tram tickets." },
      { requestId: "r-2", origin: "USER", content: "And the museum." },
    ])
    expect(answer.results[0]).toMatchObject({ ok: true, entryId: "r-1", seq: single.seq, duplicate: true })
    expect(answer.results[1]).toMatchObject({ ok: true, entryId: "r-2", duplicate: false })
  })

  it("refuses a batch above WM_MAX_BATCH_ENTRIES whole, with BatchTooLarge, storing nothing", async () => {
    const agent = system.client.agent("batch-too-large")
    await agent.register({ role: "main" })
    const before = await lastSeq(system.server.url)
    const refusal = await agent
      .recordMany(Array.from({ length: 501 }, (_, i) => ({ origin: "USER" as const, content: `line ${i}` })))
      .then(
        () => null,
        (error: unknown) => error,
      )
    expect(refusal).toBeInstanceOf(BatchTooLarge)
    expect(refusal).toMatchObject({ field: "entries", size: 501, limit: 500 })
    expect(await lastSeq(system.server.url)).toBe(before)
  })

  it("refuses a batch for an agent that is not registered", async () => {
    await expect(
      system.client.agent("batch-nobody").recordMany([{ origin: "USER", content: "hello" }]),
    ).rejects.toMatchObject({ _tag: "AgentNotFound" })
  })
})
