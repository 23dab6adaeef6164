#!/usr/bin/env bash
# npm run deploy -- --env NAME: sets up, builds, checks the environment's
# configuration (scripts/check-config.mjs), then deploys exactly that
# environment with the project's wrangler. Refuses without --env: the top
# level of wrangler.toml is local development (loopback origins).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
env_name=""
config="wrangler.toml"
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[$i]}" in
    --env) env_name="${args[$((i + 1))]:-}" ;;
    --env=*) env_name="${args[$i]#--env=}" ;;
    -e) env_name="${args[$((i + 1))]:-}" ;;
    --config | -c) config="${args[$((i + 1))]:-}" ;;
    --config=*) config="${args[$i]#--config=}" ;;
  esac
done
if [ -z "$env_name" ]; then
  envs="$(sed -n 's/^\[env\.\([A-Za-z0-9_-]*\)\]$/\1/p' "$config" | sort -u | paste -sd' ' -)"
  echo "deploy: name the environment to deploy: npm run deploy -- --env NAME (environments in $config: ${envs:-none})." >&2
  echo "deploy: the top level of $config is local development (loopback origins); it is never deployed by this command." >&2
  exit 2
fi
bash scripts/setup.sh >&2
export PATH="$NODE22_BIN:$PATH"
bash scripts/build.sh >&2
node scripts/check-config.mjs "$@"
exec npx --no-install wrangler deploy "$@"
