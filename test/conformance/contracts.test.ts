import { readFileSync } from "node:fs"
import { join } from "node:path"
import { Schema } from "effect"
import { describe, expect, it } from "vitest"
import { decodeEvent } from "../../contracts/decode.ts"
import { MemoryEvent } from "../../contracts/events.ts"
import { apiJsonSchema, eventsJsonSchema } from "../../contracts/json-schema.ts"
import { faded, recorded, registered } from "../support/events.ts"

const committed = (name: string) =>
  JSON.parse(readFileSync(join(import.meta.dirname, "..", "..", "contracts", "json", name), "utf8"))

describe("exported JSON Schemas", () => {
  it("are up to date with the contracts (run `npm run contracts:json` after changing them)", () => {
    expect(committed("api.schema.json")).toEqual(JSON.parse(JSON.stringify(apiJsonSchema())))
    expect(committed("events.schema.json")).toEqual(JSON.parse(JSON.stringify(eventsJsonSchema())))
  })

  it("describe every operation with its subject, request and reply", () => {
    const api = apiJsonSchema() as { operations: Record<string, { subject: string; request: { required?: string[] } }> }
    expect(api.operations.recordEntry?.subject).toBe("wm.api.<agentId>.entry.record")
    expect(api.operations.recordEntry?.request.required).toEqual(["content", "origin"])
    expect(Object.keys(api.operations)).toHaveLength(18)
  })
})

describe("events", () => {
  it("round-trip through their JSON encoding", () => {
    const r = recorded("e1", "hello", 1_700_000_000_000)
    for (const event of [registered(), r, faded(r, 1, "hi")]) {
      const decoded = decodeEvent(new TextEncoder().encode(JSON.stringify(Schema.encodeSync(MemoryEvent)(event))))
      expect(decoded).toEqual({ ok: true, event })
    }
  })
})
