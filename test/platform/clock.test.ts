/**
 * Time in the services is Effect's Clock, so a TestClock moves it: here the gateway's back-pressure (how
 * long a partition's progress reports answer its writes, and the pace of a draining lag that
 * `retryAfterMs` is worked out from) and a partition lease's validity follow TestClock.adjust alone, on a
 * real nats-server. The test clock starts at 0 and the test takes far less real time than it moves the
 * clock by, so a service reading the wall clock instead answers otherwise.
 */
import { type KV, Kvm } from "@nats-io/kv"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Clock, Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { progressKey } from "../../contracts/buckets.ts"
import { Overloaded } from "../../contracts/errors.ts"
import { partitionOf } from "../../contracts/partitions.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { makeBackPressure } from "../../services/gateway/back-pressure.ts"
import { Nats } from "../../services/platform/nats/connection.ts"
import { holdPartitionLeases } from "../../services/platform/partitions/leases.ts"
import { encodeProgress, progressReader } from "../../services/platform/partitions/progress.ts"
import { PartitionSettings } from "../../services/platform/partitions/settings.ts"
import { teardown } from "../faults/support/audit.ts"
import { eventually } from "../support/eventually.ts"
import { settingsFor } from "../support/system.ts"

let server: NatsServerProcess
let nc: NatsConnection
let reports: KV

beforeAll(async () => {
  server = await startNatsServer()
  nc = await connect({ servers: server.url })
  reports = await new Kvm(nc).create("clock_progress", { history: 1 })
})
afterAll(() =>
  teardown(
    () => nc?.close(),
    () => server?.stop(),
  ),
)

describe("the services' time on TestClock", () => {
  it("back-pressure re-reads progress and paces its retry on the clock", async () => {
    const LIMIT = 10
    const AGENT = "clocked-agent"
    const partition = partitionOf(AGENT)
    const reportFade = (lag: number) =>
      Effect.promise(() =>
        reports.put(progressKey("fade", partition), encodeProgress({ replica: "r", seq: 1, applied: 1, lag, at: 0 })),
      )

    const answers = await Effect.runPromise(
      Effect.gen(function* () {
        const backPressure = makeBackPressure(LIMIT, progressReader(reports), yield* Clock.Clock)
        const answers: Array<{ readonly lag: number; readonly retryAfterMs: number } | null> = []
        const check = Effect.gen(function* () {
          const refusal = yield* backPressure.check(AGENT)
          if (refusal !== null) expect(refusal).toBeInstanceOf(Overloaded)
          answers.push(refusal === null ? null : { lag: refusal.lag, retryAfterMs: refusal.retryAfterMs })
        })

        yield* reportFade(100)
        // First read: nothing to pace it by yet.
        yield* check
        // Reports read at t=0 answer writes for 250 ms of the clock: the new one is not read yet.
        yield* reportFade(36)
        yield* check
        // 1,024 ms later it is read: 64 events drained in 1,024 ms, (36 − 10/2) / (64/1,024) = 496 ms to go.
        yield* TestClock.adjust(1_024)
        yield* check
        // The same lag 3 s later: not draining.
        yield* TestClock.adjust(3_000)
        yield* check
        // Within the limit: accepted once the report is read again.
        yield* reportFade(4)
        yield* TestClock.adjust(300)
        yield* check
        return answers
      }).pipe(Effect.provide(TestClock.layer())),
    )

    expect(answers).toEqual([
      { lag: 100, retryAfterMs: 1_000 },
      { lag: 100, retryAfterMs: 1_000 },
      { lag: 36, retryAfterMs: 496 },
      { lag: 36, retryAfterMs: 1_000 },
      null,
    ])
  })

  it("a partition lease is valid for as long as the clock the leases were started with says", async () => {
    // TTL 150 ms: renewed every 100 ms of the clock, each renewal valid for 50 ms after it was sent.
    const layer = Layer.mergeAll(
      TestClock.layer(),
      Nats.layer.pipe(Layer.provide(settingsFor(server.url)("wm-clocked"))),
      settingsFor(server.url)("wm-clocked"),
      PartitionSettings.make({ leaseTtlMs: 150, leaseSettleMs: 0, replicaId: "clocked" }),
    )
    await Effect.runPromise(
      Effect.scoped(
        Effect.gen(function* () {
          const leases = yield* holdPartitionLeases("clocked", { acquired: () => {}, lost: () => {} })
          yield* leases.firstRound
          const held = leases.held()
          expect(held.length).toBeGreaterThan(0)
          // Taken at t=0: valid until t=50.
          expect(held.filter(leases.holds)).toEqual(held)
          // t=60: lapsed, the next renewal being due at t=100.
          yield* TestClock.adjust(60)
          expect(held.filter(leases.holds)).toEqual([])
          // t=100: renewed, valid again until t=150, for as long as the clock stays there.
          yield* TestClock.adjust(40)
          yield* Effect.promise(() =>
            eventually("the leases renewed", () => held.every(leases.holds) || undefined, 10_000, 20),
          )
        }),
      ).pipe(Effect.provide(layer)),
    )
  })
})
