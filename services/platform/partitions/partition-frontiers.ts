/**
 * What this process has learnt from the stream leader of where a partition's next record is. Every
 * partitioned service of a process (gateway, working, fade, memory) proves the same idle partitions
 * complete against the same log each second (partitioned-projection.ts), their trackers mostly in step:
 * the first to ask about a partition answers for the others, those asking meanwhile wait for its answer,
 * so the process asks once a partition, not once a service.
 *
 * A fact (the partition's first record at or after `from` is `next`, or it has none up to `last`) holds
 * for as long as its stream does, since a log only grows: facts are kept by stream (the server answering
 * and the stream's creation), and used only while fresh, so that a position is not held back by an old one.
 */
import { Clock, Deferred, Effect, Exit } from "effect"

/** How long a fact answers for the other services: their trackers come round once a second. */
export const FRESH_MS = 1_000
/** Streams × partitions a process keeps facts for; the oldest go first. */
const KEPT_FACTS = 4_096

interface Fact {
  readonly from: number
  /** The partition's first record at or after `from`; null: none up to `last`. */
  readonly next: number | null
  readonly last: number
  /** When it was learnt (epoch ms). */
  readonly at: number
}

/** Up to which sequence a partition that applied up to `from - 1` is complete, by `fact` (undefined: it does not say). */
const completeBy = (fact: Fact, from: number): number | undefined => {
  if (fact.from > from) return undefined
  if (fact.next === null) return from <= fact.last + 1 ? fact.last : undefined
  return from <= fact.next ? fact.next - 1 : undefined
}

export interface PartitionFrontiers {
  /**
   * Up to which stream sequence a partition applied up to `from - 1` is complete, with the stream at `last`:
   * by a fresh fact of this process, else by the answer to a question another service is asking now, else by
   * `ask` (the partition's first record at or after `from`). Undefined when the question failed.
   */
  readonly completeTo: (
    stream: string,
    partition: number,
    from: number,
    last: number,
    ask: Effect.Effect<number | null, unknown>,
  ) => Effect.Effect<number | undefined>
}

export const makePartitionFrontiers = (): PartitionFrontiers => {
  const facts = new Map<string, Fact>()
  const asking = new Map<string, { readonly from: number; readonly answer: Deferred.Deferred<Fact | undefined> }>()

  const learn = (key: string, fact: Fact) => {
    facts.delete(key)
    facts.set(key, fact)
    if (facts.size > KEPT_FACTS) facts.delete(facts.keys().next().value!)
  }

  const completeTo: PartitionFrontiers["completeTo"] = (stream, partition, from, last, ask) =>
    Effect.gen(function* () {
      const key = `${stream}|${partition}`
      const now = yield* Clock.currentTimeMillis
      const fact = facts.get(key)
      const known = fact !== undefined && now - fact.at <= FRESH_MS ? completeBy(fact, from) : undefined
      if (known !== undefined) return known
      const other = asking.get(key)
      if (other !== undefined && other.from <= from) {
        const answer = yield* Deferred.await(other.answer)
        const answered = answer === undefined ? undefined : completeBy(answer, from)
        if (answered !== undefined) return answered
      }
      const answer = Deferred.makeUnsafe<Fact | undefined>()
      asking.set(key, { from, answer })
      let learnt: Fact | undefined
      return yield* Effect.option(ask).pipe(
        Effect.map((next) => {
          if (next._tag === "None") return undefined
          learnt = { from, next: next.value, last, at: now }
          learn(key, learnt)
          return completeBy(learnt, from)
        }),
        Effect.onExit(() =>
          Effect.sync(() => {
            if (asking.get(key)?.answer === answer) asking.delete(key)
            Deferred.doneUnsafe(answer, Exit.succeed(learnt))
          }),
        ),
      )
    })

  return { completeTo }
}

/** The facts of this process, shared by its services. */
export const processFrontiers = makePartitionFrontiers()
