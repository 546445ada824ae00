import { describe, expect, it } from "vitest"
import { DEFAULT_EPISODE_LIFT, liftByEpisode } from "../../domain/relevance.ts"
import { EpisodeIndex } from "../../services/memory/retrieval/episodes.ts"

const MINUTE = 60_000
const HOUR = 60 * MINUTE

/** A dialogue of two sittings a day apart, and one entry of a thread recorded in between. */
const timeline = () => {
  const index = new EpisodeIndex()
  for (let i = 0; i < 6; i++) index.add("a", `s1-${i}`, i * MINUTE, null)
  index.add("a", "thread-1", 5 * HOUR, "lease")
  for (let i = 0; i < 6; i++) index.add("a", `s2-${i}`, 24 * HOUR + i * MINUTE, null)
  index.add("a", "thread-2", 30 * HOUR, "lease")
  return index
}

describe("the episode timeline", () => {
  it("gives the turns around an entry within its sitting, nearest first", () => {
    const n = timeline().neighbours("a", "s1-1", 2)
    expect(n).toEqual(
      expect.arrayContaining([
        { entryId: "s1-0", distance: 1 },
        { entryId: "s1-2", distance: 1 },
        { entryId: "s1-3", distance: 2 },
      ]),
    )
    expect(n).toHaveLength(3)
  })

  it("does not cross a gap of more than an hour", () => {
    expect(
      timeline()
        .neighbours("a", "s2-0", 2)
        .map((x) => x.entryId)
        .sort(),
    ).toEqual(["s2-1", "s2-2"])
  })

  it("joins the entries of one correlation id, however far apart in time", () => {
    const index = timeline()
    expect(index.neighbours("a", "thread-1", 1)).toEqual([{ entryId: "thread-2", distance: 1 }])
    expect(index.episodeOf("a", "thread-1")).toBe(index.episodeOf("a", "thread-2"))
    expect(index.episodeOf("a", "s1-4")).toBe(index.episodeOf("a", "s1-0"))
    expect(index.episodeOf("a", "s2-0")).not.toBe(index.episodeOf("a", "s1-0"))
  })

  it("keeps time order for entries recorded out of order, and forgets removed ones", () => {
    const index = timeline()
    index.add("a", "late", 2 * MINUTE + 1, null)
    expect(
      index
        .neighbours("a", "late", 1)
        .map((x) => x.entryId)
        .sort(),
    ).toEqual(["s1-2", "s1-3"])
    index.remove("a", "late")
    expect(
      index
        .neighbours("a", "s1-2", 1)
        .map((x) => x.entryId)
        .sort(),
    ).toEqual(["s1-1", "s1-3"])
    index.dropAgent("a")
    expect(index.neighbours("a", "s1-2", 1)).toEqual([])
  })
})

describe("relevance by episode", () => {
  it("lifts the reply next to a strong hit above weak matches elsewhere", () => {
    const index = timeline()
    const lifted = liftByEpisode(
      [
        ["s1-2", 1],
        ["s2-4", 0.3],
      ],
      (id) => index.neighbours("a", id, DEFAULT_EPISODE_LIFT.radius),
      (id) => index.episodeOf("a", id),
    )
    expect(lifted.get("s1-3")!).toBeGreaterThan(lifted.get("s2-4")!)
    // A hit keeps its own similarity when it is the best of its episode.
    expect(lifted.get("s1-2")).toBeCloseTo(1, 10)
    expect(lifted.has("s1-5")).toBe(false)
  })

  it("lifts the same party's next turn, two away in a dialogue, as much as the reply between", () => {
    const index = timeline()
    // s1-2 asks, s1-3 replies, s1-4 is the asker's follow-up; s1-0 and s1-1 lead up to the question.
    const lifted = liftByEpisode(
      [
        ["s1-2", 1],
        ["s2-4", 0.6],
      ],
      (id) => index.neighbours("a", id, DEFAULT_EPISODE_LIFT.radius),
      (id) => index.episodeOf("a", id),
    )
    expect(lifted.get("s1-4")).toBeCloseTo(lifted.get("s1-3")!, 10)
    expect(lifted.get("s1-0")).toBeCloseTo(lifted.get("s1-1")!, 10)
    expect(lifted.get("s1-4")!).toBeGreaterThan(lifted.get("s2-4")!)
    // Beyond the exchange, nothing is inherited.
    expect(lifted.has("s1-5")).toBe(false)
  })

  it("raises a weak match inside the best episode above an equal one elsewhere", () => {
    const index = timeline()
    const lifted = liftByEpisode(
      [
        ["s1-0", 1],
        ["s1-5", 0.2],
        ["s2-5", 0.2],
      ],
      () => [],
      (id) => index.episodeOf("a", id),
    )
    expect(lifted.get("s1-5")!).toBeGreaterThan(lifted.get("s2-5")!)
  })
})
