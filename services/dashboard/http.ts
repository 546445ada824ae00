/**
 * The dashboard's HTTP side: the bundled page (built by Vite from dashboard/, served from its output
 * directory), a read-only JSON API over the read model, and a server-sent event stream of the log's
 * events as they arrive. With credentials configured, every request must carry them (HTTP basic
 * auth, the NATS user and password the dashboard was started with).
 */
import { timingSafeEqual } from "node:crypto"
import { existsSync, readFileSync, statSync } from "node:fs"
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import { extname, join, normalize, sep } from "node:path"
import type { ContextOrder } from "../../domain/context-builder.ts"
import type { Cut, DashboardModel, TimelineItem } from "./read-model.ts"

export interface Credentials {
  readonly user: string
  readonly pass: string
}

export interface HttpOptions {
  readonly model: DashboardModel
  /** The bundle's directory (index.html and assets/). */
  readonly assetsDir: string
  readonly credentials?: Credentials | undefined
}

export interface LiveFeed {
  /** Registers a listener of every new timeline line; returns its removal. */
  readonly subscribe: (listener: (agentId: string, item: TimelineItem) => void) => () => void
}

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
}

const sameSecret = (given: string, expected: string): boolean => {
  const a = Buffer.from(given)
  const b = Buffer.from(expected)
  return a.length === b.length && timingSafeEqual(a, b)
}

/** Whether the request carries the configured user and password (HTTP basic). */
export const authorised = (header: string | undefined, credentials: Credentials | undefined): boolean => {
  if (credentials === undefined) return true
  const match = /^Basic\s+(\S+)$/i.exec(header ?? "")
  if (!match) return false
  const decoded = Buffer.from(match[1]!, "base64").toString("utf8")
  const colon = decoded.indexOf(":")
  if (colon < 0) return false
  // Both compared, whatever the first says, so the time taken does not tell which one was wrong.
  const user = sameSecret(decoded.slice(0, colon), credentials.user)
  const pass = sameSecret(decoded.slice(colon + 1), credentials.pass)
  return user && pass
}

const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", "cache-control": "no-store" })
  res.end(JSON.stringify(body))
}

const MISSING_BUNDLE = `<!doctype html><meta charset="utf-8"><title>working-memory</title>
<p>The dashboard's page is not built. Run <code>npm run build:dashboard</code> (npm start builds it when it is missing or older than its sources).</p>`

const numberParam = (url: URL, name: string): number | undefined => {
  const raw = url.searchParams.get(name)
  if (raw === null || raw === "") return undefined
  const n = Number(raw)
  return Number.isFinite(n) ? n : undefined
}

const cutOf = (url: URL): Cut | null => {
  const at = numberParam(url, "at")
  const seq = numberParam(url, "seq")
  if (at === undefined && seq === undefined) return null
  return { ...(at !== undefined ? { at } : {}), ...(seq !== undefined ? { seq } : {}) }
}

export const createDashboardServer = (options: HttpOptions, feed: LiveFeed): Server => {
  const { model } = options

  const serveAsset = (res: ServerResponse, pathname: string) => {
    const root = normalize(options.assetsDir)
    const file = normalize(join(root, pathname === "/" ? "index.html" : pathname))
    if (!file.startsWith(root + sep) && file !== root) return json(res, 404, { error: "not found" })
    if (!existsSync(file) || !statSync(file).isFile()) {
      if (pathname === "/" || pathname === "/index.html") {
        res.writeHead(503, { "content-type": "text/html; charset=utf-8" })
        return res.end(MISSING_BUNDLE)
      }
      return json(res, 404, { error: "not found" })
    }
    res.writeHead(200, {
      "content-type": CONTENT_TYPES[extname(file)] ?? "application/octet-stream",
      "cache-control": pathname.startsWith("/assets/") ? "public, max-age=31536000, immutable" : "no-cache",
    })
    res.end(readFileSync(file))
  }

  const serveEvents = (req: IncomingMessage, res: ServerResponse, agentId: string | null) => {
    res.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-store",
      connection: "keep-alive",
    })
    res.write(`retry: 1000\n\n`)
    const unsubscribe = feed.subscribe((agent, item) => {
      if (agentId === null || agent === agentId) res.write(`data: ${JSON.stringify({ agentId: agent, ...item })}\n\n`)
    })
    const heartbeat = setInterval(() => res.write(": keep-alive\n\n"), 15_000)
    req.once("close", () => {
      clearInterval(heartbeat)
      unsubscribe()
    })
  }

  const route = (req: IncomingMessage, res: ServerResponse) => {
    if (!authorised(req.headers.authorization, options.credentials)) {
      res.writeHead(401, { "www-authenticate": 'Basic realm="working-memory", charset="UTF-8"' })
      return res.end("the dashboard requires the NATS user and password it was started with")
    }
    if (req.method !== "GET" && req.method !== "HEAD") return json(res, 405, { error: "the dashboard is read-only" })
    const url = new URL(req.url ?? "/", "http://localhost")
    const parts = url.pathname
      .split("/")
      .filter((p) => p.length > 0)
      .map(decodeURIComponent)
    if (parts[0] !== "api") return serveAsset(res, url.pathname)
    if (parts[1] === "events" && parts.length === 2) return serveEvents(req, res, url.searchParams.get("agent"))
    if (parts[1] === "agents" && parts.length === 2)
      return json(res, 200, { agents: model.agents(), lastSeq: model.lastSeq })
    if (parts[1] === "agents" && parts[2] !== undefined) {
      const agentId = parts[2]
      if (parts.length === 3) {
        const limit = numberParam(url, "limit")
        const order = url.searchParams.get("order")
        const page = model.page(agentId, cutOf(url), {
          ...(limit !== undefined ? { limit } : {}),
          ...(order === "priority" || order === "timestamp" ? { order: order as ContextOrder } : {}),
        })
        return page ? json(res, 200, page) : json(res, 404, { error: `agent '${agentId}' is not registered then` })
      }
      if (parts[3] === "timeline" && parts.length === 4)
        return json(res, 200, { items: model.timeline(agentId, numberParam(url, "afterSeq") ?? 0) })
      if (parts[3] === "entries" && parts[4] !== undefined && parts[5] === "history" && parts.length === 6)
        return json(res, 200, { entryId: parts[4], items: model.history(agentId, parts[4]) })
    }
    return json(res, 404, { error: "not found" })
  }

  return createServer((req, res) => {
    try {
      route(req, res)
    } catch (error) {
      if (!res.headersSent) json(res, 500, { error: String(error) })
    }
  })
}
