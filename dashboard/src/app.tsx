/**
 * One page: the agents with their budget use against τ; for the chosen agent, its working view by
 * rung with the open step's cues, the context it builds, a live timeline of its events, one entry's
 * history with the fade score parts, and a time slider that replays all of it at any past instant.
 */
import { useCallback, useEffect, useRef, useState } from "preact/hooks"
import {
  type AgentPage,
  type AgentSummary,
  type EntryCard,
  fetchAgents,
  fetchHistory,
  fetchPage,
  fetchTimeline,
  followEvents,
  type HistoryItem,
  type TimelineItem,
} from "./api.ts"

const iso = (ms: number) => new Date(ms).toISOString().replace("T", " ").replace("Z", "")
const percent = (share: number) => `${Math.round(share * 100)}%`

const initialAgent = () => new URLSearchParams(location.search).get("agent")

export const App = () => {
  const [agents, setAgents] = useState<AgentSummary[]>([])
  const [agentId, setAgentId] = useState<string | null>(initialAgent())
  const [page, setPage] = useState<AgentPage | null>(null)
  const [timeline, setTimeline] = useState<TimelineItem[]>([])
  /** The slider's position among the agent's events; null: live. */
  const [instant, setInstant] = useState<number | null>(null)
  const [entryId, setEntryId] = useState<string | null>(null)
  const [history, setHistory] = useState<HistoryItem[]>([])
  const [error, setError] = useState<string | null>(null)
  const live = useRef({ agentId, instant })
  live.current = { agentId, instant }

  const refreshAgents = useCallback(() => {
    fetchAgents()
      .then(({ agents }) => {
        setAgents(agents)
        setError(null)
      })
      .catch((e: unknown) => setError(String(e)))
  }, [])

  const refreshPage = useCallback((id: string, at: number | null) => {
    fetchPage(id, at)
      .then(setPage)
      .catch((e: unknown) => setError(String(e)))
  }, [])

  useEffect(refreshAgents, [])

  useEffect(() => {
    if (agentId === null) return
    setInstant(null)
    setEntryId(null)
    refreshPage(agentId, null)
    setTimeline([])
    fetchTimeline(agentId)
      .then(({ items }) =>
        // Events that arrived live while the timeline loaded stay, after those it had.
        setTimeline((arrived) => {
          const last = Math.max(0, ...items.map((i) => i.seq))
          return [...items, ...arrived.filter((i) => i.seq > last)].slice(-200)
        }),
      )
      .catch((e: unknown) => setError(String(e)))
    const url = new URL(location.href)
    url.searchParams.set("agent", agentId)
    window.history.replaceState(null, "", url)
  }, [agentId])

  // The live timeline: every new event of the log, as the stream stores it.
  useEffect(() => {
    let pending: ReturnType<typeof setTimeout> | undefined
    return followEvents((item) => {
      const { agentId: shown, instant: at } = live.current
      if (item.agentId === shown) {
        setTimeline((items) => (items.some((i) => i.seq === item.seq) ? items : [...items, item].slice(-200)))
      }
      clearTimeout(pending)
      pending = setTimeout(() => {
        refreshAgents()
        if (shown !== null && at === null) refreshPage(shown, null)
      }, 100)
    })
  }, [])

  useEffect(() => {
    if (agentId === null || entryId === null) return
    fetchHistory(agentId, entryId)
      .then(({ items }) => setHistory(items))
      .catch((e: unknown) => setError(String(e)))
  }, [agentId, entryId, page?.agent.lastSeq])

  useEffect(() => {
    if (agentId === null && agents.length > 0) setAgentId(agents[0]!.agentId)
  }, [agents])

  const onSlide = (index: number) => {
    if (page === null || agentId === null) return
    const last = page.instants.length - 1
    const at = index >= last ? null : page.instants[index]!.at
    setInstant(index >= last ? null : index)
    refreshPage(agentId, at)
  }

  return (
    <div class="layout">
      <header>
        <h1>working-memory</h1>
        {error && <span class="error">{error}</span>}
      </header>
      <aside>
        <h2>Agents</h2>
        <Agents agents={agents} selected={agentId} onSelect={setAgentId} />
      </aside>
      <main>
        {page === null ? (
          <p class="muted">{agents.length === 0 ? "No agent has registered yet." : "Choose an agent."}</p>
        ) : (
          <AgentDetail
            page={page}
            instant={instant}
            onSlide={onSlide}
            timeline={timeline}
            onEntry={setEntryId}
            entryId={entryId}
            history={history}
          />
        )}
      </main>
    </div>
  )
}

const UsageBar = ({ usage, budget, tau }: { usage: number; budget: number; tau: number }) => {
  const share = Math.min(1, usage / budget)
  return (
    <div class="usage" title={`${usage}/${budget} tokens; τ ${percent(tau)}`}>
      <div class={`fill ${share > tau ? "over" : ""}`} style={{ width: percent(share) }} />
      <div class="tau" style={{ left: percent(tau) }} />
    </div>
  )
}

const Agents = (props: { agents: AgentSummary[]; selected: string | null; onSelect: (id: string) => void }) => (
  <ul class="agents">
    {props.agents.map((a) => (
      <li key={a.agentId}>
        <button
          type="button"
          data-testid="agent-row"
          data-agent={a.agentId}
          class={a.agentId === props.selected ? "selected" : ""}
          onClick={() => props.onSelect(a.agentId)}
        >
          <span class="name">{a.agentId}</span>
          <span class="muted">
            {a.role} · <span data-testid="agent-usage">{`${a.usage}/${a.budget} tok`}</span> · τ {percent(a.tau)}
          </span>
          <UsageBar usage={a.usage} budget={a.budget} tau={a.tau} />
          <span class="muted">
            r0 {a.entriesByRung["0"]} · r1 {a.entriesByRung["1"]} · r2 {a.entriesByRung["2"]} · long-term {a.longTerm}
          </span>
        </button>
      </li>
    ))}
  </ul>
)

const Entries = (props: {
  title: string
  testId: string
  entries: EntryCard[]
  selected: string | null
  onEntry: (id: string) => void
}) => (
  <section class="rung" data-testid={props.testId}>
    <h3>
      {props.title} <span class="muted">({props.entries.length})</span>
    </h3>
    {props.entries.map((e) => (
      <button
        type="button"
        key={e.id}
        data-testid="entry"
        data-entry-id={e.id}
        class={`entry ${e.id === props.selected ? "selected" : ""}`}
        onClick={() => props.onEntry(e.id)}
      >
        <span class="meta">
          {e.origin} · {e.tokens} tok · read {e.referenceCount} · cited {e.citationCount}
          {e.tags.length > 0 ? ` · ${e.tags.join(", ")}` : ""}
        </span>
        <span class="text">{e.text}</span>
      </button>
    ))}
  </section>
)

const AgentDetail = (props: {
  page: AgentPage
  instant: number | null
  onSlide: (index: number) => void
  timeline: TimelineItem[]
  entryId: string | null
  onEntry: (id: string) => void
  history: HistoryItem[]
}) => {
  const { page } = props
  const { agent, context } = page
  const last = page.instants.length - 1
  const position = props.instant ?? last
  const cutAt = props.instant === null ? null : page.instants[props.instant]!.at
  const asOf = cutAt === null ? "live" : iso(cutAt)
  return (
    <div class="detail">
      <section class="summary">
        <h2 data-testid="agent-title">{agent.agentId}</h2>
        <p>
          {agent.role} · budget {agent.budget}
          {agent.hyperfocus ? ` (hyperfocus; base ${agent.baseBudget})` : ""} · usage{" "}
          <strong data-testid="view-usage">
            {agent.usage}/{agent.budget}
          </strong>{" "}
          tokens ({percent(agent.usage / agent.budget)}, τ {percent(agent.tau)})
          {page.step ? ` · open step ${page.step.stepId}` : ""}
        </p>
        <UsageBar usage={agent.usage} budget={agent.budget} tau={agent.tau} />
      </section>
      <section class="slider">
        <label>
          Time{" "}
          <input
            data-testid="time-slider"
            type="range"
            min={0}
            max={Math.max(0, last)}
            value={position}
            onInput={(e) => props.onSlide(Number((e.target as HTMLInputElement).value))}
          />
        </label>
        <span data-testid="as-of">{asOf}</span>
        <span class="muted">
          {" "}
          · {page.applied} of {page.instants.length} events
        </span>
        {props.instant !== null && (
          <button type="button" onClick={() => props.onSlide(last)}>
            back to live
          </button>
        )}
      </section>
      <div class="rungs">
        <Entries
          title="Raw (rung 0)"
          testId="rung-raw"
          entries={page.entries.raw}
          selected={props.entryId}
          onEntry={props.onEntry}
        />
        <Entries
          title="Key points (rung 1)"
          testId="rung-keypoints"
          entries={page.entries.keyPoints}
          selected={props.entryId}
          onEntry={props.onEntry}
        />
        <Entries
          title="Summary (rung 2)"
          testId="rung-summary"
          entries={page.entries.summary}
          selected={props.entryId}
          onEntry={props.onEntry}
        />
        <Entries title="Cues" testId="cues" entries={page.cues} selected={props.entryId} onEntry={props.onEntry} />
      </div>
      <div class="columns">
        <section class="context">
          <h3>
            Context <span data-testid="context-tokens">{`${context.tokens}/${context.budget} tokens`}</span>
            <span class="muted">
              {" "}
              · {context.items.length} served · {context.omitted} left out
            </span>
          </h3>
          <pre data-testid="context-preview">{context.text}</pre>
        </section>
        <section class="timeline">
          <h3>Timeline</h3>
          <ol data-testid="timeline">
            {[...props.timeline].reverse().map((item) => (
              <li
                key={item.seq}
                data-testid="timeline-item"
                data-type={item.type}
                class={cutAt !== null && item.at > cutAt ? "after-cut" : ""}
              >
                <span class="muted">
                  #{item.seq} {iso(item.at).slice(11)}
                </span>{" "}
                <strong>{item.type}</strong> {item.detail}
              </li>
            ))}
          </ol>
        </section>
      </div>
      {props.entryId !== null && <History entryId={props.entryId} items={props.history} />}
    </div>
  )
}

const PARTS = ["age", "frequency", "emotion", "focus", "pressure"] as const

const History = (props: { entryId: string; items: HistoryItem[] }) => (
  <section class="history" data-testid="history">
    <h3>History of {props.entryId}</h3>
    <table>
      <thead>
        <tr>
          <th>seq</th>
          <th>at</th>
          <th>event</th>
          {PARTS.map((p) => (
            <th key={p}>{p}</th>
          ))}
          <th>total</th>
          <th>threshold</th>
          <th>usage / τ</th>
        </tr>
      </thead>
      <tbody>
        {props.items.map((item) => (
          <tr key={item.seq} data-testid="history-item" data-type={item.type}>
            <td>{item.seq}</td>
            <td>{iso(item.at).slice(11)}</td>
            <td>
              <strong>{item.type}</strong> {item.detail}
              {item.text && item.type !== "EntryRecorded" ? <div class="muted">{item.text}</div> : null}
            </td>
            {item.score ? (
              <>
                {PARTS.map((p) => (
                  <td key={p} data-testid={`score-${p}`}>
                    {item.score!.parts[p].toFixed(3)}
                  </td>
                ))}
                <td data-testid="score-total">{item.score.total.toFixed(3)}</td>
                <td>
                  {item.score.threshold.toFixed(2)} ({item.score.trigger})
                </td>
                <td>
                  {percent(item.score.usage)} / {percent(item.score.tau)}
                </td>
              </>
            ) : (
              <td colSpan={PARTS.length + 3} />
            )}
          </tr>
        ))}
      </tbody>
    </table>
  </section>
)
