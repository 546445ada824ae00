import { describe, it } from "vitest"
import type { FadeScore } from "../../contracts/fade.ts"
import type { Stamp } from "../../domain/decision.ts"
import { decideFadeMove, EXTRACTIVE_PRODUCER } from "../../domain/fade-decide.ts"
import type { FadeMove } from "../../domain/fade-plan.ts"
import { blockTokens } from "../../domain/render.ts"
import { given } from "../support/decider-spec.ts"
import { AGENT, faded, recorded, referenced, registered, stepStarted } from "../support/events.ts"

const stamp = (eventId: string, at = 10): Stamp => ({
  eventId,
  agentId: AGENT,
  at,
  causationId: "seq:3",
  correlationId: null,
})
const score: FadeScore = {
  total: 0.95,
  parts: { age: 1, frequency: 0, emotion: 0, focus: 0, pressure: 0 },
  trigger: "threshold",
  threshold: 0.9,
  usage: 0.5,
  tau: 0.8,
  now: 5_000,
}
const move = (entryId: string, from: 0 | 1 | 2, to: 1 | 2 | 3, expectSeq = 2): FadeMove => ({
  entryId,
  from,
  to,
  score,
  expectSeq,
})
const embedding = {
  model: "m",
  dims: 2,
  vector: "AACAPwAAAAA=",
  producer: { kind: "offline" as const, model: "m", fallbackReason: null, attempts: 1 },
}

const lease = recorded("e1", "The lease ends in May. The landlord wants notice by March.", 1_000, {
  tags: ["home"],
  emotionalWeight: 0.2,
})
const keyPoints = faded(lease, 1, "The lease ends in May.")
const summary = faded(lease, 2, "Lease: May.")

describe("fade deciders", () => {
  it("records key points at rung 1, counted as the builder serves them", () => {
    given(registered(), lease)
      .when((view) =>
        decideFadeMove(view!, move("e1", 0, 1), { to: 1, keyPoints: "The lease ends in May." }, stamp("f1")),
      )
      .then({
        _tag: "RungChanged",
        v: 1,
        eventId: "f1",
        entryId: "e1",
        from: 0,
        to: 1,
        text: "The lease ends in May.",
        tokens: blockTokens(lease, "keyPoints", "The lease ends in May.", "o200k_base"),
        score,
        producer: EXTRACTIVE_PRODUCER,
      })
  })

  it("records a summary at rung 2 with the producer that made it", () => {
    const producer = {
      kind: "offline" as const,
      model: "telegraphic-v1",
      fallbackReason: "no summarizer configured",
      attempts: 1,
    }
    given(registered(), lease, keyPoints)
      .when((view) => decideFadeMove(view!, move("e1", 1, 2), { to: 2, summary: "Lease: May.", producer }, stamp("f2")))
      .then({ _tag: "RungChanged", from: 1, to: 2, text: "Lease: May.", producer })
  })

  it("a demotion carries everything the long-term record needs, with key points working had dropped", () => {
    given(registered(), lease, stepStarted("s1", 1_100), referenced("s1", ["e1"], 1_200), keyPoints, summary)
      .when((view) =>
        decideFadeMove(view!, move("e1", 2, 3), { to: 3, embedding }, stamp("f3"), {
          keyPoints: { text: keyPoints.text, tokens: keyPoints.tokens },
          earlierCitations: 2,
        }),
      )
      .then({
        _tag: "EntryDemoted",
        v: 2,
        entryId: "e1",
        from: 2,
        score,
        embedding,
        entry: {
          timestamp: 1_000,
          origin: "USER",
          correlationId: null,
          tags: ["home"],
          moodSnapshot: null,
          emotionalWeight: 0.2,
          rawTokens: lease.tokens,
          keyPoints: { text: keyPoints.text, tokens: keyPoints.tokens },
          summary: { text: summary.text, tokens: summary.tokens },
          citationCount: 3,
        },
      })
  })

  it("refuses a move planned on a stale view (the entry has moved since)", () => {
    given(registered(), lease, keyPoints)
      .when((view) =>
        decideFadeMove(view!, move("e1", 0, 1), { to: 1, keyPoints: "The lease ends in May." }, stamp("f4")),
      )
      .thenFails("InvalidState")
  })

  it("refuses an entry that is not in working", () => {
    given(registered(), lease)
      .when((view) => decideFadeMove(view!, move("gone", 0, 1), { to: 1, keyPoints: "x" }, stamp("f5")))
      .thenFails("InvalidState")
  })

  it("refuses a representation made for another rung than the move's", () => {
    given(registered(), lease)
      .when((view) => decideFadeMove(view!, move("e1", 0, 1), { to: 3, embedding }, stamp("f6")))
      .thenFails("InvalidState")
  })
})
