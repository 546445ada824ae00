/** A short scripted session: what a main agent hears, thinks and is told by its advisors. */
import type { Origin } from "../contracts/entry.ts"

export interface ScriptedEntry {
  readonly origin: Origin
  readonly content: string
  readonly emotionalWeight?: number
  readonly tags?: ReadonlyArray<string>
  /** The thread an entry belongs to; an advisor's weight on it covers the thread's earlier entries. */
  readonly correlationId?: string
}

export const demoScript: ReadonlyArray<ScriptedEntry> = [
  { origin: "USER", content: "Hi! I'm planning a week in Lisbon in early June with my partner." },
  { origin: "INTERNAL", content: "Trip planning. Gather dates, budget, and preferences before suggesting anything." },
  { origin: "USER", content: "Our budget is about 2,500 euros for everything except flights." },
  { origin: "ADVISOR", content: "The user sounds excited; keep the tone warm.", tags: ["mood"] },
  { origin: "USER", content: "We love food markets, old neighbourhoods and anything with a view over the river." },
  {
    origin: "INTERNAL",
    content: "Alfama and Mouraria fit 'old neighbourhoods'; Time Out Market and Campo de Ourique for food.",
  },
  {
    origin: "USER",
    content: "My partner uses a wheelchair, so steep streets and stairs are a real problem.",
    correlationId: "accessibility",
    tags: ["constraint"],
  },
  {
    origin: "INTERNAL",
    content:
      "Accessibility overrides the Alfama idea: Lisbon's old quarters are steep. Prefer Baixa or Parque das Nações.",
  },
  {
    origin: "ADVISOR",
    content: "That constraint matters a lot to the user; do not lose it.",
    correlationId: "accessibility",
    emotionalWeight: 0.9,
    tags: ["mood"],
  },
  { origin: "USER", content: "We'd also like one day trip, maybe Sintra or Cascais." },
  {
    origin: "INTERNAL",
    content: "Sintra's palaces involve hills; Cascais has a flat seafront promenade. Lean to Cascais.",
  },
  {
    origin: "SYSTEM",
    content: "Tool result: 12 accessible hotels found in Baixa and Parque das Nações under 180 EUR/night.",
  },
  { origin: "USER", content: "Can you shortlist three hotels with step-free access?" },
  {
    origin: "INTERNAL",
    content: "Filter the 12 by step-free entrance and roll-in shower, then rank by price and view.",
  },
  { origin: "SYSTEM", content: "Tool result: 4 hotels have roll-in showers; 3 of them have river views." },
  { origin: "USER", content: "Great, and please remind me what we said about the day trip." },
]

/** The demo's closing step: its focus, and the facts its context must hold to answer it. */
export const demoQuestion = {
  focus: { task: "plan the Lisbon trip", query: "what did we say about the day trip?" },
  answer: ["Sintra", "Cascais"],
  /** What the advisor said must not be lost, whatever the focus. */
  kept: "My partner uses a wheelchair",
} as const
