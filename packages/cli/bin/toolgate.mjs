#!/usr/bin/env node
// placeholder until the CLI lands
console.error("toolgate: not built yet")
process.exit(1)
