/**
 * What the retrieval indexes of one agent hold in memory: the lexical index
 * over its records' terms and the dense index over their vectors, built in
 * this process from the same records the memory services rebuild, measured
 * as the growth of the heap and of array buffers (after a full collection)
 * while they are kept alive, plus the dense matrix's WebAssembly memory.
 */
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { locatedTerms } from "../../domain/terms.ts"
import { layoutOf } from "../../domain/text-layout.ts"
import { DenseIndex } from "../../services/memory/longterm/dense-index.ts"
import { LexicalIndex } from "../../services/memory/retrieval/lexical-index.ts"

export interface RetrievalMemory {
  readonly records: number
  readonly lexicalMb: number
  readonly denseMb: number
  readonly retrievalMb: number
  /** records × dims × 4 bytes: what the vectors alone take. */
  readonly rawVectorMb: number
  /** RSS of the memory services' process once it had rebuilt and served the queries. */
  readonly processRssMb: number
}

setFlagsFromString("--expose-gc")
const collect = runInNewContext("gc") as () => void
const used = () => {
  collect()
  collect()
  const m = process.memoryUsage()
  return m.heapUsed + m.arrayBuffers
}
const MB = 2 ** 20

/** Feed it the records in batches; `figures` measures what the two indexes hold. */
export const retrievalMemoryProbe = () => {
  let lexical: LexicalIndex | undefined
  let dense: DenseIndex | undefined
  let records = 0
  let dims = 0
  let afterLexical = 0
  const texts: Array<readonly [string, string]> = []
  const vectors: Array<readonly [string, Float32Array]> = []
  return {
    add: (entryId: string, text: string, vector: Float32Array) => {
      texts.push([entryId, text])
      vectors.push([entryId, vector])
    },
    figures: (agentId: string, processRssMb: number): RetrievalMemory => {
      // Built one after the other so that each one's growth is measured alone.
      const start = used()
      lexical = new LexicalIndex()
      for (const [id, text] of texts) {
        // As the memory service indexes an entry (index-state.ts): its terms, and where its units lie among them.
        const located = locatedTerms(text)
        lexical.add(agentId, id, located.terms, layoutOf(text, located))
      }
      afterLexical = used()
      for (const [id, vector] of vectors) {
        dims = vector.length
        dense ??= new DenseIndex(dims)
        dense.set(id, vector)
        records++
      }
      const afterDense = used()
      const lexicalMb = (afterLexical - start) / MB
      // The matrix lives in WebAssembly memory, which the heap figures do not count.
      const denseMb = (afterDense - afterLexical + (dense?.vectorBytes ?? 0)) / MB
      const figures = {
        records,
        lexicalMb,
        denseMb,
        retrievalMb: lexicalMb + denseMb,
        rawVectorMb: (records * dims * 4) / MB,
        processRssMb,
      }
      if (lexical.documentCount(agentId) !== records || dense?.size !== records)
        throw new Error("the indexes do not hold every record")
      texts.length = 0
      vectors.length = 0
      return figures
    },
  }
}

/** Resident set of a process (Linux), in MB; 0 where /proc is not there. */
export const processRssMb = async (pid: number | undefined): Promise<number> => {
  if (pid === undefined) return 0
  const { readFile } = await import("node:fs/promises")
  const status = await readFile(`/proc/${pid}/status`, "utf8").catch(() => "")
  const kb = /VmRSS:\s+(\d+)/.exec(status)?.[1]
  return kb === undefined ? 0 : Number(kb) / 1024
}
