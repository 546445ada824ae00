/** The bounded map a process keeps keys and opened content in: what it keeps and what it forgets. */
import { expect, it } from "vitest"
import { Recent } from "../../services/platform/keys/recent.ts"

it("keeps at most its size, and at least the last half of it that was used", () => {
  const recent = new Recent<number>(100)
  for (let i = 0; i < 1_000; i++) {
    recent.set(`k${i}`, i)
    expect(recent.count).toBeLessThanOrEqual(100)
    for (let j = Math.max(0, i - 49); j <= i; j++) expect(recent.peek(`k${j}`)).toBe(j)
  }
  expect(recent.get("k0")).toBeUndefined()
})

it("keeps a key that is read while others come and go", () => {
  const recent = new Recent<string>(10)
  recent.set("kept", "value")
  for (let i = 0; i < 100; i++) {
    recent.set(`other${i}`, "x")
    expect(recent.get("kept")).toBe("value")
  }
  recent.set("kept", "changed")
  expect(recent.get("kept")).toBe("changed")
  recent.deleteWhere((key) => key.startsWith("kept"))
  expect(recent.peek("kept")).toBeUndefined()
  recent.set("gone", "x")
  recent.delete("gone")
  expect(recent.get("gone")).toBeUndefined()
})

it("counts every value it lets go of: deleted, replaced, or let go for room; not one set anew", () => {
  const recent = new Recent<string>(4)
  recent.set("a", "x")
  recent.set("b", "x")
  // The second generation starts; nothing is let go yet.
  recent.set("c", "x")
  recent.set("c", "x")
  expect(recent.changes).toBe(0)
  recent.set("c", "y")
  expect(recent.changes).toBe(1)
  // A third generation: "a" and "b" are let go for room.
  recent.set("d", "x")
  recent.set("e", "x")
  expect(recent.peek("a")).toBeUndefined()
  expect(recent.changes).toBe(2)
  recent.delete("e")
  recent.delete("e")
  recent.delete("never")
  expect(recent.changes).toBe(3)
  recent.deleteWhere((key) => key === "c" || key === "d")
  expect(recent.changes).toBe(5)
})
