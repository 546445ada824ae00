/**
 * The key bucket as one service sees it: each key's newest record, read in one pass at start and then
 * followed as keys are made, rotated and destroyed. A reader opens a key made a moment ago by another
 * process without asking the store for it, and a writer learns, from how far the watch has read the key
 * stream, whether its agent's key changed before its own write landed (key-store.ts).
 */
import { type ConsumerMessages, DeliverPolicy, type JetStreamManager } from "@nats-io/jetstream"
import { agentKeyName, KEY_BUCKET } from "../../../contracts/buckets.ts"
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

export class KeyWatch {
  /** Entries' and snapshots' keys, bounded; agents' keys, as many as there are agents, all kept. */
  private readonly keys = new Recent<WatchedKey>(WATCHED_KEYS)
  private readonly agents = new Map<string, WatchedKey>()
  /** Every message of the key stream up to this sequence has been read. */
  private position = 0
  private live = false
  /** The watch has stopped, or its stream or connection went away. */
  ended = false
  private readonly waiters = new Set<{ readonly seq: number; readonly reached: (yes: boolean) => void }>()
  private messages: ConsumerMessages | undefined
  private readonly stream: string

  constructor(stream: string) {
    this.stream = stream
  }

  /** Reads every key's newest record, then goes on following the stream; resolves once the first pass is read. */
  async start(jsm: JetStreamManager): Promise<number> {
    const consumer = await jsm.jetstream().consumers.get(this.stream, {
      deliver_policy: DeliverPolicy.LastPerSubject,
    })
    const info = await consumer.info(true)
    const messages = await consumer.consume()
    this.messages = messages
    let firstPassRead: () => void = () => undefined
    const firstPass = new Promise<void>((resolve) => {
      firstPassRead = resolve
    })
    // Nothing pending: the stream is empty.
    if (info.num_pending === 0) {
      this.live = true
      firstPassRead()
    }
    void (async () => {
      try {
        for await (const m of messages) {
          const operation = m.headers?.get("KV-Operation")
          const deleted = operation === "DEL" || operation === "PURGE"
          this.receive(m.subject.slice(SUBJECT_PREFIX.length), { value: deleted ? null : m.data, revision: m.seq })
          if (!this.live && m.info.pending === 0) {
            this.live = true
            firstPassRead()
          }
        }
      } catch {
        // The watch ends with its service; readers and writers fall back to asking the store.
      } finally {
        this.live = false
        this.ended = true
        for (const waiter of this.waiters) waiter.reached(false)
        this.waiters.clear()
        firstPassRead()
      }
    })()
    await firstPass
    return this.keys.count + this.agents.size
  }

  /** Takes in one message of the key stream, read in stream order. */
  protected receive(name: string, key: WatchedKey) {
    if (name.startsWith(AGENT_PREFIX)) this.agents.set(name, key)
    else this.keys.set(name, key)
    this.position = Math.max(this.position, key.revision)
    for (const waiter of this.waiters)
      if (waiter.seq <= this.position) {
        this.waiters.delete(waiter)
        waiter.reached(true)
      }
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
        resolve(false)
      }, waitMs)
      this.waiters.add(waiter)
    })
  }

  async stop() {
    await this.messages?.close().catch(() => undefined)
  }
}
