import { describe, expect, it } from "vitest"
import { fnv1a32, partitionCountProblem, partitionOf } from "../../contracts/partitions.ts"
import {
  agentIdOfEventSubject,
  agentStepSubject,
  entrySubject,
  partitionOfEventSubject,
  upgradeLegacySubject,
} from "../../contracts/subjects.ts"

describe("the partition of an agent", () => {
  it("is FNV-1a (32 bits) of the agent id modulo the partition count", () => {
    // The published FNV-1a test vectors: any client in any language can route the same way.
    expect(fnv1a32("")).toBe(0x811c9dc5)
    expect(fnv1a32("a")).toBe(0xe40c292c)
    expect(fnv1a32("foobar")).toBe(0xbf9cf968)
    expect(partitionOf("foobar", 16)).toBe(0xbf9cf968 % 16)
  })

  it("is carried by the agent's event subjects", () => {
    const subject = entrySubject("planner", "e1")
    expect(subject).toBe(`wm.evt.${partitionOf("planner")}.planner.entry.e1`)
    expect(agentIdOfEventSubject(subject)).toBe("planner")
    expect(partitionOfEventSubject(subject)).toBe(partitionOf("planner"))
  })

  it("refuses a partition count outside 1..1024", () => {
    for (const n of [0, -1, 1.5, 1025]) expect(partitionCountProblem(n)).toMatch(/from 1 to 1024/)
    expect(partitionCountProblem(16)).toBeNull()
  })
})

describe("subjects of the layout before partitions", () => {
  it("are upgraded to the agent's partition; today's subjects are left alone", () => {
    expect(upgradeLegacySubject("wm.evt.planner.step")).toBe(agentStepSubject("planner"))
    expect(upgradeLegacySubject("wm.evt.planner.entry.e1")).toBe(entrySubject("planner", "e1"))
    expect(upgradeLegacySubject(agentStepSubject("planner"))).toBeNull()
    expect(upgradeLegacySubject(entrySubject("planner", "e1"))).toBeNull()
    expect(upgradeLegacySubject("wm.api.planner.view.get")).toBeNull()
  })

  it("tells an old entry subject from a new step subject of the same shape by the agent's partition", () => {
    // `wm.evt.<n>.entry.step`: agent "<n>"'s entry "step" in the old layout, unless "<n>" is the partition of agent "entry".
    const ofEntry = partitionOf("entry")
    expect(upgradeLegacySubject(`wm.evt.${ofEntry}.entry.step`)).toBeNull()
    const other = (ofEntry + 1) % 16
    expect(upgradeLegacySubject(`wm.evt.${other}.entry.step`)).toBe(entrySubject(String(other), "step"))
  })
})
