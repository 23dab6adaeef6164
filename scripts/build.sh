#!/usr/bin/env bash
# Builds the Worker into build/ (index.js + index_bg.wasm) with local binaries:
# worker-build would otherwise download wasm-bindgen and wasm-opt, which fails here.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
export WASM_BINDGEN_BIN="$CARGO_BIN/wasm-bindgen"
export ESBUILD_BIN="$ROOT/node_modules/.bin/esbuild"
export WASM_OPT_BIN="$ROOT/node_modules/.bin/wasm-opt"
# Nothing to do when the sources, the toolchain and the options are what the
# current build was made from (a `wrangler dev` start reruns this command).
fingerprint="$( {
  find src core/src core/Cargo.toml Cargo.toml Cargo.lock scripts/build.sh scripts/wasm-names.py dashboard/dist -type f -print0 \
    | sort -z | xargs -0 sha256sum
  rustc -V; echo "worker-build $WORKER_BUILD_VERSION names ${HEDGEHOG_KEEP_NAMES:-0}"
} | sha256sum | cut -d' ' -f1)"
if [ -f build/index.js ] && [ -f build/index_bg.wasm ] && [ "$(cat build/.source-hash 2>/dev/null)" = "$fingerprint" ]; then
  log "build: up to date (sources unchanged since the last build)"
  exit 0
fi
rm -f build/.source-hash
log "build: worker-build --release"
worker-build --release
wasm="build/index_bg.wasm"
[ -f "$wasm" ] || wasm="$(find build -name '*.wasm' | head -n1)"
# Function names go to a symbol map beside the module instead of into every
# cold start (panic frames read wasm-function[N]: look N up there).
# HEDGEHOG_KEEP_NAMES=1 keeps them in (for lab/profile.mjs).
if [ "${HEDGEHOG_KEEP_NAMES:-0}" != 1 ]; then
  log "build: $(python3 scripts/wasm-names.py "$wasm")"
fi
log "build: $(stat -c %s "$wasm") bytes raw, $(gzip -9c "$wasm" | wc -c) bytes gzipped ($wasm)"
echo "$fingerprint" > build/.source-hash
