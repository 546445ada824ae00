/**
 * What a partitioned replica asks of the lease bucket while nothing about its partitions changes: a replica
 * holding every partition reads no lease (each read is a request to the server, every lease round), and a
 * partition whose lag does not change is reported only as often as its report must be kept live, however
 * far the log moves on other partitions' records. An idle partition's position still follows the log's end,
 * proven by asking for its next record after what it applied, not for its last record (a lookup from the
 * log's end that costs the server milliseconds in a long log).
 */
import { jetstreamManager } from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { Effect, ManagedRuntime } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { LEASE_BUCKET, leaseKey, progressKey } from "../../contracts/buckets.ts"
import { partitionOf } from "../../contracts/partitions.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { NatsSettings } from "../../services/platform/nats/settings.ts"
import { ensureTopology } from "../../services/platform/nats/topology.ts"
import { decodeProgress } from "../../services/platform/partitions/progress.ts"
import { PartitionSettings } from "../../services/platform/partitions/settings.ts"
import { workingService } from "../../services/working/service.ts"
import { AGENT, recorded, registered } from "../support/events.ts"
import { eventually } from "../support/eventually.ts"
import { appendEvents } from "../support/log.ts"
import { settingsFor } from "../support/system.ts"

const PARTITIONS = 16

let server: NatsServerProcess
let nc: NatsConnection
let running: ManagedRuntime.ManagedRuntime<unknown, unknown> | undefined

beforeAll(async () => {
  server = await startNatsServer()
  nc = await connect({ servers: server.url })
  const jsm = await jetstreamManager(nc)
  await Effect.runPromise(
    Effect.flatMap(NatsSettings, (settings) => ensureTopology(jsm, settings)).pipe(
      Effect.provide(settingsFor(server.url)("wm-test")),
    ),
  )
  await appendEvents(server.url, [registered()])
})
afterEach(async () => {
  await running?.dispose()
  running = undefined
  // The bucket keeps the TTL it was made with: each test makes its own.
  await (await jetstreamManager(nc)).streams.delete(`KV_${LEASE_BUCKET}`).catch(() => undefined)
})
afterAll(async () => {
  await nc?.close()
  await server?.stop()
})

/** Starts one working replica, the only one, with the given lease TTL; resolves once it holds every partition. */
const startWorking = async (leaseTtlMs: number) => {
  const runtime = ManagedRuntime.make(
    workingService(settingsFor(server.url)("wm-working"), PartitionSettings.make({ leaseTtlMs, leaseSettleMs: 0 })),
  ) as ManagedRuntime.ManagedRuntime<unknown, unknown>
  running = runtime
  await runtime.runPromise(Effect.void)
  const leases = await new Kvm(nc).open(LEASE_BUCKET)
  await eventually("the replica to hold every partition", async () => {
    for (let p = 0; p < PARTITIONS; p++) if ((await leases.get(leaseKey("working", p)))?.operation !== "PUT") return
    return true
  })
  return leases
}

/** Counts, for `millis`, the messages on `subjects` for which `matches` holds (the payload as text). */
const count = async (
  subjects: ReadonlyArray<string>,
  millis: number,
  matches: (subject: string, body: string) => boolean,
) => {
  let seen = 0
  const subs = subjects.map((subject) =>
    nc.subscribe(subject, {
      callback: (_error, msg) => {
        if (matches(msg.subject, msg.string())) seen++
      },
    }),
  )
  await nc.flush()
  await new Promise((resolve) => setTimeout(resolve, millis))
  for (const sub of subs) sub.unsubscribe()
  return seen
}

describe("a replica's traffic on the lease bucket", () => {
  it("holding every partition, it reads no lease in its rounds", async () => {
    // A TTL of 4 s: a lease round every second, so the window below spans about four of them (a renewal
    // late past the TTL would read its lease again, which takes a stall of seconds).
    await startWorking(4_000)
    const leaseReads = await count(
      [
        `$JS.API.DIRECT.GET.KV_${LEASE_BUCKET}`,
        `$JS.API.DIRECT.GET.KV_${LEASE_BUCKET}.>`,
        `$JS.API.STREAM.MSG.GET.KV_${LEASE_BUCKET}`,
      ],
      4_000,
      (subject, body) => `${subject} ${body}`.includes("working.partition."),
    )
    expect(leaseReads).toBe(0)
  })

  it("reports a partition whose lag stays the same only to keep the report live, while the log moves on", async () => {
    // A TTL of 30 s: a report is kept live every 10 s, longer than the window below.
    const leases = await startWorking(30_000)
    await eventually("every partition reported", async () => {
      for (let p = 0; p < PARTITIONS; p++)
        if ((await leases.get(progressKey("working", p)))?.operation !== "PUT") return
      return true
    })
    const busy = partitionOf(AGENT)
    const idle = Array.from({ length: PARTITIONS }, (_, p) => p).filter((p) => p !== busy)
    let appending = true
    const appended = (async () => {
      for (let i = 0; appending; i++) {
        await appendEvents(server.url, [recorded(`moving-${i}`, `the log moves on ${i}`, i + 1)])
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
    })()
    const reports = await count([`$KV.${LEASE_BUCKET}.working.progress.*`], 3_000, (subject) =>
      idle.some((p) => subject.endsWith(`.progress.${p}`)),
    )
    appending = false
    await appended
    // The idle partitions' position moved with every record appended (the replica proves them complete up to
    // the log's end about once a second): none of that is reported before the report must be kept live.
    expect(reports).toBe(0)
  })

  it("moves an idle partition's position to the log's end without looking up any partition's last record", async () => {
    // A TTL of 3 s: a report is kept live every second.
    const leases = await startWorking(3_000)
    // Reported once caught up: a partition's catch-up asks for its last record once, before this window.
    await eventually("every partition reported", async () => {
      for (let p = 0; p < PARTITIONS; p++)
        if ((await leases.get(progressKey("working", p)))?.operation !== "PUT") return
      return true
    })
    const idle = (partitionOf(AGENT) + 1) % PARTITIONS
    const appending = (async () => {
      let last = 0
      for (let i = 0; i < 20; i++)
        last = await appendEvents(server.url, [recorded(`idle-${i}`, `another partition's record ${i}`, i + 1)])
      return last
    })()
    const lastReads = await count([`$JS.API.STREAM.MSG.GET.>`], 3_000, (_subject, body) =>
      /"last_by_subj":"[^"]*>"/.test(body),
    )
    const appended = await appending
    await eventually("the idle partition's report at the log's end", async () => {
      const entry = await leases.get(progressKey("working", idle))
      const progress = entry === null ? null : decodeProgress(entry.string())
      return progress !== null && progress.seq >= appended ? true : undefined
    })
    expect(lastReads).toBe(0)
  })
})
