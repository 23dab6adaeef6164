#!/usr/bin/env bash
# npm run deploy -- --env NAME: checks the environment's configuration first,
# then deploys it with wrangler (the project's Node and wrangler).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
node scripts/check-config.mjs "$@"
exec npx --no-install wrangler deploy "$@"
