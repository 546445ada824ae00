/**
 * Upgrade path: a log recorded before partitions (test/fixtures/v1-log.jsonl,
 * `wm.evt.<agent>.…`) is rewritten by `wm migrate` into the partitioned
 * layout, and the working service then serves the views the live services
 * held when it was recorded.
 */
import { execFile } from "node:child_process"
import { readFileSync } from "node:fs"
import { promisify } from "node:util"
import { jetstream } from "@nats-io/jetstream"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Effect } from "effect"
import { afterAll, beforeAll, expect, it } from "vitest"
import { decodeEvent } from "../../contracts/decode.ts"
import { partitionOf } from "../../contracts/partitions.ts"
import { mapContent } from "../../contracts/sealed.ts"
import { agentIdOfEventSubject, partitionOfEventSubject, upgradeLegacySubject } from "../../contracts/subjects.ts"
import type { StoredJson } from "../../contracts/upcasters.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { Nats } from "../../services/platform/nats/connection.ts"
import { NatsSettings } from "../../services/platform/nats/settings.ts"
import { ensureTopology } from "../../services/platform/nats/topology.ts"
import { PartitionSettings } from "../../services/platform/partitions/settings.ts"
import { workingService } from "../../services/system.ts"
import { readRecords, teardown } from "../faults/support/audit.ts"
import { type InProcess, settingsFor, startInProcess, workingOf } from "../faults/support/services.ts"
import { comparableView, readFixture, V1_EXPECTED, V1_LOG } from "../fixtures/v1-log.ts"

const run = promisify(execFile)
const expected = JSON.parse(readFileSync(V1_EXPECTED, "utf8")) as { views: Record<string, unknown> }

let server: NatsServerProcess
let nc: NatsConnection
let working: InProcess<unknown> | undefined
const legacy = readFixture(V1_LOG)

beforeAll(async () => {
  server = await startNatsServer()
  nc = await connect({ servers: server.url })
  // The stream as the services create it, holding the log exactly as it was recorded.
  await Effect.runPromise(
    Effect.gen(function* () {
      const { jsm } = yield* Nats
      yield* ensureTopology(jsm, yield* NatsSettings)
    }).pipe(Effect.provide(Nats.layer), Effect.provide(NatsSettings.make({ servers: [server.url] })), Effect.scoped),
  )
  const js = jetstream(nc)
  for (const record of legacy) await js.publish(record.subject, JSON.stringify(record.data))
})
afterAll(() =>
  teardown(
    () => working?.stop(),
    () => nc?.close(),
    () => server?.stop(),
  ),
)

const wm = (...args: string[]) =>
  run("node_modules/.bin/node", ["cli/wm.ts", ...args, "--server", server.url], { cwd: process.cwd() })

it("the recorded log is of the layout before partitions", () => {
  expect(legacy.length).toBeGreaterThan(0)
  expect(legacy.every((r) => upgradeLegacySubject(r.subject) !== null)).toBe(true)
})

it("a working service refuses to start on it and names the migration", async () => {
  await expect(
    startInProcess(
      workingService(settingsFor(server.url)("wm-working"), PartitionSettings.make({ snapshotIntervalMs: 0 })),
    ),
  ).rejects.toThrow(/run `wm migrate` first/)
})

it("wm migrate rewrites it in order into partitioned subjects, and working serves the views it held", async () => {
  const { stdout } = await wm("migrate", "--json")
  // Written before content was sealed: every event carrying content is sealed as it is rewritten.
  const inClear = legacy.filter((r) => {
    let clear = false
    mapContent(r.data as StoredJson, (value) => {
      clear = true
      return { value }
    })
    return clear
  })
  expect(inClear.length).toBeGreaterThan(0)
  expect(JSON.parse(stdout)).toEqual({
    records: legacy.length,
    upgraded: legacy.length,
    sealed: inClear.length,
    alreadyCurrent: false,
  })

  const records = await readRecords(server.url)
  expect(records.map((r) => r.subject)).toEqual(legacy.map((r) => upgradeLegacySubject(r.subject)))
  records.forEach((r, i) => {
    const before = JSON.stringify(legacy[i]!.data)
    const now = new TextDecoder().decode(r.data)
    // Events without content keep their bytes; the others are sealed and open to what was written.
    if (!inClear.includes(legacy[i]!)) expect(now).toBe(before)
    else {
      expect(now).toContain('"$sealed"')
      const original = decodeEvent(new TextEncoder().encode(before))
      expect(r.event).toEqual(original.ok ? original.event : undefined)
    }
  })
  for (const r of legacy) {
    const data = r.data as { _tag?: unknown; content?: unknown }
    if (data._tag === "EntryRecorded")
      expect(records.some((s) => new TextDecoder().decode(s.data).includes(String(data.content)))).toBe(false)
  }
  for (const r of records)
    expect(partitionOfEventSubject(r.subject)).toBe(partitionOf(agentIdOfEventSubject(r.subject)))

  working = await startInProcess(
    workingService(settingsFor(server.url)("wm-working"), PartitionSettings.make({ snapshotIntervalMs: 0 })),
  )
  const shape = await workingOf(working)
  await Effect.runPromise(shape.waitApplied(records.at(-1)!.seq))
  for (const [agentId, view] of Object.entries(expected.views))
    expect(comparableView(shape.view(agentId)!), agentId).toEqual(view)

  // Run again: nothing of the old layout is left.
  expect(JSON.parse((await wm("migrate", "--json")).stdout)).toMatchObject({ alreadyCurrent: true })
})
