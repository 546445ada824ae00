/**
 * No input from one agent degrades another, and bad input fails fast and
 * typed. Against a real nats-server, with every service of the embedded
 * default in this process (where a stall anywhere stalls everything).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { MAX_CONTENT_BYTES } from "../contracts/api.ts"
import type { EventOf } from "../contracts/events.ts"
import { blockTokens } from "../domain/render.ts"
import { WorkingMemoryClient } from "../sdk/client.ts"
import { readLog } from "./support/log.ts"
import { startTestSystem, type TestSystem } from "./support/system.ts"

const ALPHABET = "abcdefghijklmnopqrstuvwxyz"

describe("worst-case content", () => {
  let system: TestSystem
  beforeAll(async () => {
    system = await startTestSystem()
  })
  afterAll(async () => {
    await system?.stop()
  })

  it("64 KiB unbroken runs from one agent, several at once, are recorded with exact counts, and another agent is answered meanwhile", async () => {
    const heavy = system.client.agent("heavy-writer")
    // The bystander's own connection, and one attempt per call (the SDK's 5 s): answered means answered
    // the first time, not after the heavy writes are through.
    const bystanderClient = await WorkingMemoryClient.connect({ servers: system.server.url, attempts: 1 })
    const other = bystanderClient.agent("bystander")
    await heavy.register({ role: "custom", budget: 50_000 })
    await other.register({ role: "main" })
    await other.record({ origin: "USER", content: "The bystander's first note." })

    // Each a single pre-token, the tokenizer's worst case; each different, so no cache helps.
    const runs = Array.from({ length: 8 }, (_, i) =>
      i % 2 === 0 ? ALPHABET[i]!.repeat(MAX_CONTENT_BYTES) : (ALPHABET[i]! + ALPHABET[i + 1]!).repeat(MAX_CONTENT_BYTES / 2),
    )
    const heavyWrites = Promise.all(runs.map((content) => heavy.record({ origin: "USER", content })))
    // The bystander writes and reads while the heavy writes are in progress.
    const bystander = (async () => {
      const answers: string[] = []
      for (let i = 0; i < 5; i++) {
        const { entryId } = await other.record({ origin: "USER", content: `Bystander note ${i}: lunch at noon.` })
        answers.push(entryId)
      }
      const context = await other.buildContext()
      return { answers, context }
    })()
    const [recorded, { answers, context }] = await Promise.all([heavyWrites, bystander]).finally(() => bystanderClient.close())

    expect(answers).toHaveLength(5)
    expect(context.text).toContain("Bystander note 4: lunch at noon.")
    const log = await readLog(system.server.url)
    const stored = log.map((s) => s.event).filter((e): e is EventOf<"EntryRecorded"> => e._tag === "EntryRecorded" && e.agentId === "heavy-writer")
    expect(stored).toHaveLength(runs.length)
    for (const [i, reply] of recorded.entries()) {
      const event = stored.find((e) => e.entryId === reply.entryId)!
      expect(event.content).toBe(runs[i])
      expect(reply.tokens).toBe(event.tokens)
      expect(event.tokens).toBe(blockTokens(event, "raw", runs[i]!, "o200k_base"))
    }
    // The fade service brings the heavy writer back under τ (its key points and summaries count the same texts).
    const budget = 50_000
    for (let attempt = 0; ; attempt++) {
      const view = await system.liveView("heavy-writer")
      if (view !== undefined && view.usage <= 0.8 * budget) break
      if (attempt > 600) throw new Error(`fading never brought the heavy writer under τ: usage ${view?.usage}`)
      await new Promise((r) => setTimeout(r, 100))
    }
  }, 180_000)
})
