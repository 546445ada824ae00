/**
 * A stand-in for Qdrant's REST API that keeps what it is sent and answers as Qdrant does, for the requests
 * the adapter makes: collections (create, read, list, delete), payload indexes, upserts, deletes by id and
 * by filter, exact cosine queries, scrolls paged by point id, and retrieval by id. A filter is a `must` list
 * of `match.value`, `match.any` (against an array value: any element) and `range` conditions. It lets the
 * store contract (longterm-store.contract.ts) run on the Qdrant adapter without a Qdrant server; what Qdrant
 * keeps on disk is beyond it (SECURITY.md, RELIABILITY.md "Qdrant, run for real").
 */
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"

type Json = Record<string, unknown>

interface Point {
  readonly vector: ReadonlyArray<number>
  readonly payload: Json
}

interface StoredCollection {
  readonly size: number
  readonly distance: string
  /** Field name -> the schema it was indexed with. */
  readonly indexes: Map<string, Json>
  readonly points: Map<string, Point>
}

interface Reply {
  readonly status: number
  readonly body: unknown
}

/** One request as the server saw it. */
export interface SeenRequest {
  readonly method: string
  readonly path: string
  readonly body: unknown
}

const ok = (result: unknown): Reply => ({ status: 200, body: { result, status: "ok", time: 0.0001 } })
const fail = (status: number, error: string): Reply => ({ status, body: { status: { error }, time: 0.0001 } })
const completed = ok({ operation_id: 0, status: "completed" })

const asObject = (value: unknown): Json =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : {}

const matches = (payload: Json, condition: Json): boolean => {
  const value = payload[String(condition.key)]
  const values = Array.isArray(value) ? value : [value]
  const match = asObject(condition.match)
  if ("value" in match) return values.some((v) => v === match.value)
  if ("any" in match) return values.some((v) => (match.any as unknown[]).includes(v))
  if ("range" in condition) {
    const range = asObject(condition.range)
    return values.some(
      (v) =>
        typeof v === "number" &&
        (range.gte === undefined || v >= Number(range.gte)) &&
        (range.gt === undefined || v > Number(range.gt)) &&
        (range.lte === undefined || v <= Number(range.lte)) &&
        (range.lt === undefined || v < Number(range.lt)),
    )
  }
  throw new Error(`condition not understood: ${JSON.stringify(condition)}`)
}

const passes = (payload: Json, filter: unknown): boolean => {
  const must = asObject(filter).must
  return must === undefined || (must as Json[]).every((c) => matches(payload, c))
}

/** `with_payload`: true for all of it, a list of keys for those, else none. */
const payloadOf = (point: Point, wanted: unknown): Json | undefined =>
  wanted === true
    ? point.payload
    : Array.isArray(wanted)
      ? Object.fromEntries(wanted.filter((k) => k in point.payload).map((k) => [k, point.payload[k]]))
      : undefined

const cosine = (a: ReadonlyArray<number>, b: ReadonlyArray<number>): number => {
  let dot = 0
  let na = 0
  let nb = 0
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!
    na += a[i]! * a[i]!
    nb += b[i]! * b[i]!
  }
  return dot / Math.sqrt(na * nb)
}

export class InMemoryQdrant {
  readonly collections = new Map<string, StoredCollection>()
  readonly requests: SeenRequest[] = []
  url = ""
  private readonly server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      const path = new URL(req.url ?? "/", "http://qdrant").pathname
      const text = Buffer.concat(chunks).toString("utf8")
      const seen = { method: req.method ?? "", path, body: text === "" ? undefined : JSON.parse(text) }
      this.requests.push(seen)
      const reply = this.route(seen)
      res.writeHead(reply.status, { "content-type": "application/json" })
      res.end(JSON.stringify(reply.body))
    })
  })

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve))
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise((resolve) => this.server.close(resolve))
  }

  private route({ method, path, body }: SeenRequest): Reply {
    const [root, name, sub, action] = path.split("/").filter(Boolean).map(decodeURIComponent)
    if (root !== "collections") return fail(404, "unknown route")
    if (name === undefined)
      return method === "GET"
        ? ok({ collections: [...this.collections.keys()].map((n) => ({ name: n })) })
        : fail(405, "method")
    const collection = this.collections.get(name)
    const request = asObject(body)
    if (sub === undefined) {
      if (method === "PUT") {
        if (collection) return fail(409, `Wrong input: Collection \`${name}\` already exists!`)
        const vectors = asObject(request.vectors)
        this.collections.set(name, {
          size: Number(vectors.size),
          distance: String(vectors.distance),
          indexes: new Map(),
          points: new Map(),
        })
        return ok(true)
      }
      if (method === "DELETE") return ok(this.collections.delete(name))
    }
    if (!collection) return fail(404, `Not found: Collection \`${name}\` doesn't exist!`)
    if (sub === undefined && method === "GET")
      return ok({
        status: "green",
        optimizer_status: "ok",
        segments_count: 1,
        points_count: collection.points.size,
        config: { params: { vectors: { size: collection.size, distance: collection.distance } } },
        payload_schema: Object.fromEntries(
          [...collection.indexes].map(([field, schema]) => [
            field,
            { data_type: schema.type, params: schema, points: 0 },
          ]),
        ),
      })
    if (sub === "index" && method === "PUT") {
      collection.indexes.set(String(request.field_name), asObject(request.field_schema))
      return completed
    }
    if (sub !== "points") return fail(404, "unknown route")
    if (action === undefined && method === "PUT") {
      const points = request.points as Json[]
      const wrong = points.find((p) => (p.vector as number[]).length !== collection.size)
      if (wrong !== undefined)
        return fail(
          400,
          `Wrong input: Vector dimension error: expected dim: ${collection.size}, got ${(wrong.vector as number[]).length}`,
        )
      for (const p of points)
        collection.points.set(String(p.id), { vector: p.vector as number[], payload: asObject(p.payload) })
      return completed
    }
    if (action === undefined && method === "POST")
      return ok(
        (request.ids as unknown[]).flatMap((id) => {
          const point = collection.points.get(String(id))
          return point ? [{ id, payload: payloadOf(point, request.with_payload) }] : []
        }),
      )
    if (action === "delete") {
      if (Array.isArray(request.points)) for (const id of request.points) collection.points.delete(String(id))
      else
        for (const [id, point] of collection.points)
          if (passes(point.payload, request.filter)) collection.points.delete(id)
      return completed
    }
    if (action === "query") {
      const query = request.query as number[]
      const scored = [...collection.points]
        .filter(([, point]) => passes(point.payload, request.filter))
        .map(([id, point]) => ({ id, point, score: cosine(query, point.vector) }))
        .sort((a, b) => b.score - a.score)
        .slice(0, Number(request.limit ?? 10))
      return ok({
        points: scored.map(({ id, point, score }) => ({
          id,
          version: 0,
          score,
          payload: payloadOf(point, request.with_payload),
        })),
      })
    }
    if (action === "scroll") {
      const limit = Number(request.limit ?? 10)
      const from = request.offset === undefined ? null : String(request.offset)
      const ids = [...collection.points.keys()]
        .filter((id) => passes(collection.points.get(id)!.payload, request.filter) && (from === null || id >= from))
        .sort()
      return ok({
        points: ids
          .slice(0, limit)
          .map((id) => ({ id, payload: payloadOf(collection.points.get(id)!, request.with_payload) })),
        next_page_offset: ids[limit] ?? null,
      })
    }
    return fail(404, "unknown route")
  }
}
