/**
 * What the TypeScript SDK retries: a read whose view had not yet applied the caller's own writes
 * (NotCaughtUp) is asked again, as an Unavailable answer is; a refusal is thrown at once; a closed
 * connection is Unavailable at once.
 */
import { connect } from "@nats-io/transport-node"
import { afterAll, beforeAll, expect, it } from "vitest"
import { Unavailable } from "../../contracts/errors.ts"
import { apiSubject } from "../../contracts/subjects.ts"
import { type NatsServerProcess, startNatsServer } from "../../infra/nats-server.ts"
import { WorkingMemoryClient } from "../../sdk/client.ts"

let server: NatsServerProcess
beforeAll(async () => {
  // Scripted answers on the API subjects themselves: a server that does not route them by partition.
  server = await startNatsServer({ routing: false })
})
afterAll(async () => server?.stop())

/** Answers each request on `subject` with the next of `replies`, and counts them. */
const answering = async (subject: string, replies: ReadonlyArray<unknown>) => {
  const nc = await connect({ servers: server.url })
  let seen = 0
  const sub = nc.subscribe(subject, {
    callback: (_error, message) => {
      message.respond(JSON.stringify(replies[Math.min(seen, replies.length - 1)]))
      seen++
    },
  })
  await nc.flush()
  return {
    seen: () => seen,
    close: async () => {
      sub.unsubscribe()
      await nc.close()
    },
  }
}

it("asks again after NotCaughtUp and returns the answer that follows", async () => {
  const responder = await answering(apiSubject("behind", "view.get"), [
    { ok: false, error: { _tag: "NotCaughtUp", afterSeq: 9, appliedSeq: 8 } },
    { ok: true, value: { marker: "caught up" } },
  ])
  const client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 2_000 })
  try {
    const view = (await client.agent("behind").view()) as unknown as { marker: string }
    expect(view.marker).toBe("caught up")
    expect(responder.seen()).toBe(2)
  } finally {
    await client.close()
    await responder.close()
  }
})

it("throws a refusal at once, without asking again", async () => {
  const responder = await answering(apiSubject("stranger", "view.get"), [
    { ok: false, error: { _tag: "AgentNotFound", agentId: "stranger" } },
  ])
  const client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 2_000 })
  try {
    await expect(client.agent("stranger").view()).rejects.toMatchObject({ _tag: "AgentNotFound" })
    expect(responder.seen()).toBe(1)
  } finally {
    await client.close()
    await responder.close()
  }
})

it("throws the NotCaughtUp itself when the view is still behind after every attempt", async () => {
  const responder = await answering(apiSubject("far-behind", "view.get"), [
    { ok: false, error: { _tag: "NotCaughtUp", afterSeq: 90, appliedSeq: 8 } },
  ])
  const client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 2_000, attempts: 2 })
  try {
    await expect(client.agent("far-behind").view()).rejects.toMatchObject({
      _tag: "NotCaughtUp",
      afterSeq: 90,
      appliedSeq: 8,
    })
    expect(responder.seen()).toBe(2)
  } finally {
    await client.close()
    await responder.close()
  }
})

it("answers a call on a closed connection with Unavailable at once, without asking again", async () => {
  const responder = await answering(apiSubject("gone", "view.get"), [{ ok: true, value: {} }])
  const client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 2_000 })
  try {
    await client.close()
    await expect(client.agent("gone").view()).rejects.toMatchObject({ _tag: "Unavailable" })
    await expect(client.agent("gone").record({ origin: "USER", content: "still there?" })).rejects.toBeInstanceOf(
      Unavailable,
    )
    expect(responder.seen()).toBe(0)
  } finally {
    await responder.close()
  }
})

it("keeps asking while no service is subscribed (a partition moving, services restarting), for its patience", async () => {
  const client = await WorkingMemoryClient.connect({ servers: server.url, timeoutMs: 2_000 })
  let responder: Awaited<ReturnType<typeof answering>> | undefined
  try {
    const asked = client.agent("moving").view()
    // Nobody answers for 3 s — longer than the attempts' own backoff — then the new owner subscribes.
    await new Promise((r) => setTimeout(r, 3_000))
    responder = await answering(apiSubject("moving", "view.get"), [{ ok: true, value: { marker: "new owner" } }])
    expect(((await asked) as unknown as { marker: string }).marker).toBe("new owner")

    // With no patience, the attempts alone decide, and nobody answering ends in NoResponse.
    const impatient = await WorkingMemoryClient.connect({ servers: server.url, noResponderPatienceMs: 0 })
    await expect(impatient.agent("nobody").view()).rejects.toMatchObject({ name: "NoResponse" })
    await impatient.close()
  } finally {
    await client.close()
    await responder?.close()
  }
})
