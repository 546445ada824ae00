/**
 * Whether the process is ready to serve: each part of it (a NATS connection, a partitioned service's
 * leases and partitions) registers a check for as long as its scope lives, saying why it is not ready, or
 * nothing. The process is ready when no check has a reason (`/readyz`).
 *
 * A reference with a default, as `Metrics`: the parts run unchanged where no process-wide instance is
 * provided.
 */
import { Context, Effect, type Scope } from "effect"

/** Why the part is not ready now, one reason a line; empty: ready. */
export type ReadinessCheck = () => ReadonlyArray<string>

export interface ReadinessShape {
  readonly register: (check: ReadinessCheck) => Effect.Effect<void, never, Scope.Scope>
  /** Every reason the process is not ready now; empty: ready. */
  readonly reasons: () => ReadonlyArray<string>
  /** The process has built what it runs: until then it is not ready, whatever its parts say. */
  readonly started: () => void
}

export const makeReadiness = (): ReadinessShape => {
  let starting = true
  const checks = new Set<ReadinessCheck>([() => (starting ? ["starting"] : [])])
  return {
    started: () => {
      starting = false
    },
    register: (check) =>
      Effect.acquireRelease(
        Effect.sync(() => checks.add(check)),
        () => Effect.sync(() => checks.delete(check)),
      ),
    reasons: () => [...checks].flatMap((check) => check()),
  }
}

export const Readiness = Context.Reference<ReadinessShape>("wm/Readiness", { defaultValue: makeReadiness })
