/**
 * A request for an agent its replica's views do not hold: the views first catch up with the log, and the
 * agent is refused as unknown only by views that have applied all of it. Views that cannot catch up at this
 * moment, because the agent's partition does not answer here (catching up after a takeover, moving away,
 * its lease renewing after a stalled event loop), refuse with the retryable NotCaughtUp. A registered agent
 * is never told AgentNotFound by a replica that cannot see it for a moment. The log, its server and the
 * command handler are real; the views are scripted as a partition answers, as partitioned-projection.ts does.
 */
import { Clock, Effect, Layer, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { AgentNotFound, InvalidState, NotCaughtUp, Unavailable } from "../../contracts/errors.ts"
import type { AgentView } from "../../domain/agent-view.ts"
import type { Decision } from "../../domain/decision.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { makeRegistration } from "../../services/gateway/registration.ts"
import { makeWrites } from "../../services/gateway/writes.ts"
import type { ContentKeys } from "../../services/platform/keys/content-keys.ts"
import { makeCommandHandler, type ViewSource } from "../../services/platform/log/command-handler.ts"
import { EventLog } from "../../services/platform/log/event-log.ts"
import { knownView } from "../../services/platform/log/known-view.ts"
import { Nats } from "../../services/platform/nats/connection.ts"
import type { NatsSettings } from "../../services/platform/nats/settings.ts"
import type { PartitionedViews } from "../../services/platform/partitions/partitioned-views.ts"
import { AGENT, registered, viewOf } from "../support/events.ts"
import { createStreams, settingsFor } from "../support/system.ts"

let server: NatsServerProcess
let runtime: ManagedRuntime.ManagedRuntime<EventLog | ContentKeys | Nats | NatsSettings, unknown>

beforeAll(async () => {
  server = await startNatsServer()
  await createStreams(server.url)
  runtime = ManagedRuntime.make(
    EventLog.layer.pipe(Layer.provideMerge(Nats.layer), Layer.provideMerge(settingsFor(server.url)("wm-test"))),
  )
})
afterAll(async () => {
  await runtime?.dispose()
  await server?.stop()
})

/**
 * Views of one partition: while it does not answer here, it holds no view and every wait fails at once
 * with NotCaughtUp (appliedSeq 0); while it answers, a wait applies `pending` (what the log holds beyond
 * the views' position) and succeeds.
 */
const scriptedViews = (state: {
  answering: boolean
  held: Map<string, AgentView>
  pending: Map<string, AgentView>
}): ViewSource => {
  const waitFor = (seq: number) =>
    Effect.suspend(() => {
      if (!state.answering) return Effect.fail(new NotCaughtUp({ afterSeq: seq, appliedSeq: 0 }))
      for (const [id, view] of state.pending) state.held.set(id, view)
      state.pending.clear()
      return Effect.void
    })
  return { get: (agentId) => (state.answering ? state.held.get(agentId) : undefined), waitFor, waitForRecord: waitFor }
}

/** A command decided on the agent's view that records nothing. */
const decidedOnView = (views: ViewSource, agentId: string, decide: (view: AgentView) => Decision<string>) =>
  Effect.flatMap(makeCommandHandler(views), (commands) =>
    commands.handle({
      agentId,
      operation: "beginStep",
      decide,
      eventOf: () => null,
      reply: (outcome) => outcome.decided,
    }),
  )

/** A command that reads the agent's view and records nothing: what every write and read starts with. */
const readsView = (views: ViewSource, agentId: string) =>
  decidedOnView(views, agentId, (view) => ({ ok: true, event: view.config.id }))

const registeredView = () => viewOf(registered({ id: AGENT }))

describe("the view of the agent a request names", () => {
  it("is refused NotCaughtUp, not AgentNotFound, while the agent's partition does not answer here", async () => {
    const state = { answering: false, held: new Map([[AGENT, registeredView()]]), pending: new Map() }
    const views = scriptedViews(state)

    const handled = await runtime.runPromise(Effect.flip(readsView(views, AGENT)))
    expect(handled).toBeInstanceOf(NotCaughtUp)
    const read = await runtime.runPromise(Effect.flip(Effect.flatMap(EventLog, (log) => knownView(views, log, AGENT))))
    expect(read).toBeInstanceOf(NotCaughtUp)

    // Once the partition answers again, the same request is answered from the agent's view.
    state.answering = true
    expect(await runtime.runPromise(readsView(views, AGENT))).toBe(AGENT)
  })

  it("is found once the views have applied the log, when the agent's registration was behind them", async () => {
    const state = { answering: true, held: new Map(), pending: new Map([[AGENT, registeredView()]]) }
    expect(await runtime.runPromise(readsView(scriptedViews(state), AGENT))).toBe(AGENT)
  })

  it("is refused AgentNotFound by views that have applied the whole log and do not know the agent", async () => {
    const state = { answering: true, held: new Map([[AGENT, registeredView()]]), pending: new Map() }
    const refused = await runtime.runPromise(Effect.flip(readsView(scriptedViews(state), "never-registered")))
    expect(refused).toBeInstanceOf(AgentNotFound)
    expect(refused).toMatchObject({ agentId: "never-registered" })
  })
})

/** The gateway's registration on the scripted partition, as gateway.ts puts it together. */
const registration = (views: ViewSource) =>
  Effect.gen(function* () {
    const log = yield* EventLog
    const partitioned = { get: views.get, projection: { waitFor: views.waitFor } } as unknown as PartitionedViews
    const commands = yield* makeCommandHandler(views)
    const writes = makeWrites(log, partitioned, commands, yield* Clock.Clock)
    return makeRegistration(log, partitioned, commands, writes)
  })

const registeredAs = (agentId: string) => ({ ...registered({ id: agentId }), agentId })

describe("a registration the log already holds", () => {
  const request = { role: "main", budget: 8_000, encoding: "o200k_base" } as const

  /** The agent registered in the log; the gateway's registration on a partition that answers or not, holding no view. */
  const registeredInLog = async (agentId: string, answering: boolean) => {
    await runtime.runPromise(Effect.flatMap(EventLog, (log) => log.append(registeredAs(agentId))))
    const state = { answering, held: new Map<string, AgentView>(), pending: new Map<string, AgentView>() }
    const { registerAgent } = await runtime.runPromise(registration(scriptedViews(state)))
    return { state, registerAgent }
  }

  it("is refused NotCaughtUp while the agent's partition does not answer here, then answered as registered", async () => {
    const agentId = "registered-before-a-handoff"
    const { state, registerAgent } = await registeredInLog(agentId, false)

    // The first append loses to the stored registration and the views cannot catch up here: not "unknown".
    const refused = await runtime.runPromise(Effect.flip(registerAgent(agentId, request)))
    expect(refused).toBeInstanceOf(NotCaughtUp)

    state.answering = true
    state.pending.set(agentId, viewOf(registeredAs(agentId)))
    const answered = await runtime.runPromise(registerAgent(agentId, request))
    expect(answered.agent).toMatchObject({ id: agentId, role: "main", budget: 8_000 })
  })

  it("is refused the retryable Unavailable when it loses the race again after catching up", async () => {
    // The registration landed after the views caught up: they answer, and still do not hold it.
    const agentId = "registered-after-the-catch-up"
    const { registerAgent } = await registeredInLog(agentId, true)

    const refused = await runtime.runPromise(Effect.flip(registerAgent(agentId, request)))
    expect(refused).toBeInstanceOf(Unavailable)
    expect(refused).toMatchObject({ reason: expect.stringContaining(agentId) })
  })
})

describe("a refusal decided on a view that may lag", () => {
  /** A command the view refuses while it holds no open step, as a lagging view does for a step begun since. */
  const needsOpenStep = (views: ViewSource) =>
    decidedOnView(views, AGENT, (view) =>
      view.step === null
        ? { ok: false, error: new InvalidState({ field: "stepId", reason: "no step is open" }) }
        : { ok: true, event: view.step.stepId },
    )

  it("is NotCaughtUp, not the refusal, while the views cannot reach the log's end", async () => {
    // The views hold the agent, and every wait for the log's end fails: the partition does not answer here.
    const views: ViewSource = {
      get: () => registeredView(),
      waitFor: (seq) => Effect.fail(new NotCaughtUp({ afterSeq: seq, appliedSeq: 0 })),
      waitForRecord: (seq) => Effect.fail(new NotCaughtUp({ afterSeq: seq, appliedSeq: 0 })),
    }
    expect(await runtime.runPromise(Effect.flip(needsOpenStep(views)))).toBeInstanceOf(NotCaughtUp)
  })

  it("stands once the views have reached the log's end", async () => {
    const state = { answering: true, held: new Map([[AGENT, registeredView()]]), pending: new Map() }
    expect(await runtime.runPromise(Effect.flip(needsOpenStep(scriptedViews(state))))).toBeInstanceOf(InvalidState)
  })
})
