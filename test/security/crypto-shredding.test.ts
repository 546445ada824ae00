/**
 * Crypto-shredding: content is stored only sealed under its entry's key, and a forget destroys the key
 * before it erases. A copy of the store taken before the forget (a backup) keeps the sealed records and
 * the keys as they were; after the forget and one key rotation, with the retired key-encryption key
 * removed, nothing in the copy or in the live store opens them.
 */
import { execFile } from "node:child_process"
import { cpSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { jetstreamManager } from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { afterAll, beforeAll, expect, it } from "vitest"
import { forget } from "../../cli/audit/forget.ts"
import { entryKeyName, KEY_BUCKET } from "../../contracts/buckets.ts"
import { decodeEvent } from "../../contracts/decode.ts"
import { EVENTS_STREAM, entrySubject } from "../../contracts/subjects.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { SEALED_TEXT } from "../../services/memory/longterm/sealed-store.ts"
import { makeContentKeys } from "../../services/platform/keys/content-keys.ts"
import { parseKeyEncryptionKeys } from "../../services/platform/keys/kek.ts"
import { ContentKeyStore } from "../../services/platform/keys/key-store.ts"
import { rotateKeys } from "../../services/platform/keys/rotate-keys.ts"
import { FORGOTTEN_TEXT } from "../../services/platform/keys/sealing.ts"
import { eventually } from "../support/eventually.ts"
import { readLog, sealedContentOf } from "../support/log.ts"
import { filesHolding } from "../support/store-files.ts"
import { type RunningServices, startSystemWithEnv } from "../support/system.ts"

const run = promisify(execFile)
const T0 = Date.UTC(2024, 2, 1)
/** A sealed summary as the durable store's JSON payloads write it. */
const SEALED_IN_JSON = JSON.stringify(SEALED_TEXT).slice(1, -1)
const OLD_KEK = `k1:${Buffer.alloc(32, 1).toString("base64")}`
const NEW_KEK = `k2:${Buffer.alloc(32, 2).toString("base64")}`
const SECRET = "The vault code is 4417-swordfish"

let server: NatsServerProcess
let services: RunningServices
let client: WorkingMemoryClient
let nc: NatsConnection
const longTermDir = mkdtempSync(join(tmpdir(), "wm-shred-longterm-"))
const dirs: string[] = [longTermDir]
const before = process.env.WM_KEY_ENCRYPTION_KEYS

beforeAll(async () => {
  server = await startNatsServer()
  process.env.WM_KEY_ENCRYPTION_KEYS = OLD_KEK
  services = await startSystemWithEnv(server.url, {
    WM_KEY_ENCRYPTION_KEYS: OLD_KEK,
    WM_METRICS_PORT: "0",
    WM_LONGTERM_DIR: longTermDir,
  })
  client = await WorkingMemoryClient.connect({ servers: server.url })
  nc = await connect({ servers: server.url })
}, 60_000)

afterAll(async () => {
  await nc?.close()
  await client?.close()
  await services?.stop()
  await server?.stop()
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  if (before === undefined) delete process.env.WM_KEY_ENCRYPTION_KEYS
  else process.env.WM_KEY_ENCRYPTION_KEYS = before
})

/** A store of content keys over `conn`'s key bucket, with these key-encryption keys. */
const keysWith = async (conn: NatsConnection, keks: string) =>
  makeContentKeys(
    new ContentKeyStore(
      await new Kvm(conn).open(KEY_BUCKET),
      await jetstreamManager(conn),
      parseKeyEncryptionKeys(keks),
      Date.now,
    ),
  )

/** The content of the entry's stored EntryRecorded, opened with `keys` — or why it cannot be. */
const openRecorded = async (
  conn: NatsConnection,
  keys: Awaited<ReturnType<typeof keysWith>>,
  agentId: string,
  entryId: string,
) => {
  // The entry's first record: its EntryRecorded (later ones are its rung changes and demotion).
  const stored = await (await jetstreamManager(conn)).streams.getMessage(EVENTS_STREAM, {
    next_by_subj: entrySubject(agentId, entryId),
    seq: 0,
  } as unknown as { seq: number })
  if (stored === null) return "no record"
  try {
    await keys.load(stored.data)
  } catch (error) {
    return `key store: ${String(error)}`
  }
  const decoded = decodeEvent(stored.data, keys.unseal)
  return decoded.ok && decoded.event._tag === "EntryRecorded"
    ? decoded.event.content
    : `not opened: ${decoded.ok ? decoded.event._tag : decoded.reason}`
}

it("a forgotten entry's content stays unreadable in a copy of the store taken before the forget, once the keys are rotated", async () => {
  const agent = client.agent("vaulter")
  await agent.register({ role: "custom", budget: 150 })
  const { entryId } = await agent.record({ origin: "USER", content: SECRET, timestamp: T0 })
  const kept = await agent.record({ origin: "USER", content: "The meeting moved to Thursday.", timestamp: T0 + 1 })
  // Filler until the secret fades into key points and a summary and is demoted to the durable long-term store.
  for (let i = 0; i < 25; i++)
    await agent.record({
      origin: "USER",
      content: `Ordinary remark ${i} about the weather.`,
      timestamp: T0 + 60_000 * (i + 1),
    })
  await eventually("the secret demoted to long-term", async () =>
    (await readLog(server.url)).some((s) => s.event._tag === "EntryDemoted" && s.event.entryId === entryId),
  )
  await eventually("the long-term store to hold records, sealed", () =>
    filesHolding([longTermDir], SEALED_IN_JSON).length > 0 ? true : undefined,
  )

  // A write with a request id: its retry is answered from the request ledger, which keeps the body's digest only.
  const withId = { origin: "USER" as const, content: `${SECRET} (again)`, requestId: "vault-again" }
  const again = await agent.record(withId)
  expect((await agent.record(withId)).entryId).toBe(again.entryId)

  // Served in clear to the agent, stored sealed: no byte of the store holds it.
  expect((await agent.raw(entryId)).content).toBe(SECRET)
  expect(filesHolding([server.storeDir, longTermDir], SECRET)).toEqual([])
  expect(await sealedContentOf(server.url, "vaulter", entryId)).toMatch(/^[A-Za-z0-9+/=]+$/)

  // A backup: the whole store directory, as it stands before the forget.
  const backup = mkdtempSync(join(tmpdir(), "wm-backup-"))
  dirs.push(backup)
  cpSync(server.storeDir, join(backup, "nats"), { recursive: true })
  cpSync(longTermDir, join(backup, "longterm"), { recursive: true })

  const forgotten = await forget(nc, "vaulter", entryId, { waitMs: 30_000 })
  // The eraser beside the substrate completes the same forget when it reads the tombstone: whichever of the two
  // erases the key's revisions first counts them. `complete` holds only once none is left but the mark.
  expect(forgotten.complete).toBe(true)
  // The live store has the key's mark only: the entry key is gone.
  const mark = await new Kvm(nc).open(KEY_BUCKET).then((kv) => kv.get(entryKeyName("vaulter", entryId)))
  expect(JSON.parse(new TextDecoder().decode(mark?.value))).toHaveProperty("destroyed")

  // Before a rotation, the copy's own keys still open its copy of the record: what the rotation is for.
  const copy = await startNatsServer({ storeDir: join(backup, "nats"), removeStoreOnStop: false })
  const copyConn = await connect({ servers: copy.url })
  try {
    expect(await openRecorded(copyConn, await keysWith(copyConn, OLD_KEK), "vaulter", entryId)).toBe(SECRET)

    // One rotation under a new key-encryption key; the old one is then retired.
    const rotation = await rotateKeys(nc, (await keysWith(nc, `${NEW_KEK},${OLD_KEK}`)).store)
    expect(rotation.agents).toBe(1)
    const current = await keysWith(nc, NEW_KEK)

    // The copy's agent key is wrapped by the retired key; its entry key by an agent key nobody keeps.
    expect(await openRecorded(copyConn, await keysWith(copyConn, NEW_KEK), "vaulter", entryId)).toMatch(
      /key store: .*'k1'/,
    )
    const copiedEntryKey = await new Kvm(copyConn)
      .open(KEY_BUCKET)
      .then((kv) => kv.get(entryKeyName("vaulter", entryId)))
    const copiedGen = (JSON.parse(new TextDecoder().decode(copiedEntryKey?.value)) as { gen: string }).gen
    const liveAgent = await new Kvm(nc).open(KEY_BUCKET).then((kv) => kv.get("agent.vaulter"))
    const liveGens = (JSON.parse(new TextDecoder().decode(liveAgent?.value)) as { generations: { gen: string }[] })
      .generations
    expect(liveGens.map((g) => g.gen)).not.toContain(copiedGen)
    // The live store: the forgotten record is erased (its tombstone is all the subject holds), and its key destroyed.
    expect(await openRecorded(nc, current, "vaulter", entryId)).toMatch(/^not opened: EntryForgotten|^no record/)
    expect(await current.store.forRead({ agentId: "vaulter", entryId })).toBeNull()
    // The audit of the copy shows the record's metadata, and "(forgotten)" where its content was.
    const audit = await run(
      "node_modules/.bin/node",
      ["cli/wm.ts", "history", entryId, "--agent", "vaulter", "--json", "--server", copy.url, "--no-progress"],
      { cwd: process.cwd(), env: { ...process.env, WM_KEY_ENCRYPTION_KEYS: NEW_KEK }, timeout: 60_000 },
    )
    expect(audit.stdout).toContain(FORGOTTEN_TEXT)
    expect(audit.stdout).toContain("EntryRecorded")
    expect(audit.stdout).not.toContain("swordfish")
    // No file of the copy or of the live store holds the content in clear.
    expect(filesHolding([backup, server.storeDir, longTermDir], SECRET)).toEqual([])
    // The copy of the long-term store holds its records, sealed: under keys the copy's own no longer opens.
    expect(filesHolding([join(backup, "longterm")], SEALED_IN_JSON).length).toBeGreaterThan(0)

    // The entry not forgotten reads on, under the new key-encryption key, through the services and directly.
    expect(await openRecorded(nc, current, "vaulter", kept.entryId)).toBe("The meeting moved to Thursday.")
    expect((await agent.raw(kept.entryId)).content).toBe("The meeting moved to Thursday.")
  } finally {
    await copyConn.close()
    await copy.stop()
  }
}, 120_000)

it("a lost key store is answered Unavailable, and nothing is stored in clear", async () => {
  // An agent whose key the services hold (the first test's was rotated under a key-encryption key they lack).
  const agent = client.agent("otter-keeper")
  await agent.register({ role: "custom", budget: 150 })
  await agent.record({ origin: "USER", content: "Stored while the key store stood.", timestamp: T0 })
  await (await jetstreamManager(nc)).streams.delete(`KV_${KEY_BUCKET}`)
  const lost = "Written while the key store was lost: 5150-otter"
  // Answered Unavailable at every attempt (the SDK retries it, then says so with that answer as the cause).
  const refused = await agent.record({ origin: "USER", content: lost }).then(
    () => null,
    (error: unknown) => error as { cause?: { _tag?: string; reason?: string } },
  )
  expect(refused?.cause).toMatchObject({ _tag: "Unavailable" })
  expect(refused?.cause?.reason).toContain("key store")
  expect(filesHolding([server.storeDir, longTermDir], lost)).toEqual([])
}, 60_000)
