#!/usr/bin/env bash
# Builds lab/rust-passthrough (a minimal workers-rs proxy, for the lab's
# overhead table) into lab/rust-passthrough/build with the same local
# binaries and wasm-bindgen version as the Worker. Does nothing when the
# build is newer than its sources.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT/lab/rust-passthrough"
out="build/index.js"
if [ -f "$out" ] && [ -z "$(find src Cargo.toml "$ROOT/Cargo.lock" -newer "$out" 2>/dev/null)" ]; then
  exit 0
fi
# The root lock pins wasm-bindgen to the CLI's version; cargo trims the rest.
cp "$ROOT/Cargo.lock" Cargo.lock
export WASM_BINDGEN_BIN="$CARGO_BIN/wasm-bindgen"
export ESBUILD_BIN="$ROOT/node_modules/.bin/esbuild"
export WASM_OPT_BIN="$ROOT/node_modules/.bin/wasm-opt"
export CARGO_TARGET_DIR="$ROOT/target/rust-passthrough"
log "build: the minimal workers-rs pass-through (lab/rust-passthrough, first time about 2 minutes)"
worker-build --release
