/**
 * A recalled entry that is not served whole is served by the sentences that
 * bear on the step's focus. Against a real nats-server with every service
 * running.
 */
import { jetstreamManager } from "@nats-io/jetstream"
import { connect } from "@nats-io/transport-node"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { EventOf } from "../../contracts/events.ts"
import { EVENTS_STREAM } from "../../contracts/subjects.ts"
import { steppingClock } from "../support/clock.ts"
import { eventually } from "../support/eventually.ts"
import { recordThenDemote } from "../support/fillers.ts"
import { cuesOf, readLog } from "../support/log.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

const MINUTE = 60_000
const T0 = Date.UTC(2024, 5, 3, 8)
const AGENT = "focused-cues"

let system: TestSystem
beforeAll(async () => {
  system = await startTestSystem()
})
afterAll(async () => system?.stop())

/** The answer sits in the last sentence, which the turn's own key points leave out. */
const TURN =
  "John: Yep, let's keep making great memories with our loved ones and cherishing the time we have together. " +
  "Family is what keeps me going when work gets heavy and the days are long. " +
  "I'm off to do some taekwondo at the gym on Elm Street tonight!"

/** The agent's promotion of `entryId`, as the log holds it. */
const promotionOf = async (agentId: string, entryId: string) =>
  (await readLog(system.server.url))
    .map((s) => s.event)
    .find(
      (e): e is EventOf<"CuePromoted"> => e._tag === "CuePromoted" && e.agentId === agentId && e.entryId === entryId,
    )

/** The agent's cue of `entryId`, as the log holds it. */
const cueOf = async (agentId: string, entryId: string) =>
  cuesOf(await readLog(system.server.url)).find((cue) => cue.agentId === agentId && cue.entryId === entryId)

/**
 * A new agent (budget 200) that recorded `earlier`, then `turn`, then enough filler to demote `turn`; its
 * client is caught up with the log.
 */
const agentWithDemoted = async (agentId: string, turn: string, earlier: ReadonlyArray<string> = []) => {
  const agent = system.client.agent(agentId)
  await agent.register({ role: "custom", budget: 200 })
  const clock = steppingClock(T0, MINUTE)
  for (const content of earlier) await agent.record({ origin: "USER", content, timestamp: clock.next() })
  const entryId = await recordThenDemote(agent, system.server.url, turn, clock)
  agent.lastSeq = Math.max(agent.lastSeq, ...(await readLog(system.server.url)).map((s) => s.seq))
  return { agent, entryId }
}

describe("recalled key points", () => {
  it("a long recalled turn shown as key points keeps the sentence the focus asks about", {
    timeout: 60_000,
  }, async () => {
    const { agent, entryId } = await agentWithDemoted(AGENT, TURN)

    const { stepId } = await agent.beginStep({ focus: { query: "Where does John do taekwondo?" } })
    const built = await agent.buildContext({ stepId })
    expect(built.items.find((i) => i.entryId === entryId)).toMatchObject({ cue: true, form: "keyPoints" })
    expect(built.text).toContain("taekwondo at the gym on Elm Street")
    expect(built.text).not.toContain("cherishing the time")
    const cue = (await cueOf(AGENT, entryId))!
    // Even the largest build (the budget in force) shows the extract: the cue carries it alone, not the raw text.
    expect(cue.recalled).toMatchObject({ form: "keyPoints" })
    expect(cue.recalled.text).toContain("taekwondo at the gym on Elm Street")
    expect(cue.recalled.text).not.toContain("cherishing the time")
    expect(cue.recalled.keyPoints).toBeUndefined()

    // Used, it comes back whole: its raw text is read back from the substrate.
    await agent.reference(stepId, [entryId])
    await expect
      .poll(async () => (await agent.view()).entries.find((e) => e.id === entryId && !e.transient)?.content, {
        timeout: 15_000,
      })
      .toBe(TURN)
    const promoted = (await promotionOf(AGENT, entryId))!
    expect(promoted.recalled).toMatchObject({ form: "raw", text: TURN })
    expect(promoted.recalled.keyPoints?.text).toBe(cue.recalled.text)
    await agent.endStep(stepId)
  })

  it("a recalled turn the largest build shows whole carries its raw text, and its extract for smaller builds", {
    timeout: 60_000,
  }, async () => {
    const { agent, entryId } = await agentWithDemoted(`${AGENT}-whole`, TURN)
    await agent.retuneBudget(2_000)

    const { stepId } = await agent.beginStep({ focus: { query: "Where does John do taekwondo?" } })
    const whole = await agent.buildContext({ stepId })
    expect(whole.items.find((i) => i.entryId === entryId)).toMatchObject({ cue: true, form: "raw" })
    const cue = (await cueOf(agent.agentId, entryId))!
    expect(cue.recalled).toMatchObject({ form: "raw", text: TURN })
    expect(cue.recalled.keyPoints?.text).toContain("taekwondo at the gym on Elm Street")

    // Too little room for the whole turn: its key points for the focus are served.
    const tight = await agent.buildContext({ stepId, limit: cue.recalled.keyPoints!.tokens + 12 })
    expect(tight.items.find((i) => i.entryId === entryId)).toMatchObject({ cue: true, form: "keyPoints" })
    expect(tight.text).toContain("taekwondo at the gym on Elm Street")
    expect(tight.text).not.toContain("cherishing the time")
    await agent.endStep(stepId)
  })

  it("a cue held as its extract whose entry the substrate no longer has is not promoted when referenced", {
    timeout: 60_000,
  }, async () => {
    const short = "John: Taekwondo class moved to Thursdays this month."
    const { agent, entryId } = await agentWithDemoted(`${AGENT}-gone`, TURN, [short])
    const shortId = (await readLog(system.server.url))
      .map((s) => s.event)
      .find(
        (e): e is EventOf<"EntryRecorded"> =>
          e._tag === "EntryRecorded" && e.agentId === agent.agentId && e.content === short,
      )!.entryId
    const { stepId } = await agent.beginStep({ focus: { query: "Where does John do taekwondo?" } })
    const built = await agent.buildContext({ stepId })
    expect(built.items.find((i) => i.entryId === entryId)).toMatchObject({ cue: true, form: "keyPoints" })
    expect(built.items.find((i) => i.entryId === shortId)).toMatchObject({ cue: true })

    // What the memory service meets when a forget's erasure has run and its view has not yet applied the
    // tombstone: the cue is in its view, the entry's record is gone from the log.
    const recorded = (await readLog(system.server.url)).find(
      (s) => s.event._tag === "EntryRecorded" && s.event.agentId === agent.agentId && s.event.entryId === entryId,
    )!
    const nc = await connect({ servers: system.server.url })
    try {
      expect(await (await jetstreamManager(nc)).streams.deleteMessage(EVENTS_STREAM, recorded.seq)).toBe(true)
    } finally {
      await nc.close()
    }

    // The references are promoted in their order: once the second is, the first was decided.
    await agent.reference(stepId, [entryId, shortId])
    await eventually(`the cue ${shortId} to be promoted`, () => promotionOf(agent.agentId, shortId))
    expect(await promotionOf(agent.agentId, entryId)).toBeUndefined()
    await agent.endStep(stepId)
  })

  it("the extract goes by the focus's rare words: the agent's everyday words weigh less than the one its question is about", {
    timeout: 60_000,
  }, async () => {
    const turn =
      "Sam: We talked about the gym and what everyone will do on the weekend once the long exams are finally over. " +
      "The caterer said the smoker comes Tuesday. " +
      "Family is what keeps me going as work gets heavy and the days are long."
    const gym = Array.from(
      { length: 12 },
      (_, i) => `Gym again this weekend, round ${i + 1}: legs on Saturday and a long swim on Sunday.`,
    )
    const { agent, entryId } = await agentWithDemoted(`${AGENT}-rare`, turn, gym)

    const { stepId } = await agent.beginStep({ focus: { query: "When does the smoker arrive for the gym weekend?" } })
    await agent.buildContext({ stepId })
    const cue = await cueOf(agent.agentId, entryId)
    expect(cue, "the turn recalled as a cue").toBeDefined()
    expect(cue!.recalled.keyPoints?.text).toContain("the smoker comes Tuesday")
    await agent.endStep(stepId)
  })
})

describe("a recall larger than one message", () => {
  it("at a budget of a million tokens, a recall's cues go in as many events as the server takes, and are served", {
    timeout: 120_000,
  }, async () => {
    const agent = system.client.agent(`${AGENT}-large`)
    await agent.register({ role: "custom", budget: 200 })
    const clock = steppingClock(T0, MINUTE)
    // Each log is about 60 KB, so the 24 of them shown whole are more than the server's max_payload (1 MB).
    const logs = Array.from({ length: 24 }, (_, i) =>
      Array.from(
        { length: 800 },
        (_, j) => `Airship log ${i}, line ${j}: the zeppelin hangar crew checked valve ${(i * 800 + j) % 97} today.`,
      ).join(" "),
    )
    const ids: string[] = []
    for (const content of logs)
      ids.push((await agent.record({ origin: "USER", content, timestamp: clock.next() })).entryId)
    await eventually(
      "every log to be demoted",
      async () => {
        const demoted = new Set(
          (await readLog(system.server.url)).flatMap((s) =>
            s.event._tag === "EntryDemoted" && s.event.agentId === agent.agentId ? [s.event.entryId] : [],
          ),
        )
        return ids.every((id) => demoted.has(id))
      },
      60_000,
    )
    await agent.retuneBudget(1_000_000)

    const { stepId } = await agent.beginStep({ focus: { query: "What did the zeppelin hangar crew check?" } })
    // A reply holds less than the budget in force: one NATS message carries it.
    const built = await agent.buildContext({ stepId, limit: 200_000 })
    const served = built.items.filter((i) => i.cue && ids.includes(i.entryId))
    expect(served.map((i) => i.entryId).sort()).toEqual([...ids].sort())
    expect(served.filter((i) => i.form === "raw").length).toBeGreaterThan(1)

    // Recalled for the budget in force, every log is carried whole, over more than one event.
    const log = await readLog(system.server.url)
    const cues = cuesOf(log).filter((cue) => cue.agentId === agent.agentId)
    expect(cues.map((cue) => cue.entryId).sort()).toEqual([...ids].sort())
    expect(cues.map((cue) => cue.recalled.text)).toEqual(expect.arrayContaining(logs))
    const events = log.filter((s) => s.event._tag === "CuesRehydrated" && s.event.agentId === agent.agentId)
    expect(events.length).toBeGreaterThan(1)
    await agent.endStep(stepId)
  })
})
