/**
 * Where a service's views last saw each entry's subject: the stream sequence of the last record applied on
 * it. An append about an entry the views do not hold natively (a long-term entry recalled as a cue) expects
 * its subject's last sequence; remembered here, it needs no read of the log first. It is a hint the log
 * checks: a subject that moved on since (another replica wrote, a record was erased) refuses the append, and
 * the command handler reads the log before it tries again. Bounded: a subject forgotten is read again.
 */
import { Recent } from "../keys/recent.ts"

/** About one long-term entry per subject: the entries of a few hundred agents' histories. */
const REMEMBERED_SUBJECTS = 65_536

export interface SubjectPositions {
  /** A record on `subject` was applied at `seq`. */
  readonly applied: (subject: string, seq: number) => void
  /** The last sequence applied on `subject`, when it is remembered. */
  readonly lastSeq: (subject: string) => number | undefined
}

export const makeSubjectPositions = (size = REMEMBERED_SUBJECTS): SubjectPositions => {
  const positions = new Recent<number>(size)
  return {
    applied: (subject, seq) => {
      if ((positions.peek(subject) ?? 0) < seq) positions.set(subject, seq)
    },
    lastSeq: (subject) => positions.get(subject),
  }
}
