/**
 * A recall's cues sealed each under its own entry's key: each opens only with its entry's key and in its own
 * place, a cue whose key is destroyed leaves the event while the others still decode, and the record a process
 * decoded is found again only while every key it was opened with is the one in memory.
 */
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "vitest"
import { type Decoded, decodeEvent } from "../../contracts/decode.ts"
import type { EventOf } from "../../contracts/events.ts"
import type { ContentKeyRef } from "../../contracts/sealed.ts"
import type { StoredJson } from "../../contracts/upcasters.ts"
import { FORGOTTEN_TEXT, sealItems, unsealOrRedact, unsealWith } from "../../services/platform/keys/sealing.ts"
import { decodedRecord } from "../../services/platform/log/decoded-records.ts"
import { AGENT, recalledEntry } from "../support/events.ts"

const keyRing = () => {
  const keys = new Map<string, Buffer | null>()
  const name = (ref: ContentKeyRef) => `${ref.agentId}/${ref.entryId}`
  const keyOf = (ref: ContentKeyRef) => keys.get(name(ref))
  return {
    make: (entryId: string) => keys.set(name({ agentId: AGENT, entryId }), randomBytes(32)),
    remake: (entryId: string) => keys.set(name({ agentId: AGENT, entryId }), randomBytes(32)),
    destroy: (entryId: string) => keys.set(name({ agentId: AGENT, entryId }), null),
    keyOf,
    /** Every key of the record's cues in memory, as ContentKeys.heldKeyOf gives them (undefined: one is not). */
    held: (entryIds: ReadonlyArray<string>) => {
      const held = entryIds.map((entryId) => keyOf({ agentId: AGENT, entryId }))
      return held.every((k): k is Buffer => k instanceof Buffer) ? held : undefined
    },
  }
}

const SECRETS: Record<string, string> = {
  e1: "The locker code is 5-5-9-2.",
  e2: "The gym closes at ten on Sundays.",
  e3: "Bring a padlock of your own.",
}

const recall = (entryIds: ReadonlyArray<string>): EventOf<"CuesRehydrated"> => ({
  _tag: "CuesRehydrated",
  v: 1,
  eventId: `${AGENT}:cues:s1:similarity`,
  agentId: AGENT,
  at: 1,
  causationId: "s1",
  correlationId: null,
  stepId: "s1",
  trigger: "similarity",
  cues: entryIds.map((entryId) => ({
    entryId,
    relevance: 0.5,
    correlationId: null,
    recalled: recalledEntry(SECRETS[entryId]!, {
      tokens: 9,
      keyPoints: { text: SECRETS[entryId]!.slice(0, 12), tokens: 4 },
    }),
  })),
})

const bytes = (json: StoredJson) => new TextEncoder().encode(JSON.stringify(json))

const texts = (decoded: Decoded) =>
  decoded.ok && decoded.event._tag === "CuesRehydrated"
    ? decoded.event.cues.map((c) => [c.entryId, c.recalled.text, c.recalled.keyPoints?.text])
    : decoded

const ring3 = () => {
  const ring = keyRing()
  for (const id of ["e1", "e2", "e3"]) ring.make(id)
  return ring
}

describe("a recall's cues sealed each under its entry's key", () => {
  it("stores no cue's text in clear, and each opens with its own entry's key", () => {
    const ring = ring3()
    const stored = sealItems(recall(["e1", "e2", "e3"]), (ref) => ring.keyOf(ref) ?? null)
    const data = bytes(stored)
    const raw = new TextDecoder().decode(data)
    for (const secret of Object.values(SECRETS)) expect(raw).not.toContain(secret.slice(0, 12))
    expect(texts(decodeEvent(data, unsealWith(ring.keyOf)))).toEqual(
      ["e1", "e2", "e3"].map((id) => [id, SECRETS[id], SECRETS[id]!.slice(0, 12)]),
    )
    // Without keys it does not decode at all.
    expect(decodeEvent(data).ok).toBe(false)
  })

  it("a sealed text moved into another field of its own cue does not open there", () => {
    const ring = ring3()
    const stored = sealItems(recall(["e1"]), (ref) => ring.keyOf(ref) ?? null)
    const [cue] = stored.cues as Array<{ recalled: { text: unknown; keyPoints: { text: unknown } } }>
    // The same key seals both fields: only the label, which names the field, tells them apart.
    const moved = {
      ...stored,
      cues: [{ ...cue, recalled: { ...cue!.recalled, text: cue!.recalled.keyPoints.text } }],
    }
    const decoded = decodeEvent(bytes(moved as StoredJson), unsealWith(ring.keyOf))
    expect(decoded.ok).toBe(false)
    expect(decoded.ok ? "" : decoded.reason).toMatch(
      /cues\.0\.recalled\.text: sealed content that its key does not open/,
    )
  })

  it("a cue moved into another cue's place does not open there", () => {
    const ring = ring3()
    const stored = sealItems(recall(["e1", "e2"]), (ref) => ring.keyOf(ref) ?? null)
    const cues = stored.cues as StoredJson[]
    // e2's place now holds e1's sealed text: the label names e2, so e1's sealing does not open there.
    const swapped = { ...stored, cues: [cues[0], { ...cues[1], recalled: cues[0]!.recalled }] }
    const decoded = decodeEvent(bytes(swapped), unsealWith(ring.keyOf))
    expect(decoded.ok).toBe(false)
    expect(decoded.ok ? "" : decoded.reason).toMatch(/cues\.1\..*does not open/)
  })

  it("a cue whose entry's key is destroyed leaves the recall; the other cues still decode", () => {
    const ring = ring3()
    const data = bytes(sealItems(recall(["e1", "e2", "e3"]), (ref) => ring.keyOf(ref) ?? null))
    ring.destroy("e2")
    expect((texts(decodeEvent(data, unsealWith(ring.keyOf))) as string[][]).map((c) => c[0])).toEqual(["e1", "e3"])
    // The audit shows where it was.
    const redacted = decodeEvent(data, unsealOrRedact(ring.keyOf))
    expect(texts(redacted)).toEqual([
      ["e1", SECRETS.e1, SECRETS.e1!.slice(0, 12)],
      ["e2", FORGOTTEN_TEXT, FORGOTTEN_TEXT],
      ["e3", SECRETS.e3, SECRETS.e3!.slice(0, 12)],
    ])
    // A key not loaded yet is not a forget: the record waits for it.
    const unloaded = decodeEvent(
      data,
      unsealWith((ref) => (ref.entryId === "e3" ? undefined : ring.keyOf(ref))),
    )
    expect(unloaded.ok).toBe(false)
  })

  it("sealing leaves out a cue whose entry is forgotten already", () => {
    const ring = ring3()
    ring.destroy("e1")
    const data = bytes(sealItems(recall(["e1", "e2"]), (ref) => ring.keyOf(ref) ?? null))
    expect(new TextDecoder().decode(data)).not.toContain('"e1"')
    expect((texts(decodeEvent(data, unsealWith(ring.keyOf))) as string[][]).map((c) => c[0])).toEqual(["e2"])
  })

  it("a process decodes the record once for all its projections, and again once one of its keys changed", () => {
    const ring = ring3()
    const ids = ["e1", "e2", "e3"]
    const data = bytes(sealItems(recall(ids), (ref) => ring.keyOf(ref) ?? null))
    let calls = 0
    const decode = (d: Uint8Array) => {
      calls++
      return decodeEvent(d, unsealWith(ring.keyOf))
    }
    const seq = 910_001
    for (let i = 0; i < 4; i++) decodedRecord(seq, data, () => ring.held(ids), decode)
    expect(calls).toBe(1)
    // The entry forgotten and a key of the same name made since: the kept decoding is not served.
    ring.destroy("e3")
    ring.remake("e3")
    const after = decodedRecord(seq, data, () => ring.held(ids), decode)
    expect(calls).toBe(2)
    expect(after.ok).toBe(false)
  })
})
