/**
 * The sentence model in a small pool of worker threads, so its inference never
 * blocks the event loop of the process serving agents' requests: onnxruntime-node's
 * `session.run` computes synchronously (its promise only defers the start), and
 * tokenising is JavaScript, so both run in the workers (embedder-worker.ts); this
 * thread only queues texts and copies vectors out.
 *
 * Each worker holds its own copy of the model and takes one task at a time: up to
 * `batchSize` texts of about `TASK_CHARS` characters at most, so a long call is cut
 * into short tasks and the workers share it. Two lanes wait for a worker:
 * `query` (a request waiting for its answer) is always served before `background`
 * (demotions), so a query queued behind a large background batch waits for one task
 * at most, not for the batch; and `queryThreads` workers (one by default) take only
 * queries, so a query does not wait for a background task at all while one of them is free.
 * The workers that take background work run niced (BACKGROUND_NICE, on Linux), so on a
 * busy machine their inference yields the cores to the threads serving requests.
 *
 * A text already waiting or being embedded is not embedded again: the later call waits for the same vector, and a query asking for a text the
 * background lane holds moves its task to the query lane (a step's query asks for the
 * entries recorded a moment before). Each lane holds at most `maxQueued` texts; a call that
 * would pass the bound is refused with EmbedderOverloaded (unless its lane is empty:
 * a call of any size can run).
 *
 * Vectors are those of the in-thread embedder bit for bit: the same encoder code,
 * the same session options (one intra-op thread), and a text's vector does not
 * depend on what it is batched with. Idle workers do not keep the process alive;
 * `close` ends them, failing unanswered calls with EmbedderClosed.
 */
import { availableParallelism } from "node:os"
import { Worker } from "node:worker_threads"
import { Schema } from "effect"
import type { Embedder, EmbedOptions, EmbedPriority } from "./embedder.ts"
import type {
  EmbedderClose,
  EmbedderTask,
  EmbedderWorkerData,
  EmbedderWorkerMessage,
  LoadFailure,
} from "./embedder-worker.ts"
import { rememberingRecent } from "./onnx-embedder.ts"
import {
  defaultModelsDir,
  ModelFilesMissing,
  ModelLoadFailed,
  missingFiles,
  modelDir,
  SETUP_COMMAND,
  type SentenceModel,
} from "./sentence-models.ts"

/** The nice value of workers that take background work: the cores go to the threads serving requests first. */
export const BACKGROUND_NICE = 10
/** About the most characters a task carries (a task has one text at least). */
const TASK_CHARS = 2_000
export const DEFAULT_MAX_QUEUED = 4_096
/** How long a closing worker may take to finish its running task. */
const WORKER_EXIT_TIMEOUT_MS = 10_000
const WORKER = new URL("./embedder-worker.ts", import.meta.url)

/** Leaves a core to the event loop: cores − 1, at least 1, at most 4. */
export const defaultEmbedderThreads = (cores = availableParallelism()): number => Math.max(1, Math.min(4, cores - 1))

export interface EmbedderPoolOptions {
  readonly modelsDir?: string
  /** Worker threads of both lanes, each with its own copy of the model (default: defaultEmbedderThreads()). */
  readonly threads?: number
  /** Worker threads beside them that take queries only (default 1). */
  readonly queryThreads?: number
  /** Texts each lane may hold waiting for a worker (default 4096). */
  readonly maxQueued?: number
  /** Most texts per inference call inside a worker (default 32). */
  readonly batchSize?: number
}

export interface EmbedderPoolStats {
  /** Workers of both lanes. */
  readonly threads: number
  /** Workers that take queries only. */
  readonly queryThreads: number
  /** Workers computing a task now. */
  readonly busy: number
  /** Texts waiting for a worker, by lane. */
  readonly queued: Readonly<Record<EmbedPriority, number>>
}

export interface EmbedderPool extends Embedder {
  readonly stats: () => EmbedderPoolStats
  /** Ends the workers; calls not answered by then fail with EmbedderClosed. */
  readonly close: () => Promise<void>
}

const Lane = Schema.Literals(["query", "background"])

/** A lane already holds as many texts as it may: the call is refused, nothing of it is queued. */
export class EmbedderOverloaded extends Schema.TaggedError<EmbedderOverloaded>()("EmbedderOverloaded", {
  model: Schema.String,
  lane: Lane,
  queued: Schema.Number,
  texts: Schema.Number,
  bound: Schema.Number,
}) {
  override get message(): string {
    return `embedder '${this.model}': the ${this.lane} lane holds ${this.queued} texts waiting; ${this.texts} more would pass its bound of ${this.bound}`
  }
}

/** The pool was closed before the call was answered. */
export class EmbedderClosed extends Schema.TaggedError<EmbedderClosed>()("EmbedderClosed", {
  model: Schema.String,
}) {
  override get message(): string {
    return `embedder '${this.model}' is closed`
  }
}

/** A worker failed a call: inference threw, or the worker died (it is replaced; the call is not retried). */
export class EmbedderWorkerFailed extends Schema.TaggedError<EmbedderWorkerFailed>()("EmbedderWorkerFailed", {
  model: Schema.String,
  reason: Schema.String,
}) {
  override get message(): string {
    return `embedder '${this.model}': a worker failed: ${this.reason}`
  }
}

interface Call {
  readonly out: Float32Array[]
  pending: number
  settled: boolean
  readonly resolve: (vectors: Float32Array[]) => void
  readonly reject: (error: unknown) => void
}

/** Where one text's vector goes: a call's answer, at an index. */
interface Recipient {
  readonly call: Call
  readonly at: number
}

interface Task {
  readonly texts: ReadonlyArray<string>
  /** Who waits for each text's vector: the call that queued it, and any call that asked for the same text since. */
  readonly to: ReadonlyArray<Array<Recipient>>
  /** The lane it waits in; a query asking for one of its texts moves it to the query lane. */
  lane: EmbedPriority
  started: boolean
}

const waitedFor = (task: Task): boolean => task.to.some((recipients) => recipients.some((r) => !r.call.settled))

interface Slot {
  readonly worker: Worker
  /** The lanes it takes tasks from, in order. */
  lanes: ReadonlyArray<EmbedPriority>
  ready: boolean
  task: Task | null
  /** The last uncaught error of the worker, said when it exits. */
  lastError: string | null
}

/** First in, first out, without Array.shift's copying. */
class Fifo<A> {
  private items: Array<A | undefined> = []
  private head = 0
  get size(): number {
    return this.items.length - this.head
  }
  push(item: A): void {
    this.items.push(item)
  }
  shift(): A | undefined {
    if (this.head === this.items.length) return undefined
    const item = this.items[this.head]
    this.items[this.head++] = undefined
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items = this.items.slice(this.head)
      this.head = 0
    }
    return item
  }
  drain(): A[] {
    const rest = this.items.slice(this.head) as A[]
    this.items = []
    this.head = 0
    return rest
  }
}

const LANES: ReadonlyArray<EmbedPriority> = ["query", "background"]
const QUERY_ONLY: ReadonlyArray<EmbedPriority> = ["query"]

/**
 * Starts `threads` workers and resolves once every one has loaded the model.
 * Rejects with ModelFilesMissing (checked here, before any worker starts) or ModelLoadFailed.
 */
export const startEmbedderPool = async (
  model: SentenceModel,
  options: EmbedderPoolOptions = {},
): Promise<EmbedderPool> => {
  const modelsDir = options.modelsDir ?? defaultModelsDir()
  const dir = modelDir(model, modelsDir)
  const missing = missingFiles(dir)
  if (missing.length > 0) throw new ModelFilesMissing({ model: model.id, dir, missing, setup: SETUP_COMMAND })
  const threads = options.threads ?? defaultEmbedderThreads()
  if (!Number.isInteger(threads) || threads < 1)
    throw new ModelLoadFailed({ model: model.id, dir, reason: `threads must be a positive integer, not ${threads}` })
  const queryThreads = options.queryThreads ?? 1
  if (!Number.isInteger(queryThreads) || queryThreads < 0)
    throw new ModelLoadFailed({
      model: model.id,
      dir,
      reason: `queryThreads must be a non-negative integer, not ${queryThreads}`,
    })
  const maxQueued = options.maxQueued ?? DEFAULT_MAX_QUEUED
  const batchSize = options.batchSize ?? 32
  const data: EmbedderWorkerData = { model: model.id, modelsDir, batchSize, nice: 0 }

  const lanes: Record<EmbedPriority, Fifo<Task>> = { query: new Fifo(), background: new Fifo() }
  /**
   * Each text queued or being embedded, with its task and place: a call asking for it again waits for the
   * same vector instead of embedding it twice (a step's query asks for the entries the background lane was
   * given a moment before).
   */
  const inflight = new Map<string, { readonly task: Task; readonly j: number }>()
  const queued: Record<EmbedPriority, number> = { query: 0, background: 0 }
  const slots = new Set<Slot>()
  let nextTaskId = 0
  let closing: Promise<void> | null = null
  /** Set when every worker is gone and none could be started again: calls fail with it. */
  let broken: string | null = null

  const settle = (call: Call, error: unknown) => {
    if (call.settled) return
    call.settled = true
    call.reject(error)
  }

  const forget = (task: Task) => {
    for (const text of task.texts) if (inflight.get(text)?.task === task) inflight.delete(text)
  }

  const fail = (task: Task, error: unknown) => {
    forget(task)
    for (const recipients of task.to) for (const r of recipients) settle(r.call, error)
  }

  const deliver = (task: Task, vectors: ReadonlyArray<Float32Array>) => {
    forget(task)
    task.to.forEach((recipients, j) => {
      recipients.forEach(({ call, at }, k) => {
        if (call.settled) return
        call.out[at] = k === 0 ? vectors[j]! : vectors[j]!.slice()
        call.pending -= 1
        if (call.pending === 0) {
          call.settled = true
          call.resolve(call.out)
        }
      })
    })
  }

  const next = (from: ReadonlyArray<EmbedPriority>): Task | undefined => {
    for (const lane of from)
      for (let task = lanes[lane].shift(); task !== undefined; task = lanes[lane].shift()) {
        // moved to the query lane after it was queued here: it is counted and taken there
        if (task.lane !== lane || task.started) continue
        queued[lane] -= task.texts.length
        if (waitedFor(task)) return task
        forget(task)
      }
    return undefined
  }

  const pump = () => {
    for (const slot of slots) {
      if (!slot.ready || slot.task !== null) continue
      const task = next(slot.lanes)
      if (task === undefined) continue
      slot.task = task
      task.started = true
      // a busy worker keeps the process alive until it answers; an idle one does not
      slot.worker.ref()
      slot.worker.postMessage({ id: nextTaskId++, texts: task.texts } satisfies EmbedderTask)
    }
  }

  const finish = (slot: Slot): Task | null => {
    const task = slot.task
    slot.task = null
    slot.worker.unref()
    return task
  }

  const loadError = (failure: LoadFailure) =>
    failure._tag === "ModelFilesMissing"
      ? new ModelFilesMissing({
          model: model.id,
          dir: failure.dir,
          missing: [...failure.missing],
          setup: SETUP_COMMAND,
        })
      : new ModelLoadFailed({ model: model.id, dir: failure.dir, reason: failure.reason })

  /** Starts a worker; resolves once it has loaded the model, rejects with why it could not. */
  const spawn = (from: ReadonlyArray<EmbedPriority>): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      // Workers that take background work run below the event loop serving requests; the query workers do not.
      const worker = new Worker(WORKER, { workerData: { ...data, nice: from.length > 1 ? BACKGROUND_NICE : 0 } })
      const slot: Slot = { worker, lanes: from, ready: false, task: null, lastError: null }
      slots.add(slot)
      worker.on("message", (message: EmbedderWorkerMessage) => {
        switch (message.type) {
          case "ready":
            slot.ready = true
            worker.unref()
            resolve()
            pump()
            return
          case "failed":
            reject(loadError(message.failure))
            void worker.terminate()
            return
          case "done": {
            const task = finish(slot)
            if (task !== null) deliver(task, message.vectors)
            pump()
            return
          }
          case "error": {
            const task = finish(slot)
            if (task !== null) fail(task, new EmbedderWorkerFailed({ model: model.id, reason: message.reason }))
            pump()
            return
          }
        }
      })
      worker.on("error", (error) => {
        slot.lastError = error.message
      })
      worker.on("exit", (code) => {
        slots.delete(slot)
        const reason = `worker thread stopped: ${slot.lastError ?? `exit code ${code}`}`
        reject(new ModelLoadFailed({ model: model.id, dir, reason }))
        const task = slot.task
        slot.task = null
        if (closing !== null || !slot.ready) return
        if (task !== null) fail(task, new EmbedderWorkerFailed({ model: model.id, reason }))
        // replaced; when no worker is left and none can start, what waits fails
        spawn(from).catch((error: unknown) => {
          if (closing !== null) return
          if (slots.size > 0) {
            // The workers left take both lanes, so the background lane is never without one.
            if (![...slots].some((s) => s.lanes.length > 1)) for (const s of slots) s.lanes = LANES
            pump()
            return
          }
          broken = error instanceof Error ? error.message : String(error)
          for (const lane of LANES) {
            for (const waiting of lanes[lane].drain())
              fail(waiting, new EmbedderWorkerFailed({ model: model.id, reason: broken }))
            queued[lane] = 0
          }
        })
      })
    })

  /**
   * Asks a worker to end after its running task and waits for it; terminating a thread in the
   * middle of the model's native code aborts the process. One that does not end in time is terminated.
   */
  const endWorker = (worker: Worker): Promise<void> =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => void worker.terminate(), WORKER_EXIT_TIMEOUT_MS)
      worker.once("exit", () => {
        clearTimeout(timer)
        resolve()
      })
      worker.postMessage({ type: "close" } satisfies EmbedderClose)
    })

  const close = (): Promise<void> => {
    if (closing !== null) return closing
    const error = new EmbedderClosed({ model: model.id })
    const workers = [...slots].map((slot) => {
      if (slot.task !== null) fail(slot.task, error)
      return slot.worker
    })
    for (const lane of LANES) {
      for (const task of lanes[lane].drain()) fail(task, error)
      queued[lane] = 0
    }
    closing = Promise.all(workers.map(endWorker)).then(() => undefined)
    return closing
  }

  const encode = (texts: ReadonlyArray<string>, options?: EmbedOptions): Promise<Float32Array[]> => {
    const lane = options?.priority ?? "query"
    if (closing !== null) return Promise.reject(new EmbedderClosed({ model: model.id }))
    if (broken !== null) return Promise.reject(new EmbedderWorkerFailed({ model: model.id, reason: broken }))
    if (texts.length === 0) return Promise.resolve([])
    const fresh = texts.filter((text) => !inflight.has(text)).length
    if (queued[lane] > 0 && queued[lane] + fresh > maxQueued)
      return Promise.reject(
        new EmbedderOverloaded({ model: model.id, lane, queued: queued[lane], texts: fresh, bound: maxQueued }),
      )
    return new Promise<Float32Array[]>((resolve, reject) => {
      const call: Call = { out: new Array(texts.length), pending: texts.length, settled: false, resolve, reject }
      const newTask = (): Task & { texts: string[]; to: Recipient[][] } => ({ texts: [], to: [], lane, started: false })
      let task = newTask()
      let chars = 0
      const cut = () => {
        if (task.texts.length === 0) return
        lanes[lane].push(task)
        queued[lane] += task.texts.length
        task = newTask()
        chars = 0
      }
      texts.forEach((text, i) => {
        const known = inflight.get(text)
        if (known !== undefined) {
          known.task.to[known.j]!.push({ call, at: i })
          if (lane === "query" && known.task.lane === "background" && !known.task.started && known.task !== task) {
            queued.background -= known.task.texts.length
            queued.query += known.task.texts.length
            known.task.lane = "query"
            lanes.query.push(known.task)
          }
          return
        }
        if (task.texts.length > 0 && (task.texts.length === batchSize || chars + text.length > TASK_CHARS)) cut()
        inflight.set(text, { task, j: task.texts.length })
        task.texts.push(text)
        task.to.push([{ call, at: i }])
        chars += text.length
      })
      cut()
      pump()
    })
  }

  try {
    await Promise.all([
      ...Array.from({ length: threads }, () => spawn(LANES)),
      ...Array.from({ length: queryThreads }, () => spawn(QUERY_ONLY)),
    ])
  } catch (error) {
    await close()
    throw error
  }

  return {
    model: model.model,
    dims: model.dims,
    embed: rememberingRecent(encode),
    stats: () => ({
      threads: [...slots].filter((slot) => slot.lanes.length > 1).length,
      queryThreads: [...slots].filter((slot) => slot.lanes.length === 1).length,
      busy: [...slots].filter((slot) => slot.task !== null).length,
      queued: { ...queued },
    }),
    close,
  }
}
