import { HashMap } from "effect"
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { fullSupervisorView } from "../../bench/support/full-view.ts"
import type { AgentView } from "../../domain/agent-view.ts"
import { contextOfView } from "../../domain/context-builder.ts"
import { dateLineTokens, lineTokens, renderDateLine } from "../../domain/render.ts"

/** The same view with every entry a new object: nothing remembered of the originals applies to it. */
const withFreshEntries = (view: AgentView): AgentView => ({
  ...view,
  entries: HashMap.map(view.entries, (entry) => ({ ...entry, tokens: { ...entry.tokens } })),
  cues: HashMap.map(view.cues, (entry) => ({ ...entry, tokens: { ...entry.tokens } })),
})

describe("context build with remembered entry forms, terms and blocks", () => {
  it("builds the same context from a view it has built before as from the same entries met for the first time", () => {
    const view = fullSupervisorView()
    const first = contextOfView(view)
    const again = contextOfView(view)
    const fresh = contextOfView(withFreshEntries(view))
    expect(again).toEqual(first)
    expect(fresh).toEqual(first)
    for (const order of ["timestamp", "priority"] as const) {
      for (const limit of [500, 3000, 8000]) {
        expect(contextOfView(view, { order, limit })).toEqual(contextOfView(withFreshEntries(view), { order, limit }))
      }
    }
  })

  it("counts a date line by its day exactly as the line itself counts", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: Date.UTC(2100, 0, 1) }), (t) => {
        expect(dateLineTokens(t, "o200k_base")).toBe(lineTokens(renderDateLine(t), "o200k_base"))
        expect(dateLineTokens(t, "cl100k_base")).toBe(lineTokens(renderDateLine(t), "cl100k_base"))
      }),
      { numRuns: 300 },
    )
  })
})
