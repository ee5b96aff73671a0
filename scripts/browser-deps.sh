#!/usr/bin/env bash
# Installs the browser test's own package (the ArcGIS Maps SDK, esbuild, playwright-core), kept out
# of the root install, before `npm test` runs it: only when test/browser has no install yet or its
# manifest or lockfile changed since the last one. `npm test` runs this (pretest), so the README's
# two commands are enough on a fresh clone; Debian's Chromium and GDAL are still system packages
# (.ci/run installs them; the tests that need them say so when they are missing).
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=test/browser/node_modules/.package-lock.json
if [ ! -f "$stamp" ] || [ test/browser/package.json -nt "$stamp" ] || [ test/browser/package-lock.json -nt "$stamp" ]; then
  npm install --prefix test/browser --no-audit --no-fund
  touch "$stamp"
fi
