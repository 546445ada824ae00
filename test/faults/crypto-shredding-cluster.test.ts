/**
 * Crypto-shredding on a 3-node cluster (replicas 3): content reaches no node's files in clear, and a copy
 * of every node's store taken before a forget (a backup, each node's Raft log with it) holds, after the
 * forget and one key rotation with the old key-encryption key retired, no key anything still opens: its
 * agent keys are wrapped by the retired key-encryption key only, its entry keys by generations of agent
 * keys no node keeps any more.
 */
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { jetstreamManager } from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { ConfigProvider, Layer } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import { forget } from "../../cli/audit/forget.ts"
import { agentKeyName, entryKeyName, KEY_BUCKET } from "../../contracts/buckets.ts"
import { type NatsCluster, startNatsCluster } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { makeContentKeys } from "../../services/platform/keys/content-keys.ts"
import { parseKeyEncryptionKeys } from "../../services/platform/keys/kek.ts"
import { ContentKeyStore } from "../../services/platform/keys/key-store.ts"
import { rotateKeys } from "../../services/platform/keys/rotate-keys.ts"
import { systemLayer } from "../../services/system.ts"
import { eventually } from "../support/eventually.ts"
import { filesHolding } from "../support/store-files.ts"
import { type RunningServices, settingsFor, startServices } from "../support/system.ts"
import { teardown } from "./support/audit.ts"

const OLD_KEK = `k1:${Buffer.alloc(32, 11).toString("base64")}`
const NEW_KEK = `k2:${Buffer.alloc(32, 12).toString("base64")}`
const SECRET = "The cluster vault code is 9921-heron"

let cluster: NatsCluster
let services: RunningServices
let client: WorkingMemoryClient
let nc: NatsConnection
const copies: string[] = []
const before = process.env.WM_KEY_ENCRYPTION_KEYS

beforeAll(async () => {
  cluster = await startNatsCluster(3)
  process.env.WM_KEY_ENCRYPTION_KEYS = OLD_KEK
  services = await startServices(
    systemLayer(settingsFor([...cluster.servers], { replicas: 3 })).pipe(
      Layer.provide(
        ConfigProvider.layer(
          ConfigProvider.fromEnv({ env: { WM_KEY_ENCRYPTION_KEYS: OLD_KEK, WM_METRICS_PORT: "0" } }),
        ),
      ),
    ),
  )
  client = await WorkingMemoryClient.connect({ servers: [...cluster.servers], timeoutMs: 5_000 })
  nc = await connect({ servers: [...cluster.servers] })
}, 120_000)

afterAll(async () => {
  await teardown(
    () => nc?.close(),
    () => client?.close(),
    () => services?.stop(),
    () => cluster?.stop(),
  )
  for (const dir of copies) rmSync(dir, { recursive: true, force: true })
  if (before === undefined) delete process.env.WM_KEY_ENCRYPTION_KEYS
  else process.env.WM_KEY_ENCRYPTION_KEYS = before
})

/** Every `"<field>":"<value>"` written in the files under `dir` (the key records as the store keeps them). */
const valuesIn = (dir: string, field: string): Set<string> => {
  const found = new Set<string>()
  const pattern = new RegExp(`"${field}":"([A-Za-z0-9_.-]+)"`, "g")
  const walk = (path: string) => {
    for (const name of readdirSync(path)) {
      const child = join(path, name)
      if (statSync(child).isDirectory()) walk(child)
      else for (const match of readFileSync(child).toString("latin1").matchAll(pattern)) found.add(match[1]!)
    }
  }
  walk(dir)
  return found
}

it("on three nodes, a copy of every store taken before a forget opens nothing after the forget and one rotation", async () => {
  const agent = client.agent("cluster-vault")
  await agent.register({ role: "custom", budget: 2_000 })
  const { entryId } = await agent.record({ origin: "USER", content: SECRET })
  await agent.record({ origin: "USER", content: "The shift starts at nine." })
  expect((await agent.raw(entryId)).content).toBe(SECRET)
  const stores = cluster.nodes.map((n) => n.storeDir)
  expect(filesHolding(stores, SECRET)).toEqual([])

  // A backup of every node, Raft logs included, as they stand before the forget (once each has written the keys).
  for (const store of stores)
    await eventually("the node's store to hold the keys", () => (valuesIn(store, "kek").has("k1") ? true : undefined))
  for (const store of stores) {
    const copy = mkdtempSync(join(tmpdir(), "wm-node-backup-"))
    cpSync(store, copy, { recursive: true })
    copies.push(copy)
  }
  const keptBefore = copies.map((c) => valuesIn(c, "kek"))
  expect(keptBefore.every((keks) => keks.has("k1"))).toBe(true)

  const forgotten = await forget(nc, "cluster-vault", entryId, { waitMs: 60_000 })
  // The eraser beside the substrate completes the same forget when it reads the tombstone: whichever of the two
  // erases the key's revisions first counts them. `complete` holds only once none is left but the mark.
  expect(forgotten.complete).toBe(true)

  const keys = (keks: string) =>
    Promise.all([new Kvm(nc).open(KEY_BUCKET), jetstreamManager(nc)]).then(([kv, jsm]) =>
      makeContentKeys(new ContentKeyStore(kv, jsm, parseKeyEncryptionKeys(keks), Date.now)),
    )
  const rotation = await rotateKeys(nc, (await keys(`${NEW_KEK},${OLD_KEK}`)).store)
  expect(rotation.agents).toBeGreaterThan(0)

  // The live cluster: the entry's key destroyed, the agent on a generation of its key no copy holds.
  const current = await keys(NEW_KEK)
  expect(await current.store.forRead({ agentId: "cluster-vault", entryId })).toBeNull()
  const kv = await new Kvm(nc).open(KEY_BUCKET)
  const mark = await kv.get(entryKeyName("cluster-vault", entryId))
  expect(JSON.parse(new TextDecoder().decode(mark?.value))).toHaveProperty("destroyed")
  const live = await kv.get(agentKeyName("cluster-vault"))
  const liveGens = (
    JSON.parse(new TextDecoder().decode(live?.value)) as { generations: { gen: string; kek: string }[] }
  ).generations
  expect(liveGens.map((g) => g.kek)).toEqual(["k2"])
  for (const copy of copies) {
    // What a copy holds is wrapped by the retired key-encryption key, under generations no node keeps.
    expect([...valuesIn(copy, "kek")].filter((k) => k !== "k1")).toEqual([])
    const copiedGens = valuesIn(copy, "gen")
    expect(liveGens.filter((g) => copiedGens.has(g.gen))).toEqual([])
  }
  // And no node, live or copied, holds the text in clear.
  expect(filesHolding([...stores, ...copies], SECRET)).toEqual([])
}, 240_000)
