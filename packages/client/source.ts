/**
 * The package resolved to its sources, for code inside this repository (the adapters under packages/, their
 * examples and tests): it is what the `working-memory-source` export condition names, set by the root
 * tsconfig, vitest.config.ts and the `example:*` scripts. Not shipped (the package's files are `dist`), so an
 * installed package resolves to its compiled `dist` as ever.
 */
export * from "../../sdk/index.ts"
