/**
 * Progress of a long read of the log, on stderr so stdout stays the result:
 * a single line rewritten in place on a terminal; otherwise a plain line
 * every few seconds (none at all for a read that ends sooner).
 */
import { Effect } from "effect"
import { settings } from "../../contracts/settings.ts"

export interface Progress {
  /** `done` records read; `position`/`end` the stream sequence reached and the last one to read. */
  readonly update: (done: number, position: number, end: number) => void
  readonly finish: () => void
}

export interface ProgressOptions {
  readonly stream?: NodeJS.WriteStream
  readonly enabled?: boolean
  /** Between plain lines when not on a terminal (default 2000 ms, or WM_PROGRESS_INTERVAL_MS). */
  readonly intervalMs?: number
  readonly now?: () => number
}

const TTY_REFRESH_MS = 100
const fmt = (n: number) => n.toLocaleString("en-US")

export const describeProgress = (label: string, done: number, position: number, end: number, elapsedMs: number) => {
  const pct = end > 0 ? Math.min(100, Math.floor((position / end) * 100)) : 100
  const rate = elapsedMs > 0 ? Math.round((done * 1000) / elapsedMs) : 0
  return `${label}: ${fmt(done)} events read · stream seq ${fmt(position)}/${fmt(end)} (${pct}%) · ${fmt(rate)} events/s`
}

export const noProgress: Progress = { update: () => {}, finish: () => {} }

export const progress = (label: string, options: ProgressOptions = {}): Progress => {
  const stream = options.stream ?? process.stderr
  if (options.enabled === false) return noProgress
  const now = options.now ?? Date.now
  // A malformed value reports at the default pace rather than failing the command.
  const interval =
    options.intervalMs ??
    Effect.runSync(
      settings.WM_PROGRESS_INTERVAL_MS.config.pipe(
        Effect.orElseSucceed(() => Number(settings.WM_PROGRESS_INTERVAL_MS.default)),
      ),
    )
  const tty = stream.isTTY === true
  const started = now()
  let last = started
  let shown = false
  let latest = { done: 0, position: 0, end: 0 }

  const line = () => describeProgress(label, latest.done, latest.position, latest.end, now() - started)

  return {
    update: (done, position, end) => {
      latest = { done, position, end }
      const t = now()
      if (tty) {
        if (t - last < TTY_REFRESH_MS && shown) return
        stream.write(`\r\x1b[2K${line()}`)
      } else {
        if (t - last < interval) return
        stream.write(`${line()}\n`)
      }
      last = t
      shown = true
    },
    finish: () => {
      if (!shown) return
      stream.write(tty ? `\r\x1b[2K${line()}\n` : `${line()} — done\n`)
    },
  }
}
