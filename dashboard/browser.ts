/** Debian's chromium (or CHROMIUM_BIN), headless, as the browser tests and the screenshot drive it. */
import { execFileSync } from "node:child_process"
import { existsSync } from "node:fs"
import { Option } from "effect"
import { type Browser, chromium } from "playwright-core"
import { readSetting, settings } from "../contracts/settings.ts"

export const chromiumBinary = (): string => {
  const configured = Option.getOrUndefined(readSetting(settings.CHROMIUM_BIN))
  if (configured) return configured
  if (existsSync("/usr/bin/chromium")) return "/usr/bin/chromium"
  try {
    return execFileSync("which", ["chromium"], { encoding: "utf8" }).trim()
  } catch {
    throw new Error("chromium is not installed: sudo apt-get install -y chromium (or set CHROMIUM_BIN)")
  }
}

export const launchChromium = (): Promise<Browser> =>
  chromium.launch({
    executablePath: chromiumBinary(),
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--no-first-run",
    ],
  })
