#!/usr/bin/env bash
# The main job: set up, build, and run the Worker in front of local origins.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
bash scripts/setup.sh
export PATH="$NODE22_BIN:$PATH"
bash scripts/build.sh
node lab/quick-demo.mjs "$@"
