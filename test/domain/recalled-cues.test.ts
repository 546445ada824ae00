/** A recall's cues in one event: which of them a view takes, and what a snapshot keeps of the step. */
import { HashMap } from "effect"
import { describe, expect, it } from "vitest"
import type { EventOf } from "../../contracts/events.ts"
import { evolve } from "../../domain/agent-view.ts"
import { decodeView, encodeView } from "../../services/platform/partitions/view-codec.ts"
import {
  AGENT,
  demoted,
  recalledEntry,
  recorded,
  registered,
  stepEnded,
  stepStarted,
  viewOf,
} from "../support/events.ts"

const recall = (stepId: string, entryIds: ReadonlyArray<string>, at: number): EventOf<"CuesRehydrated"> => ({
  _tag: "CuesRehydrated",
  v: 1,
  eventId: `cues-${stepId}-${at}`,
  agentId: AGENT,
  at,
  causationId: stepId,
  correlationId: null,
  stepId,
  trigger: "similarity",
  cues: entryIds.map((entryId, i) => ({
    entryId,
    relevance: 0.9 - i / 10,
    correlationId: null,
    recalled: recalledEntry(`the text of ${entryId}`),
  })),
})

const forgotten = (entryId: string, at: number): EventOf<"EntryForgotten"> => ({
  _tag: "EntryForgotten",
  v: 1,
  eventId: `forget-${entryId}`,
  agentId: AGENT,
  at,
  causationId: null,
  correlationId: null,
  entryId,
})

/** Two entries in long-term, and one still held in full by working. */
const history = [
  registered(),
  recorded("e1", "The lease ends on 31 May.", 1),
  demoted("e1", 2),
  recorded("e2", "Budget moves to Q3.", 3),
  demoted("e2", 4),
  recorded("e3", "Open item.", 5),
]

const cueIds = (view: ReturnType<typeof viewOf>) => [...HashMap.keys(view.cues)].sort()

describe("a recall's cues in one event", () => {
  it("brings back each cue of the open step with its relevance, and none that working holds in full", () => {
    const view = viewOf(...history, stepStarted("s1", 6), recall("s1", ["e1", "e2", "e3"], 7))
    expect(cueIds(view)).toEqual(["e1", "e2"])
    expect(HashMap.get(view.cueRelevance, "e2")).toEqual(expect.objectContaining({ value: 0.8 }))
    expect(HashMap.get(view.cues, "e1")).toEqual(
      expect.objectContaining({ value: expect.objectContaining({ content: "the text of e1", transient: true }) }),
    )
  })

  it("leaves a cue the step already holds as it came: the first recall of an entry in a step wins", () => {
    const first = recall("s1", ["e1"], 7)
    const second = { ...recall("s1", ["e2", "e1"], 8), eventId: "cues-s1-second" }
    const view = viewOf(...history, stepStarted("s1", 6), first, second)
    expect(cueIds(view)).toEqual(["e1", "e2"])
    expect(HashMap.get(view.cueRelevance, "e1")).toEqual(expect.objectContaining({ value: 0.9 }))
  })

  it("changes nothing once its step has ended, or for another step", () => {
    expect(cueIds(viewOf(...history, stepStarted("s1", 6), stepEnded("s1", 7), recall("s1", ["e1"], 8)))).toEqual([])
    expect(cueIds(viewOf(...history, stepStarted("s2", 6), recall("s1", ["e1"], 7)))).toEqual([])
  })

  it("leaves out an entry forgotten during the step, whatever the process still holds of its key", () => {
    // A recall decided before the forget and stored after it: the forget is earlier in the log.
    const view = viewOf(...history, stepStarted("s1", 6), forgotten("e1", 7), recall("s1", ["e1", "e2"], 8))
    expect(cueIds(view)).toEqual(["e2"])
    // A recall stored before the forget loses the cue when the forget is applied.
    expect(cueIds(viewOf(...history, stepStarted("s1", 6), recall("s1", ["e1", "e2"], 7), forgotten("e1", 8)))).toEqual(
      ["e2"],
    )
  })

  it("forgets what was forgotten in a step when the next step begins", () => {
    const view = viewOf(
      ...history,
      stepStarted("s1", 6),
      forgotten("e1", 7),
      stepEnded("s1", 8),
      stepStarted("s2", 9),
      recall("s2", ["e2"], 10),
    )
    expect(view.step?.forgotten).toBeUndefined()
    expect(cueIds(view)).toEqual(["e2"])
  })

  it("a snapshot keeps what was forgotten during the open step, so a restart from it leaves the cue out too", () => {
    const before = viewOf(...history, stepStarted("s1", 6), forgotten("e1", 7))
    const restored = decodeView(JSON.parse(JSON.stringify(encodeView(before))))
    const next = evolve(restored, recall("s1", ["e1", "e2"], 8), { seq: before.lastSeq + 1 })!
    expect(cueIds(next)).toEqual(["e2"])
    // A snapshot of a step without a forget reads as before.
    const plain = viewOf(...history, stepStarted("s1", 6))
    expect(decodeView(JSON.parse(JSON.stringify(encodeView(plain)))).step?.forgotten).toBeUndefined()
  })
})
