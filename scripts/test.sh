#!/usr/bin/env bash
# The project's test command: set-up, lint, native unit tests, the wasm build,
# and the integration tests (the built Worker in workerd against real
# loopback origins). Run from a fresh clone: bash scripts/test.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
started=$(date +%s)

bash scripts/setup.sh
export PATH="$NODE22_BIN:$PATH"

log "test: cargo fmt --all --check"
cargo fmt --all --check
log "test: cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --quiet --workspace --all-targets -- -D warnings
log "test: native unit tests (cargo test --workspace)"
cargo test --quiet --workspace
log "test: generated figures in docs/ are current (scripts/docs-figures.py --check)"
python3 scripts/docs-figures.py --check
log "test: the default against the hindsight bound, per scenario (simulate --bound-check core/tests/bound-ratios.json)"
# A short run of every scenario; fails when the default's p99 or p99.9 over
# the bound's is more than 3% worse than committed, or its extra load more
# than 1 point higher (docs/lab.md, "The yardstick").
target/release/examples/simulate --scenario all --seconds 30 --routes 4 --bound-check core/tests/bound-ratios.json \
  --out target/bound-check > /dev/null
log "test: the dashboard page is built from its sources (scripts/build-dashboard.mjs --check)"
node scripts/build-dashboard.mjs --check
bash scripts/build.sh
# The panic test's build: the same Worker with a panic trigger (build-test/).
bash scripts/build.sh --test
for env in "" staging production; do
  log "test: wrangler deploy --dry-run ${env:+--env $env}"
  # --dry-run validates the configuration, bindings and bundle without
  # uploading (wrangler re-runs the [build] command; it is a no-op rebuild).
  npx --no-install wrangler deploy --dry-run --no-bundle --outdir "$(mktemp -d)" ${env:+--env "$env"} > /tmp/hedgehog-dry-run.log 2>&1 \
    || { cat /tmp/hedgehog-dry-run.log; exit 1; }
done
log "test: integration tests (node --test, built Worker in workerd via Miniflare)"
node --test --test-concurrency=1 tests/*.test.mjs
log "test: all passed in $(( $(date +%s) - started )) s"
