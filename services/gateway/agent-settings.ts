/**
 * An agent's budget and hyperfocus: retuning the budget, entering and leaving hyperfocus. Each is a
 * guarded write on the agent's config subject, answered with the budget in force after it.
 */
import { Effect } from "effect"
import type { RequestOf, ResponseOf } from "../../contracts/api.ts"
import type { EventOf } from "../../contracts/events.ts"
import { agentConfigSubject } from "../../contracts/subjects.ts"
import { decideEnterHyperfocus, decideExitHyperfocus, decideRetune } from "../../domain/decide.ts"
import { replyOfEvent } from "../../domain/requests.ts"
import type { Outcome } from "../platform/log/command-handler.ts"
import type { Writes } from "./writes.ts"

const budgetReply = ({ view, decided, seq }: Outcome<EventOf<"BudgetChanged">>) =>
  replyOfEvent(view, decided, seq) as ResponseOf<"retuneBudget">

export const makeAgentSettings = ({ write }: Writes) => {
  const retuneBudget = Effect.fn("Gateway.retuneBudget")((agentId: string, request: RequestOf<"retuneBudget">) =>
    write(
      agentId,
      "retuneBudget",
      request,
      agentConfigSubject(agentId),
      (view, s) => decideRetune(view, request, s),
      budgetReply,
    ),
  )
  const enterHyperfocus = Effect.fn("Gateway.enterHyperfocus")(
    (agentId: string, request: RequestOf<"enterHyperfocus">) =>
      write(
        agentId,
        "enterHyperfocus",
        request,
        agentConfigSubject(agentId),
        (view, s) => decideEnterHyperfocus(view, request, s),
        budgetReply,
      ),
  )
  const exitHyperfocus = Effect.fn("Gateway.exitHyperfocus")((agentId: string, request: RequestOf<"exitHyperfocus">) =>
    write(
      agentId,
      "exitHyperfocus",
      request,
      agentConfigSubject(agentId),
      (view, s) => decideExitHyperfocus(view, s),
      budgetReply,
    ),
  )

  return { retuneBudget, enterHyperfocus, exitHyperfocus }
}
