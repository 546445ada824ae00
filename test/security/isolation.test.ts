/**
 * Isolation enforced by the broker: a real nats-server started with the
 * permissions of infra/auth.ts, the services running as their own users,
 * and two agents. Agent alice can do everything to her own memory through
 * the SDK; every way of reading, subscribing to or writing into bob's
 * memory — core subjects, the API, the JetStream API — is refused by the
 * server itself (a permissions violation), and nothing is delivered or
 * stored. An agent has no right on the JetStream API at all: even its own
 * events reach it through the API (`view.events`). Threads answer across
 * agents only within a tenant (carol shares one with alice; bob with nobody).
 * Run on Debian's nats-server and on the current release
 * (NATS_SERVER_BIN=/opt/nats-2.12/nats-server).
 */

import { spawn } from "node:child_process"
import { fileURLToPath } from "node:url"
import { jetstream, jetstreamManager } from "@nats-io/jetstream"
import { Kvm } from "@nats-io/kv"
import { connect, type NatsConnection } from "@nats-io/transport-node"
import { ConfigProvider, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { entryKeyName, KEY_BUCKET, LEGACY_SUBSTRATE_BUCKET as SUBSTRATE_BUCKET } from "../../contracts/buckets.ts"
import { decodeEvent } from "../../contracts/decode.ts"
import { partitionCount } from "../../contracts/partitions.ts"
import { slotOf, slotSubject } from "../../contracts/routing.ts"
import {
  agentConfigSubject,
  agentEvents,
  agentStepSubject,
  EVENTS_STREAM,
  entrySubject,
} from "../../contracts/subjects.ts"
import { type NatsAuth, natsAuth } from "../../infra/auth.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"
import { followOwnEvents, type OwnEvent, readOwnEvents } from "../../sdk/own-events.ts"
import { FadeWorkerSettings } from "../../services/fade/fade-worker.ts"
import { AgentSharing } from "../../services/platform/access/sharing.ts"
import { openContentKeys } from "../../services/platform/keys/content-keys.ts"
import { NatsSettings } from "../../services/platform/nats/settings.ts"
import {
  defaultModels,
  fadeService,
  gatewayService,
  memoryService,
  substrateService,
  workingService,
} from "../../services/system.ts"
import { eventually } from "../support/eventually.ts"
import { type RunningServices, startServices } from "../support/system.ts"

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const encode = (s: string) => new TextEncoder().encode(s)

/** Errors the server sent on a connection (permission violations arrive this way). */
const serverErrors = (nc: NatsConnection): string[] => {
  const seen: string[] = []
  void (async () => {
    for await (const s of nc.status()) if (s.type === "error") seen.push(s.error.message)
  })()
  return seen
}

/** The error a promise rejects with; fails the test if it resolves. */
const refusal = async (p: Promise<unknown>): Promise<Error> => {
  try {
    await p
  } catch (error) {
    return error as Error
  }
  throw new Error("expected the broker to refuse, but the operation succeeded")
}

const publishViolation = (subject: string) => `Permissions Violation for Publish to "${subject}"`
const subscribeViolation = (subject: string) => `Permissions Violation for Subscription to "${subject}"`

let auth: NatsAuth
let server: NatsServerProcess
let services: RunningServices
let admin: NatsConnection
let alice: WorkingMemoryClient
let bob: WorkingMemoryClient
let carol: WorkingMemoryClient
let aliceErrors: string[]
let bobEntry: { entryId: string; seq: number }

/** Messages stored on bob's subjects, as the administrator sees them. */
const bobSubjects = async () =>
  (await (await jetstreamManager(admin)).streams.info(EVENTS_STREAM, { subjects_filter: agentEvents("bob") })).state
    .subjects ?? {}

beforeAll(async () => {
  auth = natsAuth({
    agents: ["alice", "bob", "carol"],
    tenants: [{ name: "acme", agents: ["alice", "carol"], password: "acme-console-secret" }],
  })
  // The services learn the tenants as deployed: WM_TENANTS, read through Effect Config.
  const sharing = AgentSharing.fromEnv.pipe(
    Layer.provide(
      ConfigProvider.layer(
        ConfigProvider.fromEnv({ env: { WM_TENANTS: auth.tenantsVariable, WM_EMBEDDER: "offline" } }),
      ),
    ),
  )
  server = await startNatsServer({ config: auth.config })
  // Each service on its own connection, as its own user (Layer.fresh: no connection shared between them).
  const settings = (name: string) =>
    NatsSettings.make({ servers: [server.url], name: `wm-${name}`, ...auth.service(name) })
  const models = defaultModels()
  services = await startServices(
    Layer.mergeAll(
      Layer.fresh(workingService(settings("working"))),
      Layer.fresh(gatewayService(settings("gateway"))),
      Layer.fresh(fadeService(settings("fade"), FadeWorkerSettings.fromEnv(), models)),
      Layer.fresh(substrateService(settings("substrate"))),
      Layer.fresh(memoryService(settings("memory"), { models, sharing })),
    ),
  )
  admin = await connect({ servers: server.url, user: auth.admin!.user, pass: auth.admin!.pass })
  alice = await WorkingMemoryClient.connect({
    servers: server.url,
    ...auth.agent("alice"),
    attempts: 1,
    timeoutMs: 5_000,
  })
  bob = await WorkingMemoryClient.connect({ servers: server.url, ...auth.agent("bob"), attempts: 1, timeoutMs: 5_000 })
  carol = await WorkingMemoryClient.connect({
    servers: server.url,
    ...auth.agent("carol"),
    attempts: 1,
    timeoutMs: 5_000,
  })
  aliceErrors = serverErrors(alice.nc)
  const b = bob.agent("bob")
  // A replica subscribes to a partition's requests once it holds its lease, just after it starts: until
  // then a request finds no responders, and these clients send each request once (registering is idempotent).
  await eventually("the gateway to register bob", () => b.register({ role: "main" }))
  bobEntry = await b.record({
    origin: "USER",
    content: "Bob's private plan: resign on Friday.",
    requestId: "bob-secret",
  })
}, 120_000)

afterAll(async () => {
  await alice?.close()
  await bob?.close()
  await carol?.close()
  await admin?.close()
  await services?.stop()
  await server?.stop()
})

describe("an agent's own memory", () => {
  it("an operation the API does not have, on her own subject, is refused as a ValidationError on operation", async () => {
    const reply = await alice.nc.request("wm.api.alice.no.such.op", "{}", { timeout: 5_000 })
    expect(JSON.parse(new TextDecoder().decode(reply.data))).toMatchObject({
      ok: false,
      error: { _tag: "ValidationError", field: "operation" },
    })
  })

  it("works end to end through the SDK, with no permission error on the agent's connection", async () => {
    const a = alice.agent("alice")
    await a.register({ role: "main" })
    const entry = await a.record({ origin: "USER", content: "Alice's note: book the venue.", tags: ["venue"] })
    await a.setFocus({ focus: { task: "plan the party" } })
    const { stepId } = await a.beginStep({})
    const built = await a.buildContext({ stepId })
    expect(built.items.map((i) => i.entryId)).toEqual([entry.entryId])
    expect(built.text).toContain("Alice's note: book the venue.")
    expect(built.text).not.toContain("Bob")
    await a.reference(stepId, [entry.entryId])
    await a.endStep(stepId)
    const view = await a.view()
    expect(view.entries.map((e) => [e.id, e.referenceCount, e.citationCount])).toEqual([[entry.entryId, 1, 1]])

    // Her own events, served by the working service on her own API subject, as a local mirror reads them.
    const events = await readOwnEvents(alice, "alice")
    expect(events.map((e) => e.event._tag)).toEqual([
      "AgentRegistered",
      "EntryRecorded",
      "FocusChanged",
      "StepStarted",
      "StepRecalled",
      "EntriesRead",
      "EntriesReferenced",
      "StepEnded",
    ])
    expect(
      events.every((e) => e.event.agentId === "alice" && e.subject.startsWith(agentEvents("alice").slice(0, -1))),
    ).toBe(true)
    expect(events.map((e) => e.seq)).toEqual([...events.map((e) => e.seq)].sort((x, y) => x - y))
    // In small batches the same events come back, in the same order.
    expect((await readOwnEvents(alice, "alice", { batch: 3 })).map((e) => e.seq)).toEqual(events.map((e) => e.seq))

    // And live, as a local mirror follows them: every new event once, in order, right after its write.
    const live: OwnEvent[] = []
    const following = await followOwnEvents(alice, "alice", {
      fromSeq: events.at(-1)!.seq + 1,
      onEvent: (e) => live.push(e),
    })
    const next = await a.record({ origin: "INTERNAL", content: "Check the caterer too." })
    await eventually("the live event", () => live.some((e) => e.seq === next.seq), 5_000, 20)
    const after = await a.record({ origin: "INTERNAL", content: "And the flowers." })
    await eventually("the second live event", () => live.some((e) => e.seq === after.seq), 5_000, 20)
    await following.stop()
    expect(live.map((e) => [e.event._tag, e.seq])).toEqual([
      ["EntryRecorded", next.seq],
      ["EntryRecorded", after.seq],
    ])
    // Read your writes: a read right after a write includes it.
    expect((await readOwnEvents(alice, "alice", { fromSeq: after.seq })).map((e) => e.seq)).toEqual([after.seq])

    await alice.nc.flush()
    expect(aliceErrors).toEqual([])
  })
})

describe("another agent's memory, refused by the broker", () => {
  it("requests on bob's API subjects are refused and change nothing", async () => {
    const asBob = alice.agent("bob")
    expect((await refusal(asBob.view())).message).toContain(publishViolation("wm.api.bob.view.get"))
    expect((await refusal(asBob.buildContext())).message).toContain(publishViolation("wm.api.bob.context.build"))
    expect((await refusal(asBob.record({ origin: "USER", content: "forged by alice" }))).message).toContain(
      publishViolation("wm.api.bob.entry.record"),
    )
    expect((await refusal(asBob.register({ role: "main" }))).message).toContain(
      publishViolation("wm.api.bob.agent.register"),
    )
    // A request sent without the SDK: the server refuses it on the subject it routes it to (its partition's).
    const aliceErrors = serverErrors(alice.nc)
    await refusal(alice.nc.request("wm.api.bob.step.begin", encode("{}"), { timeout: 2_000 }))
    const P = partitionCount()
    const routed = slotSubject(P, slotOf("bob", P), "bob", "step.begin")
    await eventually(
      "the refusal of the route",
      () => aliceErrors.some((e) => e.includes(publishViolation(routed))),
      5_000,
      20,
    )
    // Bob's memory is as he left it: one entry, never read.
    const view = await bob.agent("bob").view()
    expect(view.entries.map((e) => [e.id, e.referenceCount])).toEqual([[bobEntry.entryId, 0]])
  })

  it("subscriptions to bob's events, requests and replies are refused, and nothing is delivered", async () => {
    const got: string[] = []
    const closedWith: string[] = []
    const watched = [agentEvents("bob"), "wm.evt.>", "wm.api.bob.>", "_INBOX_bob.>", "_INBOX.>", ">"]
    for (const subject of watched) {
      alice.nc.subscribe(subject, {
        callback: (error, m) => void (error ? closedWith.push(error.message) : got.push(m.subject)),
      })
    }
    // Control: the administrator sees the same traffic, so a delivery would have happened.
    const control: string[] = []
    admin.subscribe(agentEvents("bob"), { callback: (_, m) => void control.push(m.subject) })
    await admin.flush()
    await alice.nc.flush()
    for (const subject of watched)
      await eventually(
        `the refusal of ${subject}`,
        () => aliceErrors.some((e) => e.includes(subscribeViolation(subject))),
        5_000,
        20,
      )
    // The client hands each refused subscription its error.
    expect(closedWith.sort()).toEqual(watched.map(subscribeViolation).sort())

    const b = bob.agent("bob")
    const recorded = await b.record({ origin: "USER", content: "Another private note." })
    await b.view()
    await eventually("the control delivery", () => control.includes(entrySubject("bob", recorded.entryId)), 5_000, 20)
    await sleep(200)
    expect(got).toEqual([])
  })

  it("publishing into bob's event subjects is refused and nothing is stored", async () => {
    const before = await bobSubjects()
    alice.nc.publish(entrySubject("bob", "forged"), encode("{}"))
    alice.nc.publish(agentStepSubject("bob"), encode("{}"))
    await alice.nc.flush()
    await eventually(
      "the core publish refusals",
      () =>
        aliceErrors.some((e) => e.includes(publishViolation(entrySubject("bob", "forged")))) &&
        aliceErrors.some((e) => e.includes(publishViolation(agentStepSubject("bob")))),
      5_000,
      20,
    )
    // Through JetStream too: the publish is a request on the same subject.
    const js = jetstream(alice.nc)
    expect(
      (await refusal(js.publish(agentConfigSubject("bob"), encode("{}"), { msgID: "forged-1" }))).message,
    ).toContain(publishViolation(agentConfigSubject("bob")))
    // Nor into her own event subjects: only the services append events.
    expect((await refusal(js.publish(agentStepSubject("alice"), encode("{}")))).message).toContain(
      publishViolation(agentStepSubject("alice")),
    )
    expect(await bobSubjects()).toEqual(before)
    expect(before[entrySubject("bob", "forged")]).toBeUndefined()
  })

  it("every JetStream API request of an agent is refused, its own events included; nothing is delivered and the stream is intact", async () => {
    const jsm = await jetstreamManager(admin)
    const stateBefore = (await jsm.streams.info(EVENTS_STREAM)).state
    const bobBefore = await bobSubjects()
    const aliceEntry = (await readOwnEvents(alice, "alice")).find((e) => e.event._tag === "EntryRecorded")!
    const aliceSubject = aliceEntry.subject
    const bobSubject = entrySubject("bob", bobEntry.entryId)
    const purge = `$JS.API.STREAM.PURGE.${EVENTS_STREAM}`

    // Control: whatever reaches these subjects, from anyone, the administrator sees.
    const delivered: string[] = []
    for (const subject of [
      "wm.api.bob.>",
      "_INBOX_bob.>",
      purge,
      `$JS.API.STREAM.DELETE.${EVENTS_STREAM}`,
      "_INBOX_alice.>",
    ]) {
      admin.subscribe(subject, { callback: (_, m) => void delivered.push(m.subject) })
    }
    await admin.flush()

    const push = (deliverSubject: string, filter = agentEvents("alice")) => ({
      stream_name: EVENTS_STREAM,
      config: {
        name: "spy",
        ack_policy: "none",
        deliver_policy: "all",
        filter_subject: filter,
        deliver_subject: deliverSubject,
      },
    })
    const attempts: Array<[string, unknown]> = [
      ["$JS.API.INFO", undefined],
      [`$JS.API.STREAM.INFO.${EVENTS_STREAM}`, { subjects_filter: agentEvents("bob") }],
      ["$JS.API.STREAM.NAMES", {}],
      ["$JS.API.STREAM.LIST", {}],
      [purge, {}],
      [purge, { filter: agentEvents("bob") }],
      [`$JS.API.STREAM.DELETE.${EVENTS_STREAM}`, undefined],
      // Push consumers on her own events delivering to another agent's subjects or to the JetStream API.
      [`$JS.API.CONSUMER.CREATE.${EVENTS_STREAM}.spy.${agentEvents("alice")}`, push("wm.api.bob.entry.record")],
      [`$JS.API.CONSUMER.CREATE.${EVENTS_STREAM}.spy.${agentEvents("alice")}`, push(purge)],
      [`$JS.API.CONSUMER.CREATE.${EVENTS_STREAM}.spy.${agentEvents("alice")}`, push("_INBOX_bob.spy")],
      [`$JS.API.CONSUMER.CREATE.${EVENTS_STREAM}.spy.${agentEvents("alice")}`, push("_INBOX_alice.own")],
      [
        `$JS.API.CONSUMER.CREATE.${EVENTS_STREAM}.spy.${agentEvents("bob")}`,
        push("_INBOX_alice.spy", agentEvents("bob")),
      ],
      [`$JS.API.CONSUMER.CREATE.${EVENTS_STREAM}`, push("_INBOX_alice.spy", agentEvents("bob"))],
      [`$JS.API.CONSUMER.CREATE.${EVENTS_STREAM}.spy`, push(purge)],
      [`$JS.API.CONSUMER.DURABLE.CREATE.${EVENTS_STREAM}.spy`, push(purge)],
      [`$JS.API.CONSUMER.NAMES.${EVENTS_STREAM}`, {}],
      [`$JS.API.CONSUMER.LIST.${EVENTS_STREAM}`, {}],
      // Direct and message get: bob's events, and her own.
      [`$JS.API.DIRECT.GET.${EVENTS_STREAM}.${bobSubject}`, undefined],
      [`$JS.API.DIRECT.GET.${EVENTS_STREAM}.${aliceSubject}`, undefined],
      [`$JS.API.DIRECT.GET.${EVENTS_STREAM}`, { seq: bobEntry.seq }],
      [`$JS.API.DIRECT.GET.${EVENTS_STREAM}`, { last_by_subj: bobSubject }],
      [`$JS.API.STREAM.MSG.GET.${EVENTS_STREAM}`, { seq: bobEntry.seq }],
      // Bob's raw text as the substrate reads it: the first message on his entry's subject.
      [`$JS.API.DIRECT.GET.${EVENTS_STREAM}`, { next_by_subj: bobSubject, seq: 0 }],
      [`$JS.API.STREAM.MSG.GET.${EVENTS_STREAM}`, { next_by_subj: bobSubject, seq: 0 }],
      [`$JS.API.STREAM.MSG.GET.${EVENTS_STREAM}`, { last_by_subj: bobSubject }],
      // The retired substrate bucket of an upgraded deployment.
      [`$JS.API.DIRECT.GET.KV_${SUBSTRATE_BUCKET}.$KV.${SUBSTRATE_BUCKET}.bob.${bobEntry.entryId}`, undefined],
      [
        `$JS.API.STREAM.MSG.GET.KV_${SUBSTRATE_BUCKET}`,
        { last_by_subj: `$KV.${SUBSTRATE_BUCKET}.bob.${bobEntry.entryId}` },
      ],
      [`$JS.API.STREAM.INFO.KV_${SUBSTRATE_BUCKET}`, undefined],
    ]
    for (const [subject, body] of attempts) {
      const request = alice.nc.request(subject, body === undefined ? undefined : encode(JSON.stringify(body)), {
        timeout: 2_000,
      })
      expect((await refusal(request)).message, subject).toContain(publishViolation(subject))
    }
    // The client library's own entry points fail the same way.
    expect((await refusal(jetstreamManager(alice.nc))).message).toContain(publishViolation("$JS.API.INFO"))
    const js = jetstream(alice.nc)
    expect(
      (
        await refusal(
          js.consumers.getPushConsumer(EVENTS_STREAM, {
            filter_subjects: agentEvents("alice"),
            deliver_prefix: "_INBOX_alice.own",
          }),
        )
      ).message,
    ).toMatch(
      /^Permissions Violation for Publish to "\$JS\.API\.CONSUMER\.CREATE\.WM_EVENTS\.[A-Za-z0-9_]+\.wm\.evt\.\d+\.alice\.>"$/,
    )
    expect(
      (await refusal(new Kvm(alice.nc).open(SUBSTRATE_BUCKET).then((kv) => kv.get(`bob.${bobEntry.entryId}`)))).message,
    ).toContain("Permissions Violation for Publish to")

    // No consumer of hers exists, nothing reached the watched subjects, and the stream is as it was.
    await sleep(300)
    await admin.flush()
    expect(delivered).toEqual([])
    const consumers = await jsm.consumers.list(EVENTS_STREAM).next()
    expect(consumers.filter((c) => c.name === "spy" || (c.config.deliver_subject ?? "") !== "")).toEqual([])
    const stateAfter = (await jsm.streams.info(EVENTS_STREAM)).state
    expect(stateAfter.first_seq).toBe(stateBefore.first_seq)
    expect(stateAfter.messages).toBeGreaterThanOrEqual(stateBefore.messages)
    expect(await bobSubjects()).toEqual(bobBefore)
    expect((await bob.agent("bob").raw(bobEntry.entryId)).content).toBe("Bob's private plan: resign on Friday.")
  })

  it("pulling from another consumer, even knowing its name, is refused", async () => {
    const jsm = await jetstreamManager(admin)
    // A service's consumer of a partition's events (no service follows the whole log any more).
    const serviceConsumer = (await jsm.consumers.list(EVENTS_STREAM).next()).find((c) =>
      [c.config.filter_subject, ...(c.config.filter_subjects ?? [])].some((f) => f?.startsWith("wm.evt.")),
    )
    expect(serviceConsumer).toBeDefined()
    const got: string[] = []
    const inbox = `_INBOX_alice.pull-${Date.now()}`
    alice.nc.subscribe(inbox, { callback: (_, m) => void got.push(m.subject) })
    const subject = `$JS.API.CONSUMER.MSG.NEXT.${EVENTS_STREAM}.${serviceConsumer!.name}`
    alice.nc.publish(subject, encode(JSON.stringify({ batch: 10, expires: 1_000_000_000 })), { reply: inbox })
    await alice.nc.flush()
    await eventually(
      "the pull refusal",
      () => aliceErrors.some((e) => e.includes(publishViolation(subject))),
      5_000,
      20,
    )
    await sleep(200)
    expect(got).toEqual([])
  })

  it("bob's raw text is read from the log by the substrate and memory users, through the request alice is refused", async () => {
    const first = { next_by_subj: entrySubject("bob", bobEntry.entryId), seq: 0 }
    for (const service of ["substrate", "memory"]) {
      const nc = await connect({ servers: server.url, ...auth.service(service) })
      try {
        const jsm = await jetstreamManager(nc)
        const direct = await jsm.direct.getMessage(EVENTS_STREAM, first)
        expect(direct?.seq, service).toBe(bobEntry.seq)
        // Stored sealed; the service's user opens it with the content keys it may read.
        expect(direct?.string(), service).not.toContain("Bob's private plan")
        const keys = await openContentKeys(nc, Date.now)
        await keys.load(direct?.data ?? new Uint8Array())
        const opened = decodeEvent(direct?.data ?? new Uint8Array(), keys.unseal)
        expect(opened.ok && opened.event._tag === "EntryRecorded" ? opened.event.content : opened, service).toBe(
          "Bob's private plan: resign on Friday.",
        )
        const leader = await jsm.streams.getMessage(EVENTS_STREAM, first as unknown as { seq: number })
        expect(leader?.seq, service).toBe(bobEntry.seq)
      } finally {
        await nc.close()
      }
    }
  })

  it("the content keys: services read them, agents cannot", async () => {
    const keyGet = `$JS.API.DIRECT.GET.KV_${KEY_BUCKET}.$KV.${KEY_BUCKET}.${entryKeyName("bob", bobEntry.entryId)}`
    const reply = await (await connect({ servers: server.url, ...auth.service("substrate") })).request(keyGet, "")
    expect(reply.data.length).toBeGreaterThan(0)
    expect((await refusal(alice.nc.request(keyGet, ""))).message).toContain("Permissions Violation for Publish to")
  })

  it("the retired substrate bucket of an upgraded deployment: the eraser's user erases from it but cannot create it; agents and the audit user cannot read it", async () => {
    const key = `bob.isolation-probe`
    const substrate = await connect({ servers: server.url, ...auth.service("substrate") })
    const audit = await connect({ servers: server.url, ...auth.service("audit") })
    try {
      // The substrate's user may not create the bucket (it is never written again).
      expect((await refusal(new Kvm(substrate).create(SUBSTRATE_BUCKET, { history: 1 }))).message).toContain(
        "Permissions Violation for Publish to",
      )
      // As a version before this one left it: created and written by the administrator here.
      const kv = await new Kvm(admin).create(SUBSTRATE_BUCKET, { history: 1 })
      const put = await kv.put(key, encode("Bob's private plan: resign on Friday."))
      // The substrate's user erases the record in place (what a forget does to the bucket).
      expect(await (await jetstreamManager(substrate)).streams.deleteMessage(`KV_${SUBSTRATE_BUCKET}`, put, true)).toBe(
        true,
      )
      await kv.put(key, encode("Bob's private plan: resign on Friday."))

      // Neither the audit user nor alice can read it; alice cannot write it.
      for (const [nc, who] of [
        [audit, "audit"],
        [alice.nc, "alice"],
      ] as const) {
        const get = `$JS.API.DIRECT.GET.KV_${SUBSTRATE_BUCKET}.$KV.${SUBSTRATE_BUCKET}.${key}`
        expect((await refusal(nc.request(get, undefined, { timeout: 2_000 }))).message, who).toContain(
          publishViolation(get),
        )
        const info = `$JS.API.STREAM.INFO.KV_${SUBSTRATE_BUCKET}`
        expect((await refusal(nc.request(info, undefined, { timeout: 2_000 }))).message, who).toContain(
          publishViolation(info),
        )
      }
      expect(
        (await refusal(jetstream(alice.nc).publish(`$KV.${SUBSTRATE_BUCKET}.${key}`, encode("x")))).message,
      ).toContain(publishViolation(`$KV.${SUBSTRATE_BUCKET}.${key}`))
      expect((await kv.get(key))?.string()).toBe("Bob's private plan: resign on Friday.")
      await kv.destroy()
    } finally {
      await substrate.close()
      await audit.close()
    }
  })

  it("an agent's connection must use its own inbox prefix: the shared _INBOX is refused", async () => {
    const { inboxPrefix: _own, ...withoutPrefix } = auth.agent("alice")
    const plain = await connect({ servers: server.url, ...withoutPrefix })
    const errors = serverErrors(plain)
    try {
      // The reply subscription on the shared prefix is refused, so the request fails at once.
      const failure = await refusal(plain.request("wm.api.alice.view.get", encode("{}"), { timeout: 5_000 }))
      expect(failure.message).toMatch(/^Permissions Violation for Subscription to "_INBOX\.[A-Za-z0-9]+\.\*"$/)
      expect(errors.filter((e) => !e.startsWith('Permissions Violation for Subscription to "_INBOX.'))).toEqual([])
    } finally {
      await plain.close()
    }
  })
})

describe("threads across agents", () => {
  it("a thread holds the caller's entries and its tenant's, never another agent's", async () => {
    const T = Date.UTC(2026, 0, 5, 9)
    const a = alice.agent("alice")
    const b = bob.agent("bob")
    const c = carol.agent("carol")
    await c.register({ role: "main" })
    await a.record({
      origin: "USER",
      content: "Offsite: book the venue by May.",
      correlationId: "offsite",
      timestamp: T + 1,
    })
    await b.record({
      origin: "INTERNAL",
      content: "Offsite: Bob's secret — he resigns after it.",
      correlationId: "offsite",
      timestamp: T + 2,
    })
    await c.record({
      origin: "ADVISOR",
      content: "Offsite: Carol suggests the lake house.",
      correlationId: "offsite",
      timestamp: T + 3,
    })
    const upTo = Math.max(a.lastSeq, b.lastSeq, c.lastSeq)
    a.lastSeq = b.lastSeq = c.lastSeq = upTo

    const seen = async (agent: typeof a) => (await agent.thread("offsite")).entries.map((e) => [e.agentId, e.text])
    // Alice and carol share the tenant acme: each sees both; bob's entry is in neither answer.
    const shared = [
      ["alice", "Offsite: book the venue by May."],
      ["carol", "Offsite: Carol suggests the lake house."],
    ]
    expect(await seen(a)).toEqual(shared)
    expect(await seen(c)).toEqual(shared)
    // Bob shares with nobody: his own entry only.
    expect(await seen(b)).toEqual([["bob", "Offsite: Bob's secret — he resigns after it."]])
    // The tenant's console acts for alice, so it sees what she sees.
    const acme = await WorkingMemoryClient.connect({ servers: server.url, ...auth.tenant("acme"), attempts: 1 })
    try {
      const viaConsole = acme.agent("alice")
      viaConsole.lastSeq = upTo
      expect(JSON.stringify(await viaConsole.thread("offsite"))).not.toContain("resigns")
    } finally {
      await acme.close()
    }
  })
})

describe("tenants and operators", () => {
  it("a tenant's user acts for the tenant's agents and no others", async () => {
    const acme = await WorkingMemoryClient.connect({ servers: server.url, ...auth.tenant("acme"), attempts: 1 })
    try {
      const view = await acme.agent("alice").view()
      expect(view.agent.id).toBe("alice")
      expect((await refusal(acme.agent("bob").view())).message).toContain(publishViolation("wm.api.bob.view.get"))
    } finally {
      await acme.close()
    }
  })

  it("the read-only audit user can verify the working views and read the services' progress; an agent cannot audit the log", async () => {
    const node = fileURLToPath(new URL("../../node_modules/.bin/node", import.meta.url))
    const run = (env: Record<string, string>, ...args: string[]) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
        const child = spawn(node, ["cli/wm.ts", ...args], {
          cwd: fileURLToPath(new URL("../..", import.meta.url)),
          env: { ...process.env, NATS_URL: server.url, ...env },
          stdio: ["ignore", "pipe", "pipe"],
        })
        let stdout = ""
        let stderr = ""
        child.stdout.on("data", (c: Buffer) => (stdout += c.toString()))
        child.stderr.on("data", (c: Buffer) => (stderr += c.toString()))
        child.on("error", reject)
        child.on("close", (code) => resolve({ code, stdout, stderr }))
      })
    const audit = auth.service("audit")
    const verified = await run({ NATS_USER: audit.user, NATS_PASS: audit.pass }, "verify")
    expect(verified.stderr, verified.stderr + verified.stdout).toBe("")
    expect(verified.code).toBe(0)
    expect(verified.stdout).toMatch(
      /^ok {4}working-views: 3 agents compared at .+; the live projection matches the log\nok {4}working-snapshots: .+\nok {4}gateway-snapshots: .+\nok {4}memory-snapshots: .+\nok {4}fade-snapshots: .+\nok {4}substrate: \d+ recorded entries compared; the live projection matches the log\n$/,
    )

    // Under the same rights it reads every service's progress reports (each service writes its own there).
    const status = await run({ NATS_USER: audit.user, NATS_PASS: audit.pass }, "status", "--json")
    expect(status.stderr, status.stderr + status.stdout).toBe("")
    expect(status.code).toBe(0)
    const reported = new Set(
      (JSON.parse(status.stdout) as { partitions: Array<{ service: string }> }).partitions.map((p) => p.service),
    )
    expect([...reported].sort()).toEqual(["fade", "gateway", "memory", "working"])

    const a = auth.agent("alice")
    const snooping = await run(
      { NATS_USER: a.user, NATS_PASS: a.pass, NATS_INBOX_PREFIX: a.inboxPrefix },
      "history",
      bobEntry.entryId,
      "--agent",
      "bob",
    )
    expect(snooping.code).toBe(2)
    expect(snooping.stdout).toBe("")
    expect(snooping.stderr).toContain("Permissions Violation for Publish to")
  })
})
