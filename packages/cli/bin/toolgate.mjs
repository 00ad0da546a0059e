#!/usr/bin/env node
// The toolgate command inside a checkout of the repository (tests, `npm run demo`): builds the
// bundle (scripts/bundle.mjs) whenever a workspace source is newer, then runs it. An installed
// package has no launcher: its `bin` is the bundle itself, built when the package was packed.
import { pathToFileURL } from "node:url"
import { build, bundle, isStale } from "../scripts/bundle.mjs"

if (isStale()) {
  try {
    build()
  } catch (error) {
    process.stderr.write(`toolgate: ${error.message}\n`)
    process.exit(70)
  }
}

await import(pathToFileURL(bundle).href)
