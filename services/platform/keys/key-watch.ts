/**
 * The key bucket as one service sees it: each key's newest record, read in one pass at start and then
 * followed as keys are made, rotated and destroyed. A reader opens a key made a moment ago by another
 * process without asking the store for it, and a writer learns, from how far the watch has read the key
 * stream, whether its agent's key changed before its own write landed (key-store.ts).
 */
import { type ConsumerMessages, DeliverPolicy, type JetStreamManager, type JsMsg } from "@nats-io/jetstream"
import { agentKeyName, entryKeyName, KEY_BUCKET } from "../../../contracts/buckets.ts"
import { readToEnd } from "../log/read-to-end.ts"
import { Recent } from "./recent.ts"

/** A key's newest record as stored (null once deleted) and its revision. */
export interface WatchedKey {
  readonly value: Uint8Array | null
  readonly revision: number
}

const SUBJECT_PREFIX = `$KV.${KEY_BUCKET}.`
const AGENT_PREFIX = agentKeyName("")
/** Records kept of keys not opened yet; one evicted is read from the store when it is needed. */
const WATCHED_KEYS = 100_000

/** What the consumer reports when its stream or itself went away: the watch reads the stream again from the start. */
const LOST = new Set(["stream_not_found", "consumer_not_found", "consumer_deleted", "ordered_consumer_recreated"])
const RESTART_WAIT_MS = 500
/** Pulls expire, and heartbeats come, within this: a consumer lost with its server is noticed in seconds. */
const EXPIRES_MS = 2_000

export class KeyWatch {
  /** Entries' and snapshots' keys, bounded; agents' keys, as many as there are agents, all kept. */
  private keys = new Recent<WatchedKey>(WATCHED_KEYS)
  private readonly agents = new Map<string, WatchedKey>()
  /** Every message of the key stream up to this sequence has been read. */
  private position = 0
  private live = false
  /** A write waited for the watch in vain: it is not relied on for writes until it reads again. */
  private stalled = false
  /** The watch was stopped. */
  ended = false
  private readonly waiters = new Set<{ readonly seq: number; readonly reached: (yes: boolean) => void }>()
  private messages: ConsumerMessages | undefined
  private readonly stream: string
  /** Called when an agent's key is destroyed (its entry keys are erased without a mark of their own). */
  onAgentDestroyed: (agentId: string) => void = () => undefined
  /** Called when an entry's key is destroyed (its name, `entry.<agent>.<entry>`). */
  onEntryDestroyed: (name: string) => void = () => undefined

  constructor(stream: string) {
    this.stream = stream
  }

  /** Reads every key's newest record, then goes on following the stream; resolves once the first pass is read. */
  async start(jsm: JetStreamManager): Promise<number> {
    return this.read(jsm)
  }

  /**
   * One pass over each key's newest record, then the stream's new messages, until the consumer reports its
   * stream lost or recreated (a bucket deleted and made again starts its sequences anew): then it all is
   * read again. Until the first pass is read again, nothing is taken from the watch (readers and writers
   * ask the store). The pass and the following are two consumers: a consumer of the last message per
   * subject makes the server count its pending messages over every subject at each delivery.
   */
  private async read(jsm: JetStreamManager): Promise<number> {
    this.live = false
    this.stalled = false
    this.position = 0
    this.keys = new Recent<WatchedKey>(WATCHED_KEYS)
    this.agents.clear()
    const js = jsm.jetstream()
    const newest = await js.consumers.get(this.stream, { deliver_policy: DeliverPolicy.LastPerSubject })
    // A forget may erase keys the pass counted before it reaches them: the pass ends without them.
    try {
      if ((await newest.info(true)).num_pending > 0)
        for await (const m of readToEnd(newest)) {
          if (this.ended) break
          this.take(m)
        }
    } catch (error) {
      // Stopped while it read: the connection closing under the pass is no failure.
      if (this.ended) return 0
      throw error
    }
    if (this.ended) return 0
    const following = await js.consumers.get(this.stream, {
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: this.position + 1,
    })
    const messages = await following.consume({ expires: EXPIRES_MS })
    this.messages = messages
    this.live = true
    void (async () => {
      for await (const status of messages.status())
        if (LOST.has(status.type)) {
          await messages.close().catch(() => undefined)
          return
        }
    })().catch(() => undefined)
    void (async () => {
      try {
        for await (const m of messages) this.take(m)
      } catch {
        // Read again below, unless stopped.
      } finally {
        this.live = false
        for (const waiter of this.waiters) waiter.reached(false)
        this.waiters.clear()
        if (!this.ended) void this.readAgain(jsm)
      }
    })()
    return this.keys.count + this.agents.size
  }

  private take(m: JsMsg) {
    const operation = m.headers?.get("KV-Operation")
    const deleted = operation === "DEL" || operation === "PURGE"
    this.receive(m.subject.slice(SUBJECT_PREFIX.length), { value: deleted ? null : m.data, revision: m.seq })
  }

  private async readAgain(jsm: JetStreamManager) {
    while (!this.ended) {
      await new Promise((resolve) => setTimeout(resolve, RESTART_WAIT_MS))
      if (this.ended) return
      try {
        await this.read(jsm)
        return
      } catch {
        // The stream or the connection is not back yet.
      }
    }
  }

  /** Takes in one message of the key stream, read in stream order. */
  protected receive(name: string, key: WatchedKey) {
    this.stalled = false
    if (name.startsWith(AGENT_PREFIX)) {
      this.agents.set(name, key)
      // A forget erases the agent's entry keys without marks: what the watch read of them goes too.
      if (this.live && key.value !== null && isDestroyed(key.value)) {
        const agentId = name.slice(AGENT_PREFIX.length)
        this.keys.deleteWhere((k) => k.startsWith(`${entryKeyName(agentId, "")}`))
        this.onAgentDestroyed(agentId)
      }
    } else {
      this.keys.set(name, key)
      if (this.live && key.value !== null && isDestroyed(key.value)) this.onEntryDestroyed(name)
    }
    this.position = Math.max(this.position, key.revision)
    for (const waiter of this.waiters)
      if (waiter.seq <= this.position) {
        this.waiters.delete(waiter)
        waiter.reached(true)
      }
  }

  /** True while the watch is read up to date: a write may take an agent's key from it (and confirm it after). */
  get current(): boolean {
    return this.live && !this.stalled
  }

  /** The newest record of `name` the watch has read; undefined when it has none (never made, evicted, or not live). */
  get(name: string): WatchedKey | undefined {
    if (!this.live) return undefined
    return name.startsWith(AGENT_PREFIX) ? this.agents.get(name) : this.keys.peek(name)
  }

  /** Forgets what was read of `name` (its key is held unwrapped, or dropped on a forget). */
  drop(name: string) {
    this.keys.delete(name)
    this.agents.delete(name)
  }

  dropWhere(match: (name: string) => boolean) {
    this.keys.deleteWhere(match)
    for (const name of [...this.agents.keys()]) if (match(name)) this.agents.delete(name)
  }

  /** True once every message up to `seq` has been read; false when `waitMs` passes first or the watch is not live. */
  reached(seq: number, waitMs: number): Promise<boolean> {
    if (seq <= this.position && this.live) return Promise.resolve(true)
    if (!this.live) return Promise.resolve(false)
    return new Promise((resolve) => {
      const waiter = {
        seq,
        reached: (yes: boolean) => {
          clearTimeout(timer)
          resolve(yes)
        },
      }
      const timer = setTimeout(() => {
        this.waiters.delete(waiter)
        this.stalled = true
        resolve(false)
      }, waitMs)
      this.waiters.add(waiter)
    })
  }

  async stop() {
    this.ended = true
    await this.messages?.close().catch(() => undefined)
  }
}

const decoder = new TextDecoder()
const isDestroyed = (value: Uint8Array) => {
  try {
    return "destroyed" in (JSON.parse(decoder.decode(value)) as object)
  } catch {
    return false
  }
}
