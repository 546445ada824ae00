/**
 * Forget means gone: after `wm forget`, no file the running system wrote
 * holds the content. A recognisable secret is recorded, faded to key points
 * and a summary, demoted to long-term, and dead-lettered (a poison record
 * carrying it); the entry (and, in a second case, a whole agent) is
 * forgotten; then every file of the nats-server store and of every other
 * store directory is searched for the secret's bytes — while the server
 * runs and again after it has stopped — and nothing is found. Another
 * agent's content stays, and it keeps being served.
 */

import { execFile } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { jetstream, jetstreamManager } from "@nats-io/jetstream"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Effect } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import {
  agentEvents,
  agentStepSubject,
  DEAD_LETTER_STREAM,
  deadLetterSubject,
  EVENTS_STREAM,
  entrySubject,
} from "../../contracts/subjects.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { qdrantConfigFromEnv } from "../../services/memory/longterm/qdrant-config.ts"
import { makeQdrantStore } from "../../services/memory/longterm/qdrant-store.ts"
import { LongTermStore, type LongTermStoreShape } from "../../services/memory/longterm/store.ts"
import { systemLayer } from "../../services/system.ts"
import { eventually } from "../support/eventually.ts"
import { readLog, sealedContentOf } from "../support/log.ts"
import { filesHolding as filesHoldingIn } from "../support/store-files.ts"
import { type RunningServices, settingsFor, startServices } from "../support/system.ts"
import { within } from "../support/within.ts"

const run = promisify(execFile)

// Every directory the running system writes: the broker's store, and the long-term store's when durable.
const root = mkdtempSync(join(tmpdir(), "wm-forget-erasure-"))
const natsStore = join(root, "nats")
const longTermStore = join(root, "longterm")
const previousLongTermDir = process.env.WM_LONGTERM_DIR

let server: NatsServerProcess
let services: RunningServices | undefined
let client: WorkingMemoryClient
let nc: NatsConnection

beforeAll(async () => {
  process.env.WM_LONGTERM_DIR = longTermStore
  server = await startNatsServer({ storeDir: natsStore, removeStoreOnStop: false })
  services = await startServices(systemLayer(settingsFor(server.url)))
  client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 5_000 })
  nc = await connect({ servers: server.url })
})

afterAll(async () => {
  await client?.close()
  await nc?.close()
  await services?.stop()
  await server?.stop()
  rmSync(root, { recursive: true, force: true })
  if (previousLongTermDir === undefined) delete process.env.WM_LONGTERM_DIR
  else process.env.WM_LONGTERM_DIR = previousLongTermDir
})

const storeDirs = () => [natsStore, longTermStore]

const filesHolding = (needle: string) => filesHoldingIn(storeDirs(), needle)

// Killed, and failed naming itself, past its own deadlines: a phase that never ends says which it was.
const wm = (...args: string[]) =>
  run("node_modules/.bin/node", ["cli/wm.ts", ...args, "--server", server.url], {
    cwd: process.cwd(),
    timeout: 60_000,
  })

/**
 * A forget test runs phases that each wait on their own condition, with their own deadline: the entry's demotion
 * and the poison's dead letters (`eventually`, 30 s each), and the projections' confirmations of the erasure (`wm
 * forget`, 30 s). The test's budget covers them, so a slow machine fails on the condition that did not happen.
 */
const LONG_TEST_MS = 150_000

const T0 = Date.UTC(2024, 2, 1)
const KEEPER = "KEEPERWOMBAT5512"

/** Records `secret` among filler until it is demoted, so it reaches key points, a summary and long-term. */
const recordAndFade = async (agentId: string, secret: string) => {
  const agent = client.agent(agentId)
  await agent.register({ role: "custom", budget: 150 })
  const { entryId } = await agent.record({
    origin: "USER",
    content: `${secret} opens the north vault. Never write ${secret} on paper, keep ${secret} in mind.`,
    timestamp: T0,
  })
  for (let i = 0; i < 25; i++)
    await agent.record({
      origin: "USER",
      content: `Ordinary remark ${i} about the weather.`,
      timestamp: T0 + 60_000 * (i + 1),
    })
  await eventually("demotion", async () =>
    (await readLog(server.url)).some((s) => s.event._tag === "EntryDemoted" && s.event.entryId === entryId),
  )
  return { agent, entryId }
}

/** A record no projection can decode, carrying the secret: every projection dead-letters it. */
const poison = async (subject: string, agentId: string, secret: string) =>
  (
    await jetstream(nc).publish(
      subject,
      JSON.stringify({
        _tag: "EntryRecorded",
        v: 1,
        eventId: `poison-${secret}`,
        agentId,
        at: 1,
        causationId: null,
        correlationId: null,
        entryId: "p",
        timestamp: "yesterday",
        origin: "USER",
        content: secret,
        tags: [],
        moodSnapshot: null,
        emotionalWeight: 0,
        tokens: 3,
      }),
    )
  ).seq

// With QDRANT_URL set the long-term store is Qdrant, else the durable embedded one (WM_LONGTERM_DIR being set).
// Read once the settings are in place: the first read of the environment is the one every later read sees.
const qdrantConfig = () => qdrantConfigFromEnv()

// The projections that read an agent's entries and steps, and so dead-letter a poison record on their subjects.
const deadLetteredBy = () => {
  const qdrant = qdrantConfig()
  return [
    "fade",
    "gateway",
    `longterm-${qdrant === null ? "durable" : makeQdrantStore(qdrant).name}`,
    "memory",
    "working",
  ]
}

/** The long-term records of these entries the store still answers with. */
const storedRecords = async (agentId: string, entryIds: ReadonlyArray<string>) => {
  const store = await services!.runtime.runPromise(LongTermStore as unknown as Effect.Effect<LongTermStoreShape>)
  return Effect.runPromise(store.get(agentId, entryIds))
}

/**
 * What the report says a store still keeps below its API: nothing for the embedded stores (they overwrite),
 * Qdrant's soft deletes with Qdrant (SECURITY.md).
 */
const expectRetainedAsTheStoreKeeps = (report: ForgetReport) =>
  expect(report.retained).toEqual(
    qdrantConfig() === null ? [] : [expect.stringMatching(/^longterm-qdrant-(agents-)?\w+: Qdrant deletes softly/)],
  )

/** The projections whose dead letters hold `needle`, one subject per letter; read by sequence, so it never waits on a letter erased meanwhile. */
const deadLettersHolding = async (needle: string): Promise<string[]> => {
  const jsm = await jetstreamManager(nc)
  const { state } = await jsm.streams.info(DEAD_LETTER_STREAM)
  const subjects: string[] = []
  for (let seq = state.first_seq; state.messages > 0 && seq <= state.last_seq; seq++) {
    const letter = await jsm.streams.getMessage(DEAD_LETTER_STREAM, { seq })
    if (letter?.string().includes(needle)) subjects.push(letter.subject)
  }
  return subjects.sort()
}

/** The secret is everywhere the system stores content: log events of every kind, long-term, dead letters, store files. */
const expectEverywhere = async (agentId: string, entryId: string, secret: string) => {
  const log = await readLog(server.url, agentEvents(agentId))
  const carrying = new Set(log.filter((s) => JSON.stringify(s.event).includes(secret)).map((s) => s.event._tag))
  expect(carrying).toContain("EntryRecorded")
  expect(carrying).toContain("RungChanged")
  const agent = client.agent(agentId)
  agent.lastSeq = Math.max(...log.map((s) => s.seq))
  const { results } = await agent.query(`${secret} north vault`, { limit: 50 })
  expect(results.some((r) => r.entryId === entryId && r.tier === "long-term")).toBe(true)
  // Every projection reading the poison's subject dead-letters it; a letter stored after the forget would be the guard's to erase.
  await eventually(
    "the poison to be dead-lettered by every projection",
    async () => (await deadLettersHolding(secret)).join() === deadLetteredBy().map(deadLetterSubject).join(),
  )
  expect(filesHolding(secret).length).toBeGreaterThan(0)
}

interface ForgetReport {
  readonly tombstoneSeq: number
  readonly purged: number
  readonly complete: boolean
  readonly pending: ReadonlyArray<string>
  readonly retained: ReadonlyArray<string>
}

it(
  "forgetting an entry erases its content from every file the system writes, and other agents keep being served",
  async () => {
    const keeper = client.agent("keeper")
    await keeper.register({ role: "main" })
    const kept = await keeper.record({ origin: "USER", content: `The keeper's word is ${KEEPER}.` })

    const SECRET = "QUOKKA7731ZEBRA"
    const { agent, entryId } = await recordAndFade("confider", SECRET)
    await poison(entrySubject("confider", entryId), "confider", SECRET)
    await expectEverywhere("confider", entryId, SECRET)

    const { stdout } = await wm("forget", "--agent", "confider", "--entry", entryId, "--json")
    const report = JSON.parse(stdout) as ForgetReport
    expect(report.complete).toBe(true)
    expect(report.pending).toEqual([])
    expectRetainedAsTheStoreKeeps(report)
    expect(await storedRecords("confider", [entryId])).toEqual([])

    expect(filesHolding(SECRET)).toEqual([])
    expect(await deadLettersHolding(SECRET)).toEqual([])
    // The tombstone stays, and names the entry only.
    const left = (await readLog(server.url, entrySubject("confider", entryId))).map((s) => s.event._tag)
    expect(left).toEqual(["EntryForgotten"])

    // The rest of the agent, and every other agent, is still served and still stored.
    agent.lastSeq = report.tombstoneSeq
    expect((await agent.view()).entries.length).toBeGreaterThan(0)
    expect((await keeper.raw(kept.entryId)).content).toContain(KEEPER)
    const later = await keeper.record({ origin: "USER", content: "A word recorded after the forget." })
    expect((await keeper.raw(later.entryId)).content).toBe("A word recorded after the forget.")
    // The kept entry is on disk, sealed: the search finds its sealed bytes.
    expect(filesHolding(await sealedContentOf(server.url, "keeper", kept.entryId)).length).toBeGreaterThan(0)
  },
  LONG_TEST_MS,
)

it("forgetting an agent that was never registered, or an entry it never recorded, is refused and writes nothing", async () => {
  const jsm = await jetstreamManager(nc)
  const lastBefore = (await jsm.streams.info(EVENTS_STREAM)).state.last_seq
  const refusal = (...args: string[]) =>
    wm(...args).then(
      () => null,
      (e: { code: number; stderr: string }) => e,
    )
  const unknownAgent = await refusal("forget", "--agent", "nobody-here")
  expect(unknownAgent?.code).toBe(1)
  expect(unknownAgent?.stderr).toMatch(/agent 'nobody-here' is not registered/)
  const unknownEntry = await refusal("forget", "--agent", "keeper", "--entry", "no-such-entry")
  expect(unknownEntry?.code).toBe(1)
  expect(unknownEntry?.stderr).toMatch(/unknown entries: no-such-entry/)
  expect((await jsm.streams.info(EVENTS_STREAM)).state.last_seq).toBe(lastBefore)
})

it(
  "forgetting an agent erases everything it recorded from every file, including its dead letters",
  async () => {
    const SECRET = "PANGOLIN4409HERON"
    const { entryId } = await recordAndFade("leaver", SECRET)
    await poison(agentStepSubject("leaver"), "leaver", SECRET)
    await expectEverywhere("leaver", entryId, SECRET)

    const { stdout } = await wm("forget", "--agent", "leaver", "--json")
    const report = JSON.parse(stdout) as ForgetReport
    expect(report.complete).toBe(true)
    expectRetainedAsTheStoreKeeps(report)
    expect(await storedRecords("leaver", [entryId])).toEqual([])
    expect(filesHolding(SECRET)).toEqual([])
    expect(await deadLettersHolding(SECRET)).toEqual([])
    expect((await readLog(server.url, agentEvents("leaver"))).map((s) => s.event._tag)).toEqual(["AgentForgotten"])

    // Still nothing once the broker has flushed and closed every file.
    const keeper = client.agent("keeper")
    const { results } = await keeper.query(KEEPER)
    expect(results.length).toBeGreaterThan(0)
    const keptSealed = await sealedContentOf(server.url, "keeper", results[0]!.entryId)
    await within("closing the client", 20_000, client.close())
    await within("closing the connection", 20_000, nc.close())
    await within("stopping the services", 30_000, services?.stop() ?? Promise.resolve())
    services = undefined
    // A graceful stop writes the stores' indexes and per-subject state; a restart rebuilds them.
    await within("stopping the server", 20_000, server.stop())
    expect(filesHolding(SECRET)).toEqual([])
    expect(filesHolding("QUOKKA7731ZEBRA")).toEqual([])
    await within("restarting the server", 30_000, server.restart())
    await within("stopping the server again", 20_000, server.stop())
    expect(filesHolding(SECRET)).toEqual([])
    expect(filesHolding("QUOKKA7731ZEBRA")).toEqual([])
    // The agent kept is on disk, sealed: its sealed bytes are found, its text in clear nowhere.
    expect(filesHolding(keptSealed).length).toBeGreaterThan(0)
    expect(filesHolding(KEEPER)).toEqual([])
  },
  LONG_TEST_MS,
)
