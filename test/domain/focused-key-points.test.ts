import { describe, expect, it } from "vitest"
import {
  extractKeyPoints,
  focusedKeyPoints,
  focusTerms,
  RECALLED_KEY_POINTS_CAP,
  RECALLED_KEY_POINTS_SHARE,
  recalledKeyPoints,
} from "../../domain/key-points.ts"
import { blockTokens } from "../../domain/render.ts"
import { countTokens } from "../../domain/tokens.ts"

const ENCODING = "o200k_base" as const
const focusOf = (question: string) => focusTerms(question)

/** A long turn whose answer sits in a sentence that is not the turn's most "central" one. */
const TURN =
  "John: Yep, let's keep making great memories with our loved ones and cherishing the time we have together. " +
  "Family is what keeps me going when work gets heavy and the days are long. " +
  "I'm off to do some taekwondo at the gym tonight!"

describe("key points for a focus", () => {
  it("keep the sentence that bears on the focus, which the unfocused key points cut", () => {
    const unfocused = extractKeyPoints(TURN, RECALLED_KEY_POINTS_SHARE, ENCODING)
    const focused = focusedKeyPoints(
      TURN,
      focusOf("Where does John do taekwondo?"),
      RECALLED_KEY_POINTS_SHARE,
      ENCODING,
    )
    expect(unfocused).not.toContain("taekwondo")
    expect(focused).toContain("I'm off to do some taekwondo at the gym tonight!")
    // Still an extract: the speaker kept, the cut marked, and smaller than the text.
    expect(focused.startsWith("John: …")).toBe(true)
    expect(countTokens(focused, ENCODING)).toBeLessThan(countTokens(TURN, ENCODING))
  })

  it("are the text's own key points when the focus matches nothing in it", () => {
    const share = RECALLED_KEY_POINTS_SHARE
    expect(focusedKeyPoints(TURN, focusOf("What is the capital of Peru?"), share, ENCODING)).toBe(
      extractKeyPoints(TURN, share, ENCODING),
    )
  })

  it("prefer the sentence holding more of the focus's words", () => {
    const text =
      "Maria: The shelter needs volunteers this weekend. The fundraiser at the shelter will have a chili cook-off. Call me later."
    const kept = focusedKeyPoints(text, focusOf("What events will the shelter fundraiser have?"), 0.4, ENCODING)
    expect(kept).toContain("The fundraiser at the shelter will have a chili cook-off.")
    expect(kept).not.toContain("needs volunteers")
  })

  it("a recalled entry carries them with the token count of their block, or nothing when they are not smaller", () => {
    const entry = { timestamp: Date.UTC(2023, 4, 8), origin: "USER" as const }
    const carried = recalledKeyPoints(entry, TURN, focusOf("taekwondo"), ENCODING)
    expect(carried).not.toBeNull()
    expect(carried!.tokens).toBe(blockTokens(entry, "keyPoints", carried!.text, ENCODING))
    expect(recalledKeyPoints(entry, "Caroline: Thanks!", focusOf("taekwondo"), ENCODING)).toBeNull()
  })
})

describe("a long recalled entry", () => {
  /** An assistant's long reply: many sentences, one of which answers the question. */
  const REPLY = `Assistant: ${Array.from(
    { length: 30 },
    (_, i) => `Option ${i + 1} is a pleasant place to spend an afternoon with friends and family.`,
  ).join(" ")} The museum on Rua Augusta has a step-free entrance and a lift to every floor. ${Array.from(
    { length: 10 },
    (_, i) => `Tip ${i + 1}: book ahead in the summer months when queues are long.`,
  ).join(" ")}`

  it("is shown by the passage that bears on the focus, at most RECALLED_KEY_POINTS_CAP tokens of it", () => {
    const entry = { timestamp: Date.UTC(2023, 4, 8), origin: "USER" as const }
    const shown = recalledKeyPoints(entry, REPLY, focusOf("Which museum has a step-free entrance?"), ENCODING)!
    expect(shown.text).toContain("The museum on Rua Augusta has a step-free entrance and a lift to every floor.")
    // A third of the reply would be well over a hundred tokens; the extract is the sentence, the speaker and the marks.
    const third = Math.floor(countTokens(REPLY, ENCODING) * RECALLED_KEY_POINTS_SHARE)
    expect(third).toBeGreaterThan(4 * RECALLED_KEY_POINTS_CAP)
    expect(shown.tokens).toBeLessThanOrEqual(RECALLED_KEY_POINTS_CAP + 8)
    expect(shown.text.startsWith("Assistant: …")).toBe(true)
  })

  it("keeps one whole sentence even when that sentence alone is over the cap", () => {
    const long = `Bob: ${"word ".repeat(80).trim()} about taekwondo. Short one.`
    const kept = focusedKeyPoints(long, focusOf("taekwondo"), RECALLED_KEY_POINTS_SHARE, ENCODING, 32)
    expect(kept).toContain("about taekwondo.")
  })
})

describe("the units an extract is cut from", () => {
  const entry = { timestamp: Date.UTC(2023, 4, 8), origin: "USER" as const }

  it("end at a line break (a list item is a unit of its own), so the item is kept without its paragraph", () => {
    const reply = [
      "Assistant: The temple is filled with undead warriors and constructs guarding its treasures, and every hall holds a trap that must be disarmed before moving on",
      "",
      "Here are the stat blocks for the enemies",
      "* Mummies (4):",
      "\t+ Armor Class: 11",
      "\t+ Hit Points: 45 (6d8 + 18)",
      "* Constructs (2):",
      "\t+ Armor Class: 17",
      "\t+ Hit Points: 60 (8d10 + 16)",
      "",
      "The treasure of the temple includes a ring of protection, a cloak of elvenkind and a bag of holding to keep once the final battle is won",
    ].join("\n")
    const shown = recalledKeyPoints(entry, reply, focusOf("How many mummies will the party face?"), ENCODING)!
    expect(shown.text).toContain("Mummies (4)")
    expect(shown.tokens).toBeLessThanOrEqual(RECALLED_KEY_POINTS_CAP + 8)
  })

  it("keep the sentence holding the rest of the focus over a second one naming what the first already named", () => {
    const text =
      "Ana: The lost temple lies in the desert. Everyone says the lost temple is haunted at night. Four mummies guard it."
    const kept = focusedKeyPoints(text, focusOf("Who guards the lost temple at night? Mummies?"), 0.8, ENCODING)
    expect(kept).toContain("Four mummies guard it.")
  })

  it("weigh the focus's terms: a sentence with the rare word the question is about outweighs one with two common ones", () => {
    const text =
      "Sam: We talked about the party and what everyone will wear to it on the weekend after the exams. " +
      "The caterer said the smoker arrives Tuesday."
    const question = "When does the smoker arrive for the party weekend?"
    const rare = new Set(["smoker"])
    const weighed = focusTerms(question, (t) => (rare.has(t) ? 5 : 1))
    expect(focusedKeyPoints(text, weighed, 0.4, ENCODING)).toContain("The caterer said the smoker arrives Tuesday.")
    expect(focusedKeyPoints(text, focusTerms(question), 0.4, ENCODING)).not.toContain("smoker")
  })
})
