/** The records a process decoded last, shared by its projections: found again, never served wrong or forgotten. */
import { randomBytes } from "node:crypto"
import { describe, expect, it } from "vitest"
import { type Decoded, decodeEvent } from "../../contracts/decode.ts"
import type { MemoryEvent } from "../../contracts/events.ts"
import type { ContentKeyRef } from "../../contracts/sealed.ts"
import { contentKeyOf, sealEvent, unsealWith } from "../../services/platform/keys/sealing.ts"
import { decodedRecord } from "../../services/platform/log/decoded-records.ts"
import { AGENT, recorded } from "../support/events.ts"

/** Keys held in memory by entry; a destroyed one reads null, as the key store says. */
const keyRing = () => {
  const keys = new Map<string, Buffer | null>()
  const name = (ref: ContentKeyRef) => `${ref.agentId}/${ref.entryId}`
  const keyOf = (ref: ContentKeyRef) => keys.get(name(ref))
  return {
    make: (ref: ContentKeyRef) => {
      const key = randomBytes(32)
      keys.set(name(ref), key)
      return key
    },
    load: (ref: ContentKeyRef, key: Buffer) => keys.set(name(ref), key),
    destroy: (ref: ContentKeyRef) => keys.set(name(ref), null),
    /** The key in memory, as the key store gives it (undefined: not in memory). */
    held: (ref: ContentKeyRef) => keys.get(name(ref)) ?? undefined,
    unseal: unsealWith(keyOf),
  }
}

const stored = (event: MemoryEvent, key: Buffer) =>
  new TextEncoder().encode(JSON.stringify(sealEvent(event, contentKeyOf(event)!, key)))

const counted = (decode: (data: Uint8Array) => Decoded) => {
  let calls = 0
  return {
    decode: (data: Uint8Array) => {
      calls++
      return decode(data)
    },
    calls: () => calls,
  }
}

const contentOf = (decoded: Decoded) =>
  decoded.ok && decoded.event._tag === "EntryRecorded" ? decoded.event.content : null

describe("records decoded once per process", () => {
  it("decodes a record once for every projection that reads it, and gives each the same event", () => {
    const ring = keyRing()
    const event = recorded("e-1", "the partner uses a wheelchair", 1)
    const ref = contentKeyOf(event)!
    const data = stored(event, ring.make(ref))
    const decoder = counted((d) => decodeEvent(d, ring.unseal))
    const seq = 900_001
    const reads = [0, 1, 2, 3, 4].map(() => decodedRecord(seq, data, () => ring.held(ref), decoder.decode))
    expect(decoder.calls()).toBe(1)
    expect(reads.map(contentOf)).toEqual(Array(5).fill("the partner uses a wheelchair"))
    // A copy of the bytes (another consumer's message) is the same record.
    decodedRecord(seq, Uint8Array.from(data), () => ring.held(ref), decoder.decode)
    expect(decoder.calls()).toBe(1)
  })

  it("decodes a record once for every reader holding the key, in whichever Buffer it holds it", () => {
    const event = recorded("e-5", "the meeting moved to Thursday", 1)
    const ref = contentKeyOf(event)!
    const key = randomBytes(32)
    const data = stored(event, key)
    // A key loaded again after the key cache let it go, or unwrapped by another key store: the same bytes, another Buffer.
    const services = [0, 1, 2, 3, 4].map(() => {
      const ring = keyRing()
      ring.load(ref, Buffer.from(key))
      return ring
    })
    const decoder = counted((d) => decodeEvent(d, services[0]!.unseal))
    const seq = 900_005
    const reads = services.map((ring) =>
      decodedRecord(seq, Uint8Array.from(data), () => ring.held(ref), decoder.decode),
    )
    expect(decoder.calls()).toBe(1)
    expect(reads.map(contentOf)).toEqual(Array(5).fill("the meeting moved to Thursday"))
  })

  it("serves nothing opened under a key to a reader holding another key under the same name", () => {
    const event = recorded("e-6", "opened under the first key", 1)
    const ref = contentKeyOf(event)!
    const first = keyRing()
    const data = stored(event, first.make(ref))
    const seq = 900_006
    expect(
      contentOf(
        decodedRecord(
          seq,
          data,
          () => first.held(ref),
          (d) => decodeEvent(d, first.unseal),
        ),
      ),
    ).toBe("opened under the first key")
    // A key made since under the same name (after a forget) opens nothing sealed under the first.
    const second = keyRing()
    second.make(ref)
    const read = decodedRecord(
      seq,
      data,
      () => second.held(ref),
      (d) => decodeEvent(d, second.unseal),
    )
    expect(read.ok).toBe(false)
  })

  it("serves no content whose key was destroyed since: the forgotten entry does not decode", () => {
    const ring = keyRing()
    const event = recorded("e-2", "a secret to forget", 1)
    const ref = contentKeyOf(event)!
    const data = stored(event, ring.make(ref))
    const decode = (d: Uint8Array) => decodeEvent(d, ring.unseal)
    const seq = 900_002
    expect(contentOf(decodedRecord(seq, data, () => ring.held(ref), decode))).toBe("a secret to forget")
    ring.destroy(ref)
    const after = decodedRecord(seq, data, () => ring.held(ref), decode)
    expect(after.ok).toBe(false)
    expect(after.ok ? "" : after.reason).toMatch(/forgotten/)
  })

  it("tells apart the records of two logs at the same sequence by their bytes", () => {
    const ring = keyRing()
    const first = recorded("e-3", "from the first log", 1)
    const second = recorded("e-3", "from the second log", 1)
    const ref = contentKeyOf(first)!
    const key = ring.make(ref)
    const decode = (d: Uint8Array) => decodeEvent(d, ring.unseal)
    const seq = 900_003
    expect(contentOf(decodedRecord(seq, stored(first, key), () => key, decode))).toBe("from the first log")
    expect(contentOf(decodedRecord(seq, stored(second, key), () => key, decode))).toBe("from the second log")
    expect(first.agentId).toBe(AGENT)
  })

  it("keeps no failure: a record that did not decode is decoded again once its key is there", () => {
    const ring = keyRing()
    const event = recorded("e-4", "arrives before its key", 1)
    const ref = contentKeyOf(event)!
    const key = randomBytes(32)
    const data = stored(event, key)
    const decode = (d: Uint8Array) => decodeEvent(d, ring.unseal)
    const seq = 900_004
    expect(decodedRecord(seq, data, () => ring.held(ref), decode).ok).toBe(false)
    ring.load(ref, key)
    expect(contentOf(decodedRecord(seq, data, () => ring.held(ref), decode))).toBe("arrives before its key")
  })
})
