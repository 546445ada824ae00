import type { AgentClient } from "../../sdk/client.ts"
import { eventually } from "./eventually.ts"
import { readLog } from "./log.ts"

/** Everyday turns unrelated to anything a test asks about: they fill an agent's budget so older entries fade. */
export const FILLER_TURNS = [
  "The weather was grey and the bus was late again this morning.",
  "Remember to water the tomatoes on the balcony before noon.",
  "The quarterly tax report is due at the end of the month.",
  "We talked about repainting the kitchen a pale green colour.",
  "My brother keeps asking about the football tickets for Sunday.",
  "The laptop fan is noisy whenever the build runs for long.",
] as const

/**
 * Records `content` for the agent, then filler turns until fading demotes it to long-term (the agent's
 * budget small enough for 30 fillers to push it out); the entry's id.
 */
export const recordThenDemote = async (
  agent: AgentClient,
  serverUrl: string,
  content: string,
  clock: { readonly next: () => number },
): Promise<string> => {
  const { entryId } = await agent.record({ origin: "USER", content, timestamp: clock.next() })
  for (let i = 0; i < 30; i++)
    await agent.record({ origin: "USER", content: FILLER_TURNS[i % FILLER_TURNS.length]!, timestamp: clock.next() })
  await eventually(
    `entry ${entryId} to demote`,
    async () =>
      (await readLog(serverUrl)).some(
        (s) => s.event._tag === "EntryDemoted" && s.event.agentId === agent.agentId && s.event.entryId === entryId,
      ),
    30_000,
  )
  return entryId
}
