/**
 * TypeScript client of the working-memory API over NATS.
 *
 *   const wm = await WorkingMemoryClient.connect()   // NATS_URL, else nats://127.0.0.1:4222
 *   const agent = wm.agent("planner")
 *   await agent.register({ role: "main" })
 *   await agent.record({ origin: "USER", content: "Ship the report by Friday." })
 *   const { text, tokens } = await agent.buildContext()
 *
 * Every write carries a request id; a call that times out is retried with
 * the same body (so the same id), and a write is stored and applied once; one
 * refused with `Overloaded` is sent again after the wait the refusal asks for. The client remembers the
 * highest log sequence its writes reached and asks reads to wait for it, so
 * an agent always reads its own writes. Called within an OpenTelemetry span,
 * a request carries its W3C trace context, and the services' spans join the trace.
 */
import { nuid } from "@nats-io/nuid"
import { connect, errors, type NatsConnection } from "@nats-io/transport-node"
import { Schema } from "effect"
import type { OperationName, RequestOf, ResponseOf } from "../contracts/api.ts"
import { MAX_CONTENT_BYTES, operations } from "../contracts/api.ts"
import { DEFAULT_NATS_PING_INTERVAL_MS, dialLeastRecent, MAX_PINGS_OUT } from "../contracts/connection.ts"
import { ApiError, Overloaded, Unavailable, ValidationError } from "../contracts/errors.ts"
import { apiSubject, DEFAULT_NATS_URL } from "../contracts/subjects.ts"
import { RoutedRefusals } from "./routed-refusals.ts"
import { traceHeaders } from "./trace-context.ts"

export interface ConnectOptions {
  /** Comma-separated or a list (default: `NATS_URL`, else `nats://127.0.0.1:4222`). */
  readonly servers?: string | ReadonlyArray<string>
  readonly user?: string
  readonly pass?: string
  readonly name?: string
  /**
   * Prefix of this connection's reply subjects (default `_INBOX`). Under the
   * broker permissions of infra/auth.ts an agent may receive replies only on
   * its own prefix, `_INBOX_<agentId>`.
   */
  readonly inboxPrefix?: string
  /** Per attempt, in milliseconds (default 5000). */
  readonly timeoutMs?: number
  /** Attempts per call when the service does not answer (default 4). */
  readonly attempts?: number
  /**
   * Attempts per call while the service answers `Overloaded` (default 10): each waits the refusal's
   * `retryAfterMs` (at most 10 s) and sends the same request again; after the last, the `Overloaded`
   * error is thrown.
   */
  readonly overloadedAttempts?: number
  /**
   * How long, in milliseconds, a call keeps asking while no service is subscribed at all (default 8000):
   * a partition moving between replicas, or services restarting, has no responder for up to a lease's
   * lifetime (WM_LEASE_TTL_MS, 6 s). These retries, every 250 ms, are not attempts; after the patience,
   * a call without responders uses its attempts as any unanswered one.
   */
  readonly noResponderPatienceMs?: number
  /**
   * How often the connection pings its server (default 5000); two pings unanswered and it reconnects to
   * another server of the list. A server cut off by a network partition keeps the connection open.
   */
  readonly pingIntervalMs?: number
}

/** How often a call without responders asks again while its patience lasts. */
const NO_RESPONDER_RETRY_MS = 250

/** The longest wait an `Overloaded` refusal is taken at its word for. */
const MAX_OVERLOADED_WAIT_MS = 10_000

const decodeApiError = Schema.decodeUnknownSync(ApiError)
const textEncoder = new TextEncoder()
const textDecoder = new TextDecoder()

/** Thrown when the service does not answer at all after every attempt. */
export class NoResponse extends Error {
  override readonly name = "NoResponse"
}

type Without<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never

export class WorkingMemoryClient {
  readonly nc: NatsConnection
  readonly #timeoutMs: number
  readonly #attempts: number
  readonly #overloadedAttempts: number
  readonly #noResponderPatienceMs: number
  readonly #refusals: RoutedRefusals

  private constructor(nc: NatsConnection, options: ConnectOptions) {
    this.nc = nc
    this.#refusals = new RoutedRefusals(nc)
    this.#timeoutMs = options.timeoutMs ?? 5_000
    this.#attempts = options.attempts ?? 4
    this.#overloadedAttempts = options.overloadedAttempts ?? 10
    this.#noResponderPatienceMs = options.noResponderPatienceMs ?? 8_000
  }

  static async connect(options: ConnectOptions = {}): Promise<WorkingMemoryClient> {
    const servers = options.servers ?? process.env.NATS_URL ?? DEFAULT_NATS_URL
    const nc = await connect({
      servers: typeof servers === "string" ? servers.split(",") : [...servers],
      name: options.name ?? "working-memory-sdk",
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
      pingInterval: options.pingIntervalMs ?? DEFAULT_NATS_PING_INTERVAL_MS,
      maxPingOut: MAX_PINGS_OUT,
      reconnectToServer: dialLeastRecent,
      // Every failure reaches the caller as the SDK's own error (NoResponse, a typed refusal); a stack trace
      // captured for each request would cost the agent's process CPU on every call.
      noAsyncTraces: true,
      ...(options.user !== undefined ? { user: options.user } : {}),
      ...(options.pass !== undefined ? { pass: options.pass } : {}),
      ...(options.inboxPrefix !== undefined ? { inboxPrefix: options.inboxPrefix } : {}),
    })
    return new WorkingMemoryClient(nc, options)
  }

  agent(agentId: string): AgentClient {
    return new AgentClient(this, agentId)
  }

  /**
   * Sends one request, retrying with the same body (hence the same request
   * id) while nobody answers, and after the wait an `Overloaded` refusal asks
   * for. Throws the typed API error on refusal.
   */
  async call<O extends OperationName>(
    agentId: string,
    operation: O,
    request: RequestOf<O>,
    options: { readonly timeoutMs?: number } = {},
  ): Promise<ResponseOf<O>> {
    const subject = apiSubject(agentId, operations[operation].subject)
    const body = textEncoder.encode(JSON.stringify(request))
    // The connection would refuse it with a bare "max_payload size exceeded": say which limit, as the API does.
    const maxPayload = this.nc.info?.max_payload
    if (maxPayload !== undefined && body.length > maxPayload) {
      throw ValidationError.one(
        "(body)",
        `the request is ${body.length} bytes, above the server's max_payload of ${maxPayload} bytes (entry content is limited to ${MAX_CONTENT_BYTES} bytes)`,
      )
    }
    const headers = traceHeaders()
    let lastError: unknown
    let overloaded = 0
    let firstNoResponder: number | undefined
    for (let attempt = 1; attempt <= this.#attempts; attempt++) {
      try {
        const reply = await this.#refusals.guard(subject, () =>
          this.nc.request(subject, body, {
            timeout: options.timeoutMs ?? this.#timeoutMs,
            ...(headers !== undefined ? { headers } : {}),
          }),
        )
        const parsed = JSON.parse(textDecoder.decode(reply.data)) as
          | { ok: true; value: ResponseOf<O> }
          | { ok: false; error: unknown }
        if (parsed.ok) return parsed.value
        throw decodeApiError(parsed.error)
      } catch (error) {
        // A connection closed or draining sends nothing, now or on a retry: the API's Unavailable, at once.
        if (error instanceof errors.ClosedConnectionError || error instanceof errors.DrainingConnectionError)
          throw new Unavailable({ reason: `the connection to NATS is closed (${error.message}); nothing was stored` })
        const noResponders =
          error instanceof errors.NoRespondersError ||
          // No service listening (restarting) arrives as a RequestError caused by NoRespondersError.
          (error instanceof errors.RequestError && error.isNoResponders())
        const retryable = error instanceof errors.TimeoutError || noResponders
        // Only "nothing was stored, try again" is retried; every other refusal (StorageFull included:
        // a full store stays full) is thrown as its typed error at once.
        // Unavailable: nothing was stored. NotCaughtUp: the view had not yet applied the caller's own
        // writes when its wait ran out (a loaded machine); the same request again is answered once it has.
        const tag = typeof error === "object" && error !== null ? (error as { _tag?: unknown })._tag : undefined
        const unavailable = tag === "Unavailable" || tag === "NotCaughtUp"
        if (error instanceof Overloaded) {
          // Nothing was stored: the same request again once the background work has caught up, a bounded
          // number of times; these waits are not attempts that went unanswered.
          if (++overloaded >= this.#overloadedAttempts) throw error
          attempt--
          await new Promise((r) => setTimeout(r, Math.min(MAX_OVERLOADED_WAIT_MS, Math.max(0, error.retryAfterMs))))
          continue
        }
        if (!retryable && !unavailable) throw error
        lastError = error
        if (noResponders) {
          firstNoResponder ??= Date.now()
          if (Date.now() - firstNoResponder < this.#noResponderPatienceMs) {
            attempt--
            await new Promise((r) => setTimeout(r, NO_RESPONDER_RETRY_MS))
            continue
          }
        }
        await new Promise((r) => setTimeout(r, Math.min(2_000, 100 * 2 ** attempt)))
      }
    }
    // A view still behind after every attempt is said as such: its typed answer, not "no answer".
    if (typeof lastError === "object" && lastError !== null && (lastError as { _tag?: unknown })._tag === "NotCaughtUp")
      throw lastError
    throw new NoResponse(`no answer on ${subject} after ${this.#attempts} attempts: ${String(lastError)}`, {
      cause: lastError,
    })
  }

  async close(): Promise<void> {
    await this.nc.drain().catch(() => this.nc.close())
  }
}

/** One agent's side of the API. */
export class AgentClient {
  readonly #client: WorkingMemoryClient
  readonly agentId: string
  /** The highest log sequence this client's writes reached. */
  lastSeq = 0

  constructor(client: WorkingMemoryClient, agentId: string) {
    this.#client = client
    this.agentId = agentId
  }

  async #write<O extends OperationName>(
    operation: O,
    request: Without<RequestOf<O>, "requestId"> & { requestId?: string },
  ) {
    const value = await this.#client.call(this.agentId, operation, {
      requestId: nuid.next(),
      ...request,
    } as RequestOf<O>)
    const seq = (value as { seq?: number }).seq
    if (typeof seq === "number" && seq > this.lastSeq) this.lastSeq = seq
    return value
  }

  register(request: Without<RequestOf<"registerAgent">, "requestId"> & { requestId?: string }) {
    return this.#write("registerAgent", request)
  }
  retuneBudget(budget: number) {
    return this.#write("retuneBudget", { budget })
  }
  enterHyperfocus(budget?: number) {
    return this.#write("enterHyperfocus", budget === undefined ? {} : { budget })
  }
  exitHyperfocus() {
    return this.#write("exitHyperfocus", {})
  }
  record(request: Without<RequestOf<"recordEntry">, "requestId"> & { requestId?: string }) {
    return this.#write("recordEntry", request)
  }
  /**
   * Records a batch of entries (importing a transcript), each as `record` records it: `entry.recordMany`.
   * Every entry without a request id is given one here, before the first attempt, so a batch retried
   * after a lost reply stores nothing twice. Resolves with one result per entry, in order: an entry
   * refused alone has its typed error in its result (`ok: false`); a batch refused whole is thrown.
   */
  async recordMany(
    entries: ReadonlyArray<Without<RequestOf<"recordEntry">, "requestId"> & { requestId?: string }>,
  ): Promise<ResponseOf<"recordMany">> {
    const request = { entries: entries.map((entry) => ({ ...entry, requestId: entry.requestId ?? nuid.next() })) }
    const value = await this.#client.call(this.agentId, "recordMany", request)
    if (value.seq > this.lastSeq) this.lastSeq = value.seq
    return {
      ...value,
      // On the wire an entry's refusal is its JSON; here it is the typed error, as a refusal of a call is.
      results: value.results.map((result) => (result.ok ? result : { ...result, error: decodeApiError(result.error) })),
    }
  }
  beginStep(request: Without<RequestOf<"beginStep">, "requestId"> & { requestId?: string } = {}) {
    return this.#write("beginStep", request)
  }
  setFocus(request: Without<RequestOf<"setFocus">, "requestId">) {
    return this.#write("setFocus", request)
  }
  /** Reports the entries used in the step, by id and/or by quoting their text. */
  reference(stepId: string, entryIds: ReadonlyArray<string>, quotes?: ReadonlyArray<string>) {
    return this.#write("referenceEntries", {
      stepId,
      entryIds: [...entryIds],
      ...(quotes ? { quotes: [...quotes] } : {}),
    })
  }
  endStep(stepId: string) {
    return this.#write("endStep", { stepId })
  }
  buildContext(request: Without<RequestOf<"buildContext">, "requestId" | "afterSeq"> = {}) {
    return this.#write("buildContext", { ...request, afterSeq: this.lastSeq })
  }
  view() {
    return this.#client.call(this.agentId, "getView", { afterSeq: this.lastSeq })
  }
  /** Searches working and long-term memory. */
  query(query: string, options: Without<RequestOf<"query">, "query" | "afterSeq"> = {}) {
    return this.#client.call(this.agentId, "query", { query, ...options, afterSeq: this.lastSeq })
  }
  /** Every entry of a correlation id, across agents and tiers. */
  thread(correlationId: string) {
    return this.#client.call(this.agentId, "thread", { correlationId, afterSeq: this.lastSeq })
  }
  /** The raw text of any entry this agent recorded, from the substrate. */
  raw(entryId: string) {
    return this.#client.call(this.agentId, "getRaw", { entryId, afterSeq: this.lastSeq })
  }
  /** After the agent restarts: brings its most recently demoted records back into working. */
  warmUp(count?: number) {
    return this.#write("warmUp", { ...(count === undefined ? {} : { count }), afterSeq: this.lastSeq })
  }
}
