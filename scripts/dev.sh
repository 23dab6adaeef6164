#!/usr/bin/env bash
# npm run dev: example origins and `wrangler dev` wired to them (scripts/dev.mjs),
# with the project's Node (setup installs Node 22 when the system's is older).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
bash scripts/setup.sh
export PATH="$NODE22_BIN:$PATH"
exec node scripts/dev.mjs "$@"
