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

log "test: cargo fmt --check"
cargo fmt --check
log "test: cargo clippy --all-targets -- -D warnings"
cargo clippy --quiet --all-targets -- -D warnings
log "test: native unit tests (cargo test)"
cargo test --quiet
bash scripts/build.sh
log "test: integration tests (node --test, built Worker in workerd via Miniflare)"
node --test --test-concurrency=1 tests/*.test.mjs
log "test: all passed in $(( $(date +%s) - started )) s"
