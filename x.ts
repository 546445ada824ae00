import { Schema, Exit } from "effect"
import { MemoryEvent } from "./contracts/events.ts"
const ev = { _tag: "EntryRecorded", v: 1, eventId: "abc123abc123abc123", agentId: "agent-1", at: 1700000000000, causationId: null, correlationId: null, entryId: "e123456789", timestamp: 1700000000000, origin: "USER", content: "hello there this is some content of a typical size for a chat turn in a conversation, about two hundred characters long, give or take a few words here.", tags: ["a"], moodSnapshot: null, emotionalWeight: 0, tokens: 40 }
const s = JSON.stringify(ev)
const dec = Schema.decodeUnknownExit(MemoryEvent)
let t = performance.now(); let n = 100000
for (let i = 0; i < n; i++) { const x = dec(JSON.parse(s)); if (!Exit.isSuccess(x)) throw 1 }
console.log("decode+parse/s", n / ((performance.now() - t) / 1000))
t = performance.now()
for (let i = 0; i < n; i++) { JSON.parse(s) }
console.log("parse/s", n / ((performance.now() - t) / 1000))
const ev2 = { ...ev, _tag: "CueDropped", stepId: "s1" }
const s2 = JSON.stringify(ev2)
t = performance.now()
for (let i = 0; i < n; i++) { const x = dec(JSON.parse(s2)); if (!Exit.isSuccess(x)) throw 1 }
console.log("decode last member/s", n / ((performance.now() - t) / 1000))
