/**
 * Which recalled hits come back as cues, and in which form, within the room
 * a step's cues may fill: best first, the raw text while it fits (a raw cue
 * that carries key points costs only its key points, since the builder falls
 * back to them when room runs short), else the key points, else the summary.
 * Pure: sizes are known without reading anything, so the service fetches
 * only the raw texts of what was planned.
 */
import type { Encoding } from "../contracts/agent.ts"
import type { EventOf } from "../contracts/events.ts"
import { type FocusTerms, RECALLED_KEY_POINTS_CAP, recalledKeyPoints, tokenCountsOf } from "./key-points.ts"
import type { Renderable } from "./render.ts"
import type { PreparedText } from "./text-layout.ts"

export interface CueSizes {
  readonly rawTokens: number
  /** The key points held for the entry (made at fading), with their block tokens. */
  readonly keyPoints?: { readonly text: string; readonly tokens: number } | undefined
  readonly summaryTokens: number
}

export interface PlannedCueForm<H> {
  readonly hit: H
  readonly form: "raw" | "keyPoints" | "summary"
  readonly keyPoints?: { readonly text: string; readonly tokens: number }
}

/** Tokens an extract's block adds to its sentences: the speaker, the "…" marks, the newline. */
const EXTRACT_OVERHEAD = 8

export const planCueForms = <H>(
  hits: ReadonlyArray<H>,
  room: number,
  sizesOf: (hit: H) => CueSizes,
): Array<PlannedCueForm<H>> => {
  const planned: Array<PlannedCueForm<H>> = []
  for (const hit of hits) {
    if (room <= 0) break
    const { rawTokens, keyPoints, summaryTokens } = sizesOf(hit)
    // Shown short, a raw cue costs its extract for the focus: at most the cap, and never more than its key points.
    const rawCost = keyPoints ? Math.min(keyPoints.tokens, RECALLED_KEY_POINTS_CAP + EXTRACT_OVERHEAD) : rawTokens
    if (rawCost <= room) {
      planned.push({ hit, form: "raw", ...(keyPoints ? { keyPoints } : {}) })
      room -= rawCost
    } else if (keyPoints && keyPoints.tokens <= room) {
      planned.push({ hit, form: "keyPoints", keyPoints })
      room -= keyPoints.tokens
    } else if (summaryTokens <= room) {
      planned.push({ hit, form: "summary" })
      room -= summaryTokens
    }
  }
  return planned
}

type Recalled = EventOf<"CueRehydrated">["recalled"]

/** The metadata a recalled entry carries back, from whatever holds it (a working entry, a record, the substrate). */
export const recalledMeta = (m: {
  readonly timestamp: number
  readonly origin: Recalled["origin"]
  readonly tags: ReadonlyArray<string>
  readonly moodSnapshot: Recalled["moodSnapshot"]
  readonly emotionalWeight: number
}) => ({
  timestamp: m.timestamp,
  origin: m.origin,
  tags: [...m.tags],
  moodSnapshot: m.moodSnapshot,
  emotionalWeight: m.emotionalWeight,
})

/**
 * A raw cue by its sizes alone, before its text is read: what a build needs to choose among cues (their
 * ranks come from the recall's similarities, their forms from token counts). Shown short, it is taken to
 * cost what planCueForms counts for it: its extract at the most, or the key points made at fading when
 * smaller. It is never recorded: a recall reads and extracts only the cues a build would serve this way.
 */
export const sizedRawCue = (
  meta: Renderable & Omit<Recalled, "form" | "text" | "tokens" | "keyPoints">,
  rawTokens: number,
  fadingKeyPoints: { readonly tokens: number } | undefined,
): Recalled => {
  const extract = RECALLED_KEY_POINTS_CAP + EXTRACT_OVERHEAD
  const shortTokens = fadingKeyPoints
    ? Math.min(fadingKeyPoints.tokens, extract)
    : rawTokens > extract
      ? extract
      : undefined
  return {
    ...recalledMeta(meta),
    form: "raw",
    text: "",
    tokens: rawTokens,
    ...(shortTokens !== undefined ? { keyPoints: { text: "", tokens: shortTokens } } : {}),
  } as Recalled
}

/**
 * A cue recalled with its raw text: shown whole while the builder has room,
 * else by its extract for the step's focus (`focus`: the focus's weighed
 * lexical terms), else by the key points made at fading. `prepared`: the raw
 * text's layout and terms, when the caller holds them (text-layout.ts).
 */
export const rawCue = (
  meta: Renderable & Omit<Recalled, "form" | "text" | "tokens" | "keyPoints">,
  raw: { readonly content: string; readonly tokens: number },
  fadingKeyPoints: { readonly text: string; readonly tokens: number } | undefined,
  focus: FocusTerms,
  encoding: Encoding,
  prepared?: PreparedText,
): Recalled => {
  // The raw text is read again for other focuses: what was counted of it is kept with it.
  const counts = tokenCountsOf(raw, encoding, prepared?.layout)
  const shown = recalledKeyPoints(meta, raw.content, focus, encoding, prepared, counts) ?? fadingKeyPoints
  return {
    ...recalledMeta(meta),
    form: "raw",
    text: raw.content,
    tokens: raw.tokens,
    ...(shown ? { keyPoints: shown } : {}),
  } as Recalled
}
