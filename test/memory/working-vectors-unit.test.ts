/**
 * The vectors of working entries for a query (services/memory/retrieval/working-vectors.ts): an embedder in
 * this thread answers within the query; a sentence model in a worker is not waited for, and its vectors
 * serve the next query; a vector landing after its entry left working is not kept.
 */
import { describe, expect, it } from "vitest"
import type { WorkingEntry } from "../../contracts/entry.ts"
import { WorkingTexts } from "../../services/memory/retrieval/working-texts.ts"
import { WorkingVectors } from "../../services/memory/retrieval/working-vectors.ts"
import type { Embedder } from "../../services/platform/embedding/embedder.ts"

/** The fields the vectors read: the id, the order recorded and the text. */
const entry = (n: number) => ({ id: `e-${n}`, ordinal: n, content: `remark ${n}` }) as unknown as WorkingEntry

const vectorOf = (text: string) => Float32Array.of(text.length, 1)

/** An embedder that answers when `release` is called (a worker thread busy elsewhere), or at once. */
const embedder = (answersAtOnce: boolean) => {
  const calls: string[][] = []
  const waiting: Array<() => void> = []
  const e: Embedder = {
    model: "test",
    dims: 2,
    embed: (texts) => {
      calls.push([...texts])
      const answer = () => texts.map(vectorOf)
      return answersAtOnce ? Promise.resolve(answer()) : new Promise((resolve) => waiting.push(() => resolve(answer())))
    },
  }
  return {
    embedder: e,
    calls,
    release: async () => {
      for (const r of waiting.splice(0)) r()
      await new Promise((r) => setImmediate(r))
    },
  }
}

describe("working vectors for a query", () => {
  it("are made within the query by an embedder in this thread", async () => {
    const { embedder: e, calls } = embedder(true)
    const vectors = new WorkingVectors(e, new WorkingTexts())
    const got = await vectors.forQuery("a", [entry(1), entry(2)])
    expect(got.map((v) => v && [...v])).toEqual([
      [8, 1],
      [8, 1],
    ])
    expect(calls).toEqual([["remark 2", "remark 1"]])
    await vectors.forQuery("a", [entry(1), entry(2)])
    expect(calls).toHaveLength(1)
  })

  it("are not waited for from a sentence model in a worker: the next query has them", async () => {
    const model = embedder(false)
    const vectors = new WorkingVectors(model.embedder, new WorkingTexts())
    expect(await vectors.forQuery("a", [entry(1)])).toEqual([null])
    expect(vectors.inBackground()).toBe(1)
    await model.release()
    expect((await vectors.forQuery("a", [entry(1)])).map((v) => v && [...v])).toEqual([[8, 1]])
    expect(model.calls).toHaveLength(1)
    expect(vectors.inBackground()).toBe(0)
  })

  it("does not keep a vector that lands after its entry left working", async () => {
    const model = embedder(false)
    const vectors = new WorkingVectors(model.embedder, new WorkingTexts())
    await vectors.forQuery("a", [entry(1), entry(2)])
    vectors.left("a", "e-1")
    vectors.dropAgents(["b"])
    await model.release()
    const got = await vectors.forQuery("a", [entry(1), entry(2)])
    expect(got[1] && [...got[1]]).toEqual([8, 1])
    // e-1 is asked for again: the vector made while it left was not kept.
    expect(got[0]).toBeNull()
    expect(model.calls.at(-1)).toEqual(["remark 1"])
  })
})
