/**
 * Sealing an event's content fields (contracts/sealed.ts) with its data key, and opening them again.
 * A field's value is sealed as its JSON text, labelled with its agent, entry and path.
 */
import type { Unseal } from "../../../contracts/decode.ts"
import { entryIdOf, type MemoryEvent } from "../../../contracts/events.ts"
import {
  CONTENT_FIELDS,
  type ContentKeyRef,
  isSealed,
  mapContent,
  sealedFieldLabel,
  sealedKeyOf,
} from "../../../contracts/sealed.ts"
import type { StoredJson } from "../../../contracts/upcasters.ts"
import { open, seal } from "./aead.ts"
import { Recent } from "./recent.ts"

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** Whose key seals this event's content; null when it carries none: an entry's, else (a focus) its agent's. */
export const contentKeyOf = (event: MemoryEvent): ContentKeyRef | null => {
  if (CONTENT_FIELDS[event._tag] === undefined) return null
  if (event._tag === "StepStarted" && event.focus === null) return null
  return { agentId: event.agentId, entryId: entryIdOf(event) }
}

/** The event's JSON with every content field sealed under `key`. */
export const sealEvent = (event: MemoryEvent, ref: ContentKeyRef, key: Uint8Array): StoredJson => {
  const sealed = mapContent(event as unknown as StoredJson, (value, path) => ({
    value: { $sealed: seal(key, encoder.encode(JSON.stringify(value)), sealedFieldLabel(ref, path)) },
  }))
  // mapContent fails only when `change` does.
  return sealed.ok ? sealed.json : (event as unknown as StoredJson)
}

/**
 * Opens a stored event's sealed fields with the key `keyOf` gives: undefined when it is not known here
 * yet, null when it is destroyed (the content is forgotten).
 */
export const unsealWith =
  (keyOf: (ref: ContentKeyRef) => Buffer | null | undefined): Unseal =>
  (json) => {
    const ref = sealedKeyOf(json)
    if (ref === null) return { ok: true, json }
    const key = keyOf(ref)
    if (key === undefined) return { ok: false, reason: "sealed content: its key is not loaded" }
    if (key === null)
      return {
        ok: false,
        reason: `forgotten: the key of ${ref.entryId === null ? `agent ${ref.agentId}` : `entry ${ref.entryId}`} is destroyed`,
      }
    return mapContent(json, (value, path) => {
      if (!isSealed(value)) return { value }
      const label = sealedFieldLabel(ref, path)
      // Every projection of a process reads the same record: it is opened once.
      const id = `${label}|${value.$sealed.slice(0, OPENED_ID_CHARS)}`
      const known = recentlyOpened.get(id)
      if (known !== undefined) return { value: known }
      const plain = open(key, value.$sealed, label)
      if (plain === null) return "sealed content that its key does not open"
      const opened = JSON.parse(decoder.decode(plain)) as unknown
      recentlyOpened.set(id, opened)
      return { value: opened }
    })
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
    const opened = unsealWith(keyOf)(json)
    if (opened.ok) return opened
    return mapContent(json, (value) => ({ value: isSealed(value) ? FORGOTTEN_TEXT : value }))
  }
