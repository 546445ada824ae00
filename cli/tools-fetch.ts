/**
 * Sets up the pinned tools the deployment tests run, once per machine:
 *
 *   npm run tools:fetch
 *
 * promtool, helm and kubeconform are built with `go install` from the Go module proxy; Kubernetes' JSON
 * schemas come from the kubernetes-validate wheel on PyPI (pip, digest checked). Each goes to its own
 * directory under $WM_CI_CACHE/tools (infra/tools.ts), written under a temporary name and renamed into
 * place, so a directory is either complete or absent; what is already there is left alone.
 */
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs"
import { tmpdir } from "node:os"
import { basename, dirname, join } from "node:path"
import { readSetting, settings } from "../contracts/settings.ts"
import { GO_TOOLS, goToolPath, KUBE_SCHEMAS, kubeSchemasInWheel, kubeSchemasPath, localSchema } from "../infra/tools.ts"
import { downloadWheel } from "../services/platform/pypi-wheel.ts"

const run = (command: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv = process.env) =>
  execFileSync(command, args, { stdio: ["ignore", "inherit", "inherit"], env })

/** Fills a temporary directory beside `dir`, then renames it to `dir`. */
const installDir = (dir: string, fill: (tmp: string) => void) => {
  const tmp = `${dir}.${process.pid}.tmp`
  rmSync(tmp, { recursive: true, force: true })
  mkdirSync(tmp, { recursive: true })
  try {
    fill(tmp)
    rmSync(dir, { recursive: true, force: true })
    renameSync(tmp, dir)
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
}

const timed = (what: string, step: () => void) => {
  const started = Date.now()
  step()
  console.log(`${what}: ${((Date.now() - started) / 1000).toFixed(1)} s`)
}

for (const tool of GO_TOOLS) {
  const binary = goToolPath(tool)
  if (existsSync(binary)) {
    console.log(`${tool.name} ${tool.version}: already in ${dirname(binary)}`)
    continue
  }
  timed(`${tool.name} ${tool.version}: go install`, () =>
    installDir(dirname(binary), (tmp) =>
      run("go", ["install", ...(tool.tags ? ["-tags", tool.tags] : []), `${tool.goPackage}@${tool.version}`], {
        ...process.env,
        GOBIN: tmp,
      }),
    ),
  )
}

const schemas = kubeSchemasPath()
if (existsSync(schemas)) console.log(`Kubernetes ${KUBE_SCHEMAS.kubernetesVersion} schemas: already in ${schemas}`)
else
  timed(
    `Kubernetes ${KUBE_SCHEMAS.kubernetesVersion} schemas from ${KUBE_SCHEMAS.pypi} ${KUBE_SCHEMAS.version}`,
    () => {
      const python = readSetting(settings.WM_PYTHON)
      const work = mkdtempSync(join(tmpdir(), "wm-kube-schemas-"))
      try {
        const spec = `${KUBE_SCHEMAS.pypi}==${KUBE_SCHEMAS.version}`
        const wheelPath = downloadWheel(python, spec, work)
        const wheel = basename(wheelPath)
        const digest = createHash("sha256").update(readFileSync(wheelPath)).digest("hex")
        if (digest !== KUBE_SCHEMAS.sha256)
          throw new Error(`${wheel} has SHA-256 ${digest}, expected ${KUBE_SCHEMAS.sha256}`)
        const unpacked = join(work, "unpacked")
        run(python, [
          "-c",
          "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nz.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith(sys.argv[3])])",
          wheelPath,
          unpacked,
          kubeSchemasInWheel,
        ])
        const from = join(unpacked, kubeSchemasInWheel)
        installDir(schemas, (tmp) => {
          for (const file of readdirSync(from))
            writeFileSync(join(tmp, file), localSchema(readFileSync(join(from, file), "utf8")))
        })
      } finally {
        rmSync(work, { recursive: true, force: true })
      }
    },
  )
