#!/usr/bin/env bash
# Start the rules service and the example lobby together: the rules service on a free port,
# the lobby on LOBBY_PORT (default 8080; 0 picks a free one), until Ctrl-C or SIGTERM, which
# stop both. Sets up .venv (as `bash .ci/serve` does) and the lobby's node_modules first.
# BASRA_* variables (signing keys, bot level, ...) reach the rules service as they are.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash .ci/setup runtime
(cd examples/lobby && npm ci --no-audit --no-fund --loglevel=error)

dir=$(mktemp -d)
log=$dir/rules.log
# Made here: a background job's redirection happens in the job, maybe after the first read.
: >"$log"
.venv/bin/basra-rules serve --host 127.0.0.1 --port 0 --metrics-port 0 --log-format json \
  >"$log" 2>&1 &
rules=$!
lobby=
stop() {
  [ -z "$lobby" ] || kill -TERM "$lobby" 2>/dev/null || true
  kill -TERM "$rules" 2>/dev/null || true
  wait
  rm -rf "$dir"
}
trap stop EXIT
trap 'exit 0' INT TERM

# The rules service names the port it chose in its "serving" log line.
port=
for _ in $(seq 300); do
  port=$(sed -n '/"event": *"serving"/ s/.*"port": *\([0-9]*\).*/\1/p' "$log" | head -n 1)
  [ -n "$port" ] && break
  kill -0 "$rules" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "the rules service did not start:" >&2; cat "$log" >&2; exit 1; }

node examples/lobby/server.mjs --rules "127.0.0.1:$port" &
lobby=$!
wait "$lobby"
