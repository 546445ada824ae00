/**
 * A partition's views, some of them still the snapshot lines they were read from. A line is decoded
 * when its agent is first read or written, or by the partition's background decoding once it answers:
 * a restart from snapshots answers before it has parsed them. A line still undecoded when the next
 * snapshot is taken is written back as it was (its view has not changed: every event and dead letter
 * of the agent reads the view first).
 */
import type { AgentView } from "../../../domain/agent-view.ts"
import { decodeViewLine, type SnapshotAgent } from "./snapshots.ts"

/** An agent's view as its snapshot line: `[agentId, encodedView]` in UTF-8, not yet parsed. */
class SnapshotLine {
  readonly bytes: Uint8Array
  constructor(bytes: Uint8Array) {
    this.bytes = bytes
  }
}

export class PartitionViewMap {
  readonly #entries = new Map<string, AgentView | SnapshotLine>()
  /** Agents whose entry may still be a line (the background decoding takes them from the end). */
  #pending: string[] = []
  #lines = 0

  readonly #undecodable: (agentId: string, reason: string) => void

  /** `undecodable`: a line did not decode; the view is treated as unknown and the partition must be rebuilt. */
  constructor(undecodable: (agentId: string, reason: string) => void) {
    this.#undecodable = undecodable
  }

  /** Puts a snapshot's undecoded lines in, before anything else is applied. */
  addLines(lines: ReadonlyMap<string, Uint8Array>): void {
    for (const [agentId, bytes] of lines) {
      this.#entries.set(agentId, new SnapshotLine(bytes))
      this.#pending.push(agentId)
      this.#lines++
    }
  }

  get(agentId: string): AgentView | undefined {
    const entry = this.#entries.get(agentId)
    return entry instanceof SnapshotLine ? this.#decode(agentId, entry) : entry
  }

  has(agentId: string): boolean {
    return this.#entries.has(agentId)
  }

  set(agentId: string, view: AgentView): void {
    if (this.#entries.get(agentId) instanceof SnapshotLine) this.#lines--
    this.#entries.set(agentId, view)
  }

  delete(agentId: string): void {
    if (this.#entries.get(agentId) instanceof SnapshotLine) this.#lines--
    this.#entries.delete(agentId)
  }

  /** The agents it holds, their views decoded or not. */
  get size(): number {
    return this.#entries.size
  }

  /** Lines not decoded yet. */
  get undecoded(): number {
    return this.#lines
  }

  keys(): IterableIterator<string> {
    return this.#entries.keys()
  }

  /** Every view, decoding what is still a line (an undecodable one is left out). */
  *entries(): IterableIterator<[string, AgentView]> {
    for (const agentId of [...this.#entries.keys()]) {
      const view = this.get(agentId)
      if (view !== undefined) yield [agentId, view]
    }
  }

  /** What a snapshot of the partition writes now: views as they are, undecoded lines as they were read. */
  snapshotAgents(): Array<readonly [string, SnapshotAgent]> {
    return [...this.#entries].map(([agentId, entry]) => [
      agentId,
      entry instanceof SnapshotLine ? { line: entry.bytes } : { view: entry },
    ])
  }

  /** Decodes up to `count` lines; returns how many are left. */
  decodeSome(count: number): number {
    let decoded = 0
    while (decoded < count && this.#pending.length > 0) {
      const agentId = this.#pending.pop()!
      const entry = this.#entries.get(agentId)
      if (!(entry instanceof SnapshotLine)) continue
      this.#decode(agentId, entry)
      decoded++
    }
    if (this.#lines === 0) this.#pending = []
    return this.#lines
  }

  #decode(agentId: string, line: SnapshotLine): AgentView | undefined {
    this.#lines--
    try {
      const view = decodeViewLine(agentId, line.bytes)
      this.#entries.set(agentId, view)
      return view
    } catch (error) {
      this.#entries.delete(agentId)
      this.#undecodable(agentId, error instanceof Error ? error.message : String(error))
      return undefined
    }
  }
}
