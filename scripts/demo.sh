#!/usr/bin/env bash
# The main job: set up, build, and run the tail-latency lab (simulated origins,
# the Worker in workerd, open-loop load, side-by-side report and plot).
# Arguments go to lab/run.mjs, e.g. --scenario all --rate 300 --seconds 30 --overhead
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
bash scripts/setup.sh
export PATH="$NODE22_BIN:$PATH"
bash scripts/build.sh
node lab/run.mjs --pop "$@"
