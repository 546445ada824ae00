/**
 * Per-agent bookkeeping is bounded by configuration, not by history: one
 * agent recording 100,000 entries over 10,000 steps keeps a bounded set of
 * seen event ids, one open-step record in each service, and a projection
 * keeps a bounded list of dead letters however many records it refuses.
 * (Structure sizes are measured, not process memory; the figures per agent
 * and per entry are in BENCHMARKS.md.)
 */
import { jetstream, type PubAck } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { Effect, Layer } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import { agentStepSubject, DEAD_LETTER_STREAM } from "../contracts/subjects.ts"
import { type AgentView, evolve, SEEN_GENERATION, SEEN_IDS, seenIdCount } from "../domain/agent-view.ts"
import { type NatsServerProcess, startNatsServer } from "../infra/nats-server.ts"
import { EventLog } from "../services/platform/log/event-log.ts"
import { DEAD_LETTERS_KEPT, runProjection } from "../services/platform/log/projection.ts"
import { Nats } from "../services/platform/nats/connection.ts"
import { NatsSettings } from "../services/platform/nats/settings.ts"
import { makeOpenStepMemo } from "../services/platform/views/open-step-memo.ts"
import { AGENT, recorded, registered, stepEnded, stepStarted } from "./support/events.ts"

const ENTRIES = 100_000
const PER_STEP = 10

it("one agent's seen event ids and open-step records stay bounded over 100k entries and 10k steps", () => {
  let seq = 1
  let view: AgentView | undefined = evolve(undefined, registered(), { seq })
  const recalls = makeOpenStepMemo<number>()
  let mostSeen = 0
  for (let i = 0; i < ENTRIES; i++) {
    const stepId = `s${Math.floor(i / PER_STEP)}`
    if (i % PER_STEP === 0) {
      view = evolve(view, stepStarted(stepId, i), { seq: ++seq })
      recalls.set(AGENT, stepId, i)
    }
    view = evolve(view, recorded(`e${i}`, "Ship the quarterly report.", i), { seq: ++seq })
    if (i % PER_STEP === PER_STEP - 1) view = evolve(view, stepEnded(stepId, i), { seq: ++seq })
    mostSeen = Math.max(mostSeen, seenIdCount(view!.seen))
  }
  expect(view!.entryCount).toBe(ENTRIES)
  expect(mostSeen).toBeLessThanOrEqual(SEEN_IDS + SEEN_GENERATION)
  expect(recalls.size()).toBe(1)
  expect(recalls.get(AGENT, `s${ENTRIES / PER_STEP - 1}`)).toBe(ENTRIES - PER_STEP)
  expect(recalls.get(AGENT, "s0")).toBeUndefined()
})

let server: NatsServerProcess
beforeAll(async () => {
  server = await startNatsServer()
})
afterAll(() => server?.stop())

it("a projection keeps only the newest dead letters in memory", async () => {
  const foundation = EventLog.layer.pipe(
    Layer.provideMerge(Nats.layer),
    Layer.provideMerge(NatsSettings.make({ servers: [server.url] })),
  )
  const refused = DEAD_LETTERS_KEPT + 200
  const kept = await Effect.runPromise(
    Effect.gen(function* () {
      const log = yield* EventLog
      yield* log.lastSeq
      const nc = yield* Effect.promise(() => connect({ servers: server.url }))
      const js = jetstream(nc)
      const acks: Array<Promise<PubAck>> = []
      for (let i = 0; i < refused; i++) acks.push(js.publish(agentStepSubject("noisy"), `not an event ${i}`))
      const last = (yield* Effect.promise(() => Promise.all(acks))).at(-1)!.seq
      yield* Effect.promise(() => nc.close())
      const projection = yield* runProjection({ name: "bounded", apply: () => undefined })
      yield* projection.waitFor(last, "30 seconds")
      // Every one is still stored in the dead-letter stream.
      const { jsm } = yield* Nats
      const stored = () =>
        Effect.promise(() => jsm.streams.info(DEAD_LETTER_STREAM)).pipe(Effect.map((i) => i.state.messages))
      while ((yield* stored()) < refused) yield* Effect.sleep("50 millis")
      return projection.deadLetters()
    }).pipe(Effect.provide(foundation), Effect.scoped),
  )
  expect(kept).toHaveLength(DEAD_LETTERS_KEPT)
  expect(kept.at(-1)!.payload).toBe(`not an event ${refused - 1}`)
})
