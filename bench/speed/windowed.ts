/**
 * Runs `total` asynchronous operations with at most `window` in flight: the
 * same pacing for the system's requests and for raw JetStream publishes, so
 * the two are compared under the same load.
 */
export const runWindowed = (total: number, window: number, operation: (i: number) => Promise<unknown>): Promise<void> =>
  new Promise((resolve, reject) => {
    let started = 0
    let finished = 0
    let failed = false
    const fail = (error: unknown) => {
      if (failed) return
      failed = true
      reject(error)
    }
    const startMore = () => {
      while (!failed && started < total && started - finished < window) {
        const i = started++
        let pending: Promise<unknown>
        try {
          pending = operation(i)
        } catch (error) {
          return fail(error)
        }
        pending.then(done, fail)
      }
    }
    const done = () => {
      finished++
      if (finished === total) resolve()
      else startMore()
    }
    if (total === 0) resolve()
    else startMore()
  })
