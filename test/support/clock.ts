/** A clock for recorded timestamps: each `next()` is one step later than the last. */
export const steppingClock = (start: number, step: number) => {
  let now = start
  return {
    next: (): number => {
      now += step
      return now
    },
  }
}
