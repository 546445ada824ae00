/** Small statistics helpers for the speed benchmark. */

export const median = (xs: ReadonlyArray<number>): number => {
  if (xs.length === 0) throw new Error("median of nothing")
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** Nearest-rank percentile (p in 0..100) of individual samples. */
export const percentile = (xs: ReadonlyArray<number>, p: number): number => {
  if (xs.length === 0) throw new Error("percentile of nothing")
  const sorted = Float64Array.from(xs).sort()
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)))
  return sorted[rank - 1]!
}

export const perSecond = (count: number, millis: number): number => count / (millis / 1000)

/** Runs `body` and returns its wall time in milliseconds. */
export const timed = async <A>(body: () => Promise<A>): Promise<{ readonly value: A; readonly millis: number }> => {
  const start = performance.now()
  const value = await body()
  return { value, millis: performance.now() - start }
}
