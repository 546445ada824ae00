/**
 * An agent's working view as JSON and back, for snapshots: the persistent
 * maps and sets become sorted arrays of pairs and ids, the seen-id list an
 * array of hashes. `decodeView` throws on anything it does not recognise;
 * the caller treats that as "no snapshot" and rebuilds from the log.
 */
import { HashMap, HashSet } from "effect"
import { type AgentView, type SeenIds, seenGeneration } from "../../../domain/agent-view.ts"
import { fieldReaders } from "./snapshot-fields.ts"

type Json = Record<string, unknown>

const pairs = <V>(map: HashMap.HashMap<string, V>) =>
  [...HashMap.toEntries(map)].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
const ids = (set: HashSet.HashSet<string>) => [...set].sort()

/** The newest hashes newest first, as snapshots have always had them. */
const encodeSeen = (seen: SeenIds) => ({ recent: [...seen.recent].reverse(), older: seen.older.map((g) => [...g]) })

export const encodeView = (view: AgentView): Json => ({
  ...view,
  entries: pairs(view.entries),
  cues: pairs(view.cues),
  cueRelevance: pairs(view.cueRelevance),
  step: view.step && {
    ...view.step,
    referenced: ids(view.step.referenced),
    similarities: view.step.similarities && pairs(view.step.similarities),
    ...(view.step.forgotten !== undefined ? { forgotten: ids(view.step.forgotten) } : {}),
  },
  seen: encodeSeen(view.seen),
})

const { array, number, object } = fieldReaders((field, reason) => `${field}: ${reason}`)
const hashMap = <V>(value: unknown, field: string): HashMap.HashMap<string, V> =>
  HashMap.fromIterable(
    array(value, field).map((pair) => {
      const [k, v] = array(pair, field)
      if (typeof k !== "string") throw new Error(`${field}: a key is not a string`)
      return [k, v as V] as const
    }),
  )
const hashSet = (value: unknown, field: string): HashSet.HashSet<string> =>
  HashSet.fromIterable(
    array(value, field).map((id) => {
      if (typeof id !== "string") throw new Error(`${field}: an id is not a string`)
      return id
    }),
  )

const decodeSeen = (value: unknown): SeenIds => {
  const seen = object(value, "seen")
  const recent = Float64Array.from(array(seen.recent, "seen.recent").map((h) => number(h, "seen.recent"))).reverse()
  const older = array(seen.older, "seen.older").map((g) =>
    seenGeneration(array(g, "seen.older").map((h) => number(h, "seen.older"))),
  )
  return { recent, older }
}

/** The view's numeric fields; typed as keys of AgentView, so a renamed field fails the type-check here. */
const NUMERIC_FIELDS = [
  "budgetInForce",
  "usage",
  "entryCount",
  "clock",
  "configSeq",
  "stepSeq",
  "registeredSeq",
  "lastSeq",
] as const satisfies ReadonlyArray<keyof AgentView>

export const decodeView = (value: unknown): AgentView => {
  const v = object(value, "view")
  object(v.config, "config")
  for (const field of NUMERIC_FIELDS) number(v[field], field)
  const step = v.step === null ? null : object(v.step, "step")
  return {
    ...(v as unknown as AgentView),
    entries: hashMap(v.entries, "entries"),
    cues: hashMap(v.cues, "cues"),
    cueRelevance: hashMap(v.cueRelevance, "cueRelevance"),
    step:
      step === null
        ? null
        : ({
            ...step,
            referenced: hashSet(step.referenced, "step.referenced"),
            similarities: step.similarities === null ? null : hashMap(step.similarities, "step.similarities"),
            ...(step.forgotten !== undefined ? { forgotten: hashSet(step.forgotten, "step.forgotten") } : {}),
          } as unknown as AgentView["step"]),
    seen: decodeSeen(v.seen),
  }
}
