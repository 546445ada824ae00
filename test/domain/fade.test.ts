import { HashMap, Option } from "effect"
import { describe, expect, it } from "vitest"
import type { MemoryEvent } from "../../contracts/events.ts"
import { type AgentView, evolve } from "../../domain/agent-view.ts"
import { type FadeMove, planFade } from "../../domain/fade-plan.ts"
import { DEFAULT_FADE_CONFIG } from "../../domain/fade-score.ts"
import {
  demoted,
  faded,
  focusChanged,
  recorded,
  referenced,
  registered,
  stepEnded,
  stepStarted,
} from "../support/events.ts"

const MINUTE = 60_000
const T0 = Date.UTC(2024, 0, 1)
const config = DEFAULT_FADE_CONFIG

/** A log and a fade worker in miniature: events are folded, plans applied as their events. */
class Simulation {
  view: AgentView
  seq = 0
  readonly moves: Array<FadeMove & { step: number }> = []
  step = 0
  constructor(...events: MemoryEvent[]) {
    let view: AgentView | undefined
    for (const e of events) view = evolve(view, e, { seq: ++this.seq })
    this.view = view!
  }
  apply(event: MemoryEvent) {
    this.view = evolve(this.view, event, { seq: ++this.seq })!
  }
  /** Plans and applies until nothing moves. */
  settle() {
    for (let pass = 0; pass < 20; pass++) {
      const moves = planFade(this.view, config)
      if (moves.length === 0) return
      for (const m of moves) {
        this.moves.push({ ...m, step: this.step })
        const entry = Option.getOrThrow(HashMap.get(this.view.entries, m.entryId))
        const original = recorded(entry.id, entry.content ?? entry.keyPoints ?? "x", entry.timestamp)
        this.apply(m.to === 3 ? demoted(m.entryId, T0) : faded(original, m.to, m.to === 1 ? "key points." : "sum."))
      }
    }
  }
  /** Records one more entry `minutes` after the start, then settles. */
  record(id: string, content: string, minutes: number, options: Parameters<typeof recorded>[3] = {}) {
    this.step++
    this.apply(recorded(id, content, T0 + minutes * MINUTE, options))
    this.settle()
  }
  rungOf(id: string): number {
    const e = HashMap.get(this.view.entries, id)
    return Option.isSome(e) ? e.value.rung : 3
  }
  movesOf(id: string) {
    return this.moves.filter((m) => m.entryId === id)
  }
}

describe("fade plan", () => {
  it("moves an entry 0 → 1 → 2 → out of working as newer entries age it, each move carrying its score", () => {
    const sim = new Simulation(
      registered({ budget: 100_000 }),
      recorded("old", "The first thing that happened today.", T0),
    )
    for (let i = 1; i <= 150 && sim.rungOf("old") < 3; i++) sim.record(`n${i}`, `newer entry number ${i}.`, i * 5)
    const moves = sim.movesOf("old")
    expect(moves.map((m) => m.to)).toEqual([1, 2, 3])
    const thresholds = [config.thresholds.keyPoints, config.thresholds.summary, config.thresholds.demote]
    moves.forEach((m, i) => {
      expect(m.score.trigger).toBe("threshold")
      expect(m.score.threshold).toBe(thresholds[i])
      expect(m.score.total).toBeGreaterThanOrEqual(thresholds[i]!)
      const p = m.score.parts
      expect(p.age + p.frequency + p.emotion + p.focus + p.pressure).toBeCloseTo(m.score.total, 10)
    })
    // Each rung is reached at a later point than the one before.
    expect(moves[0]!.step).toBeLessThan(moves[1]!.step)
    expect(moves[1]!.step).toBeLessThan(moves[2]!.step)
  })

  it("emotional weight and references slow fading", () => {
    const sim = new Simulation(
      registered({ budget: 100_000 }),
      recorded("plain", "We talked about the weather.", T0),
      recorded("moving", "My father passed away last spring.", T0, { emotionalWeight: 0.9 }),
      recorded("cited", "The project deadline is the 14th.", T0),
      stepStarted("s1", T0),
      referenced("s1", ["cited"], T0),
      referenced("s1", ["cited"], T0),
      referenced("s1", ["cited"], T0),
      stepEnded("s1", T0),
    )
    const demotedAt: Record<string, number> = {}
    for (let i = 1; i <= 400; i++) {
      sim.record(`n${i}`, `newer entry ${i}.`, i * 5)
      for (const id of ["plain", "moving", "cited"])
        if (sim.rungOf(id) === 3 && demotedAt[id] === undefined) demotedAt[id] = i
    }
    expect(demotedAt.plain).toBeDefined()
    expect(demotedAt.moving ?? Infinity).toBeGreaterThan(demotedAt.plain!)
    expect(demotedAt.cited ?? Infinity).toBeGreaterThan(demotedAt.plain!)
    const firstMove = (id: string) => sim.movesOf(id)[0]?.step ?? Infinity
    expect(firstMove("moving")).toBeGreaterThan(firstMove("plain"))
    expect(firstMove("cited")).toBeGreaterThan(firstMove("plain"))
  })

  it("under pressure, the entries least relevant to the focus fade first, and a task transition turns that around", () => {
    const hotel = (i: number) => `Hotel booking note ${i}: the Paris hotel room rate and check-in date for the trip.`
    const code = (i: number) => `Python bug note ${i}: the parser raises a KeyError in the config loader module.`
    const events: MemoryEvent[] = [
      registered({ role: "custom", budget: 250 }),
      focusChanged("fix the python parser bug", T0),
    ]
    for (let i = 0; i < 6; i++) {
      events.push(recorded(`hotel${i}`, hotel(i), T0 + i * MINUTE))
      events.push(recorded(`code${i}`, code(i), T0 + i * MINUTE))
    }
    const sim = new Simulation(...events)
    sim.settle()
    const rungs = (prefix: string) => Array.from({ length: 6 }, (_, i) => sim.rungOf(`${prefix}${i}`))
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0)
    expect(sim.view.usage).toBeLessThanOrEqual(0.8 * 250)
    expect(sum(rungs("hotel"))).toBeGreaterThan(sum(rungs("code")))

    // The same entries under the other task: now the code notes give way first.
    const other = new Simulation(
      ...events.map((e) => (e._tag === "FocusChanged" ? focusChanged("book the paris hotel room", T0) : e)),
    )
    other.settle()
    const otherRungs = (prefix: string) => Array.from({ length: 6 }, (_, i) => other.rungOf(`${prefix}${i}`))
    expect(sum(otherRungs("code"))).toBeGreaterThan(sum(otherRungs("hotel")))
  })

  it("pressure alone brings working back under τ, and every pressure move says so", () => {
    const events: MemoryEvent[] = [registered({ role: "custom", budget: 150, fade: { tau: 0.5 } })]
    for (let i = 0; i < 30; i++)
      events.push(recorded(`e${i}`, `Entry ${i}. It has two sentences of some length to fade.`, T0 + i * 1_000))
    const sim = new Simulation(...events)
    sim.settle()
    expect(sim.view.usage).toBeLessThanOrEqual(0.5 * 150)
    const pressure = sim.moves.filter((m) => m.score.trigger === "pressure")
    expect(pressure.length).toBeGreaterThan(0)
    expect(pressure.every((m) => m.score.tau === 0.5 && m.score.parts.pressure > 0)).toBe(true)
  })

  it("never fades a transient cue or an entry cited in the open step", () => {
    const events: MemoryEvent[] = [registered({ role: "custom", budget: 100 })]
    for (let i = 0; i < 10; i++)
      events.push(recorded(`e${i}`, `Entry number ${i} with several words in it.`, T0 + i * 1_000))
    events.push(stepStarted("s", T0 + 20_000), referenced("s", ["e0"], T0 + 20_000))
    const moves = planFade(new Simulation(...events).view, config)
    expect(moves.length).toBeGreaterThan(0)
    expect(moves.some((m) => m.entryId === "e0")).toBe(false)
  })
})
