#!/usr/bin/env bash
# npm run advise -- --url URL | --from FILE [--json] [...]: what another hedge
# budget would buy, replayed from a Worker's stats page (core/examples/advise.rs;
# --help says more). Sets up and builds what it needs first, so it works as the
# first command on a fresh clone.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
for arg in "$@"; do
  if [ "$arg" = "--help" ] || [ "$arg" = "-h" ]; then
    cat core/examples/advise.txt
    exit 0
  fi
done
bash scripts/setup.sh >&2
export PATH="$NODE22_BIN:$PATH"
cargo build --quiet --release -p hedgehog-core --example advise >&2
exec node scripts/advise.mjs "$@"
