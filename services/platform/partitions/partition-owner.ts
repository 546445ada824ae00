/** How a partitioned service's operations know which agents this replica answers for (services/platform/api/serve.ts). */
import { replicaQueue } from "../../../contracts/subjects.ts"
import type { PartitionOwner } from "../api/serve.ts"
import type { PartitionedViews } from "./partitioned-views.ts"

export const partitionOwner = (service: string, views: PartitionedViews): PartitionOwner => ({
  queue: replicaQueue(service, views.leases.replicaId),
  owns: views.owns,
  placement: views.placement,
  // A lease lapsing for a moment keeps the routes: its requests are left unanswered (and retried) meanwhile.
  answering: views.caughtUp,
  watchAnswering: views.watchReady,
})
