/** Waiting for fading to finish: what a test reads after it is then the last word of the fade service. */
import type { Effect } from "effect"
import { FadeWorker, type FadeWorkerShape } from "../../services/fade/fade-worker.ts"
import { eventually } from "./eventually.ts"
import { readLog } from "./log.ts"
import type { TestSystem } from "./system.ts"

/**
 * Waits until the system's fade worker has read every event of the agent in the log and evaluating the agent
 * moves nothing more (a move taken meanwhile by its own schedule is a conflict, and it evaluates again).
 */
export const fadeSettled = async (system: TestSystem, agentId: string): Promise<void> => {
  const { runtime } = system.services
  const fade = await runtime.runPromise(FadeWorker as unknown as Effect.Effect<FadeWorkerShape>)
  const own = (await readLog(system.server.url)).filter((s) => "agentId" in s.event && s.event.agentId === agentId)
  const last = Math.max(0, ...own.map((s) => s.seq))
  await eventually(`the fade worker to read ${agentId}'s events`, () => (fade.view(agentId)?.lastSeq ?? 0) >= last)
  for (let i = 0; i < 50; i++) {
    const run = await runtime.runPromise(fade.evaluate(agentId))
    if (run.applied === 0 && run.conflicts === 0) return
  }
  throw new Error(`fading of ${agentId} did not settle`)
}
