/**
 * Partition pins (WM_PARTITION_PINS over WM_TENANTS): a pinned tenant's agents are placed only on its
 * partitions, which no other agent is placed on; without pins nothing moves. A deployment with pins
 * stores a pinned agent's events under its pinned partition and its working replica answers for it; a
 * log written before the pins is refused until `wm migrate` moves each agent to its partition now.
 */
import { connect } from "@nats-io/transport-node"
import { ConfigProvider, Effect, Exit, HashMap, Layer, ManagedRuntime } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { migrateLog } from "../../cli/audit/migrate.ts"
import { InvalidPlacementSetting, placementFromSettings } from "../../contracts/partition-pins.ts"
import { fnv1a32, partitionOf } from "../../contracts/partitions.ts"
import {
  agentIdOfEventSubject,
  entrySubject,
  partitionOfEventSubject,
  relocatedSubject,
} from "../../contracts/subjects.ts"
import type { AgentView } from "../../domain/agent-view.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import type { Gateway } from "../../services/gateway/gateway.ts"
import { Nats } from "../../services/platform/nats/connection.ts"
import { NatsSettings } from "../../services/platform/nats/settings.ts"
import { ensureTopology } from "../../services/platform/nats/topology.ts"
import { checkLogLayout } from "../../services/platform/partitions/partitioned-views.ts"
import { partitionSettingsFromConfig } from "../../services/platform/partitions/settings.ts"
import { systemLayer } from "../../services/system.ts"
import { Working } from "../../services/working/working.ts"
import { readRecords } from "../faults/support/audit.ts"
import { lastSeq } from "../support/log.ts"
import { type RunningServices, settingsFor, startServices } from "../support/system.ts"

const PLACEMENT_VARIABLES = ["WM_PARTITIONS", "WM_PARTITION_PINS", "WM_TENANTS"] as const
type PlacementEnv = Partial<Record<(typeof PLACEMENT_VARIABLES)[number], string>>

/** Sets the placement variables of this process (unset: removed); `afterEach` puts the old values back. */
const saved = Object.fromEntries(PLACEMENT_VARIABLES.map((name) => [name, process.env[name]]))
const setPlacementEnv = (env: PlacementEnv) => {
  for (const name of PLACEMENT_VARIABLES) {
    const value = env[name]
    if (value === undefined) delete process.env[name]
    else process.env[name] = value
  }
}
afterEach(() => {
  for (const name of PLACEMENT_VARIABLES) {
    const value = saved[name]
    if (value === undefined) delete process.env[name]
    else process.env[name] = value
  }
})

const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`)
const ACME = ids("acme", 200)
const BETA = ids("beta", 100)
const OTHERS = ids("agent", 2_000)
const TENANTS = `acme=${ACME.join(",")}; beta=${BETA.join(",")}; gamma=loner`

describe("placement with pins", () => {
  it("places a pinned tenant's agents only on its partitions, hashing over them", () => {
    setPlacementEnv({ WM_TENANTS: TENANTS, WM_PARTITION_PINS: "acme=0-3; beta=4,6" })
    const acme = ACME.map((id) => partitionOf(id))
    const beta = BETA.map((id) => partitionOf(id))
    expect(new Set(acme)).toEqual(new Set([0, 1, 2, 3]))
    expect(new Set(beta)).toEqual(new Set([4, 6]))
    // The same FNV-1a, over the tenant's own list.
    for (const id of BETA) expect(partitionOf(id)).toBe([4, 6][fnv1a32(id) % 2])
    // Event subjects follow.
    expect(partitionOfEventSubject(entrySubject("beta-0", "e1"))).toBe(partitionOf("beta-0"))
  })

  it("never places another agent on a pinned partition, and spreads them over all the others", () => {
    setPlacementEnv({ WM_TENANTS: TENANTS, WM_PARTITION_PINS: "acme=0-3; beta=4,6" })
    const placed = [...OTHERS, "loner"].map((id) => partitionOf(id))
    expect(new Set(placed)).toEqual(new Set([5, 7, 8, 9, 10, 11, 12, 13, 14, 15]))
  })

  it("places agents outside every pin over all partitions when every partition is pinned", () => {
    setPlacementEnv({ WM_TENANTS: TENANTS, WM_PARTITION_PINS: "acme=0-7; beta=8-15" })
    for (const id of OTHERS) expect(partitionOf(id)).toBe(fnv1a32(id) % 16)
    expect(ACME.every((id) => partitionOf(id) < 8)).toBe(true)
  })

  it("without pins places every agent where it was placed before pins existed", () => {
    const today = (id: string, partitions: number) => fnv1a32(id) % partitions
    const all = [...OTHERS, ...ACME, ...BETA]
    for (const env of [{}, { WM_TENANTS: TENANTS }, { WM_TENANTS: TENANTS, WM_PARTITION_PINS: "  " }]) {
      setPlacementEnv(env)
      for (const id of all) expect(partitionOf(id)).toBe(today(id, 16))
      for (const id of all) expect(partitionOf(id, 7)).toBe(today(id, 7))
    }
    setPlacementEnv({ WM_PARTITIONS: "5" })
    for (const id of all) expect(partitionOf(id)).toBe(today(id, 5))
  })

  it("follows the environment when the pins change", () => {
    setPlacementEnv({ WM_TENANTS: TENANTS, WM_PARTITION_PINS: "acme=2" })
    expect(partitionOf("acme-7")).toBe(2)
    setPlacementEnv({ WM_TENANTS: TENANTS, WM_PARTITION_PINS: "acme=9" })
    expect(partitionOf("acme-7")).toBe(9)
    // A record written under the first pins belongs elsewhere under the second.
    expect(relocatedSubject("wm.evt.2.acme-7.entry.e1")).toBe("wm.evt.9.acme-7.entry.e1")
    expect(relocatedSubject("wm.evt.9.acme-7.step")).toBeNull()
  })

  const refusals: ReadonlyArray<readonly [string, string, string, RegExp]> = [
    ["no '='", "acme", TENANTS, /'acme' is not <tenant>=<partition>\|<from>-<to>/],
    ["no partitions", "acme=", TENANTS, /'acme=' is not <tenant>=/],
    ["an open range", "acme=0-", TENANTS, /'acme=0-' is not <tenant>=/],
    ["a partition that is not a number", "acme=one", TENANTS, /'acme=one' is not <tenant>=/],
    ["an empty list item", "acme=1,,2", TENANTS, /'acme=1,,2' is not <tenant>=/],
    ["a backward range", "acme=3-1", TENANTS, /the range 3-1 runs backwards/],
    ["a tenant pinned twice", "acme=1; acme=2", TENANTS, /tenant 'acme' is pinned twice/],
    ["a partition above P-1", "acme=0-16", TENANTS, /partition 16 of tenant 'acme' is outside 0\.\.15/],
    [
      "a partition pinned to two tenants",
      "acme=0-3; beta=3,4",
      TENANTS,
      /partition 3 is pinned to both 'acme' and 'beta'/,
    ],
    ["a tenant absent from WM_TENANTS", "delta=1", TENANTS, /tenant 'delta' is not one of WM_TENANTS/],
    ["pins without any tenant", "acme=1", "", /tenant 'acme' is not one of WM_TENANTS/],
    [
      "an agent in two pinned tenants",
      "acme=0; beta=1",
      "acme=planner,critic; beta=critic,scout",
      /agent 'critic' is in two pinned tenants, 'acme' and 'beta'/,
    ],
  ]
  for (const [what, pins, tenants, reason] of refusals)
    it(`refuses ${what}, naming WM_PARTITION_PINS and the reason`, () => {
      setPlacementEnv({ WM_TENANTS: tenants, WM_PARTITION_PINS: pins })
      const refusal = (() => {
        try {
          partitionOf("planner")
        } catch (error) {
          return error
        }
        return null
      })()
      expect(refusal).toBeInstanceOf(InvalidPlacementSetting)
      expect((refusal as Error).message).toMatch(/^WM_PARTITION_PINS: /)
      expect((refusal as Error).message).toMatch(reason)
    })

  it("refuses malformed tenants under pins naming WM_TENANTS", () => {
    expect(() => placementFromSettings(16, "acme=1", "acme=")).toThrow(/^WM_TENANTS: tenant 'acme' names no agent/)
  })

  it("is refused by a partitioned service's settings, naming WM_PARTITION_PINS and the reason", async () => {
    const env = { WM_TENANTS: TENANTS, WM_PARTITION_PINS: "acme=0-3; beta=3" }
    const exit = await Effect.runPromiseExit(
      partitionSettingsFromConfig.pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env })))),
    )
    expect(Exit.isFailure(exit) && String(exit.cause)).toMatch(/WM_PARTITION_PINS: partition 3 is pinned to both/)
  })

  it("is refused by a partitioned service whose pins differ from those its event subjects are built with", async () => {
    setPlacementEnv({ WM_TENANTS: TENANTS, WM_PARTITION_PINS: "acme=0-3" })
    const env = { WM_TENANTS: TENANTS, WM_PARTITION_PINS: "acme=0-4" }
    const exit = await Effect.runPromiseExit(
      partitionSettingsFromConfig.pipe(Effect.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env })))),
    )
    expect(Exit.isFailure(exit) && String(exit.cause)).toMatch(/WM_PARTITION_PINS .* place agents otherwise/)
  })
})

/** The records of the log, by agent: each one's partitions. */
const partitionsByAgent = async (url: string) => {
  const byAgent = new Map<string, Set<number>>()
  for (const r of await readRecords(url)) {
    const agentId = agentIdOfEventSubject(r.subject)
    const set = byAgent.get(agentId) ?? new Set<number>()
    set.add(partitionOfEventSubject(r.subject)!)
    byAgent.set(agentId, set)
  }
  return byAgent
}

/** Why a layer refused to start (null: it started; it is stopped again either way). */
const refusalOf = async <R, E>(layer: Layer.Layer<R, E>): Promise<unknown> => {
  const runtime = ManagedRuntime.make(layer)
  try {
    await runtime.runPromise(Effect.void)
    return null
  } catch (error) {
    return error
  } finally {
    await runtime.dispose()
  }
}

interface Deployment {
  readonly server: NatsServerProcess
  readonly client: WorkingMemoryClient
  services: RunningServices | undefined
  /** Every service in this process, reading the environment as it is now. */
  readonly layer: () => Layer.Layer<Working | Gateway, unknown>
  /** The working replica's view of the agent once it has applied the log's end. */
  readonly liveView: (agentId: string) => Promise<AgentView | undefined>
  readonly stop: () => Promise<void>
}

/**
 * The test system's services on a real nats-server. Effect's default ConfigProvider keeps the
 * environment it first read, so each start gives the services a provider of the environment now: the
 * pins of the test that starts them.
 */
const deploy = async (): Promise<Deployment> => {
  const server = await startNatsServer()
  const layer = () =>
    systemLayer(settingsFor(server.url)).pipe(Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv())))
  const deployment: Deployment = {
    server,
    client: await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 5_000 }),
    services: await startServices(layer()),
    layer,
    liveView: async (agentId) => {
      const runtime = deployment.services!.runtime
      const working = await runtime.runPromise(Effect.service(Working))
      await runtime.runPromise(working.waitApplied(await lastSeq(server.url), agentId))
      return working.view(agentId)
    },
    stop: async () => {
      await deployment.client.close()
      await deployment.services?.stop()
      await server.stop()
    },
  }
  return deployment
}

const PINNED = ["planner", "critic"]
const E2E_TENANTS = "acme=planner,critic; beta=scout"
const E2E_PINS = "acme=5,9"

const writeSome = async (deployment: Deployment, agentIds: ReadonlyArray<string>) => {
  for (const id of agentIds) {
    const agent = deployment.client.agent(id)
    await agent.register({ role: "main" })
    await agent.record({ origin: "USER", content: `${id} has to ship the quarterly report.` })
    await agent.record({ origin: "INTERNAL", content: `${id} checks the numbers twice.` })
  }
}

/** How many entries the working service answers the agent's view with, and its live view holds. */
const entriesServed = async (deployment: Deployment, agentId: string) => [
  ((await deployment.client.agent(agentId).view()) as { entries: ReadonlyArray<unknown> }).entries.length,
  HashMap.size((await deployment.liveView(agentId))!.entries),
]

describe("a deployment with a pinned tenant", () => {
  let deployment: Deployment | undefined
  afterEach(async () => {
    await deployment?.stop()
    deployment = undefined
  })

  it("stores the tenant's events under its pinned partitions and its working replica answers for them", async () => {
    setPlacementEnv({ WM_TENANTS: E2E_TENANTS, WM_PARTITION_PINS: E2E_PINS })
    deployment = await deploy()
    await writeSome(deployment, [...PINNED, "scout", "stranger"])

    const byAgent = await partitionsByAgent(deployment.server.url)
    for (const id of PINNED) {
      expect(byAgent.get(id), id).toEqual(new Set([partitionOf(id)]))
      expect([5, 9]).toContain(partitionOf(id))
    }
    for (const id of ["scout", "stranger"]) {
      expect(byAgent.get(id), id).toEqual(new Set([partitionOf(id)]))
      expect([5, 9]).not.toContain(partitionOf(id))
    }

    const working = await deployment.services!.runtime.runPromise(Effect.service(Working))
    for (const id of PINNED) {
      expect(working.owns(id)).toBe(true)
      expect(working.answeringPartitions()).toContain(partitionOf(id))
      expect(await entriesServed(deployment, id)).toEqual([2, 2])
    }
  })

  it("refuses a log written before the pins until wm migrate moves each agent to its pinned partition", async () => {
    setPlacementEnv({ WM_TENANTS: E2E_TENANTS })
    deployment = await deploy()
    const agents = [...PINNED, "scout", "stranger"]
    await writeSome(deployment, agents)
    const before = await partitionsByAgent(deployment.server.url)
    await deployment.services!.stop()
    deployment.services = undefined

    setPlacementEnv({ WM_TENANTS: E2E_TENANTS, WM_PARTITION_PINS: E2E_PINS })
    // A pinned agent was elsewhere: its records must move.
    expect(PINNED.some((id) => !before.get(id)!.has(partitionOf(id)))).toBe(true)
    expect(String(await refusalOf(deployment.layer()))).toMatch(
      /written with another placement .*WM_PARTITION_PINS=acme=5,9 .*run `wm migrate` first/,
    )

    const nc = await connect({ servers: deployment.server.url })
    try {
      const migrated = await migrateLog(nc)
      expect(migrated.alreadyCurrent).toBe(false)
      expect(migrated.upgraded).toBeGreaterThan(0)
    } finally {
      await nc.close()
    }
    const after = await partitionsByAgent(deployment.server.url)
    for (const id of agents) expect(after.get(id), id).toEqual(new Set([partitionOf(id)]))
    for (const id of PINNED) expect([5, 9]).toContain(partitionOf(id))

    deployment.services = await startServices(deployment.layer())
    for (const id of agents) expect(await entriesServed(deployment, id), id).toEqual([2, 2])
  })
})

describe("the log layout check of a partitioned service", () => {
  let server: NatsServerProcess | undefined
  afterEach(async () => {
    await server?.stop()
    server = undefined
  })

  /** Stores records under these subjects (their bytes do not matter to the check) and runs the check. */
  const checkOn = async (subjects: ReadonlyArray<string>) => {
    server = await startNatsServer()
    const url = server.url
    return Effect.runPromiseExit(
      Effect.gen(function* () {
        const { jsm, js } = yield* Nats
        yield* ensureTopology(jsm, yield* NatsSettings)
        for (const subject of subjects) yield* Effect.promise(() => js.publish(subject, "{}"))
        yield* checkLogLayout(16)
      }).pipe(Effect.provide(Nats.layer), Effect.provide(NatsSettings.make({ servers: [url] })), Effect.scoped),
    )
  }

  it("finds a pinned agent's records outside its partitions though every partition's last record is in place", async () => {
    setPlacementEnv({ WM_TENANTS: E2E_TENANTS })
    const unpinnedAt = partitionOf("planner")
    const misplaced = entrySubject("planner", "e1")
    setPlacementEnv({ WM_TENANTS: E2E_TENANTS, WM_PARTITION_PINS: "acme=5,9" })
    expect([5, 9]).not.toContain(unpinnedAt)
    // An agent placed, under the pins, on the partition the planner was on without them: its record is
    // that partition's last and the log's last, and both are in place.
    const neighbour = OTHERS.find((id) => partitionOf(id) === unpinnedAt)!
    const exit = await checkOn([misplaced, entrySubject(neighbour, "e2")])
    expect(Exit.isFailure(exit) && String(exit.cause)).toMatch(
      new RegExp(`${misplaced.replaceAll(".", "\\.")} belongs in wm\\.evt\\.${partitionOf("planner")}\\.planner`),
    )
  })

  it("passes a log whose every record is where this deployment places its agent", async () => {
    setPlacementEnv({ WM_TENANTS: E2E_TENANTS, WM_PARTITION_PINS: "acme=5,9" })
    const exit = await checkOn(["planner", "critic", "scout"].map((id) => entrySubject(id, "e1")))
    expect(Exit.isSuccess(exit)).toBe(true)
  })
})
