/**
 * `/readyz` and `wm_projection_lag_events` of a working replica: not ready before it has caught up, ready
 * once it has; the lag of a partition held back at an event newer than the replica reads rises with every
 * event after it, and is gone once the replica reads on; a lease lost to a replica that is not live makes
 * it not ready until the partition is its own again.
 */
import { jetstream, jetstreamManager } from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import { connect } from "@nats-io/transport-node"
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { LEASE_BUCKET, leaseKey } from "../../contracts/buckets.ts"
import { partitionOf } from "../../contracts/partitions.ts"
import { agentStepSubject, EVENTS_STREAM } from "../../contracts/subjects.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { processStarted } from "../../services/platform/observability/observability.ts"
import { PartitionSettings } from "../../services/platform/partitions/settings.ts"
import { workingService } from "../../services/working/service.ts"
import { AGENT, recorded, registered } from "../support/events.ts"
import { eventually } from "../support/eventually.ts"
import { appendEvents } from "../support/log.ts"
import { observedOnFreePort, readyz, sample, scrape } from "../support/ops.ts"
import { createStreams, settingsFor } from "../support/system.ts"

let server: NatsServerProcess
const running: ManagedRuntime.ManagedRuntime<unknown, unknown>[] = []
const partition = partitionOf(AGENT)

beforeAll(async () => {
  server = await startNatsServer()
  // The streams, as a service creates them at start: events are appended before any replica runs.
  await createStreams(server.url)
})
afterAll(async () => {
  for (const runtime of running.splice(0)) await runtime.dispose()
  await server?.stop()
})

/** Starts a working replica with its operations port; returns the port's URL and the replica's start. */
const startWorking = async () => {
  const observed = await observedOnFreePort("working")
  // A settle long enough that the port answers before the replica has taken and caught up on its partitions.
  const partitions = PartitionSettings.make({ leaseTtlMs: 2_000, leaseSettleMs: 1_000 })
  const runtime = ManagedRuntime.make(
    processStarted.pipe(
      Layer.provideMerge(workingService(settingsFor(server.url)("wm-working"), partitions)),
      Layer.provide(observed.layer),
    ),
  ) as ManagedRuntime.ManagedRuntime<unknown, unknown>
  running.push(runtime)
  return { url: observed.url, runtime, started: runtime.runPromise(Effect.void) }
}

const lagOf = async (url: string) =>
  sample(await scrape(url), "wm_projection_lag_events", { service: "working", partition: String(partition) })

describe("a working replica's readiness and lag", () => {
  let url: string

  it("is not ready before it has caught up, and ready once it has", async () => {
    await appendEvents(server.url, [registered(), recorded("e-1", "recorded before the replica started", 1)])
    const working = await startWorking()
    url = working.url
    const first = await eventually("the operations port to answer", () => readyz(url))
    expect(first.status).toBe(503)
    expect(first.body).toMatch(/starting|leases settling|behind|loading/)
    await working.started
    await eventually("the replica to be ready", async () => ((await readyz(url)).status === 200 ? true : undefined))
    expect(await lagOf(url)).toBe(0)
  })

  it("counts the events a partition is held back from, and none once it reads on", async () => {
    const nc = await connect({ servers: server.url })
    try {
      const envelope = { eventId: "newer-1", agentId: AGENT, at: 2, causationId: null, correlationId: null }
      const newer = await jetstream(nc).publish(
        agentStepSubject(AGENT),
        JSON.stringify({ _tag: "StepStarted", v: 9, ...envelope, stepId: "s", focus: null }),
      )
      await appendEvents(server.url, [recorded("e-2", "after", 3), recorded("e-3", "after", 4)])
      await eventually("the lag to count the newer event and the two after it", async () =>
        (await lagOf(url)) === 3 ? true : undefined,
      )
      await appendEvents(server.url, [recorded("e-4", "after", 5)])
      await eventually("the lag to rise with the next event", async () => ((await lagOf(url)) === 4 ? true : undefined))
      const held = await readyz(url)
      expect(held.status).toBe(503)
      expect(held.body).toContain(`working: partition ${partition} stopped before seq ${newer.seq}`)

      // An upgraded replica reads on: here the newer event is removed, and the replica started again.
      await running.pop()!.dispose()
      await (await jetstreamManager(nc)).streams.deleteMessage(EVENTS_STREAM, newer.seq)
      const again = await startWorking()
      url = again.url
      await again.started
      await eventually("the restarted replica to be ready", async () =>
        (await readyz(url)).status === 200 ? true : undefined,
      )
      expect(await lagOf(url)).toBe(0)
    } finally {
      await nc.close()
    }
  })

  it("is not ready after losing a lease to a replica that is not live, and ready once it holds it again", async () => {
    const nc = await connect({ servers: server.url })
    try {
      const leases = await new Kvm(jetstream(nc)).open(LEASE_BUCKET)
      await leases.put(leaseKey("working", partition), JSON.stringify({ replica: "gone-replica" }))
      const lost = await eventually("the replica to see the lease lost", async () => {
        const answer = await readyz(url)
        return answer.status === 503 ? answer.body : undefined
      })
      expect(lost).toMatch(new RegExp(`working: leases settling, partitions without an owner: .*\\b${partition}\\b`))
      expect(sample(await scrape(url), "wm_partitions_without_owner", { service: "working" })).toBeGreaterThan(0)
      // The lease of the replica that is not live expires; this replica takes the partition and catches up.
      await eventually(
        "the replica to hold every partition again",
        async () => ((await readyz(url)).status === 200 ? true : undefined),
        30_000,
      )
      const text = await scrape(url)
      expect(sample(text, "wm_partitions_owned", { service: "working" })).toBe(16)
      expect(sample(text, "wm_partitions_without_owner", { service: "working" })).toBe(0)
    } finally {
      await nc.close()
    }
  })
})
