/**
 * What the memory service keeps beside its views to rank both tiers, per agent: the lexical and episode
 * indexes, the texts working entries were recorded with and their vectors, the records recalls read lately;
 * and the ranking sources that read them with the long-term store and the embedders.
 */
import { Effect } from "effect"
import type { EmbeddingProviderShape } from "../../platform/embedding/embedding-provider.ts"
import type { LongTermStoreShape } from "../longterm/store.ts"
import { EpisodeIndex } from "./episodes.ts"
import { LexicalIndex } from "./lexical-index.ts"
import type { RankingSources } from "./rank.ts"
import { RecalledRecords } from "./recalled-records.ts"
import { WorkingTexts } from "./working-texts.ts"
import { WorkingVectors } from "./working-vectors.ts"

export interface MemoryIndexes {
  readonly lexical: LexicalIndex
  readonly episodes: EpisodeIndex
  readonly texts: WorkingTexts
  readonly workingVectors: WorkingVectors
  /** The substrate records recalls read lately. */
  readonly recalled: RecalledRecords
  readonly sources: RankingSources
  /** These agents are no longer this replica's (or were forgotten): nothing is kept of them. */
  readonly dropAgents: (agents: ReadonlyArray<string>) => void
}

export interface MemoryIndexesDependencies {
  readonly store: LongTermStoreShape
  readonly embeddings: EmbeddingProviderShape
}

export const makeMemoryIndexes = ({ store, embeddings }: MemoryIndexesDependencies): MemoryIndexes => {
  const lexical = new LexicalIndex()
  const episodes = new EpisodeIndex()
  const texts = new WorkingTexts()
  const workingVectors = new WorkingVectors(embeddings.offline, texts)
  const recalled = new RecalledRecords()
  return {
    lexical,
    episodes,
    texts,
    workingVectors,
    recalled,
    sources: {
      store,
      embeddings,
      lexical,
      episodes,
      workingVectors: (agentId, entries) => Effect.promise(() => workingVectors.forQuery(agentId, entries)),
    },
    dropAgents: (agents) => {
      for (const agentId of agents) {
        lexical.dropAgent(agentId)
        episodes.dropAgent(agentId)
        texts.dropAgent(agentId)
        recalled.dropAgent(agentId)
      }
      workingVectors.dropAgents(agents)
    },
  }
}
