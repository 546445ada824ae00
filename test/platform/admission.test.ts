/**
 * Admission (services/platform/api/admission.ts): at most `limit` requests run at once; the next place goes
 * to the waiting agent with the fewest running, among equals the one admitted least recently, then the one
 * waiting longest; an agent's own requests keep their order; an interrupted request, waiting or running,
 * leaves nothing held.
 */
import { Deferred, Effect, Fiber } from "effect"
import { describe, expect, it } from "vitest"
import { type AdmissionShape, makeAdmission } from "../../services/platform/api/admission.ts"

/** A request that records when it starts and runs until released. */
const heldRequest = (admission: AdmissionShape, agentId: string, label: string, started: string[]) =>
  Effect.gen(function* () {
    const release = yield* Deferred.make<void>()
    const fiber = yield* Effect.forkChild(
      admission.admit(
        agentId,
        Effect.andThen(
          Effect.sync(() => void started.push(label)),
          Deferred.await(release),
        ),
      ),
    )
    yield* Effect.yieldNow
    return { fiber, finish: Effect.andThen(Deferred.succeed(release, undefined), Fiber.join(fiber)) }
  })

describe("admission", () => {
  it("runs at most its limit at once, and admits the next as one ends", async () => {
    const admission = makeAdmission(2)
    const started: string[] = []
    await Effect.runPromise(
      Effect.gen(function* () {
        const a1 = yield* heldRequest(admission, "a", "a1", started)
        const b1 = yield* heldRequest(admission, "b", "b1", started)
        const c1 = yield* heldRequest(admission, "c", "c1", started)
        expect(started).toEqual(["a1", "b1"])
        expect(admission.stats()).toEqual({ running: 2, waiting: 1 })
        yield* a1.finish
        expect(started).toEqual(["a1", "b1", "c1"])
        yield* b1.finish
        yield* c1.finish
        expect(admission.stats()).toEqual({ running: 0, waiting: 0 })
      }),
    )
  })

  it("gives the next place to the agent with the fewest running, not to the one that sent the most", async () => {
    const admission = makeAdmission(2)
    const started: string[] = []
    await Effect.runPromise(
      Effect.gen(function* () {
        // A burst of one agent fills both places and queues four more; then another agent sends one request.
        const burst = []
        for (let i = 1; i <= 6; i++) burst.push(yield* heldRequest(admission, "burst", `burst${i}`, started))
        const bystander = yield* heldRequest(admission, "bystander", "bystander", started)
        expect(started).toEqual(["burst1", "burst2"])
        yield* burst[0]!.finish
        // The bystander has none running, the burst one: the bystander goes first, then the burst in its order.
        expect(started).toEqual(["burst1", "burst2", "bystander"])
        yield* burst[1]!.finish
        yield* bystander.finish
        expect(started).toEqual(["burst1", "burst2", "bystander", "burst3", "burst4"])
        for (const request of burst.slice(2)) yield* request.finish
        expect(started).toEqual(["burst1", "burst2", "bystander", "burst3", "burst4", "burst5", "burst6"])
      }),
    )
  })

  it("among agents with as many running, admits the one admitted least recently, then the one waiting longest", async () => {
    const admission = makeAdmission(1)
    const started: string[] = []
    await Effect.runPromise(
      Effect.gen(function* () {
        // With one place, the agent whose request just ended has none running, as the others waiting: its second
        // request, though it came first, goes after theirs.
        const first = yield* heldRequest(admission, "a", "a1", started)
        const a2 = yield* heldRequest(admission, "a", "a2", started)
        const c = yield* heldRequest(admission, "c", "c1", started)
        const b = yield* heldRequest(admission, "b", "b1", started)
        yield* first.finish
        yield* c.finish
        yield* b.finish
        yield* a2.finish
        expect(started).toEqual(["a1", "c1", "b1", "a2"])
      }),
    )
  })

  it("a request interrupted while it waits leaves the queue, and one interrupted while it runs frees its place", async () => {
    const admission = makeAdmission(1)
    const started: string[] = []
    await Effect.runPromise(
      Effect.gen(function* () {
        const running = yield* heldRequest(admission, "a", "a1", started)
        const waiting = yield* heldRequest(admission, "b", "b1", started)
        const last = yield* heldRequest(admission, "c", "c1", started)
        yield* Fiber.interrupt(waiting.fiber)
        expect(admission.stats()).toEqual({ running: 1, waiting: 1 })
        yield* Fiber.interrupt(running.fiber)
        expect(started).toEqual(["a1", "c1"])
        yield* last.finish
        expect(admission.stats()).toEqual({ running: 0, waiting: 0 })
      }),
    )
  })

  it("with a limit of 0 runs every request at once", async () => {
    const admission = makeAdmission(0)
    const started: string[] = []
    await Effect.runPromise(
      Effect.gen(function* () {
        const requests = []
        for (let i = 1; i <= 50; i++) requests.push(yield* heldRequest(admission, "a", `a${i}`, started))
        expect(started).toHaveLength(50)
        for (const request of requests) yield* request.finish
      }),
    )
  })
})
