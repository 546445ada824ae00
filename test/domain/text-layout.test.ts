import { describe, expect, it } from "vitest"
import { focusTerms, recalledKeyPoints, tokenCountsOf } from "../../domain/key-points.ts"
import { locatedTerms, terms } from "../../domain/terms.ts"
import { forEachUnit, layoutOf, type TextLayout, termsKnown } from "../../domain/text-layout.ts"

const rangesOf = (layout: TextLayout) => {
  const out: Array<{ start: number; end: number; termFrom: number; termTo: number }> = []
  forEachUnit(layout, (start, end, termFrom, termTo) => out.push({ start, end, termFrom, termTo }))
  return out
}

const unitsOf = (text: string, layout: TextLayout): string[] =>
  rangesOf(layout).map(({ start, end }) => text.slice(start, end))

/** Texts whose units meet at marks, quotes, numbers, apostrophes and letters whose case is context-dependent. */
const AWKWARD = [
  "  Ana: The flat on Rua Augusta is 84 m². It's Sam’s, not mine!  Ask him?\n",
  "Dr. Ruiz: Take 2.5 mg at 8:30. Don't skip it… Call if the rash (it's red) spreads.",
  "ΤΟ ΣΠΙΤΙ ΤΟΥ ΚΩΣΤΑΣ? Ναι, ΟΔΟΣ ΕΡΜΟΥ. Μετά ΤΕΛΟΣ.",
  "We met at the café—then walked on; the bakery, sadly, was shut, and it rained",
  'He said "no." She said "yes!" Then: silence. See https://example.org/a?b=c. Done.',
  "Line one without a stop\nLine two, also bare\n\nA third. And a fourth.",
]

describe("text layout", () => {
  it("lays a text out by its sentences after the speaker, each trimmed", () => {
    const text = "  Ana: First one here.  Second one?\nThird!\n"
    expect(unitsOf(text, layoutOf(text)!)).toEqual(["First one here.", "Second one?", "Third!"])
  })

  it("lays a text of one sentence out by its clauses, without the marks they end with", () => {
    const text = "Bob: We went to Lisbon, stayed by the river; ate well, then flew home."
    expect(unitsOf(text, layoutOf(text)!)).toEqual([
      "We went to Lisbon",
      "stayed by the river",
      "ate well",
      "then flew home.",
    ])
  })

  it("has no layout for a text of one unit, nor for one longer than 65,535 characters", () => {
    expect(layoutOf("Just one short sentence.")).toBeNull()
    expect(layoutOf("Ana: Yes.")).toBeNull()
    // Positions past 65,535 do not fit the layout's code units: such a text is cut from itself.
    expect(layoutOf("One more. ".repeat(7_000))).toBeNull()
  })

  it("lays out a text of thousands of sentences", () => {
    const text = Array.from({ length: 6_000 }, (_, i) => `Go ${i}.`).join(" ")
    const layout = layoutOf(text)!
    expect(rangesOf(layout)).toHaveLength(6_000)
    expect(unitsOf(text, layout).at(-1)).toBe("Go 5999.")
  })

  it("gives each unit the terms of its own text", () => {
    for (const text of AWKWARD) {
      const located = locatedTerms(text)
      const layout = layoutOf(text, located)!
      expect(layout, text).not.toBeNull()
      expect(termsKnown(layout), text).toBe(true)
      for (const { start, end, termFrom, termTo } of rangesOf(layout)) {
        const unit = text.slice(start, end)
        expect(located.terms.slice(termFrom, termTo), `${text} / ${unit}`).toEqual(terms(unit))
      }
    }
  })

  it("keeps no term positions for a text lower-casing lengthens, and cuts it the same", () => {
    const text = "İstanbul was hot in July. The ferry to Kadıköy took twenty minutes. We ate simit on board."
    const layout = layoutOf(text)!
    expect(termsKnown(layout)).toBe(false)
    const focus = focusTerms("How long did the ferry take?")
    const entry = { timestamp: 0, origin: "USER" as const }
    expect(recalledKeyPoints(entry, text, focus, "o200k_base", { layout, terms: locatedTerms(text).terms })).toEqual(
      recalledKeyPoints(entry, text, focus, "o200k_base"),
    )
  })

  it("cuts a text read again for one focus after another as it cuts it afresh, from the counts kept with it", () => {
    const text = Array.from(
      { length: 24 },
      (_, i) => `Entry ${i}: the ${["red", "blue", "green"][i % 3]} van took crate ${i % 5} to dock ${(i * 7) % 11}.`,
    ).join(" ")
    const located = locatedTerms(text)
    const prepared = { layout: layoutOf(text, located)!, terms: located.terms }
    const raw = { content: text }
    const entry = { timestamp: 0, origin: "USER" as const }
    const questions = ["Which van went to dock 3?", "Where did crate 4 go?", "red van", "dock 9 crate 2 green"]
    // With its layout, without it, and with it again: the counts kept follow the units they were taken of.
    for (const withLayout of [true, false, true])
      for (const question of questions) {
        const focus = focusTerms(question)
        const layout = withLayout ? prepared : undefined
        const counts = tokenCountsOf(raw, "o200k_base", layout?.layout)
        expect(recalledKeyPoints(entry, text, focus, "o200k_base", layout, counts), question).toEqual(
          recalledKeyPoints(entry, text, focus, "o200k_base", layout),
        )
      }
  })

  it("cuts a text from a layout made beforehand exactly as from its text alone", () => {
    const long = Array.from(
      { length: 30 },
      (_, i) => `Note ${i}: the ${["red", "blue", "green"][i % 3]} van left depot ${i % 7} at ${8 + (i % 9)}:15.`,
    ).join(" ")
    const focus = focusTerms("When did the blue van leave depot 4?", (t) => (t === "blue" ? 3 : 1))
    for (const text of [...AWKWARD, long]) {
      const located = locatedTerms(text)
      const layout = layoutOf(text, located)!
      for (const origin of ["USER", "INTERNAL"] as const) {
        const entry = { timestamp: 0, origin }
        expect(recalledKeyPoints(entry, text, focus, "o200k_base", { layout, terms: located.terms }), text).toEqual(
          recalledKeyPoints(entry, text, focus, "o200k_base"),
        )
      }
    }
  })
})
