import { describe, expect, it } from "vitest"
import { extractKeyPoints } from "../../domain/key-points.ts"
import { offlineSummary } from "../../domain/offline-summary.ts"
import { blockTokens } from "../../domain/render.ts"
import { countTokens } from "../../domain/tokens.ts"

/** Texts as agents record them: tool results, decisions, dialogue turns. */
const SOURCES = [
  "Tool result: 3 providers cover the Utrecht office. KPN quotes 12 business days for installation, Ziggo 20 and T-Mobile 15; KPN is the cheapest at €42 a month.",
  "The Lease API is old: version 1.2 was deprecated on 3 March 2025 and Acme plans to switch it off in June.",
  "We agreed to move 15% of the Q3 marketing budget to hiring, starting 1 July, as Priya proposed.",
  "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
  "Melanie: Wow, that's really cool! I painted a sunrise last year, back in 2022, after my trip to Sweden with Tom.",
  "Supervisor: the invoice INV-2291 for 1,450.00 EUR from Brightline BV is due on 2025-11-30; ask Jonas before paying.",
  "Jon: Gina and I opened the dance studio on 20 June 2023 in Newark, and 40 students signed up the first week!",
  "Tool result: HTTP 503 from api.example.com after 3 retries (timeout 15 s); last success at 09:42 UTC.",
] as const

/** Numbers (with what is attached to them) and capitalised words that do not just open a sentence. */
const factsOf = (text: string): string[] => {
  const words = text.replace(/^[^:\n]{1,40}:\s+/, "").split(/\s+/)
  const facts: string[] = []
  words.forEach((word, i) => {
    const bare = word.replace(/^[^\p{L}\p{N}]+|[^\p{L}\p{N}]+$/gu, "")
    const opens = i === 0 || /[.!?:]$/.test(words[i - 1]!)
    if (/\p{N}/u.test(bare) || (/^\p{Lu}/u.test(bare) && !opens && bare !== "I")) facts.push(bare)
  })
  return facts
}

describe("offline summary", () => {
  it.each(SOURCES)("keeps every number and name of %s, and is smaller", (source) => {
    const summary = offlineSummary(source, 0.25, "o200k_base")
    expect(countTokens(summary, "o200k_base")).toBeLessThan(countTokens(source, "o200k_base"))
    const said = /names\/numbers dropped\)$/.test(summary)
    for (const fact of factsOf(source)) {
      if (!said) expect(summary, fact).toContain(fact)
    }
  })

  it("keeps who spoke", () => {
    expect(offlineSummary(SOURCES[3], 0.25, "o200k_base")).toMatch(/^Caroline: /)
  })

  it("says how many facts it dropped when a text is too dense in them to shorten", () => {
    const dense = "KPN 12, Ziggo 20, T-Mobile 15, Odido 9, Delta 31, Caiway 44, Freedom 7."
    const summary = offlineSummary(dense, 0.25, "o200k_base")
    expect(countTokens(summary, "o200k_base")).toBeLessThan(countTokens(dense, "o200k_base"))
    expect(summary).toMatch(/\(\d+ names\/numbers dropped\)$/)
  })
})

describe("key points", () => {
  it.each(SOURCES)("never cost more than the text they stand for: %s", (source) => {
    const entry = { timestamp: 0, origin: "USER" as const }
    const keyPoints = extractKeyPoints(source, 0.5, "o200k_base")
    expect(blockTokens(entry, "keyPoints", keyPoints, "o200k_base")).toBeLessThanOrEqual(
      blockTokens(entry, "raw", source, "o200k_base"),
    )
  })

  it("mark what they leave out and keep the speaker", () => {
    const turn =
      "Caroline: I went to a LGBTQ support group yesterday and it was so powerful. The weather was grey. Anyway, how are you doing these days?"
    const keyPoints = extractKeyPoints(turn, 0.5, "o200k_base")
    expect(keyPoints).toMatch(/^Caroline: /)
    expect(keyPoints).toContain("…")
  })

  it("are the text itself for one short sentence", () => {
    expect(extractKeyPoints("Ana: the lease ends in May.", 0.5, "o200k_base")).toBe("Ana: the lease ends in May.")
  })
})
