/**
 * The settings docker-compose.yml reads, written next to the NATS
 * configuration by `npm run wm -- auth-config ... --out <conf> --compose-env .env`:
 * where the configuration is (the NATS container mounts it), one NATS user
 * per service container, the key-encryption key the content keys are wrapped by,
 * the Qdrant API key, and the tenants (WM_TENANTS,
 * which the retrieval service scopes threads by). docker-compose.yml refuses
 * to start without them (`${VAR:?…}`), so a deployment is closed by default.
 */
import { randomBytes } from "node:crypto"
import { isAbsolute } from "node:path"
import { generatePassword, type NatsAuth } from "./auth.ts"

/** The service containers of docker-compose.yml; each logs in as the user of the same name. */
export const COMPOSE_SERVICES = ["gateway", "working", "fade", "substrate", "memory"] as const
export type ComposeService = (typeof COMPOSE_SERVICES)[number]

export const natsUserVariable = (service: ComposeService) => `WM_${service.toUpperCase()}_NATS_USER`
export const natsPassVariable = (service: ComposeService) => `WM_${service.toUpperCase()}_NATS_PASS`
export const NATS_CONFIG_VARIABLE = "WM_NATS_AUTH_CONF"

/** A key-encryption key for WM_KEY_ENCRYPTION_KEYS: an id from today's date, 32 random bytes. */
export const newKeyEncryptionKey = (now: Date = new Date()): string =>
  `k${now.toISOString().slice(0, 10).replaceAll("-", "")}:${randomBytes(32).toString("base64")}`

/** The env file's text. Throws when the configuration lacks a user for one of the compose services. */
export const deploymentEnv = (
  auth: NatsAuth,
  configFile: string,
  qdrantApiKey: string = generatePassword(),
  keyEncryptionKey: string = newKeyEncryptionKey(),
): string => {
  const mounted = isAbsolute(configFile) || configFile.startsWith(".") ? configFile : `./${configFile}`
  const lines = [
    "# docker compose settings from `npm run wm -- auth-config` (secrets: keep this file private).",
    `${NATS_CONFIG_VARIABLE}=${mounted}`,
  ]
  for (const service of COMPOSE_SERVICES) {
    const creds = auth.service(service)
    lines.push(`${natsUserVariable(service)}=${creds.user}`, `${natsPassVariable(service)}=${creds.pass}`)
  }
  lines.push(
    `WM_KEY_ENCRYPTION_KEYS=${keyEncryptionKey}`,
    `QDRANT_API_KEY=${qdrantApiKey}`,
    `WM_TENANTS=${auth.tenantsVariable}`,
    "",
  )
  return lines.join("\n")
}
