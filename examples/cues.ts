/**
 * Long-term memory and cues: an entry fades out of a tiny working budget into
 * long-term, comes back as a cue when a step asks about it, and is promoted
 * by referencing it. Uses only the SDK; run it against a running system:
 *
 *   node examples/cues.ts [nats://127.0.0.1:4222]
 */
import { nuid } from "@nats-io/nuid"
import { type AgentClient, WorkingMemoryClient } from "../sdk/client.ts"

const fillers = [
  "The weather was grey and the bus was late again this morning.",
  "Remember to water the tomatoes on the balcony before noon.",
  "The quarterly tax report is due at the end of the month.",
  "We talked about repainting the kitchen a pale green colour.",
  "My brother keeps asking about the football tickets for Sunday.",
  "The laptop fan is noisy whenever the build runs for long.",
]

/** Records the puppy entry, then enough filler that the fade service demotes it out of a 200-token budget. */
export const setUpPuppyAgent = async (agent: AgentClient) => {
  await agent.register({ role: "custom", budget: 200 })
  const puppy = await agent.record({
    origin: "USER",
    content: "We adopted a golden retriever puppy called Biscuit last week.",
    tags: ["pets"],
  })
  for (let i = 0; i < 30; i++) await agent.record({ origin: "USER", content: fillers[i % fillers.length]! })
  const deadline = Date.now() + 30_000
  for (;;) {
    const view = await agent.view()
    if (!view.entries.some((e) => e.id === puppy.entryId)) {
      // Later reads wait for the demotion's log position, so long-term holds the puppy.
      agent.lastSeq = Math.max(agent.lastSeq, view.appliedSeq)
      return puppy.entryId
    }
    if (Date.now() > deadline) throw new Error("the puppy entry was not demoted within 30 s")
    await new Promise((r) => setTimeout(r, 200))
  }
}

export const runCues = async (agent: AgentClient) => {
  await setUpPuppyAgent(agent)

  const { stepId } = await agent.beginStep({ focus: { query: "Which dog did I adopt recently?" } })
  const context = await agent.buildContext({ stepId }) // the long-demoted "golden retriever puppy" entry is a cue
  await agent.reference(stepId, [context.items.find((i) => i.cue)!.entryId]) // now native again
  await agent.endStep(stepId) // other cues dropped
  const { results } = await agent.query("puppy", { explain: true, filter: { tags: ["pets"] } })
  const raw = await agent.raw(results[0]!.entryId) // from the substrate

  return { context, results, raw }
}

if (import.meta.main) {
  const wm = await WorkingMemoryClient.connect({
    servers: process.argv[2] ?? process.env.NATS_URL ?? "nats://127.0.0.1:4222",
  })
  try {
    const { context, raw } = await runCues(wm.agent(`cues-${nuid.next()}`))
    console.log(context.text)
    console.log(`\nraw from the substrate: ${raw.content}`)
  } finally {
    await wm.close()
  }
}
