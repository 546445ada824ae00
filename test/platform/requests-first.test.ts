/**
 * Requests first (services/platform/scheduling/requests-first.ts): background work that asks for a turn
 * before each unit waits while the loop is busy with requests, except for one turn per pace; it resumes
 * when the last request ends; requests that only wait do not hold it back; and its turns come one per turn
 * of the event loop, so what arrives on a socket is read between two units. Here the loop counts as busy
 * whenever a request is in flight (`congestedMs: 0`) and a turn is then held back a minute, so no held turn
 * comes inside a test, unless the test says otherwise.
 */
import { Deferred, Effect, Fiber } from "effect"
import { describe, expect, it } from "vitest"
import { makeRequestsFirst } from "../../services/platform/scheduling/requests-first.ts"

const MINUTE = 60_000
/** The loop counts as busy whenever a request is in flight. */
const busyLoop = { busyShare: 0.25, congestedMs: 0, minHoldMs: MINUTE }

/** Background work: `units` units, each after a turn; `done` counts the units finished. */
const background = (lane: ReturnType<typeof makeRequestsFirst>, units: number, done: { count: number }) =>
  Effect.forEach(
    Array.from({ length: units }, (_, i) => i),
    () =>
      Effect.andThen(
        lane.backgroundTurn,
        Effect.sync(() => {
          done.count++
        }),
      ),
    { concurrency: 8, discard: true },
  )

/** Lets the event loop turn `n` times. */
const loopTurns = (n: number) =>
  Effect.promise(async () => {
    for (let i = 0; i < n; i++) await new Promise<void>((resolve) => setImmediate(resolve))
  })

describe("requests first", () => {
  it("background work waits while a request is in flight and resumes when it ends", async () => {
    const lane = makeRequestsFirst(busyLoop)
    const done = { count: 0 }
    await Effect.runPromise(
      Effect.gen(function* () {
        const release = yield* Deferred.make<void>()
        const request = yield* Effect.forkChild(lane.serve(Deferred.await(release)))
        yield* Effect.yieldNow
        expect(lane.stats().inFlight).toBe(1)
        const work = yield* Effect.forkChild(background(lane, 20, done))
        yield* loopTurns(50)
        expect(done.count).toBe(0)
        expect(lane.stats().waiting).toBe(8)
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(request)
        yield* Fiber.join(work)
        expect(done.count).toBe(20)
        expect(lane.stats()).toEqual({ inFlight: 0, waiting: 0 })
      }),
    )
  })

  it.each([
    {
      case: "a request in flight does not hold background work back while the loop comes round at once",
      options: { busyShare: 0.25, congestedMs: MINUTE, minHoldMs: MINUTE },
    },
    {
      case: "background work slows down while the loop is busy with requests, but never stops",
      options: { busyShare: 0.5, congestedMs: 0, minHoldMs: 1 },
    },
  ])("$case", async ({ options }) => {
    const lane = makeRequestsFirst(options)
    const done = { count: 0 }
    await Effect.runPromise(
      Effect.gen(function* () {
        const release = yield* Deferred.make<void>()
        const request = yield* Effect.forkChild(lane.serve(Deferred.await(release)))
        yield* Effect.yieldNow
        yield* background(lane, 20, done)
        expect(done.count).toBe(20)
        expect(lane.stats().inFlight).toBe(1)
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(request)
      }),
    )
  })

  it("the turn freed by the last request to end is given on a turn of the loop of its own, not in that request", async () => {
    const lane = makeRequestsFirst(busyLoop)
    const order: string[] = []
    await Effect.runPromise(
      Effect.gen(function* () {
        const release = yield* Deferred.make<void>()
        const request = yield* Effect.forkChild(
          lane.serve(Deferred.await(release)).pipe(Effect.tap(() => Effect.sync(() => order.push("request ended")))),
        )
        yield* Effect.yieldNow
        const work = yield* Effect.forkChild(
          Effect.andThen(
            lane.backgroundTurn,
            Effect.sync(() => order.push("unit")),
          ),
        )
        yield* loopTurns(5)
        yield* Effect.sync(() => order.push("released"))
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(request)
        yield* Fiber.join(work)
      }),
    )
    // "request ended" stands for the reply, which serve.ts sends once the counted part has ended.
    expect(order).toEqual(["released", "request ended", "unit"])
  })

  it("a request that fails or is interrupted is no longer in flight", async () => {
    const lane = makeRequestsFirst(busyLoop)
    await Effect.runPromise(
      Effect.gen(function* () {
        yield* Effect.flip(lane.serve(Effect.fail("refused")))
        const hanging = yield* Effect.forkChild(lane.serve(Effect.never))
        yield* Effect.yieldNow
        expect(lane.stats().inFlight).toBe(1)
        yield* Fiber.interrupt(hanging)
        expect(lane.stats().inFlight).toBe(0)
        const done = { count: 0 }
        yield* background(lane, 3, done)
        expect(done.count).toBe(3)
      }),
    )
  })

  it("with no request in flight, turns are given one per turn of the event loop", async () => {
    const lane = makeRequestsFirst(busyLoop)
    const order: string[] = []
    // Something arriving on every turn of the loop, as a socket's data would.
    let arrivals = 0
    const arrive = () => {
      order.push("io")
      if (++arrivals < 40) setImmediate(arrive)
    }
    setImmediate(arrive)
    await Effect.runPromise(
      Effect.forEach(
        [1, 2, 3, 4, 5],
        (i) =>
          Effect.andThen(
            lane.backgroundTurn,
            Effect.sync(() => order.push(`unit ${i}`)),
          ),
        { concurrency: 5, discard: true },
      ),
    )
    const units = order.flatMap((o, i) => (o.startsWith("unit") ? [i] : []))
    expect(units).toHaveLength(5)
    // Between any two units, what arrived was read.
    for (let k = 1; k < units.length; k++) expect(order.slice(units[k - 1]!, units[k]!)).toContain("io")
  })

  it("an interrupted wait gives its turn up", async () => {
    const lane = makeRequestsFirst(busyLoop)
    await Effect.runPromise(
      Effect.gen(function* () {
        const release = yield* Deferred.make<void>()
        const request = yield* Effect.forkChild(lane.serve(Deferred.await(release)))
        yield* Effect.yieldNow
        const waiter = yield* Effect.forkChild(lane.backgroundTurn)
        yield* Effect.yieldNow
        expect(lane.stats().waiting).toBe(1)
        yield* Fiber.interrupt(waiter)
        expect(lane.stats().waiting).toBe(0)
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(request)
      }),
    )
  })
})
