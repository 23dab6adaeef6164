#!/usr/bin/env bash
# Builds the Worker into build/ (index.js, hedgehog.js, index_bg.wasm) with local
# binaries: worker-build would otherwise download wasm-bindgen and wasm-opt,
# which fails here. `--test` builds the test build into build-test/ instead:
# the same Worker plus a panic trigger (feature `test-panic`) that no
# deployed build has.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
out="build"
features=()
if [ "${1:-}" = "--test" ]; then
  out="build-test"
  features=(-- --features test-panic)
fi
export WASM_BINDGEN_BIN="$CARGO_BIN/wasm-bindgen"
export ESBUILD_BIN="$ROOT/node_modules/.bin/esbuild"
export WASM_OPT_BIN="$ROOT/node_modules/.bin/wasm-opt"
# Nothing to do when the sources, the toolchain and the options are what the
# current build was made from (a `wrangler dev` start reruns this command).
fingerprint="$( {
  find src core/src core/Cargo.toml Cargo.toml Cargo.lock scripts/build.sh scripts/wasm-names.py -type f -print0 \
    | sort -z | xargs -0 sha256sum
  rustc -V; echo "worker-build $WORKER_BUILD_VERSION names ${HEDGEHOG_KEEP_NAMES:-0} ${features[*]:-}"
} | sha256sum | cut -d' ' -f1)"
if [ -f "$out/index.js" ] && [ -f "$out/index_bg.wasm" ] && [ "$(cat "$out/.source-hash" 2>/dev/null)" = "$fingerprint" ]; then
  log "build: $out up to date (sources unchanged since the last build)"
  exit 0
fi
rm -f "$out/.source-hash"
log "build: worker-build --release --out-dir $out ${features[*]:-}"
worker-build --release --out-dir "$out" "${features[@]}"
# The entry module wraps worker-build's (src/entry.mjs says why).
mv "$out/index.js" "$out/hedgehog.js"
cp src/entry.mjs "$out/index.js"
wasm="$out/index_bg.wasm"
# Function names go to a symbol map beside the module instead of into every
# cold start (panic frames read wasm-function[N]: look N up there).
# HEDGEHOG_KEEP_NAMES=1 keeps them in (for lab/profile.mjs).
if [ "${HEDGEHOG_KEEP_NAMES:-0}" != 1 ]; then
  log "build: $(python3 scripts/wasm-names.py "$wasm")"
fi
log "build: $(stat -c %s "$wasm") bytes raw, $(gzip -9c "$wasm" | wc -c) bytes gzipped ($wasm)"
echo "$fingerprint" > "$out/.source-hash"
