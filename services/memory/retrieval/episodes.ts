/**
 * Each agent's entries on one timeline, both tiers, so retrieval can bring
 * the neighbours of a hit along: in a dialogue or a task the answer usually
 * sits next to what matched the query. Neighbours are the entries just
 * before and after on the timeline within the same sitting (no gap longer
 * than SITTING_GAP_MS), and the nearest entries sharing the correlation id.
 * An in-memory projection of EntryRecorded/EntryForgotten, rebuilt from the
 * log at start.
 */

import type { Neighbour } from "../../../domain/relevance.ts"
import { SITTING_GAP_MS } from "../../../domain/render.ts"

export interface Point {
  readonly entryId: string
  readonly timestamp: number
  readonly correlationId: string | null
}

class Timeline {
  readonly points: Point[] = []
  readonly #positions = new Map<string, number>()
  #stale = false
  readonly byCorrelation = new Map<string, string[]>()

  add(point: Point): void {
    if (this.position(point.entryId) !== undefined) return
    const last = this.points[this.points.length - 1]
    if (last === undefined || last.timestamp <= point.timestamp) {
      this.#positions.set(point.entryId, this.points.length)
      this.points.push(point)
    } else {
      // Recorded out of order (imported history): insert in place; positions are rebuilt on the next read.
      let lo = 0
      let hi = this.points.length
      while (lo < hi) {
        const mid = (lo + hi) >> 1
        if (this.points[mid]!.timestamp <= point.timestamp) lo = mid + 1
        else hi = mid
      }
      this.points.splice(lo, 0, point)
      this.#stale = true
      this.#sittingStarts.length = 0
    }
    if (point.correlationId !== null) {
      const ids = this.byCorrelation.get(point.correlationId) ?? []
      ids.push(point.entryId)
      this.byCorrelation.set(point.correlationId, ids)
    }
  }

  remove(entryId: string): void {
    const at = this.position(entryId)
    if (at === undefined) return
    const [point] = this.points.splice(at, 1)
    this.#stale = true
    this.#sittingStarts.length = 0
    if (point?.correlationId != null) {
      const ids = this.byCorrelation.get(point.correlationId)?.filter((id) => id !== entryId) ?? []
      if (ids.length > 0) this.byCorrelation.set(point.correlationId, ids)
      else this.byCorrelation.delete(point.correlationId)
    }
  }

  position(entryId: string): number | undefined {
    if (this.#stale) this.#reindex()
    return this.#positions.get(entryId)
  }

  /**
   * Where the sitting of the point at `at` starts. Kept per point and
   * extended as points are appended (the common case), recomputed after an
   * insertion or removal: a sitting can span the whole timeline, and walking
   * back to its start at every lookup made retrieval linear in its length.
   */
  sittingStart(at: number): number {
    const starts = this.#sittingStarts
    const points = this.points
    for (let i = starts.length; i < points.length; i++)
      starts.push(i > 0 && points[i]!.timestamp - points[i - 1]!.timestamp <= SITTING_GAP_MS ? starts[i - 1]! : i)
    return starts[at]!
  }
  readonly #sittingStarts: number[] = []

  #reindex(): void {
    this.#positions.clear()
    this.points.forEach((p, i) => {
      this.#positions.set(p.entryId, i)
    })
    this.#stale = false
  }
}

/** An agent's timeline as a snapshot carries it: its points in order, and each correlation id's entries in order. */
export interface TimelineParts {
  readonly points: ReadonlyArray<Point>
  readonly correlations: ReadonlyArray<readonly [string, ReadonlyArray<string>]>
}

export class EpisodeIndex {
  readonly #timelines = new Map<string, Timeline>()

  /** The agent's timeline as it stands (copies: the timeline goes on changing). */
  partsOf(agentId: string): TimelineParts {
    const timeline = this.#timelines.get(agentId)
    if (timeline === undefined) return { points: [], correlations: [] }
    return {
      points: [...timeline.points],
      correlations: [...timeline.byCorrelation].map(([id, ids]) => [id, [...ids]] as const),
    }
  }

  /** Puts back a timeline taken by `partsOf`, as it was. */
  restore(agentId: string, parts: TimelineParts): void {
    const timeline = new Timeline()
    for (const point of parts.points) timeline.add(point)
    timeline.byCorrelation.clear()
    for (const [id, ids] of parts.correlations) timeline.byCorrelation.set(id, [...ids])
    this.#timelines.set(agentId, timeline)
  }

  add(agentId: string, entryId: string, timestamp: number, correlationId: string | null): void {
    let timeline = this.#timelines.get(agentId)
    if (timeline === undefined) {
      timeline = new Timeline()
      this.#timelines.set(agentId, timeline)
    }
    timeline.add({ entryId, timestamp, correlationId })
  }

  remove(agentId: string, entryId: string): void {
    this.#timelines.get(agentId)?.remove(entryId)
  }

  dropAgent(agentId: string): void {
    this.#timelines.delete(agentId)
  }

  /**
   * The episode of an entry: its correlation id when it has one, else its
   * sitting (named by the sitting's first entry).
   */
  episodeOf(agentId: string, entryId: string): string | null {
    const timeline = this.#timelines.get(agentId)
    const at = timeline?.position(entryId)
    if (timeline === undefined || at === undefined) return null
    const points = timeline.points
    if (points[at]!.correlationId !== null) return `c:${points[at]!.correlationId}`
    return `s:${points[timeline.sittingStart(at)]!.entryId}`
  }

  /** The entries within `radius` steps of `entryId` in its sitting, and up to `radius` nearest of its correlation id. */
  neighbours(agentId: string, entryId: string, radius: number): Neighbour[] {
    const timeline = this.#timelines.get(agentId)
    const at = timeline?.position(entryId)
    if (timeline === undefined || at === undefined) return []
    const points = timeline.points
    const found = new Map<string, number>()
    for (const direction of [-1, 1]) {
      for (let d = 1; d <= radius; d++) {
        const i = at + direction * d
        const near = points[i - direction]!
        const p = points[i]
        if (p === undefined || Math.abs(p.timestamp - near.timestamp) > SITTING_GAP_MS) break
        found.set(p.entryId, d)
      }
    }
    const correlationId = points[at]!.correlationId
    if (correlationId !== null) {
      const ids = timeline.byCorrelation.get(correlationId) ?? []
      const k = ids.indexOf(entryId)
      for (let d = 1; d <= radius; d++) {
        for (const id of [ids[k - d], ids[k + d]]) {
          if (id !== undefined && !found.has(id)) found.set(id, d)
        }
      }
    }
    return [...found].map(([id, distance]) => ({ entryId: id, distance }))
  }
}
