/**
 * Sealing an event's content fields (contracts/sealed.ts) with its data key, and opening them again.
 * A field's value is sealed as its JSON text, labelled with its agent, entry and path. An event whose items
 * each carry an entry's content (a recall's cues) seals each item under its own entry's key.
 */
import { createHash } from "node:crypto"
import type { Unseal } from "../../../contracts/decode.ts"
import { entryIdOf, type MemoryEvent } from "../../../contracts/events.ts"
import {
  CONTENT_FIELDS,
  type ContentKeyRef,
  type FieldPath,
  hasSealedField,
  ITEM_CONTENT,
  isSealed,
  mapContent,
  mapItemContent,
  mapItems,
  sealedFieldLabel,
  sealedItemFieldLabel,
  sealedKeyOf,
} from "../../../contracts/sealed.ts"
import type { StoredJson } from "../../../contracts/upcasters.ts"
import { open, seal } from "./aead.ts"
import { Recent } from "./recent.ts"

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** Whose key seals this event's content; null when it carries none (or its items have keys of their own): an entry's, else (a focus) its agent's. */
export const contentKeyOf = (event: MemoryEvent): ContentKeyRef | null => {
  if (CONTENT_FIELDS[event._tag] === undefined) return null
  if (event._tag === "StepStarted" && event.focus === null) return null
  return { agentId: event.agentId, entryId: entryIdOf(event) }
}

/** True when the event's items are sealed each under its own entry's key (contracts/sealed.ts ITEM_CONTENT). */
export const hasItemContent = (event: MemoryEvent | StoredJson): boolean =>
  ITEM_CONTENT[event._tag as MemoryEvent["_tag"]] !== undefined

const sealValue = (key: Uint8Array, value: unknown, label: string) => ({
  $sealed: seal(key, encoder.encode(JSON.stringify(value)), label),
})

/** The event's JSON with every content field sealed under `key`. */
export const sealEvent = (event: MemoryEvent, ref: ContentKeyRef, key: Uint8Array): StoredJson => {
  const sealed = mapContent(event as unknown as StoredJson, (value, path) => ({
    value: sealValue(key, value, sealedFieldLabel(ref, path)),
  }))
  // mapContent fails only when `change` does.
  return sealed.ok ? sealed.json : (event as unknown as StoredJson)
}

/**
 * The event's JSON with each item's content sealed under its entry's key (`keyOf`); an item whose key is
 * destroyed (null) is left out: its entry is forgotten.
 */
export const sealItems = (event: MemoryEvent, keyOf: (ref: ContentKeyRef) => Uint8Array | null): StoredJson => {
  const json = event as unknown as StoredJson
  const sealed = mapItems(json, (item, ref, paths) => {
    const key = keyOf(ref)
    if (key === null) return null
    const opened = mapItemContent(item, paths, (value, path) => ({
      value: sealValue(key, value, sealedItemFieldLabel(json, ref, path)),
    }))
    return opened.ok ? opened.json : item
  })
  return sealed.ok ? sealed.json : json
}

/**
 * What an opened field is remembered under, beside its label and sealing: a digest of the key's bytes, the same
 * for every copy of the key (loaded again after the cache let it go, or by another key store), never the key
 * itself.
 */
const keyIds = new WeakMap<Buffer, string>()
const keyId = (key: Buffer) => {
  let id = keyIds.get(key)
  if (id === undefined) {
    id = createHash("sha256").update(key).digest("base64").slice(0, 22)
    keyIds.set(key, id)
  }
  return id
}

/**
 * Opens one sealed field, once per process (every projection of a process reads the same record) and key: a
 * key made since under the same name does not find what another opened.
 */
const openField = (key: Buffer, value: unknown, label: string): { readonly value: unknown } | string => {
  if (!isSealed(value)) return { value }
  const id = `${keyId(key)}|${label}|${value.$sealed.slice(0, OPENED_ID_CHARS)}`
  const known = recentlyOpened.get(id)
  if (known !== undefined) return { value: known }
  const plain = open(key, value.$sealed, label)
  if (plain === null) return "sealed content that its key does not open"
  const opened = JSON.parse(decoder.decode(plain)) as unknown
  recentlyOpened.set(id, opened)
  return { value: opened }
}

/** One item's sealed fields of `json` opened with its entry's key. */
const openItem = (
  json: StoredJson,
  item: StoredJson,
  ref: ContentKeyRef,
  paths: ReadonlyArray<FieldPath>,
  key: Buffer,
) => mapItemContent(item, paths, (value, path) => openField(key, value, sealedItemFieldLabel(json, ref, path)))

/**
 * Opens a stored event's sealed fields with the key `keyOf` gives: undefined when it is not known here
 * yet, null when it is destroyed (the content is forgotten). An item of an event with per-item content whose
 * key is destroyed is left out of it: the rest of the event still decodes.
 */
export const unsealWith =
  (keyOf: (ref: ContentKeyRef) => Buffer | null | undefined): Unseal =>
  (json) => {
    if (hasItemContent(json))
      return mapItems(json, (item, ref, paths) => {
        if (!hasSealedField(item, paths)) return item
        const key = keyOf(ref)
        if (key === undefined) return "sealed content: its key is not loaded"
        if (key === null) return null
        const opened = openItem(json, item, ref, paths, key)
        return opened.ok ? opened.json : opened.reason
      })
    const ref = sealedKeyOf(json)
    if (ref === null) return { ok: true, json }
    const key = keyOf(ref)
    if (key === undefined) return { ok: false, reason: "sealed content: its key is not loaded" }
    if (key === null)
      return {
        ok: false,
        reason: `forgotten: the key of ${ref.entryId === null ? `agent ${ref.agentId}` : `entry ${ref.entryId}`} is destroyed`,
      }
    return mapContent(json, (value, path) => openField(key, value, sealedFieldLabel(ref, path)))
  }

/** The nonce and tag of a sealed value, in base64: what tells one sealing from every other. */
const OPENED_ID_CHARS = 40
/** Opened content fields by label and sealing (strings and plain JSON: shared, never changed). */
const recentlyOpened = new Recent<unknown>(4_096)

/** What an audit shows where a forgotten event's content was. */
export const FORGOTTEN_TEXT = "(forgotten)"

/** For the audit: sealed fields that cannot be opened read as FORGOTTEN_TEXT; the rest of the event as stored. */
export const unsealOrRedact =
  (keyOf: (ref: ContentKeyRef) => Buffer | null | undefined): Unseal =>
  (json) => {
    if (hasItemContent(json))
      return mapItems(json, (item, ref, paths) => {
        const key = keyOf(ref)
        const opened = key === undefined || key === null ? undefined : openItem(json, item, ref, paths, key)
        if (opened?.ok) return opened.json
        const redacted = mapItemContent(item, paths, (value) => ({ value: isSealed(value) ? FORGOTTEN_TEXT : value }))
        return redacted.ok ? redacted.json : item
      })
    const opened = unsealWith(keyOf)(json)
    if (opened.ok) return opened
    return mapContent(json, (value) => ({ value: isSealed(value) ? FORGOTTEN_TEXT : value }))
  }
