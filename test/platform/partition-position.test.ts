/**
 * A read that waits for a position of the log answers from its agent's partition without asking the
 * server for the partition's last record (a wildcard lookup that costs the server milliseconds in a long
 * log): when the position is another partition's record, the partition's consumer says it has nothing
 * more to deliver, and the read is answered at once, by the working service and by long-term alike.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { partitionOf } from "../../contracts/partitions.ts"
import { startTestSystem, type TestSystem } from "../support/system.ts"

let system: TestSystem
const QUIET = "position-quiet"
const BUSY = ["position-busy-0", "position-busy-1", "position-busy-2"].find(
  (id) => partitionOf(id) !== partitionOf(QUIET),
)!

beforeAll(async () => {
  system = await startTestSystem()
  await system.client.agent(QUIET).register({ role: "main" })
  await system.client.agent(QUIET).record({ origin: "USER", content: "The quiet agent's only entry." })
  await system.client.agent(BUSY).register({ role: "main" })
}, 60_000)
afterAll(() => system?.stop())

/** Counts the requests for a wildcard filter's last record while `body` runs. */
const wildcardLastReads = async <A>(body: () => Promise<A>): Promise<{ value: A; reads: number }> => {
  let reads = 0
  const sub = system.client.nc.subscribe("$JS.API.STREAM.MSG.GET.>", {
    callback: (_error, msg) => {
      if (/"last_by_subj":"[^"]*>"/.test(msg.string())) reads++
    },
  })
  await system.client.nc.flush()
  try {
    const value = await body()
    await system.client.nc.flush()
    return { value, reads }
  } finally {
    sub.unsubscribe()
  }
}

describe("a read after another partition's record", () => {
  it("is answered by the working service and by long-term, with no lookup of the partition's last record", async () => {
    const { value, reads } = await wildcardLastReads(async () => {
      const answers = []
      for (let i = 0; i < 5; i++) {
        const { seq } = await system.client
          .agent(BUSY)
          .record({ origin: "USER", content: `The busy agent moves on ${i}.` })
        const view = await system.client.call(QUIET, "getView", { afterSeq: seq })
        const hits = await system.client.call(QUIET, "query", { query: "quiet agent entry", afterSeq: seq })
        answers.push({ view, hits })
      }
      return answers
    })
    expect(reads).toBe(0)
    for (const { view, hits } of value) {
      expect(view).toMatchObject({ agent: { id: QUIET }, entries: [{ content: "The quiet agent's only entry." }] })
      expect(JSON.stringify(hits)).toContain("quiet agent")
    }
  }, 60_000)
})
