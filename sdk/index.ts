/**
 * The TypeScript SDK's public surface, as the `@working-memory/client`
 * package exports it (packages/client builds it from these sources).
 */

export type { OperationName, RequestOf, ResponseOf } from "../contracts/api.ts"
export { FutureEventVersion } from "../contracts/decode.ts"
export * from "../contracts/errors.ts"
export type { MemoryEvent } from "../contracts/events.ts"
export * from "./client.ts"
export * from "./own-events.ts"
