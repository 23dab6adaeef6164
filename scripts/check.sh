#!/usr/bin/env bash
# npm run check [-- --env NAME]: the configuration check (scripts/check-config.mjs)
# with the project's Node (setup installs Node 22 when the system's is older).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
exec node scripts/check-config.mjs "$@"
