/**
 * The server routes a request to its partition's owner by mapping its subject (contracts/routing.ts) and
 * checks the sender's rights on the mapped subject, so a refused request is reported on a subject the caller
 * never used and the connection cannot match it to the request. This watches the connection's errors and
 * rejects the pending requests of the API subject a refused route stands for, with the refusal the caller
 * would otherwise have had: `Permissions Violation for Publish to "wm.api.<agent>.<operation>"`.
 */
import { errors, type NatsConnection } from "@nats-io/transport-node"
import { parseRouteSubject } from "../contracts/routing.ts"
import { apiSubject } from "../contracts/subjects.ts"

export class RoutedRefusals {
  readonly #pending = new Map<string, Set<(error: Error) => void>>()

  constructor(nc: NatsConnection) {
    void (async () => {
      for await (const status of nc.status()) {
        if (status.type !== "error") continue
        const error = status.error
        if (!(error instanceof errors.PermissionViolationError) || error.operation !== "publish") continue
        const routed = parseRouteSubject(error.subject)
        if (routed === undefined) continue
        const subject = apiSubject(routed.agentId, routed.operation)
        const refusal = new errors.PermissionViolationError(
          `Permissions Violation for Publish to "${subject}"`,
          "publish",
          subject,
        )
        for (const reject of this.#pending.get(subject) ?? []) reject(refusal)
      }
    })()
  }

  /** Runs a request on `subject`, rejected at once if the server refuses its route. */
  async guard<A>(subject: string, request: () => Promise<A>): Promise<A> {
    let reject!: (error: Error) => void
    const refused = new Promise<never>((_, r) => {
      reject = r
    })
    const waiting = this.#pending.get(subject) ?? new Set()
    waiting.add(reject)
    this.#pending.set(subject, waiting)
    try {
      return await Promise.race([request(), refused])
    } finally {
      waiting.delete(reject)
      if (waiting.size === 0) this.#pending.delete(subject)
    }
  }
}
