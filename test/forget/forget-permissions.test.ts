/**
 * The forget eraser works under the generated broker permissions: with every
 * service logged in as its own user, a stored tombstone is carried out by
 * the substrate's user alone (the log, the dead letters and its bucket are
 * erased in place), while an agent may erase nothing, not even its own events.
 */
import { jetstream, jetstreamManager } from "@nats-io/jetstream"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Layer } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import { scanLog } from "../../cli/audit/log.ts"
import { agentConfigSubject, agentEvents, agentStepSubject, EVENTS_STREAM } from "../../contracts/subjects.ts"
import { type AgentView, evolve } from "../../domain/agent-view.ts"
import { decideForget } from "../../domain/forget.ts"
import { type NatsAuth, natsAuth } from "../../infra/auth.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { NatsSettings } from "../../services/platform/nats/settings.ts"
import { gatewayService, memoryService, substrateService, workingService } from "../../services/system.ts"
import { eventually } from "../support/eventually.ts"
import { filesHolding } from "../support/store-files.ts"
import { type RunningServices, startServices } from "../support/system.ts"

let auth: NatsAuth
let server: NatsServerProcess
let services: RunningServices
let admin: NatsConnection
let carol: WorkingMemoryClient

beforeAll(async () => {
  auth = natsAuth({ agents: ["carol"] })
  server = await startNatsServer({ config: auth.config })
  const settings = (name: string) =>
    NatsSettings.make({ servers: [server.url], name: `wm-${name}`, ...auth.service(name) })
  services = await startServices(
    Layer.mergeAll(
      Layer.fresh(workingService(settings("working"))),
      Layer.fresh(gatewayService(settings("gateway"))),
      Layer.fresh(substrateService(settings("substrate"))),
      Layer.fresh(memoryService(settings("memory"))),
    ),
  )
  admin = await connect({ servers: server.url, user: auth.admin!.user, pass: auth.admin!.pass })
  carol = await WorkingMemoryClient.connect({
    servers: server.url,
    ...auth.agent("carol"),
    attempts: 1,
    timeoutMs: 5_000,
  })
})

afterAll(async () => {
  await carol?.close()
  await admin?.close()
  await services?.stop()
  await server?.stop()
})

const SECRET = "NARWHAL6614COPPER"

it("the substrate's user carries out a stored tombstone; an agent cannot erase even its own events", async () => {
  const agent = carol.agent("carol")
  await agent.register({ role: "main" })
  const { entryId, seq } = await agent.record({ origin: "USER", content: `Carol's pin is ${SECRET}.` })
  // A record nobody can decode, carrying the text, so that every projection dead-letters it.
  await jetstream(admin).publish(agentStepSubject("carol"), `{"_tag":"StepStarted","v":0,"note":"${SECRET}"}`)
  await eventually(
    "the substrate to store the entry",
    async () =>
      await agent.raw(entryId).then(
        () => true,
        () => false,
      ),
  )
  expect(filesHolding([server.storeDir], SECRET).length).toBeGreaterThan(0)

  await expect(
    (await jetstreamManager(carol.nc, { checkAPI: false })).streams.deleteMessage(EVENTS_STREAM, seq, true),
  ).rejects.toThrow(/Permissions Violation/)
  let view: AgentView | undefined
  const { records } = await scanLog(admin, { filter: agentEvents("carol") }, (r) => {
    if (r.event !== null) view = evolve(view, r.event, r)
  })
  expect(records).toBe(3)
  const decision = decideForget(
    view,
    {},
    { eventId: "carol:forget", agentId: "carol", at: Date.now(), causationId: "operator:forget", correlationId: null },
  )
  if (!decision.ok) throw new Error(decision.error.message)
  await jetstream(admin).publish(agentConfigSubject("carol"), JSON.stringify(decision.event), {
    msgID: decision.event.eventId,
  })

  await eventually("the eraser to finish the forget", () => filesHolding([server.storeDir], SECRET).length === 0)
})
