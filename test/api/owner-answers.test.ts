/**
 * A replica that has taken a partition but does not answer for it at this moment (catching up after a
 * takeover, or its lease renewing after a lapse) holds the partition's requests until it does, and refuses
 * them with a typed Unavailable when it does not in time: the caller hears an answer instead of waiting out
 * its timeout. The partition's state is scripted; the server, its routing and the serving are real.
 */
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Effect, Fiber } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AgentNotFound } from "../../contracts/errors.ts"
import { deploymentPlacement } from "../../contracts/partitions.ts"
import { placedPartition } from "../../contracts/routing.ts"
import { apiSubject } from "../../contracts/subjects.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { OWNER_WAIT_MS, type PartitionOwner, serveOperation } from "../../services/platform/api/serve.ts"
import { Nats } from "../../services/platform/nats/connection.ts"
import { NatsSettings } from "../../services/platform/nats/settings.ts"

interface Scripted {
  answering: boolean
  taken: boolean
  /** What the handler does once it runs. */
  handle: () => Effect.Effect<{ cues: number; seq: number }, AgentNotFound>
}

const placement = deploymentPlacement()

const ownerOf = (state: Scripted, agentId: string): PartitionOwner => ({
  queue: "wm-retrieval.test-replica",
  owns: () => state.answering,
  takes: () => state.taken,
  placement,
  // The route of the agent's partition stays subscribed: the moment between giving it up and unsubscribing.
  taken: () => [placedPartition(placement, agentId)],
  watchTaken: () => () => {},
})

type Reply = { ok: true; value: unknown } | { ok: false; error: { _tag: string; reason?: string } }

describe.each([
  ["routed by partition", true],
  ["not routed", false],
] as const)("a request at the replica that has taken its partition (%s)", (_name, routed) => {
  let server: NatsServerProcess
  let nc: NatsConnection
  const state: Scripted = { answering: false, taken: true, handle: () => Effect.succeed({ cues: 0, seq: 7 }) }
  const agentId = `owner-${routed ? "r" : "u"}`
  let serving: Fiber.Fiber<void> | undefined

  beforeAll(async () => {
    server = await startNatsServer(routed ? {} : { routing: false })
    nc = await connect({ servers: server.url })
    serving = Effect.runFork(
      Effect.gen(function* () {
        yield* serveOperation("recall", () => Effect.suspend(() => state.handle()), ownerOf(state, agentId))
        yield* Effect.never
      }).pipe(Effect.provide(Nats.layer), Effect.provide(NatsSettings.make({ servers: [server.url] })), Effect.scoped),
    )
    // Served once a request is answered.
    state.answering = true
    for (;;) {
      const reply = await ask(1_000).catch(() => null)
      if (reply?.ok) break
    }
  })
  afterAll(async () => {
    if (serving) await Effect.runPromise(Fiber.interrupt(serving))
    await nc?.close()
    await server?.stop()
  })

  const ask = async (timeout: number): Promise<Reply> =>
    (await nc.request(apiSubject(agentId, "step.recall"), JSON.stringify({ stepId: "s-1" }), { timeout })).json<Reply>()

  it("is held while the partition catches up, then answered", async () => {
    Object.assign(state, { answering: false, taken: true, handle: () => Effect.succeed({ cues: 0, seq: 7 }) })
    const reply = ask(OWNER_WAIT_MS + 5_000)
    setTimeout(() => {
      state.answering = true
    }, 300)
    expect(await reply).toEqual({ ok: true, value: { cues: 0, seq: 7 } })
  })

  it("is refused with Unavailable, naming the agent, when the partition does not answer in time", async () => {
    Object.assign(state, { answering: false, taken: true })
    const reply = await ask(OWNER_WAIT_MS + 10_000)
    expect(reply.ok).toBe(false)
    if (reply.ok) return
    expect(reply.error._tag).toBe("Unavailable")
    expect(reply.error.reason).toContain(`agent '${agentId}'`)
    expect(reply.error.reason).toContain("catching up or renewing its lease")
  })

  if (routed)
    it("is refused with Unavailable at once when its partition has just left the replica", async () => {
      Object.assign(state, { answering: false, taken: false })
      // Well under the wait for a partition still held: this refusal does not wait.
      const reply = await ask(OWNER_WAIT_MS - 1_000)
      expect(reply).toMatchObject({ ok: false, error: { _tag: "Unavailable" } })
      if (!reply.ok) expect(reply.error.reason).toContain("moving to another replica")
    })
  else
    it("is left to the replica that has taken its partition when it is not this one", async () => {
      // Without routing every replica receives every request; this one holds nothing for the agent.
      Object.assign(state, { answering: false, taken: false })
      await expect(ask(1_000)).rejects.toThrow(/timeout/i)
    })

  it("answers Unavailable for a refusal made while the partition moved away, and keeps an answer made before", async () => {
    Object.assign(state, {
      answering: true,
      taken: true,
      handle: () =>
        Effect.suspend(() => {
          Object.assign(state, { answering: false, taken: false })
          return Effect.fail(new AgentNotFound({ agentId }))
        }),
    })
    expect(await ask(OWNER_WAIT_MS)).toMatchObject({ ok: false, error: { _tag: "Unavailable" } })

    Object.assign(state, {
      answering: true,
      taken: true,
      handle: () =>
        Effect.sync(() => {
          Object.assign(state, { answering: false, taken: false })
          return { cues: 2, seq: 9 }
        }),
    })
    expect(await ask(OWNER_WAIT_MS)).toEqual({ ok: true, value: { cues: 2, seq: 9 } })
  })
})
