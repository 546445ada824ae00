/**
 * One worker thread of the embedder pool (embedder-pool.ts): loads the sentence
 * model once, says whether it could, then encodes each task it is sent — one at
 * a time, in its own thread, so the model's synchronous inference blocks no
 * event loop but this one.
 */
import { setPriority } from "node:os"
import { parentPort, workerData } from "node:worker_threads"
import { loadSentenceEncoder, type SentenceEncoder } from "./onnx-embedder.ts"
import { ModelFilesMissing, ModelLoadFailed, sentenceModel } from "./sentence-models.ts"

export interface EmbedderWorkerData {
  readonly model: string
  readonly modelsDir: string
  readonly batchSize: number
  /** The thread's nice value (0: as the process): a worker of background work yields the cores to requests. */
  readonly nice: number
}

/** What the pool sends: texts to encode. */
export interface EmbedderTask {
  readonly id: number
  readonly texts: ReadonlyArray<string>
}

/** What the pool sends to end a worker: it finishes the task it is running, then exits. */
export interface EmbedderClose {
  readonly type: "close"
}

/** A failure to load, as it crosses threads (errors lose their class on the way). */
export type LoadFailure =
  | { readonly _tag: "ModelFilesMissing"; readonly dir: string; readonly missing: ReadonlyArray<string> }
  | { readonly _tag: "ModelLoadFailed"; readonly dir: string; readonly reason: string }

/** What a worker answers: once whether it loaded, then one message per task. */
export type EmbedderWorkerMessage =
  | { readonly type: "ready" }
  | { readonly type: "failed"; readonly failure: LoadFailure }
  | { readonly type: "done"; readonly id: number; readonly vectors: ReadonlyArray<Float32Array> }
  | { readonly type: "error"; readonly id: number; readonly reason: string }

const port = parentPort
const data = workerData as EmbedderWorkerData
// On Linux a nice value is the calling thread's own: this worker's, and its inference's (one intra-op thread).
if (data.nice > 0) {
  try {
    setPriority(data.nice)
  } catch {
    // Not permitted here: the worker runs at the process's priority.
  }
}

const loadFailure = (error: unknown): LoadFailure =>
  error instanceof ModelFilesMissing
    ? { _tag: "ModelFilesMissing", dir: error.dir, missing: error.missing }
    : error instanceof ModelLoadFailed
      ? { _tag: "ModelLoadFailed", dir: error.dir, reason: error.reason }
      : { _tag: "ModelLoadFailed", dir: data.modelsDir, reason: String(error) }

const serve = (encoder: SentenceEncoder) => {
  let running = 0
  let closing = false
  // Ending the thread while the model's native code runs aborts the whole process, so a worker ends
  // itself, between tasks, when asked to.
  const exitIfDone = () => {
    if (closing && running === 0) process.exit(0)
  }
  port!.on("message", (message: EmbedderTask | EmbedderClose) => {
    if ("type" in message) {
      closing = true
      exitIfDone()
      return
    }
    const task = message
    running++
    encoder
      .encode(task.texts)
      .then(
        (vectors) => {
          const done: EmbedderWorkerMessage = { type: "done", id: task.id, vectors }
          port!.postMessage(
            done,
            vectors.map((v) => v.buffer as ArrayBuffer),
          )
        },
        (error: unknown) => {
          const failed: EmbedderWorkerMessage = {
            type: "error",
            id: task.id,
            reason: error instanceof Error ? error.message : String(error),
          }
          port!.postMessage(failed)
        },
      )
      .finally(() => {
        running--
        exitIfDone()
      })
  })
}

if (port !== null) {
  const model = sentenceModel(data.model)
  const loading =
    model === undefined
      ? Promise.reject(new Error(`no sentence model '${data.model}'`))
      : loadSentenceEncoder(model, { modelsDir: data.modelsDir, batchSize: data.batchSize })
  loading.then(
    (encoder) => {
      serve(encoder)
      port.postMessage({ type: "ready" } satisfies EmbedderWorkerMessage)
    },
    (error: unknown) =>
      port.postMessage({ type: "failed", failure: loadFailure(error) } satisfies EmbedderWorkerMessage),
  )
}
