#!/usr/bin/env bash
# schemathesis (PyPI) against GET /openapi.json of a running stack, with the operator token: a
# request the document accepts is never refused as malformed, one it refuses is never accepted,
# every answer and method is the one it documents, never a 5xx (scripts/schemathesis.toml says
# which answers are widened, and why). Bounded (examples per operation, fixed seed) to take under
# about a minute.
#
#   scripts/schemathesis.sh                      starts a stack of its own (npm start on free
#                                                ports, no Kafka), runs, stops it
#   SCALEGATE_API_URL=… SCALEGATE_OPERATOR_TOKEN=… scripts/schemathesis.sh   against that stack
#
# schemathesis is installed once into a virtualenv under ~/.cache/scalegate (pinned version).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=4.32.5
EXAMPLES=${SCHEMATHESIS_EXAMPLES:-5}
SEED=${SCHEMATHESIS_SEED:-1}
venv="${XDG_CACHE_HOME:-$HOME/.cache}/scalegate/schemathesis-$VERSION"
if [ ! -x "$venv/bin/schemathesis" ]; then
  echo "installing schemathesis $VERSION into $venv"
  python3 -m venv "$venv" || { echo "python3 -m venv failed (Debian: apt-get install python3-venv)"; exit 1; }
  "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$VERSION"
fi

if [ -z "${SCALEGATE_API_URL:-}" ]; then
  home=$(mktemp -d)
  free_port() { node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })'; }
  # The three agents take agent_base..+2: drawn below the ephemeral ports (32768 and up), where
  # the stack's own outgoing connections could take one before its agent binds it.
  free_block() { node -e '
    const net = require("net");
    const bindable = (port) => new Promise((ok) => { const s = net.createServer().once("error", () => ok(false)).listen(port, "127.0.0.1", () => s.close(() => ok(true))); });
    (async () => { for (;;) { const base = 12000 + Math.floor(Math.random() * 18000);
      if ((await Promise.all([0, 1, 2].map((i) => bindable(base + i)))).every(Boolean)) { console.log(base); return; } } })();'; }
  api_port=$(free_port)
  agent_base=$(free_block)
  export SCALEGATE_HOME="$home" SCALEGATE_API_PORT="$api_port" SCALEGATE_TEMPORAL_PORT="$(free_port)" SCALEGATE_UI_PORT="$(free_port)" \
    SCALEGATE_PG_PORT="$(free_port)" SCALEGATE_AGENT_BASE_PORT="$agent_base" SCALEGATE_KAFKA=off SCALEGATE_CONTAINERS=off SCALEGATE_PG_FSYNC=off
  # npm start itself (package.json's script runs the stack in the process npm starts, which takes
  # the SIGINT npm forwards; tsx's CLI in between SIGKILLed a stack busy at that moment)
  npm start >"$home/start.log" 2>&1 &
  stack_pid=$!
  stop_stack() {
    kill -INT "$stack_pid" 2>/dev/null || true
    wait "$stack_pid" 2>/dev/null || true
    # npm start stops everything it started; should a process of its stack outlive it (seen once:
    # its three agents, under a loaded CI), it is named here, with the stack's log, and killed, so
    # that nothing of this run is left on the machine.
    left=$(pgrep -f -- "$home" || true)
    if [ -n "$left" ]; then
      echo "npm start left $(echo "$left" | wc -l) process(es) behind after SIGINT:"
      ps -o pid=,args= -p "$(echo "$left" | paste -sd,)" || true
      tail -30 "$home/start.log" || true
      kill -KILL $left 2>/dev/null || true
    fi
    rm -rf "$home"
  }
  trap stop_stack EXIT
  for _ in $(seq 1 360); do
    grep -q '^\[scalegate\] ready' "$home/start.log" && break
    if ! kill -0 "$stack_pid" 2>/dev/null; then echo "npm start ended before it was ready:"; tail -40 "$home/start.log"; exit 1; fi
    sleep 0.5
  done
  grep -q '^\[scalegate\] ready' "$home/start.log" || { echo "npm start was not ready within 180 s:"; tail -40 "$home/start.log"; exit 1; }
  export SCALEGATE_API_URL="http://127.0.0.1:$api_port"
  SCALEGATE_OPERATOR_TOKEN=$(node -p "require('$home/tokens.json').operator")
fi
: "${SCALEGATE_OPERATOR_TOKEN:?set SCALEGATE_OPERATOR_TOKEN with SCALEGATE_API_URL}"

# --workers 1: with two threads, CPython 3.11's AST compiler fails inside schemathesis now and then
# ("SystemError: AST constructor recursion depth mismatch", seen in one of four runs here)
"$venv/bin/schemathesis" --config-file scripts/schemathesis.toml run "$SCALEGATE_API_URL/openapi.json" \
  -H "Authorization: Bearer $SCALEGATE_OPERATOR_TOKEN" --max-examples "$EXAMPLES" --seed "$SEED" --workers 1 --no-color \
  --output-sanitize true --generation-database none
