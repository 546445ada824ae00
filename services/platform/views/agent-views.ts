/**
 * Every agent's working view, folded from the event log by the shared
 * reducer. The working service serves these; the gateway keeps its own copy
 * to validate requests against the agent's state.
 */
import { Effect } from "effect"
import { agentOfEventSubject } from "../../../contracts/subjects.ts"
import { type AgentView, evolve, skipUndecodable } from "../../../domain/agent-view.ts"
import { type Projection, runProjection } from "../log/projection.ts"

export interface AgentViews {
  readonly get: (agentId: string) => AgentView | undefined
  readonly all: () => ReadonlyMap<string, AgentView>
  readonly projection: Projection
}

export const projectAgentViews = (name: string) =>
  Effect.gen(function* () {
    const views = new Map<string, AgentView>()
    const projection = yield* runProjection({
      name,
      apply: (event, record) => {
        const next = evolve(views.get(event.agentId), event, record)
        if (next !== undefined) views.set(event.agentId, next)
        else views.delete(event.agentId)
      },
      onDeadLetter: (letter) => {
        const agentId = agentOfEventSubject(letter.subject)
        const view = views.get(agentId)
        if (view !== undefined) views.set(agentId, skipUndecodable(view, letter.subject, letter.seq))
      },
    })
    return { get: (agentId: string) => views.get(agentId), all: () => views, projection } satisfies AgentViews
  })
