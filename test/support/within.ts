/**
 * `work`, or a failure naming `what` once `ms` have passed: a phase that never ends fails naming itself,
 * not at the test's timeout.
 */
export const within = <A>(what: string, ms: number, work: Promise<A>): Promise<A> => {
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms)
  })
  return Promise.race([work, late]).finally(() => clearTimeout(timer))
}
