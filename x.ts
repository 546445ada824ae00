import { Schema } from "effect"
import { ApiError } from "./contracts/errors.ts"
import { RecordEntryRequest } from "./contracts/api.ts"
import { MemoryEvent } from "./contracts/events.ts"
console.log(JSON.stringify(Schema.toJsonSchemaDocument(ApiError)).slice(0, 800))
console.log(JSON.stringify(Schema.toJsonSchemaDocument(RecordEntryRequest), null, 1).slice(0, 2500))
console.log(JSON.stringify(Schema.toJsonSchemaDocument(MemoryEvent)).length)
