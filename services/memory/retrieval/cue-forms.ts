/**
 * What a recalled entry carries back, and in which form: the metadata of whatever holds it (a working
 * entry, a long-term record, the substrate), with one representation. A recall's hits take the raw text
 * while the cues' room lasts, else key points, else the summary; a cue being promoted keeps the fullest
 * it holds.
 */
import { Effect } from "effect"
import type { WorkingEntry } from "../../../contracts/entry.ts"
import type { AgentView } from "../../../domain/agent-view.ts"
import type { Recalled } from "../../../domain/cue-decide.ts"
import { planCueForms, rawCue, recalledMeta, sizedRawCue } from "../../../domain/cue-plan.ts"
import type { FocusTerms } from "../../../domain/key-points.ts"
import type { SubstrateReaderShape } from "../../platform/substrate-reader.ts"
import type { LexicalIndex } from "./lexical-index.ts"
import { hitText, type RankedHit } from "./rank.ts"

/** What a cue of the view brings back, as it was rehydrated. */
export const recalledOfCue = (cue: WorkingEntry): Recalled => {
  const base = recalledMeta(cue)
  if (cue.content !== null) {
    const kp =
      cue.keyPoints !== null && cue.tokens.keyPoints !== undefined
        ? { keyPoints: { text: cue.keyPoints, tokens: cue.tokens.keyPoints } }
        : {}
    return { ...base, form: "raw", text: cue.content, tokens: cue.tokens.raw, ...kp }
  }
  if (cue.keyPoints !== null)
    return { ...base, form: "keyPoints", text: cue.keyPoints, tokens: cue.tokens.keyPoints ?? 0 }
  return { ...base, form: "summary", text: cue.summary ?? "", tokens: cue.tokens.summary ?? 0 }
}

/**
 * Chooses each hit's representation while `room` lasts: the raw text
 * (from the substrate) while it fits, else key points, else the summary.
 * Sizes are known without reading anything.
 */
export const planCueSizes = (hits: ReadonlyArray<RankedHit>, room: number) =>
  planCueForms(hits, room, (hit) => ({
    rawTokens: hit.working?.tokens.raw ?? hit.record?.rawTokens ?? Infinity,
    keyPoints:
      hit.working?.keyPoints != null && hit.working.tokens.keyPoints !== undefined
        ? { text: hit.working.keyPoints, tokens: hit.working.tokens.keyPoints }
        : hit.record?.keyPoints != null && hit.record.keyPointsTokens !== null
          ? { text: hit.record.keyPoints, tokens: hit.record.keyPointsTokens }
          : undefined,
    summaryTokens: hit.working?.tokens.summary ?? hit.record?.summaryTokens ?? Infinity,
  }))

export type PlannedCue = ReturnType<typeof planCueSizes>[number]

/** A planned cue by its sizes alone (domain/cue-plan.ts, sizedRawCue): what a build would choose it by. */
export const sizedCue = ({ hit, form, keyPoints }: PlannedCue): Recalled | null => {
  const meta = hit.working ?? hit.record!
  if (form === "raw")
    return sizedRawCue(meta, hit.working?.tokens.raw ?? hit.record?.rawTokens ?? Number.MAX_SAFE_INTEGER, keyPoints)
  return unreadCue(hit, meta, form, keyPoints)
}

/** A cue of key points or a summary: what the hit already holds, nothing to read (null: no text). */
const unreadCue = (
  hit: RankedHit,
  meta: NonNullable<RankedHit["working"] | RankedHit["record"]>,
  form: PlannedCue["form"],
  keyPoints: PlannedCue["keyPoints"],
): Recalled | null => {
  const base = recalledMeta(meta)
  if (keyPoints && form !== "summary") return { ...base, form: "keyPoints", ...keyPoints } as Recalled
  const summary = hitText(hit)
  const tokens = hit.working?.tokens.summary ?? hit.record?.summaryTokens ?? 0
  return summary.text.length > 0 ? ({ ...base, form: summary.form, text: summary.text, tokens } as Recalled) : null
}

/**
 * What the planned cues carry back: raw texts read from the substrate (and extracted for the focus, from the
 * layouts the lexical index keeps where it has them) together.
 */
export const readCues = (
  substrate: SubstrateReaderShape,
  lexical: LexicalIndex,
  view: AgentView,
  planned: ReadonlyArray<PlannedCue>,
  focus: FocusTerms,
) =>
  Effect.forEach(
    planned,
    ({ hit, form, keyPoints }) =>
      Effect.gen(function* () {
        const meta = hit.working ?? hit.record!
        if (form === "raw") {
          const raw = yield* substrate.get(view.config.id, hit.entryId)
          if (raw !== null) {
            const prepared = lexical.preparedText(view.config.id, hit.entryId)
            return { hit, recalled: rawCue(meta, raw, keyPoints, focus, view.config.encoding, prepared) }
          }
        }
        const recalled = unreadCue(hit, meta, form, keyPoints)
        return recalled === null ? null : { hit, recalled }
      }),
    { concurrency: 16 },
  ).pipe(Effect.map((xs) => xs.filter((x) => x !== null)))
