/**
 * Builds the dashboard's page into dashboard/dist (npm run build:dashboard; npm start builds it when
 * it is missing or older than its sources). Preact's JSX, compiled by Vite's own transformer: no
 * plugin, nothing fetched when the page runs.
 */
import { defineConfig } from "vite"

export default defineConfig({
  root: import.meta.dirname,
  base: "/",
  logLevel: "warn",
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  build: { outDir: "dist", emptyOutDir: true, target: "es2022", sourcemap: false },
})
