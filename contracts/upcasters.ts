/**
 * Upcasters: one function per event type and stored version, turning the
 * JSON of version n into the JSON of version n + 1. The decoder applies
 * them in a chain up to the current version (`EVENT_VERSIONS`) before it
 * checks the schema, so every projection, the audit and the SDK's mirror
 * see only current events, whatever version the log holds.
 *
 * An upcaster is pure and total on what its version's writers stored; it
 * never looks anything up. Add one whenever a version is bumped.
 */
import type { MemoryEventTag } from "./events.ts"

export type StoredJson = { readonly [field: string]: unknown }
export type Upcaster = (event: StoredJson) => StoredJson

export const UPCASTERS: { readonly [T in MemoryEventTag]?: { readonly [fromVersion: number]: Upcaster } } = {
  EntryDemoted: {
    // v2 carries what the long-term record needs; a v1 event did not.
    1: (event) => ({ ...event, v: 2, entry: null }),
  },
}
