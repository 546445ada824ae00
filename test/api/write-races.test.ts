/**
 * Of two racing writes on the same state, one wins and the other is told:
 * every write that depends on an agent's step, focus or configuration is
 * appended with the expected sequence of its subject, and a loser is decided
 * again on the winner's outcome.
 */

import { Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { RequestOf } from "../../contracts/api.ts"
import type { MemoryEvent } from "../../contracts/events.ts"
import { agentStepSubject } from "../../contracts/subjects.ts"
import { gatewayService, workingService } from "../../services/system.ts"
import { readLog } from "../support/log.ts"
import { settingsFor, startTestSystem, type TestSystem } from "../support/system.ts"

let system: TestSystem
beforeAll(async () => {
  // No fade worker or retrieval: only the writes under test touch these agents.
  system = await startTestSystem({}, { fade: false, memory: false })
  // A second gateway and working replica: they divide the partitions with the first, so an agent's requests
  // move between processes while its partition moves; racing writes are decided on their subject's sequence.
  const settings = settingsFor(system.server.url)
  await system.startReplica(
    Layer.mergeAll(gatewayService(settings("wm-gateway-2")), workingService(settings("wm-working-2"))),
  )
})
afterAll(async () => {
  await system?.stop()
})

const settle = <T>(promises: ReadonlyArray<Promise<T>>) => Promise.allSettled(promises)
const tagOf = (result: PromiseSettledResult<unknown>) =>
  result.status === "fulfilled" ? "ok" : ((result.reason as { _tag?: string })._tag ?? String(result.reason))

const stepEvents = async (agentId: string): Promise<MemoryEvent[]> =>
  (await readLog(system.server.url, agentStepSubject(agentId))).map((r) => r.event)

describe("racing step writes", () => {
  it("of many concurrent step.begin with different step ids exactly one succeeds, the others get InvalidState", async () => {
    const agent = system.client.agent("race-begin")
    await agent.register({ role: "main" })
    for (let round = 0; round < 3; round++) {
      const ids = Array.from({ length: 16 }, (_, i) => `r${round}-s${i}`)
      const results = await settle(
        ids.map((stepId) => system.client.call(agent.agentId, "beginStep", { requestId: `begin-${stepId}`, stepId })),
      )
      const tags = results.map(tagOf)
      expect(tags.filter((t) => t === "ok")).toHaveLength(1)
      expect(tags.filter((t) => t !== "ok")).toEqual(Array(15).fill("InvalidState"))
      const winner = ids[tags.indexOf("ok")]!
      const started = (await stepEvents(agent.agentId)).filter((e) => e._tag === "StepStarted")
      expect(started.slice(-1).map((e) => e._tag === "StepStarted" && e.stepId)).toEqual([winner])
      expect(started).toHaveLength(round + 1)
      // The step that won is the open one, and it ends.
      await expect(
        system.client.call(agent.agentId, "endStep", { requestId: `end-${winner}`, stepId: winner }),
      ).resolves.toMatchObject({ stepId: winner })
    }
  })

  it("a reference racing the end of its step lands before the end or is refused, never after it", async () => {
    const agent = system.client.agent("race-reference")
    await agent.register({ role: "main" })
    const { entryId } = await agent.record({ origin: "USER", content: "The lease ends in May." })
    let refused = 0
    for (let i = 0; i < 12; i++) {
      const stepId = `s${i}`
      await system.client.call(agent.agentId, "beginStep", { requestId: `b-${stepId}`, stepId })
      const [end, reference] = await settle<unknown>([
        system.client.call(agent.agentId, "endStep", { requestId: `e-${stepId}`, stepId }),
        system.client.call(agent.agentId, "referenceEntries", {
          requestId: `r-${stepId}`,
          stepId,
          entryIds: [entryId],
        }),
      ])
      expect(tagOf(end!)).toBe("ok")
      if (tagOf(reference!) !== "ok") {
        expect(tagOf(reference!)).toBe("InvalidState")
        refused++
      }
    }
    // After the end, a reference to the step is refused.
    await expect(
      system.client.call(agent.agentId, "referenceEntries", { stepId: "s11", entryIds: [entryId] }),
    ).rejects.toMatchObject({ _tag: "InvalidState" })
    const events = await stepEvents(agent.agentId)
    const endedAt = new Map(events.flatMap((e, i) => (e._tag === "StepEnded" ? [[e.stepId, i] as const] : [])))
    const late = events.filter((e, i) => e._tag === "EntriesReferenced" && i > (endedAt.get(e.stepId) ?? Infinity))
    expect(late).toEqual([])
    const references = events.filter((e) => e._tag === "EntriesReferenced").length
    expect(references + refused).toBe(12)
  })

  it("a build racing the end of its step records its read inside the step or is refused", async () => {
    const agent = system.client.agent("race-read")
    await agent.register({ role: "main" })
    await agent.record({ origin: "USER", content: "The lease ends in May." })
    for (let i = 0; i < 12; i++) {
      const stepId = `s${i}`
      await system.client.call(agent.agentId, "beginStep", { requestId: `b-${stepId}`, stepId })
      const [end, build] = await settle<unknown>([
        system.client.call(agent.agentId, "endStep", { requestId: `e-${stepId}`, stepId }),
        system.client.call(agent.agentId, "buildContext", { requestId: `c-${stepId}`, stepId }),
      ])
      expect(tagOf(end!)).toBe("ok")
      expect(["ok", "InvalidState"]).toContain(tagOf(build!))
    }
    const events = await stepEvents(agent.agentId)
    const endedAt = new Map(events.flatMap((e, i) => (e._tag === "StepEnded" ? [[e.stepId, i] as const] : [])))
    const late = events.filter(
      (e, i) => e._tag === "EntriesRead" && e.stepId !== null && i > (endedAt.get(e.stepId) ?? Infinity),
    )
    expect(late).toEqual([])
  })
})

describe("concurrent builds", () => {
  it("each build records one read and every entry's reference count equals the reads that served it", async () => {
    const agent = system.client.agent("race-builds")
    await agent.register({ role: "main" })
    for (let i = 0; i < 6; i++)
      await agent.record({ origin: "USER", content: `Fact number ${i} about the move to Porto.` })
    const builds = Array.from({ length: 16 }, (_, i): RequestOf<"buildContext"> => ({ requestId: `build-${i}` }))
    // Each build sent three times at once, as an impatient client would: stored and counted once.
    const replies = await Promise.all(
      builds.flatMap((b) => [b, b, b]).map((b) => system.client.call(agent.agentId, "buildContext", b)),
    )
    for (let i = 0; i < builds.length; i++) {
      const copies = replies.slice(3 * i, 3 * i + 3)
      expect(new Set(copies.map((c) => c.seq)).size).toBe(1)
    }
    const reads = (await stepEvents(agent.agentId)).filter((e) => e._tag === "EntriesRead")
    expect(reads).toHaveLength(builds.length)
    expect(new Set(reads.map((r) => r.eventId)).size).toBe(builds.length)
    const served = new Map<string, number>()
    for (const r of reads)
      if (r._tag === "EntriesRead") for (const s of r.served) served.set(s.entryId, (served.get(s.entryId) ?? 0) + 1)
    const view = await system.liveView(agent.agentId)
    const counts = new Map([...view!.entries].map(([id, e]) => [id, e.referenceCount]))
    expect(counts).toEqual(served)
  })
})
