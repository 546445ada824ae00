/** Searches store directories byte for byte (binary-safe): the files that hold a string's UTF-8 bytes. */
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"

export const filesHolding = (dirs: ReadonlyArray<string>, needle: string): string[] => {
  const bytes = Buffer.from(needle, "utf8")
  const hits: string[] = []
  const walk = (dir: string) => {
    let names: string[]
    try {
      names = readdirSync(dir)
    } catch {
      return
    }
    for (const name of names) {
      const path = join(dir, name)
      const stat = statSync(path, { throwIfNoEntry: false })
      if (stat === undefined) continue
      if (stat.isDirectory()) walk(path)
      else if (stat.isFile() && readFileSync(path).indexOf(bytes) >= 0) hits.push(path)
    }
  }
  for (const dir of dirs) walk(dir)
  return hits
}
