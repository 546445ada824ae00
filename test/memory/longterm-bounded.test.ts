/**
 * The long-term projection keeps an entry's facts (origin, tags, its key
 * points and summary) only until the entry is demoted with them: an agent
 * that records and demotes thousands of entries leaves it holding the facts
 * of its working entries alone, and every record is stored.
 */
import { jetstream } from "@nats-io/jetstream"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Effect, type ManagedRuntime } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import type { EventOf } from "../../contracts/events.ts"
import { eventSubject } from "../../contracts/subjects.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { LongTerm, type LongTermShape } from "../../services/memory/longterm/longterm.ts"
import { LongTermStore, type LongTermStoreShape } from "../../services/memory/longterm/store.ts"
import { AGENT, demoted, recorded, registered } from "../support/events.ts"
import { startLongTermAlone } from "../support/longterm.ts"

const RECORDED = 3_000
const STILL_WORKING = 25

let server: NatsServerProcess
let nc: NatsConnection
let runtime: ManagedRuntime.ManagedRuntime<LongTerm | LongTermStore, unknown>

beforeAll(async () => {
  server = await startNatsServer()
  runtime = await startLongTermAlone(server.url)
  nc = await connect({ servers: server.url })
})
afterAll(async () => {
  await nc?.close()
  await runtime?.dispose()
  await server?.stop()
})

it("keeps the facts of working entries only, however many entries were demoted", async () => {
  const js = jetstream(nc)
  let lastSeq = (await js.publish(eventSubject(registered()), JSON.stringify(registered()))).seq
  const pending: Promise<unknown>[] = []
  for (let i = 0; i < RECORDED; i++) {
    const entry = recorded(`e${i}`, `Note ${i} about the quarterly report.`, 1_000 + i)
    pending.push(js.publish(eventSubject(entry), JSON.stringify(entry)))
    if (i < RECORDED - STILL_WORKING) {
      const facts: EventOf<"EntryDemoted">["entry"] = {
        timestamp: entry.timestamp,
        origin: entry.origin,
        correlationId: null,
        tags: [],
        moodSnapshot: null,
        emotionalWeight: 0,
        rawTokens: entry.tokens,
        keyPoints: null,
        summary: { text: `Note ${i}.`, tokens: 4 },
        citationCount: 0,
      }
      const left = demoted(`e${i}`, 1_000 + i, facts)
      pending.push(js.publish(eventSubject(left), JSON.stringify(left)))
    }
    if (pending.length >= 256) for (const ack of pending.splice(0)) await ack
  }
  for (const ack of pending) lastSeq = Math.max(lastSeq, ((await ack) as { seq: number }).seq)

  const longTerm = await runtime.runPromise(LongTerm as unknown as Effect.Effect<LongTermShape>)
  await runtime.runPromise(longTerm.waitFor(lastSeq))
  const store = await runtime.runPromise(LongTermStore as unknown as Effect.Effect<LongTermStoreShape>)
  const records = await Effect.runPromise(store.list({ agentId: AGENT }))
  expect(records).toHaveLength(RECORDED - STILL_WORKING)
  expect(longTerm.trackedEntries()).toBe(STILL_WORKING)
})
