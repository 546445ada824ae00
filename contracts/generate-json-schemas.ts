import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { apiJsonSchema, eventsJsonSchema } from "./json-schema.ts"

const dir = join(import.meta.dirname, "json")
writeFileSync(join(dir, "api.schema.json"), `${JSON.stringify(apiJsonSchema(), null, 2)}\n`)
writeFileSync(join(dir, "events.schema.json"), `${JSON.stringify(eventsJsonSchema(), null, 2)}\n`)
console.log(`wrote ${dir}/api.schema.json and events.schema.json`)
