/**
 * Sealed content: what an event carries of an agent's content (raw text, key points, summaries,
 * embeddings, a focus) is stored encrypted, each field replaced by `{ "$sealed": "<base64>" }`.
 * An entry's event is sealed with the entry's key; an agent's focus with the agent's. Which fields
 * are content is declared here, once; the encryption itself is services/platform/keys/.
 *
 * A log written before sealing holds plain fields: they decode as they are.
 */
import type { MemoryEventTag } from "./events.ts"
import type { StoredJson } from "./upcasters.ts"

export interface SealedValue {
  readonly $sealed: string
}

export const isSealed = (value: unknown): value is SealedValue =>
  typeof value === "object" &&
  value !== null &&
  !Array.isArray(value) &&
  typeof (value as { $sealed?: unknown }).$sealed === "string"

/** A field path inside an event, e.g. ["recalled", "keyPoints", "text"]. */
export type FieldPath = ReadonlyArray<string>

const RECALLED: ReadonlyArray<FieldPath> = [
  ["recalled", "text"],
  ["recalled", "keyPoints", "text"],
]
const FOCUS: ReadonlyArray<FieldPath> = [
  ["focus", "task"],
  ["focus", "subgoal"],
  ["focus", "query"],
]

/** The content fields of each event type, at its current version; a path absent or null in an event is skipped. */
export const CONTENT_FIELDS: { readonly [T in MemoryEventTag]?: ReadonlyArray<FieldPath> } = {
  EntryRecorded: [["content"]],
  RungChanged: [["text"]],
  EntryDemoted: [
    ["embedding", "vector"],
    ["entry", "keyPoints", "text"],
    ["entry", "summary", "text"],
  ],
  CueRehydrated: RECALLED,
  CuePromoted: RECALLED,
  StepStarted: FOCUS,
  FocusChanged: FOCUS,
}

/**
 * Content inside the items of an array, each item sealed under the key of its own entry (`entryId`): one
 * event that carries several entries' content, such as a recall's cues.
 */
export interface ItemContent {
  /** The array field holding the items. */
  readonly array: string
  /** The content fields of one item, inside it. */
  readonly paths: ReadonlyArray<FieldPath>
}

export const ITEM_CONTENT: { readonly [T in MemoryEventTag]?: ItemContent } = {
  CuesRehydrated: { array: "cues", paths: RECALLED },
}

/** The tag a stored record of per-item content carries, as it appears in the record's bytes. */
export const ITEM_CONTENT_MARKS: ReadonlyArray<string> = Object.keys(ITEM_CONTENT).map((tag) => `"_tag":"${tag}"`)

/** Whose key seals an event's content: the entry's, when the event concerns one, else the agent's. */
export interface ContentKeyRef {
  readonly agentId: string
  readonly entryId: string | null
}

/** The authenticated data of one sealed field: a sealed value opens only in its own event's field. */
export const sealedFieldLabel = (ref: ContentKeyRef, path: FieldPath): string =>
  `${ref.agentId}/${ref.entryId ?? ""}/${path.join(".")}`

const fieldsOf = (json: StoredJson): ReadonlyArray<FieldPath> | undefined =>
  typeof json._tag === "string" ? CONTENT_FIELDS[json._tag as MemoryEventTag] : undefined

const at = (json: StoredJson, path: FieldPath): unknown => {
  let value: unknown = json
  for (const key of path) {
    if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined
    value = (value as StoredJson)[key]
  }
  return value
}

const withValue = (json: StoredJson, path: FieldPath, value: unknown): StoredJson => {
  const [head, ...rest] = path as [string, ...string[]]
  return { ...json, [head]: rest.length === 0 ? value : withValue(json[head] as StoredJson, rest, value) }
}

/** The key a stored event's sealed fields need (null: none of its fields is sealed, or its items have keys of their own). */
export const sealedKeyOf = (json: StoredJson): ContentKeyRef | null => {
  const fields = fieldsOf(json)
  if (fields === undefined || !fields.some((path) => isSealed(at(json, path)))) return null
  return { agentId: String(json.agentId), entryId: typeof json.entryId === "string" ? json.entryId : null }
}

const itemContentOf = (json: StoredJson): ItemContent | undefined =>
  typeof json._tag === "string" ? ITEM_CONTENT[json._tag as MemoryEventTag] : undefined

const isObject = (value: unknown): value is StoredJson =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The key an item of `json` is sealed under: its entry's. */
const itemRef = (json: StoredJson, item: StoredJson): ContentKeyRef => ({
  agentId: String(json.agentId),
  entryId: typeof item.entryId === "string" ? item.entryId : "",
})

/** The items of an event with per-item content, each with the key it is sealed under (none: not such an event). */
export const contentItems = (
  json: StoredJson,
): ReadonlyArray<{ readonly item: StoredJson; readonly ref: ContentKeyRef }> | undefined => {
  const content = itemContentOf(json)
  if (content === undefined) return undefined
  const items = json[content.array]
  if (!Array.isArray(items)) return []
  return items.filter(isObject).map((item) => ({ item, ref: itemRef(json, item) }))
}

/** Every key a stored event's sealed content needs: its own, or each of its items' (empty: nothing is sealed). */
export const sealedKeysOf = (json: StoredJson): ReadonlyArray<ContentKeyRef> => {
  const items = contentItems(json)
  if (items === undefined) {
    const ref = sealedKeyOf(json)
    return ref === null ? [] : [ref]
  }
  const paths = itemContentOf(json)!.paths
  return items.filter(({ item }) => hasSealedField(item, paths)).map(({ ref }) => ref)
}

/** Whether any of `paths` in `json` holds a sealed value. */
export const hasSealedField = (json: StoredJson, paths: ReadonlyArray<FieldPath>): boolean =>
  paths.some((path) => isSealed(at(json, path)))

/** The authenticated data of one sealed field of an item: it opens only in an item of its own entry, in that field. */
export const sealedItemFieldLabel = (json: StoredJson, ref: ContentKeyRef, path: FieldPath): string =>
  sealedFieldLabel(ref, [itemContentOf(json)!.array, ...path])

/**
 * Replaces the items of an event with per-item content by what `change` gives for each (with its key): an item,
 * null to leave the item out, or a string to fail with that reason. Returns `json` itself when nothing changed.
 */
export const mapItems = (
  json: StoredJson,
  change: (item: StoredJson, ref: ContentKeyRef, paths: ReadonlyArray<FieldPath>) => StoredJson | null | string,
): { readonly ok: true; readonly json: StoredJson } | { readonly ok: false; readonly reason: string } => {
  const content = itemContentOf(json)
  const items = content === undefined ? undefined : json[content.array]
  if (content === undefined || !Array.isArray(items)) return { ok: true, json }
  const changed: unknown[] = []
  let same = true
  for (const [index, item] of items.entries()) {
    // An item that is not an object is left for the schema to refuse.
    if (!isObject(item)) {
      changed.push(item)
      continue
    }
    const next = change(item, itemRef(json, item), content.paths)
    if (typeof next === "string") return { ok: false, reason: `${content.array}.${index}.${next}` }
    if (next !== item) same = false
    if (next !== null) changed.push(next)
  }
  return same ? { ok: true, json } : { ok: true, json: { ...json, [content.array]: changed } }
}

/** One item's content fields replaced as `mapContent` does an event's (paths inside the item). */
export const mapItemContent = (
  item: StoredJson,
  paths: ReadonlyArray<FieldPath>,
  change: (value: unknown, path: FieldPath) => { readonly value: unknown } | string,
): { readonly ok: true; readonly json: StoredJson } | { readonly ok: false; readonly reason: string } => {
  let result = item
  for (const path of paths) {
    const value = at(result, path)
    if (value === undefined || value === null) continue
    const changed = change(value, path)
    if (typeof changed === "string") return { ok: false, reason: `${path.join(".")}: ${changed}` }
    if (changed.value !== value) result = withValue(result, path, changed.value)
  }
  return { ok: true, json: result }
}

/**
 * Replaces each content field of `json` by what `change` gives for it (with its path); `change` returns
 * the value itself to leave it, or a string to fail with that reason. Returns `json` itself when nothing
 * changed.
 */
export const mapContent = (
  json: StoredJson,
  change: (value: unknown, path: FieldPath) => { readonly value: unknown } | string,
): { readonly ok: true; readonly json: StoredJson } | { readonly ok: false; readonly reason: string } => {
  const fields = fieldsOf(json)
  return fields === undefined ? { ok: true, json } : mapItemContent(json, fields, change)
}

/**
 * The key a sealed event stored on `subject` needs, read off the subject: an entry's events are on its
 * subject (`wm.evt.<p>.<agent>.entry.<entry>`, sealed with the entry's key), an agent's focus on its step
 * subject (sealed with the agent's). Null for a subject of another shape.
 */
export const contentKeyRefOfSubject = (subject: string): ContentKeyRef | null => {
  const tokens = subject.split(".")
  const agentId = tokens[3]
  if (agentId === undefined || tokens[0] !== "wm" || tokens[1] !== "evt") return null
  if (tokens[4] === "entry" && tokens[5] !== undefined) return { agentId, entryId: tokens[5] }
  return tokens[4] === "step" ? { agentId, entryId: null } : null
}
