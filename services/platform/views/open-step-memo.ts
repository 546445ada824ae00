/**
 * What a service remembers about each agent's open step (the recall it
 * already ran for it): one record per agent, replaced when the agent opens
 * another step, so it stays one per agent however many steps the agent
 * takes. Only the open step is ever asked about (a recall for any other step
 * is refused before it gets here).
 */
export interface OpenStepMemo<V> {
  readonly get: (agentId: string, stepId: string) => V | undefined
  readonly set: (agentId: string, stepId: string, value: V) => void
  /** The agent is no longer this replica's. */
  readonly forget: (agentId: string) => void
  /** Records held: at most one per agent. */
  readonly size: () => number
}

export const makeOpenStepMemo = <V>(): OpenStepMemo<V> => {
  const byAgent = new Map<string, { readonly stepId: string; readonly value: V }>()
  return {
    get: (agentId, stepId) => {
      const memo = byAgent.get(agentId)
      return memo !== undefined && memo.stepId === stepId ? memo.value : undefined
    },
    set: (agentId, stepId, value) => void byAgent.set(agentId, { stepId, value }),
    forget: (agentId) => void byAgent.delete(agentId),
    size: () => byAgent.size,
  }
}
