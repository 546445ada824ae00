/** Replicas, requests and the server's per-subscription counts, for the routing tests. */
import { expect } from "vitest"
import { freePort, type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { PartitionSettings } from "../../services/platform/partitions/settings.ts"
import { workingService } from "../../services/system.ts"
import { teardown } from "../faults/support/audit.ts"
import { gatewayLayer, type InProcess, settingsFor, startInProcess, workingOf } from "../faults/support/services.ts"

export interface Subscription {
  readonly subject: string
  readonly qgroup?: string
  readonly msgs?: number
}

/** Every subscription of the server with the messages it delivered, from `/connz?subs=detail`. */
export const subscriptions = async (monitorUrl: string): Promise<Subscription[]> => {
  const response = await fetch(`${monitorUrl}/connz?subs=detail&limit=1024`)
  const body = (await response.json()) as { connections?: Array<{ subscriptions_list_detail?: Subscription[] }> }
  return (body.connections ?? []).flatMap((c) => c.subscriptions_list_detail ?? [])
}

/** The context.build requests each working replica's queue received: routed, and not routed. */
export const received = (subs: ReadonlyArray<Subscription>, replicaId: string) => {
  const mine = subs.filter((s) => s.qgroup === `wm-working.${replicaId}` && s.subject.endsWith(".context.build"))
  return {
    unrouted: mine.filter((s) => s.subject.startsWith("wm.api.")).reduce((n, s) => n + (s.msgs ?? 0), 0),
    routes: mine.filter((s) => s.subject.startsWith("wm.route.")),
  }
}

/** A working replica in process; `leaseSettleMs`: how long it waits, announced, before taking partitions. */
export const startReplica = async (url: string, replicaId: string, leaseSettleMs?: number) => {
  const services = await startInProcess(
    workingService(
      settingsFor(url)(`wm-working-${replicaId}`),
      PartitionSettings.make({
        leaseTtlMs: 5_000,
        replicaId,
        ...(leaseSettleMs !== undefined ? { leaseSettleMs } : {}),
      }),
    ),
  )
  return { replicaId, services, working: await workingOf(services) }
}

export const AGENTS = Array.from({ length: 40 }, (_, i) => `routed-${i}`)

export const stepEach = async (client: WorkingMemoryClient, agents: ReadonlyArray<string>) => {
  for (const id of agents) {
    const agent = client.agent(id)
    await agent.register({ role: "main" })
    await agent.record({ origin: "USER", content: `Agent ${id} keeps the routing notes.` })
    const context = await agent.buildContext()
    expect(context.text).toContain(`Agent ${id} keeps the routing notes.`)
  }
}

export type Replica = Awaited<ReturnType<typeof startReplica>>

export interface RoutedSystem {
  readonly server: NatsServerProcess
  /** The server's monitoring endpoint, where `subscriptions` reads what each subscription received. */
  readonly monitorUrl: string
  readonly gateway: InProcess<unknown>
  /** The working replicas still running (a test that stops one takes it out). */
  replicas: Replica[]
  readonly client: WorkingMemoryClient
  readonly stop: () => Promise<void>
}

/**
 * A nats-server (routing by partition unless `routing` is false) with its monitoring endpoint, one gateway,
 * a working replica per id and an SDK client.
 */
export const startRoutedSystem = async (
  replicaIds: ReadonlyArray<string>,
  options: { readonly routing?: false } = {},
): Promise<RoutedSystem> => {
  const monitorPort = await freePort()
  const server = await startNatsServer({
    config: `http: "127.0.0.1:${monitorPort}"\n`,
    ...(options.routing === false ? { routing: false as const } : {}),
  })
  const gateway = await startInProcess(gatewayLayer(server.url))
  const replicas: Replica[] = []
  for (const id of replicaIds) replicas.push(await startReplica(server.url, id))
  const client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 3_000, attempts: 8 })
  const system: RoutedSystem = {
    server,
    monitorUrl: `http://127.0.0.1:${monitorPort}`,
    gateway,
    replicas,
    client,
    stop: () =>
      teardown(
        () => client.close(),
        ...system.replicas.map((r) => () => r.services.stop()),
        () => gateway.stop(),
        () => server.stop(),
      ),
  }
  return system
}
