import { HashMap, Option } from "effect"
import { describe, expect, it } from "vitest"
import { fullSupervisorView } from "../../bench/support/full-view.ts"
import type { EventOf } from "../../contracts/events.ts"
import { evolve } from "../../domain/agent-view.ts"
import { contextOfView } from "../../domain/context-builder.ts"

describe("folding a read", () => {
  it("counts one reference and the read's time on each native entry served, and leaves every other entry as it was", () => {
    const view = fullSupervisorView()
    const built = contextOfView(view, { limit: 6_000 })
    const read: EventOf<"EntriesRead"> = {
      _tag: "EntriesRead",
      v: 1,
      eventId: "read-1",
      agentId: view.config.id,
      at: view.lastEventAt + 1,
      causationId: null,
      correlationId: null,
      stepId: view.step?.stepId ?? null,
      budget: built.budget,
      tokens: built.tokens,
      served: built.items.map((i) => ({ entryId: i.entryId, form: i.form, cue: i.cue })),
    }
    const after = evolve(view, read, { seq: view.lastSeq + 1 })!
    const served = new Set(built.items.map((i) => i.entryId))
    expect(served.size).toBeGreaterThan(0)
    expect(HashMap.size(after.entries)).toBe(HashMap.size(view.entries))
    expect([...HashMap.keys(after.entries)]).toEqual([...HashMap.keys(view.entries)])
    for (const [id, before] of view.entries) {
      const now = Option.getOrThrow(HashMap.get(after.entries, id))
      if (served.has(id))
        expect(now).toEqual({ ...before, referenceCount: before.referenceCount + 1, lastReadAt: read.at })
      else expect(now).toBe(before)
    }
    // The view read from is untouched.
    expect(contextOfView(view, { limit: 6_000 })).toEqual(built)
  })
})
