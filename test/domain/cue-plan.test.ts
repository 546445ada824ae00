import { describe, expect, it } from "vitest"
import { planCueForms, sizedRawCue } from "../../domain/cue-plan.ts"
import { RECALLED_KEY_POINTS_CAP } from "../../domain/key-points.ts"

describe("cue planning", () => {
  const hit = (id: string, rawTokens: number, keyPointsTokens?: number) => ({
    id,
    sizes: {
      rawTokens,
      keyPoints: keyPointsTokens === undefined ? undefined : { text: `${id} …`, tokens: keyPointsTokens },
      summaryTokens: 10,
    },
  })

  it("takes the best hits first, raw while the room pays for what the builder may show of them", () => {
    const hits = [hit("a", 20), hit("b", 30), hit("c", 50)]
    const planned = planCueForms(hits, 60, (h) => h.sizes)
    expect(planned.map((p) => [p.hit.id, p.form])).toEqual([
      ["a", "raw"],
      ["b", "raw"],
      ["c", "summary"],
    ])
  })

  it("counts a long entry at its extract for the focus, not at its fading key points", () => {
    // Five long replies whose fading key points are 300 tokens each: their extracts are capped.
    const hits = Array.from({ length: 5 }, (_, i) => hit(`r${i}`, 600, 300))
    const planned = planCueForms(hits, 5 * (RECALLED_KEY_POINTS_CAP + 8), (h) => h.sizes)
    expect(planned.map((p) => p.form)).toEqual(["raw", "raw", "raw", "raw", "raw"])
    expect(planned[0]!.keyPoints!.tokens).toBe(300)
  })

  it("stops once the room is spent", () => {
    expect(planCueForms([hit("a", 20)], 0, (h) => h.sizes)).toEqual([])
  })
})

describe("a cue by its sizes, before its text is read", () => {
  const meta = { timestamp: 1, origin: "USER" as const, tags: [], moodSnapshot: null, emotionalWeight: 0 }
  const extract = RECALLED_KEY_POINTS_CAP + 8

  it("costs its raw tokens whole and, shown short, what its plan counted: its extract at most", () => {
    const long = sizedRawCue(meta, 600, undefined)
    expect(long).toMatchObject({ form: "raw", tokens: 600, text: "" })
    expect(long.keyPoints?.tokens).toBe(extract)
  })

  it("falls back to the key points made at fading when they are smaller than an extract", () => {
    expect(sizedRawCue(meta, 600, { tokens: 12 }).keyPoints?.tokens).toBe(12)
    expect(sizedRawCue(meta, 600, { tokens: 300 }).keyPoints?.tokens).toBe(extract)
  })

  it("has no short form when its text is no longer than an extract", () => {
    expect(sizedRawCue(meta, extract, undefined).keyPoints).toBeUndefined()
  })
})
