#!/usr/bin/env bash
# npm run check [-- --env NAME]: the configuration check (scripts/check-config.mjs),
# run by the built Worker's own parser. Sets up and builds what it needs first,
# as dev and test do, so it works as the first command on a fresh clone.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
bash scripts/setup.sh >&2
export PATH="$NODE22_BIN:$PATH"
bash scripts/build.sh >&2
exec node scripts/check-config.mjs "$@"
