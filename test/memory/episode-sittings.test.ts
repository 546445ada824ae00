import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { SITTING_GAP_MS } from "../../domain/render.ts"
import { EpisodeIndex } from "../../services/memory/retrieval/episodes.ts"

describe("an entry's episode", () => {
  it("is its correlation id, else the first entry of its sitting, through out-of-order additions and removals", () => {
    const gap = fc.oneof(fc.constant(0), fc.integer({ min: 1, max: SITTING_GAP_MS }), fc.constant(SITTING_GAP_MS + 1))
    const operation = fc.oneof(
      {
        weight: 4,
        arbitrary: fc.record({
          kind: fc.constant("add" as const),
          at: fc.array(gap, { minLength: 1, maxLength: 3 }).map((gs) => gs.reduce((a, b) => a + b, 0)),
          correlated: fc.option(fc.constantFrom("c1", "c2"), { nil: null }),
        }),
      },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant("remove" as const), pick: fc.nat() }) },
    )
    fc.assert(
      fc.property(fc.array(operation, { maxLength: 60 }), fc.array(fc.nat(), { maxLength: 10 }), (ops, reads) => {
        const index = new EpisodeIndex()
        let live: Array<{ id: string; timestamp: number; correlationId: string | null }> = []
        let clock = 0
        ops.forEach((op, n) => {
          if (op.kind === "add") {
            // Mostly later than everything so far; sometimes in the past (imported history).
            if (n % 5 !== 4) clock += op.at
            const timestamp = n % 5 === 4 ? Math.max(0, clock - op.at) : clock
            index.add("a", `e${n}`, timestamp, op.correlated)
            live.push({ id: `e${n}`, timestamp, correlationId: op.correlated })
          } else if (live.length > 0) {
            const gone = [...live].sort((x, y) => x.timestamp - y.timestamp)[op.pick % live.length]!.id
            index.remove("a", gone)
            live = live.filter((e) => e.id !== gone)
          }
          // Reads between changes exercise the kept sitting starts.
          for (const r of reads) {
            if (live.length === 0) break
            const ordered = [...live].sort((x, y) => x.timestamp - y.timestamp)
            expect(index.episodeOf("a", live[r % live.length]!.id)).toBe(
              naiveEpisode(ordered, live[r % live.length]!.id),
            )
          }
        })
      }),
      { numRuns: 300 },
    )
  })
})

/** The walk back to the start of the sitting, over the timeline in the order the index keeps it. */
const naiveEpisode = (
  ordered: ReadonlyArray<{ id: string; timestamp: number; correlationId: string | null }>,
  id: string,
) => {
  let i = ordered.findIndex((e) => e.id === id)
  if (ordered[i]!.correlationId !== null) return `c:${ordered[i]!.correlationId}`
  while (i > 0 && ordered[i]!.timestamp - ordered[i - 1]!.timestamp <= SITTING_GAP_MS) i--
  return `s:${ordered[i]!.id}`
}
