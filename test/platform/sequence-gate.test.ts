/** Waiting until a projection has reached a sequence: released when it gets there, refused when it never will. */
import { Effect, Fiber } from "effect"
import { expect, it } from "vitest"
import { NotCaughtUp } from "../../contracts/errors.ts"
import { makeSequenceGate } from "../../services/platform/log/sequence-gate.ts"

it("a wait for a sequence already reached returns at once; a later one when the position gets there", async () => {
  const gate = makeSequenceGate(3)
  await Effect.runPromise(gate.awaitSeq(2))
  const released: number[] = []
  const program = Effect.gen(function* () {
    const waiting = [5, 4, 5, 7].map((seq) =>
      Effect.runFork(
        Effect.andThen(
          gate.awaitSeq(seq),
          Effect.sync(() => released.push(seq)),
        ),
      ),
    )
    yield* Effect.yieldNow
    gate.advanceTo(5)
    yield* Effect.yieldNow
    expect(released.sort()).toEqual([4, 5, 5])
    gate.advanceTo(4) // never back
    expect(gate.current()).toBe(5)
    gate.advanceTo(9)
    yield* Fiber.join(waiting[3]!)
    expect(released).toContain(7)
  })
  await Effect.runPromise(program)
})

it("a wait that times out, or meets a closed gate, is told NotCaughtUp with the position reached", async () => {
  const gate = makeSequenceGate(1)
  const timedOut = await Effect.runPromise(Effect.flip(gate.awaitSeq(3, "20 millis")))
  expect(timedOut).toMatchObject({ afterSeq: 3, appliedSeq: 1 })
  const waiting = Effect.runFork(gate.awaitSeq(4))
  gate.advanceTo(2)
  gate.close()
  const refused = await Effect.runPromise(Effect.flip(Fiber.join(waiting)))
  expect(refused).toBeInstanceOf(NotCaughtUp)
  expect(refused).toMatchObject({ afterSeq: 4, appliedSeq: 2 })
  const later = await Effect.runPromise(Effect.flip(gate.awaitSeq(3)))
  expect(later).toMatchObject({ afterSeq: 3, appliedSeq: 2 })
})
