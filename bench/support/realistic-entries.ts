/**
 * Deterministic, realistic working entries: what a supervisor agent hears
 * from users, thinks, is told by its advisors and gets back from tools,
 * with lengths that vary the way conversation turns do. Used where a
 * benchmark needs text that tokenises like real content (the synthetic log's
 * small vocabulary does not).
 */
import type { Origin } from "../../contracts/entry.ts"

const USER = [
  "Can you pull together the quarterly numbers for the Lisbon office before Thursday's review?",
  "I still haven't heard back from the vendor about the revised delivery schedule.",
  "Let's keep the budget under 40,000 euros; finance was very clear about that last week.",
  "My manager wants a one-page summary, not the full deck, so keep it short.",
  "The client asked whether we can move the launch to the second week of September.",
  "Please double-check the figures in table 3, they don't match what Maria sent on Monday.",
  "We also need to book a meeting room for twelve people with a projector.",
  "I'm worried the integration tests will not be green in time for the release.",
  "Could you draft a polite reply declining the conference invitation?",
  "Remember that Tom is on leave from the 14th to the 28th.",
  "What did we decide about the pricing tiers for the enterprise plan?",
  "The hotel in Porto cancelled our reservation, so we need an alternative near the station.",
  "Honestly this week has been exhausting and I'd like fewer meetings next week.",
  "Send me the list of open issues ranked by how many customers they affect.",
]

const THOUGHT = [
  "The user cares most about the deadline; accuracy of the numbers comes second.",
  "Table 3 probably uses the old exchange rate; recompute with the rate from the finance sheet.",
  "A September launch collides with the vendor's delivery window, so flag the dependency first.",
  "Summarise the review in five bullets: revenue, costs, headcount, risks, next steps.",
  "Tom's leave overlaps the release; someone else must own the deployment checklist.",
  "The enterprise tiers were agreed in the June call: three tiers, annual billing only.",
  "Declining politely: thank them, cite the schedule conflict, offer a recorded talk instead.",
  "Fewer meetings: propose merging the two stand-ups and moving the design review to async comments.",
  "Rank issues by affected customers, then by severity, and cut the list at twenty.",
  "Check whether the budget limit includes travel; last quarter it did not.",
]

const ADVISOR = [
  "The user sounds stressed; keep replies short and concrete.",
  "Tone check: the user was frustrated by the vendor, avoid defending them.",
  "The user appreciated the bullet-point summary last time; reuse that format.",
  "Mood is improving after the release news; a brief congratulation would land well.",
  "The user repeated the budget limit twice, treat it as a hard constraint.",
]

const SYSTEM = [
  "Tool result: 7 meeting rooms available on Thursday; 2 seat twelve people and have a projector.",
  "Tool result: quarterly revenue 1.84M EUR (+6.2% QoQ), operating costs 1.31M EUR, headcount 41.",
  "Tool result: 23 open issues; the top 5 affect 412, 288, 153, 97 and 64 customers respectively.",
  "Tool result: vendor portal shows delivery rescheduled to 2 September, status 'confirmed by carrier'.",
  "Tool result: 4 hotels within 500 m of Porto São Bento have rooms for the dates, 95 to 160 EUR per night.",
  "Tool result: exchange rate used in table 3 is 1.0712; the finance sheet uses 1.0845 for the quarter.",
  "Tool result: calendar has 19 meetings next week totalling 14.5 hours, 6 of them recurring stand-ups.",
  "Tool result: CI pipeline for release/2.4 — 1,284 tests, 1,271 passed, 9 failed, 4 skipped.",
]

const POOLS: ReadonlyArray<{ origin: Origin; sentences: ReadonlyArray<string>; min: number; max: number }> = [
  { origin: "USER", sentences: USER, min: 1, max: 4 },
  { origin: "INTERNAL", sentences: THOUGHT, min: 1, max: 3 },
  { origin: "USER", sentences: USER, min: 1, max: 3 },
  { origin: "ADVISOR", sentences: ADVISOR, min: 1, max: 2 },
  { origin: "INTERNAL", sentences: THOUGHT, min: 1, max: 4 },
  { origin: "SYSTEM", sentences: SYSTEM, min: 2, max: 5 },
]

export interface RealisticEntry {
  readonly origin: Origin
  readonly content: string
  readonly emotionalWeight: number
  readonly tags: ReadonlyArray<string>
}

const mix = (x: number): number => {
  let h = (x + 0x9e3779b9) | 0
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b)
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
  return (h ^ (h >>> 16)) >>> 0
}

/** The `i`-th entry of an endless, deterministic conversation. */
export const realisticEntry = (i: number): RealisticEntry => {
  const pool = POOLS[i % POOLS.length]!
  const h = mix(i)
  const count = pool.min + (h % (pool.max - pool.min + 1))
  const parts: string[] = []
  for (let k = 0; k < count; k++) parts.push(pool.sentences[mix(h + k) % pool.sentences.length]!)
  const emotional = pool.origin === "ADVISOR" || h % 11 === 0
  return {
    origin: pool.origin,
    content: parts.join(" "),
    emotionalWeight: emotional ? 0.6 + (h % 4) / 10 : 0,
    tags: pool.origin === "ADVISOR" ? ["mood"] : pool.origin === "SYSTEM" ? ["tool"] : [],
  }
}

/** Extractive key points of an entry: its first sentence. */
export const keyPointsOf = (content: string): string => {
  const end = content.search(/[.?!](\s|$)/)
  return end < 0 ? content : content.slice(0, end + 1)
}

/** A short abstractive-style summary of an entry. */
export const summaryOf = (entry: RealisticEntry): string => {
  const words = keyPointsOf(entry.content).split(/\s+/).slice(0, 8).join(" ")
  return `${entry.origin === "INTERNAL" ? "Considered" : "Noted"}: ${words.replace(/[.?!,;:]+$/, "")}.`
}

const PEOPLE =
  "Maria Tom Aisha Kenji Lucas Priya Omar Sofia Daniel Mei Jonas Fatima Carlos Elena Ivan Chloe Ravi Hannah Mateo Yuki Nadia Pierre Grace Ahmed Lena Diego Zoe Samuel Ingrid Hugo".split(
    " ",
  )
const PLACES =
  "Lisbon Porto Madrid Berlin Oslo Kyoto Toronto Nairobi Lima Dublin Prague Vienna Seoul Austin Denver Lyon Milan Krakow Athens Cairo Sydney Boston Zurich Helsinki".split(
    " ",
  )
const TOPICS = [
  "budget",
  "invoice",
  "contract",
  "release",
  "deadline",
  "hotel booking",
  "flight",
  "onboarding",
  "hiring plan",
  "roadmap",
  "pricing tier",
  "security audit",
  "database migration",
  "customer churn",
  "marketing campaign",
  "quarterly report",
  "design review",
  "test coverage",
  "vendor delivery",
  "office move",
  "team offsite",
  "performance review",
  "API latency",
  "support backlog",
  "translation",
  "legal review",
  "data export",
  "mobile app",
  "payment failure",
  "conference talk",
  "insurance claim",
  "rent increase",
  "doctor appointment",
  "birthday dinner",
  "train tickets",
  "visa application",
  "tax return",
  "kitchen renovation",
  "school enrolment",
  "wedding venue",
]
const VERBS = [
  "asked about",
  "complained about",
  "approved",
  "postponed",
  "cancelled",
  "rescheduled",
  "double-checked",
  "forgot",
  "confirmed",
  "questioned",
  "signed off on",
  "escalated",
]
const TEMPLATES: ReadonlyArray<(w: (list: ReadonlyArray<string>) => string, n: () => number) => string> = [
  (w, n) =>
    `${w(PEOPLE)} ${w(VERBS)} the ${w(TOPICS)} for ${w(PLACES)} and wants an answer within ${(n() % 14) + 1} days.`,
  (w, n) =>
    `The ${w(TOPICS)} in ${w(PLACES)} is ${(n() % 40) + 5}% over plan; ${w(PEOPLE)} suggested moving part of it to the ${w(TOPICS)}.`,
  (w) =>
    `Remember that ${w(PEOPLE)} prefers short updates about the ${w(TOPICS)}, ideally before the ${w(TOPICS)} meeting.`,
  (w, n) =>
    `Tool result: ${(n() % 90) + 3} records match '${w(TOPICS)}' in ${w(PLACES)}, the newest from ${w(PEOPLE)}.`,
  (w) => `I think the ${w(TOPICS)} depends on the ${w(TOPICS)}, so ask ${w(PEOPLE)} before promising anything.`,
  (w, n) =>
    `${w(PEOPLE)} said the ${w(TOPICS)} costs ${(n() % 9000) + 100} euros and the ${w(TOPICS)} another ${(n() % 900) + 50}.`,
  (w) =>
    `We agreed with ${w(PEOPLE)} and ${w(PEOPLE)} to keep the ${w(TOPICS)} in ${w(PLACES)} until the ${w(TOPICS)} is done.`,
  (w) => `The user sounded worried about the ${w(TOPICS)}; mention the ${w(TOPICS)} only if asked.`,
]

/**
 * The `i`-th of an endless set of distinct, realistic memories (names,
 * places, topics, amounts vary), for long-term stores of realistic size.
 */
export const memoryText = (i: number): string => {
  let x = mix(i * 7919 + 17)
  const next = () => (x = mix(x))
  const w = (list: ReadonlyArray<string>) => list[next() % list.length]!
  const sentences = 1 + (next() % 3)
  const parts: string[] = []
  for (let k = 0; k < sentences; k++) parts.push(TEMPLATES[next() % TEMPLATES.length]!(w, next))
  return parts.join(" ")
}

/** The `i`-th of a set of realistic questions about such memories. */
export const memoryQuestion = (i: number): string => {
  let x = mix(i * 104729 + 3)
  const next = () => (x = mix(x))
  const w = (list: ReadonlyArray<string>) => list[next() % list.length]!
  switch (next() % 4) {
    case 0:
      return `What did ${w(PEOPLE)} say about the ${w(TOPICS)}?`
    case 1:
      return `How much over plan is the ${w(TOPICS)} in ${w(PLACES)}?`
    case 2:
      return `Who ${w(VERBS)} the ${w(TOPICS)} for ${w(PLACES)}?`
    default:
      return `${w(TOPICS)} ${w(TOPICS)} ${w(PLACES)}`
  }
}

/**
 * The texts of one step of an agent loop, sized like real ones: a user turn (~40 tokens) asking about
 * something the agent's history holds, a tool output (~300 tokens: records in the history's style) and
 * a thought (~60 tokens).
 */
export const stepTexts = (i: number): { readonly user: string; readonly tool: string; readonly thought: string } => {
  const h = mix(i * 31 + 7)
  const user = `${memoryQuestion(i)} ${USER[h % USER.length]!} ${USER[mix(h) % USER.length]!}`
  const records: string[] = []
  let length = 0
  for (let k = 0; length < 1_250; k++) {
    const line = `${k + 1}. ${memoryText(i * 97 + k + 1_000_003)}`
    records.push(line)
    length += line.length + 1
  }
  const tool = `Tool result: ${records.length} records match the request.\n${records.join("\n")}`
  const thoughts: string[] = []
  for (let k = 0; thoughts.join(" ").length < 280; k++) thoughts.push(THOUGHT[mix(h + k) % THOUGHT.length]!)
  const thought = thoughts.join(" ")
  return { user, tool, thought }
}
