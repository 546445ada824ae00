/**
 * Readers of one filter in one process share one consumer of the log: each still gets every record of its
 * filter from where it starts, once and in order, whether it starts behind, ahead, or reads on after the
 * reader whose connection held the consumer stopped.
 */
import { jetstream, jetstreamManager } from "@nats-io/jetstream"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { afterAll, beforeAll, expect, it } from "vitest"
import { readStatus } from "../../cli/audit/status.ts"
import { partitionOf } from "../../contracts/partitions.ts"
import { EVENTS_STREAM, partitionEvents } from "../../contracts/subjects.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { followEvents, type LogRecord } from "../../services/platform/log/event-log.ts"
import { followShared, type OpenConsumer, sharedConsumers } from "../../services/platform/log/shared-follow.ts"
import { eventually } from "../support/eventually.ts"
import { createStreams, startTestSystem } from "../support/system.ts"

let server: NatsServerProcess
const connections: NatsConnection[] = []
beforeAll(async () => {
  server = await startNatsServer()
  await createStreams(server.url)
})
afterAll(async () => {
  for (const nc of connections) await nc.close().catch(() => undefined)
  await server?.stop()
})

const connection = async () => {
  const nc = await connect({ servers: server.url })
  connections.push(nc)
  return nc
}

const opener =
  (nc: NatsConnection, filter: string): OpenConsumer =>
  (fromSeq, onRecord) =>
    followEvents(jetstream(nc), { filter, fromSeq, onRecord })

/** An opener whose first opening waits until `release` is called; later ones open at once. */
const heldFirst = (open: OpenConsumer) => {
  let release: () => void = () => undefined
  const held = new Promise<void>((resolve) => {
    release = resolve
  })
  let opened = 0
  const first: OpenConsumer = async (fromSeq, onRecord) => {
    if (opened++ === 0) await held
    return open(fromSeq, onRecord)
  }
  return { open: first, release: () => release() }
}

/** Appends `count` records to `subject`, one at a time; gives their sequences. */
const append = async (nc: NatsConnection, subject: string, count: number) => {
  const js = jetstream(nc)
  const seqs: number[] = []
  for (let i = 0; i < count; i++) seqs.push((await js.publish(subject, `r${i}`)).seq)
  return seqs
}

/** The last stream sequence each consumer of the log has delivered, by name (stopped ones linger a while). */
const deliveredByConsumer = async (nc: NatsConnection) => {
  const delivered = new Map<string, number>()
  for await (const consumer of (await jetstreamManager(nc)).consumers.list(EVENTS_STREAM))
    delivered.set(consumer.name, consumer.delivered.stream_seq)
  return delivered
}

/** How many consumers the server delivered the records `append` adds through, once `readers` have them. */
const consumersDelivering = async (
  nc: NatsConnection,
  readers: ReadonlyArray<Reading>,
  append: () => Promise<number[]>,
) => {
  const before = await deliveredByConsumer(nc)
  const last = (await append()).at(-1)!
  for (const reader of readers) await gotUpTo(reader, last)
  const after = await deliveredByConsumer(nc)
  return [...after].filter(([name, seq]) => seq >= last && (before.get(name) ?? 0) < last).length
}

interface Reading {
  readonly seqs: number[]
  readonly onRecord: (record: LogRecord) => void
}
const reading = (): Reading => {
  const seqs: number[] = []
  return { seqs, onRecord: (record) => void seqs.push(record.seq) }
}

const gotUpTo = (r: Reading, last: number) =>
  eventually(`records up to ${last}`, () => (r.seqs.at(-1) === last ? true : undefined), 20_000, 20)

it("a reader behind the shared consumer catches up, joins it, and misses and repeats nothing while the log grows", async () => {
  const log = "behind"
  const filter = partitionEvents(1)
  const writer = await connection()
  const before = await append(writer, "wm.evt.1.a.step", 300)
  await append(writer, "wm.evt.2.other.step", 50)

  const first = reading()
  const a = await followShared(log, filter, 1, first.onRecord, opener(await connection(), filter))
  await gotUpTo(first, before.at(-1)!)

  // Appends go on while a second reader starts from the beginning and a third from the middle.
  const growing = append(writer, "wm.evt.1.a.step", 400)
  const second = reading()
  const b = await followShared(log, filter, 1, second.onRecord, opener(await connection(), filter))
  const third = reading()
  const c = await followShared(log, filter, before[150]!, third.onRecord, opener(await connection(), filter))
  const after = await growing

  const all = [...before, ...after]
  await gotUpTo(first, all.at(-1)!)
  await gotUpTo(second, all.at(-1)!)
  await gotUpTo(third, all.at(-1)!)
  expect(first.seqs).toEqual(all)
  expect(second.seqs).toEqual(all)
  expect(third.seqs).toEqual(all.filter((seq) => seq >= before[150]!))
  // Once caught up, the readers read from one consumer.
  expect(sharedConsumers()).toEqual({ consumers: 1, readers: 3 })
  expect(await consumersDelivering(writer, [first, second, third], () => append(writer, "wm.evt.1.a.step", 5))).toBe(1)

  await Promise.all([a.stop(), b.stop(), c.stop()])
  expect(sharedConsumers()).toEqual({ consumers: 0, readers: 0 })
})

it("a reader ahead of the shared consumer takes the front: it does not wait for the readers behind it", async () => {
  const log = "ahead"
  const filter = partitionEvents(3)
  const writer = await connection()
  const seqs = await append(writer, "wm.evt.3.b.step", 40)
  const slow = reading()
  // The first reader's consumer is slow to open; the second reader starts ahead of it.
  const slowOpen = heldFirst(opener(await connection(), filter))
  const a = followShared(log, filter, 1, slow.onRecord, slowOpen.open)
  const late = reading()
  const sb = await followShared(log, filter, seqs[30]!, late.onRecord, opener(await connection(), filter))
  const more = await append(writer, "wm.evt.3.b.step", 5)
  await gotUpTo(late, more.at(-1)!)
  expect(late.seqs).toEqual([...seqs.slice(30), ...more])

  slowOpen.release()
  const sa = await a
  await gotUpTo(slow, more.at(-1)!)
  expect(slow.seqs).toEqual([...seqs, ...more])
  expect(await consumersDelivering(writer, [slow, late], () => append(writer, "wm.evt.3.b.step", 5))).toBe(1)
  await Promise.all([sa.stop(), sb.stop()])
})

it("a reader whose callback throws neither keeps records from the others nor stops their consumer", async () => {
  const log = "throws"
  const filter = partitionEvents(4)
  const writer = await connection()
  const errors: unknown[] = []
  const a = await followShared(
    log,
    filter,
    1,
    () => {
      throw new Error("a broken reader")
    },
    opener(await connection(), filter),
    { onError: (error) => errors.push(error) },
  )
  const other = reading()
  const b = await followShared(log, filter, 1, other.onRecord, opener(await connection(), filter))
  const seqs = await append(writer, "wm.evt.4.e.step", 10)
  await gotUpTo(other, seqs.at(-1)!)
  expect(other.seqs).toEqual(seqs)
  expect(errors).toHaveLength(10)
  await Promise.all([a.stop(), b.stop()])
})

it("a follow given up while its consumer opens leaves nothing reading", async () => {
  const filter = partitionEvents(6)
  const slowOpen = heldFirst(opener(await connection(), filter))
  const abandoned = new AbortController()
  const following = followShared("abandoned", filter, 1, () => undefined, slowOpen.open, { signal: abandoned.signal })
  abandoned.abort()
  slowOpen.release()
  await expect(following).rejects.toThrow()
  expect(sharedConsumers()).toEqual({ consumers: 0, readers: 0 })
})

it("when the connection holding the consumer goes without its reader stopping, the others read on", async () => {
  const log = "gone"
  const filter = partitionEvents(8)
  const writer = await connection()
  const ownerConnection = await connection()
  const owner = reading()
  const other = reading()
  const first = await append(writer, "wm.evt.8.f.step", 5)
  const a = await followShared(log, filter, 1, owner.onRecord, opener(ownerConnection, filter))
  const b = await followShared(log, filter, 1, other.onRecord, opener(await connection(), filter))
  await gotUpTo(other, first.at(-1)!)
  await ownerConnection.close()
  const more = await append(writer, "wm.evt.8.f.step", 5)
  await gotUpTo(other, more.at(-1)!)
  expect(other.seqs).toEqual([...first, ...more])
  await Promise.all([a.stop(), b.stop()])
})

it("a reader whose catch-up outlasts what is kept for it still gets every record once", async () => {
  const log = "overflow"
  const filter = partitionEvents(7)
  const writer = await connection()
  const first = await append(writer, "wm.evt.7.d.step", 10)
  const live = reading()
  const a = await followShared(log, filter, 1, live.onRecord, opener(await connection(), filter))
  await gotUpTo(live, first.at(-1)!)
  // The late reader's own consumer opens only after more records than are kept for it went by.
  const lateOpen = heldFirst(opener(await connection(), filter))
  const late = reading()
  const b = followShared(log, filter, 1, late.onRecord, lateOpen.open)
  const js = jetstream(writer)
  const more: number[] = []
  for (let batch = 0; batch < 110; batch++) {
    const acks = await Promise.all(Array.from({ length: 100 }, (_, i) => js.publish("wm.evt.7.d.step", `m${i}`)))
    more.push(...acks.map((ack) => ack.seq))
  }
  await gotUpTo(live, more.at(-1)!)
  lateOpen.release()
  const sb = await b
  const tail = await append(writer, "wm.evt.7.d.step", 10)
  const all = [...first, ...more.sort((x, y) => x - y), ...tail]
  await gotUpTo(late, all.at(-1)!)
  expect(late.seqs).toEqual(all)
  await Promise.all([a.stop(), sb.stop()])
})

it("when the reader whose connection holds the consumer stops, the others read on from another connection", async () => {
  const log = "handover"
  const filter = partitionEvents(5)
  const writer = await connection()
  const ownerConnection = await connection()
  const first = await append(writer, "wm.evt.5.c.step", 20)
  const owner = reading()
  const other = reading()
  const a = await followShared(log, filter, 1, owner.onRecord, opener(ownerConnection, filter))
  const b = await followShared(log, filter, 1, other.onRecord, opener(await connection(), filter))
  await gotUpTo(other, first.at(-1)!)

  await a.stop()
  await ownerConnection.close()
  const more = await append(writer, "wm.evt.5.c.step", 30)
  await gotUpTo(other, more.at(-1)!)
  expect(other.seqs).toEqual([...first, ...more])
  expect(owner.seqs).toEqual(first)
  expect(await consumersDelivering(writer, [other], () => append(writer, "wm.evt.5.c.step", 5))).toBe(1)
  await b.stop()
})

it("the services of one process read each partition of the log through one consumer", async () => {
  const system = await startTestSystem()
  try {
    const agent = system.client.agent("shared-reader")
    await agent.register({ role: "main" })
    await system.liveView("shared-reader", (await agent.record({ origin: "USER", content: "a first entry" })).seq)
    const { seq } = await agent.record({ origin: "USER", content: "one consumer per partition" })
    const nc = system.client.nc
    // Gateway, working, retrieval, fading, long-term and the eraser all read the agent's partition.
    const filter = partitionEvents(partitionOf("shared-reader"))
    const deliveredIt = async () => {
      let consumers = 0
      for await (const consumer of (await jetstreamManager(nc)).consumers.list(EVENTS_STREAM)) {
        const filters = consumer.config.filter_subjects ?? [consumer.config.filter_subject]
        if (filters.includes(filter) && consumer.delivered.stream_seq >= seq) consumers++
      }
      return consumers
    }
    // Once every service reporting on the partition has applied the record: read apart, each service's own
    // consumer would have delivered it.
    await eventually("every service of the partition to apply the record", async () => {
      const reports = (await readStatus(nc, 0)).partitions.filter((p) => p.partition === partitionOf("shared-reader"))
      return reports.length >= 4 && reports.every((p) => p.applied >= seq) ? true : undefined
    })
    expect(await deliveredIt()).toBe(1)
  } finally {
    await system.stop()
  }
})
