#!/usr/bin/env bash
# The soak test (not in CI; CI runs a 20 s version in tests/soak.test.mjs):
# set-up, build, then 10 minutes at 100 rps through workerd. Flags go to
# lab/soak.mjs: --minutes 10 --rate 100 --slice-seconds 30
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
bash scripts/setup.sh
export PATH="$NODE22_BIN:$PATH"
bash scripts/build.sh
node lab/soak.mjs "$@"
