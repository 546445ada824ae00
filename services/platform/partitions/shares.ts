/**
 * How many partitions a replica takes, and which it keeps when it holds more than its share.
 *
 * Requests are routed by partition, so a replica receives the requests of the agents placed on the partitions
 * it holds. With P partitions over R replicas some hold ⌈P/R⌉ and the others ⌊P/R⌋ (16 over 3: 6, 5, 5).
 *
 * - **Taking.** A replica takes up to ⌊P/R⌋ at once; one more, up to ⌈P/R⌉, only of a partition that was
 *   already free at its last round. Replicas that join together then end with 5, 5 and 6 of 16, never 6, 6
 *   and 4, where one joiner would hold 6 partitions of the heavier ones.
 * - **Keeping.** A replica that holds more than ⌈P/R⌉ (others joined) keeps the partitions whose agents come
 *   closest to a replica's fair part of the agents it holds, the lightest first: holding the most partitions,
 *   it keeps the lighter ones. Without agents it keeps its first partitions in its order of preference.
 * - **Giving back.** A replica that joins after the others have taken their shares can find fewer than ⌊P/R⌋
 *   free (16 over 3, after 8 and 8: 6, 6 and 4). A replica above ⌊P/R⌋ that sees another below it, and no
 *   partition free, gives one up (chosen as when keeping), for that one to take.
 */

/** The partitions a replica takes at once, of `partitions` over `replicas`; the rest comes a round later. */
export const firstTake = (partitions: number, replicas: number): number =>
  Math.max(1, Math.floor(partitions / Math.max(1, replicas)))

/**
 * Which of `held` (in the replica's order of preference) it keeps when it may hold `share`, given the agents
 * of each (`weight`) and the deployment's `partitions` over `replicas`; in its order of preference.
 *
 * The fair part is the agents a replica would hold if the partitions this one does not hold weighed what
 * those it holds weigh on average. The `share` lightest are kept, then the heaviest of the others replace the
 * lightest kept while that brings the kept agents closer to the fair part.
 */
export const partitionsToKeep = (
  held: ReadonlyArray<number>,
  share: number,
  weight: (partition: number) => number,
  split: { readonly partitions: number; readonly replicas: number },
): ReadonlyArray<number> => {
  if (held.length <= share) return held
  const weights = new Map(held.map((p) => [p, Math.max(0, weight(p))]))
  const total = [...weights.values()].reduce((sum, w) => sum + w, 0)
  if (total <= 0) return held.slice(0, share)
  const fair = (total * split.partitions) / (held.length * Math.max(1, split.replicas))
  const preference = new Map(held.map((p, i) => [p, i]))
  const lighterFirst = [...held].sort(
    (a, b) => weights.get(a)! - weights.get(b)! || preference.get(a)! - preference.get(b)!,
  )
  const kept = lighterFirst.slice(0, share)
  const others = lighterFirst.slice(share).reverse()
  let sum = kept.reduce((s, p) => s + weights.get(p)!, 0)
  let i = 0
  for (const candidate of others) {
    if (i >= kept.length) break
    const gain = weights.get(candidate)! - weights.get(kept[i]!)!
    if (gain <= 0) break
    if (Math.abs(sum + gain - fair) < Math.abs(sum - fair)) {
      kept[i] = candidate
      sum += gain
      i++
    }
  }
  const keep = new Set(kept)
  return held.filter((p) => keep.has(p))
}
