/**
 * The services of one process share what they learn of where a partition's next record is: one question to
 * the stream leader answers every service that asks about the same partition meanwhile or soon after, and an
 * answer is used only where it proves something (a service behind the question's start asks for itself), only
 * while fresh, and only for the stream it was asked of.
 */
import { Effect, Fiber, Ref } from "effect"
import { TestClock } from "effect/testing"
import { describe, expect, it } from "vitest"
import { FRESH_MS, makePartitionFrontiers } from "../../services/platform/partitions/partition-frontiers.ts"

const STREAM = "server-a/2026-12-06T00:00:00Z"

/** A question to the stream leader that answers `next` once released, counting how often it was asked. */
const leader = (next: number | null) =>
  Effect.gen(function* () {
    const asked = yield* Ref.make(0)
    return {
      asked: Ref.get(asked),
      ask: Effect.andThen(
        Ref.update(asked, (n) => n + 1),
        Effect.as(Effect.sleep(10), next),
      ),
    }
  })

const run = <A>(effect: Effect.Effect<A>) => Effect.runPromise(effect.pipe(Effect.provide(TestClock.layer())))

describe("what a process's services learn of a partition's next record", () => {
  it("is asked once by services asking at the same time, and proves the partition complete for each", async () => {
    const [answers, asked] = await run(
      Effect.gen(function* () {
        const frontiers = makePartitionFrontiers()
        const { ask, asked } = yield* leader(null)
        const fibers = yield* Effect.forEach([101, 101, 120, 151], (from) =>
          Effect.forkChild(frontiers.completeTo(STREAM, 3, from, 150, ask)),
        )
        yield* TestClock.adjust(10)
        return [yield* Effect.forEach(fibers, Fiber.join), yield* asked] as const
      }),
    )
    // No record of the partition from 101 to 150: complete up to 150 whichever of those it applied.
    expect(answers).toEqual([150, 150, 150, 150])
    expect(asked).toBe(1)
  })

  it("answers from the partition's next record only for those that have not passed it", async () => {
    const [before, at, beyond, asked] = await run(
      Effect.gen(function* () {
        const frontiers = makePartitionFrontiers()
        const { ask, asked } = yield* leader(130)
        const first = yield* Effect.forkChild(frontiers.completeTo(STREAM, 3, 101, 150, ask))
        yield* TestClock.adjust(10)
        const before = yield* Fiber.join(first)
        const at = yield* frontiers.completeTo(STREAM, 3, 130, 150, ask)
        // A service that applied the record at 130 learns nothing from it: it asks.
        const beyond = yield* Effect.forkChild(frontiers.completeTo(STREAM, 3, 131, 150, ask))
        yield* TestClock.adjust(10)
        return [before, at, yield* Fiber.join(beyond), yield* asked] as const
      }),
    )
    expect(before).toBe(129)
    expect(at).toBe(129)
    // The leader (scripted) says 130 again: the service asked, and nothing is proven beyond its position.
    expect(beyond).toBeUndefined()
    expect(asked).toBe(2)
  })

  it("is asked again by a service behind the question, once the fact is stale, and for another stream", async () => {
    const asked = await run(
      Effect.gen(function* () {
        const frontiers = makePartitionFrontiers()
        const { ask, asked } = yield* leader(null)
        const answer = (stream: string, from: number) =>
          Effect.gen(function* () {
            const fiber = yield* Effect.forkChild(frontiers.completeTo(stream, 3, from, 150, ask))
            yield* TestClock.adjust(10)
            return yield* Fiber.join(fiber)
          })
        expect(yield* answer(STREAM, 120)).toBe(150)
        expect(yield* asked).toBe(1)
        // Behind the question's start: the fact says nothing of 101 to 119.
        expect(yield* answer(STREAM, 101)).toBe(150)
        expect(yield* asked).toBe(2)
        // Fresh: answered without asking.
        expect(yield* answer(STREAM, 120)).toBe(150)
        expect(yield* asked).toBe(2)
        yield* TestClock.adjust(FRESH_MS + 1)
        expect(yield* answer(STREAM, 120)).toBe(150)
        expect(yield* asked).toBe(3)
        // The same partition of another stream (another server, or the stream made again) is asked of it.
        expect(yield* answer("server-b/2026-12-06T00:00:00Z", 120)).toBe(150)
        return yield* asked
      }),
    )
    expect(asked).toBe(4)
  })

  it("learns nothing from a question that failed: those waiting on it ask for themselves", async () => {
    const [answers, asked] = await run(
      Effect.gen(function* () {
        const frontiers = makePartitionFrontiers()
        const count = yield* Ref.make(0)
        const failing = Effect.andThen(
          Ref.update(count, (n) => n + 1),
          Effect.andThen(Effect.sleep(10), Effect.fail("leader unreachable")),
        )
        const fibers = yield* Effect.forEach([101, 101], (from) =>
          Effect.forkChild(frontiers.completeTo(STREAM, 3, from, 150, failing)),
        )
        yield* TestClock.adjust(10)
        yield* TestClock.adjust(10)
        return [yield* Effect.forEach(fibers, Fiber.join), yield* Ref.get(count)] as const
      }),
    )
    expect(answers).toEqual([undefined, undefined])
    expect(asked).toBe(2)
  })
})
