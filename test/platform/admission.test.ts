/**
 * Admission (services/platform/api/admission.ts): a request of an agent with nothing running or waiting runs
 * at once; the rest share `places`; a free place goes to the waiting agent with the fewest running, among
 * equals the one admitted least recently; an agent's requests start in order; an interrupted request,
 * waiting or running, leaves nothing held.
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

/** Runs `test` against an admission of `places`, with the labels of the requests in the order they started. */
const withAdmission = (places: number, test: (admission: AdmissionShape, started: string[]) => Effect.Effect<void>) =>
  Effect.runPromise(test(makeAdmission(places), []))

describe("admission", () => {
  it("runs an idle agent's request at once, and what an agent sends beyond it within the places", async () => {
    await withAdmission(2, (admission, started) =>
      Effect.gen(function* () {
        const a = []
        for (let i = 1; i <= 5; i++) a.push(yield* heldRequest(admission, "a", `a${i}`, started))
        expect(started).toEqual(["a1", "a2", "a3"])
        expect(admission.stats()).toEqual({ running: 3, waiting: 2 })
        // Another agent with nothing running is not queued behind the places a's burst holds.
        const b = yield* heldRequest(admission, "b", "b1", started)
        expect(started).toEqual(["a1", "a2", "a3", "b1"])
        yield* a[1]!.finish
        expect(started).toEqual(["a1", "a2", "a3", "b1", "a4"])
        for (const request of [a[0]!, a[2]!, a[3]!, a[4]!, b]) yield* request.finish
        expect(started).toEqual(["a1", "a2", "a3", "b1", "a4", "a5"])
        expect(admission.stats()).toEqual({ running: 0, waiting: 0 })
      }),
    )
  })

  it("an agent with requests waiting gets no turn of its own when its running one ends: they wait for a place", async () => {
    await withAdmission(1, (admission, started) =>
      Effect.gen(function* () {
        const z1 = yield* heldRequest(admission, "z", "z1", started)
        const z2 = yield* heldRequest(admission, "z", "z2", started)
        const x1 = yield* heldRequest(admission, "x", "x1", started)
        const x2 = yield* heldRequest(admission, "x", "x2", started)
        expect(started).toEqual(["z1", "z2", "x1"])
        yield* x1.finish
        expect(started).toEqual(["z1", "z2", "x1"])
        yield* z2.finish
        expect(started).toEqual(["z1", "z2", "x1", "x2"])
        // An agent idle again runs its next request at once.
        yield* x2.finish
        const x3 = yield* heldRequest(admission, "x", "x3", started)
        expect(started).toEqual(["z1", "z2", "x1", "x2", "x3"])
        for (const request of [x3, z1]) yield* request.finish
        expect(admission.stats()).toEqual({ running: 0, waiting: 0 })
      }),
    )
  })

  it("an agent with a request still running waits for a place, though its first has ended", async () => {
    await withAdmission(1, (admission, started) =>
      Effect.gen(function* () {
        const a1 = yield* heldRequest(admission, "a", "a1", started)
        const a2 = yield* heldRequest(admission, "a", "a2", started)
        yield* a1.finish
        const a3 = yield* heldRequest(admission, "a", "a3", started)
        expect(started).toEqual(["a1", "a2"])
        yield* a2.finish
        expect(started).toEqual(["a1", "a2", "a3"])
        yield* a3.finish
        expect(admission.stats()).toEqual({ running: 0, waiting: 0 })
      }),
    )
  })

  it("gives a free place to the agent with the fewest running, not to the one that sent the most", async () => {
    await withAdmission(2, (admission, started) =>
      Effect.gen(function* () {
        const x = []
        for (let i = 1; i <= 4; i++) x.push(yield* heldRequest(admission, "x", `x${i}`, started))
        const y1 = yield* heldRequest(admission, "y", "y1", started)
        const y2 = yield* heldRequest(admission, "y", "y2", started)
        expect(started).toEqual(["x1", "x2", "x3", "y1"])
        // x waited first, but runs two to y's one: the place goes to y.
        yield* x[1]!.finish
        expect(started).toEqual(["x1", "x2", "x3", "y1", "y2"])
        yield* x[2]!.finish
        expect(started).toEqual(["x1", "x2", "x3", "y1", "y2", "x4"])
        for (const request of [x[0]!, x[3]!, y1, y2]) yield* request.finish
      }),
    )
  })

  it("among agents with as many running, gives the place to the one admitted least recently", async () => {
    await withAdmission(1, (admission, started) =>
      Effect.gen(function* () {
        const b1 = yield* heldRequest(admission, "b", "b1", started)
        const a1 = yield* heldRequest(admission, "a", "a1", started)
        const a2 = yield* heldRequest(admission, "a", "a2", started)
        const a3 = yield* heldRequest(admission, "a", "a3", started)
        const b2 = yield* heldRequest(admission, "b", "b2", started)
        expect(started).toEqual(["b1", "a1", "a2"])
        // a3 waited longer than b2, and both agents run one: b was admitted less recently.
        yield* a2.finish
        expect(started).toEqual(["b1", "a1", "a2", "b2"])
        for (const request of [b2, a1, a3, b1]) yield* request.finish
        expect(started).toEqual(["b1", "a1", "a2", "b2", "a3"])
      }),
    )
  })

  it("a request interrupted while it waits leaves the queue, and one interrupted while it runs frees its place", async () => {
    await withAdmission(1, (admission, started) =>
      Effect.gen(function* () {
        const a1 = yield* heldRequest(admission, "a", "a1", started)
        const a2 = yield* heldRequest(admission, "a", "a2", started)
        const a3 = yield* heldRequest(admission, "a", "a3", started)
        const a4 = yield* heldRequest(admission, "a", "a4", started)
        expect(started).toEqual(["a1", "a2"])
        yield* Fiber.interrupt(a3.fiber)
        expect(admission.stats()).toEqual({ running: 2, waiting: 1 })
        yield* Fiber.interrupt(a2.fiber)
        expect(started).toEqual(["a1", "a2", "a4"])
        yield* a4.finish
        yield* a1.finish
        expect(admission.stats()).toEqual({ running: 0, waiting: 0 })
      }),
    )
  })

  it("with 0 places runs every request at once", async () => {
    await withAdmission(0, (admission, started) =>
      Effect.gen(function* () {
        const requests = []
        for (let i = 1; i <= 50; i++) requests.push(yield* heldRequest(admission, "a", `a${i}`, started))
        expect(started).toHaveLength(50)
        for (const request of requests) yield* request.finish
      }),
    )
  })
})
