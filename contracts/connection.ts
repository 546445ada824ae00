/**
 * How every connection to NATS — each service's and each SDK client's — notices a dead path and moves on.
 * A server cut off by a network partition keeps its TCP connections open without a word: only pings
 * notice (two unanswered and the connection is stale), and the server to dial next is the one dialled
 * least recently, never the one just lost, whose dial would hang until the connection timeout.
 */
import type { ReconnectToServerHandler } from "@nats-io/transport-node"

/** How often a connection pings its server; two pings unanswered and it reconnects. */
export const DEFAULT_NATS_PING_INTERVAL_MS = 5_000
export const MAX_PINGS_OUT = 2

/**
 * The server dialled least recently (never dialled counts as longest ago; ties keep the pool's order,
 * which puts the client's own choice first): after a stale connection that is another server of the
 * list, and a run of failed dials walks the whole list before it comes back to the first.
 */
export const dialLeastRecent: ReconnectToServerHandler = (pool) => {
  let chosen = pool[0]
  for (const server of pool) if (chosen !== undefined && server.lastConnect < chosen.lastConnect) chosen = server
  return chosen ?? null
}

/**
 * The servers' side, in their configuration (`infra/cluster.ts`'s nodes, `wm auth-config`'s file): routes and
 * clients pinged every 5 s instead of nats-server's 2 minutes (at most 30 s for routes). A node cut off by a
 * partition keeps its route connections open, and until the others find them stale they route requests to
 * its subscriptions (its direct-get responders among them), which time out.
 */
export const SERVER_PING_CONFIG = 'ping_interval: "5s"'
