#!/usr/bin/env bash
# Runs the SDK tests and the examples against a live coordinator: builds
# coordinator-sim and coordinator, starts them on free 127.0.0.1 ports (the
# full cascade pipeline of config/dev.yaml, and the control listener with a
# bearer token over a static membership of the simulator's three engines),
# then runs
#   sdk/python/test_sdk.py        (Python SDK, unittest; the control plane too)
#   sdk/typescript test/sdk.test  (TypeScript SDK, node:test; the control plane too)
#   examples/rl_rollout.py        (GRPO-style rollout through the Python SDK)
#   examples/rl_loop.py           (rollouts streaming across a pause, keep then abort, a weight version and a resume)
#   examples/openai_chat.mjs      (OpenAI Node SDK, streamed, over REST)
#   examples/openai_responses.mjs (OpenAI Node SDK, responses.create, streamed and not, inputTokens.count)
#   examples/openai_responses_stored.mjs (OpenAI Node SDK: previous_response_id, retrieve, inputItems.list, delete)
#     and a Conversations round trip (conversations.create, responses.create({conversation}), items.list, delete)
#   examples/anthropic_messages.mjs (Anthropic SDK, messages.create, .stream and .countTokens)
# and stops both servers. `make sdk-test` runs it; .ci/run runs it after
# `make test`. Needs Go, curl, Node 20 + npm, and Debian's python3-grpcio and
# python3-protobuf (PYTHON, default /usr/bin/python3, must import both).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
pids=()

cleanup() {
	local rc=$?
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
	if ((rc != 0)); then
		for log in "$work"/*.log; do
			[[ -f $log ]] || continue
			echo "---- last lines of $(basename "$log")" >&2
			tail -n 40 "$log" >&2
		done
	fi
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT

# step prints a heading with the seconds spent so far.
step() { echo "== [${SECONDS}s] $*"; }

"$PYTHON" -c 'import grpc, google.protobuf' 2>/dev/null || {
	echo "sdk/run-tests.sh: $PYTHON cannot import grpc and google.protobuf" >&2
	echo "  apt-get install -y python3-grpcio python3-protobuf (or set PYTHON)" >&2
	exit 1
}

# npm ci where the lock file is newer than the installed tree.
npm_ci() {
	if [[ ! -f $1/node_modules/.package-lock.json || $1/package-lock.json -nt $1/node_modules/.package-lock.json ]]; then
		(cd "$1" && npm ci --no-audit --no-fund --silent)
	fi
}
step "npm ci (sdk/typescript, examples)"
npm_ci sdk/typescript
npm_ci examples

# With -race: data races surface here too, and after `make test` (which
# builds with -race) the packages come from the build cache, so only the
# link is left (a build without it compiles every package again: minutes
# on 2 cores).
step "build coordinator and coordinator-sim (-race)"
go build -race -o "$work/coordinator" ./cmd/coordinator
go build -race -o "$work/coordinator-sim" ./cmd/coordinator-sim

# Free loopback ports: bound to port 0, then released for the servers.
read -r gw render rest grpc control < <("$PYTHON" - <<'PY'
import socket
socks = [socket.socket() for _ in range(5)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
PY
)

# The simulator's engines (one per role) take free ports and list them in
# engines.json once they listen; the coordinator's membership is built from it.
"$work/coordinator-sim" --gateway-addr "127.0.0.1:$gw" --render-addr "127.0.0.1:$render" \
	--token-delay 1ms --strict=true \
	--engine-listen 127.0.0.1:0 --engines-file "$work/engines.json" >"$work/sim.log" 2>&1 &
pids+=($!)
for ((i = 0; ; i++)); do
	[[ -f $work/engines.json ]] && break
	kill -0 "${pids[0]}" 2>/dev/null || { echo "sdk/run-tests.sh: coordinator-sim exited during startup" >&2; exit 1; }
	((i < 200)) || { echo "sdk/run-tests.sh: no engines.json after 20s" >&2; exit 1; }
	sleep 0.1
done
# JSON is YAML: control.membership.static as a flow sequence of {role, address}.
static=$("$PYTHON" -c '
import json, sys
print(json.dumps([{"role": e["role"], "address": e["address"]} for e in json.load(open(sys.argv[1]))]))' "$work/engines.json")
"$PYTHON" -c 'import secrets; print(secrets.token_hex(16))' >"$work/control-token"

cat >"$work/config.yaml" <<YAML
log_level: 2
server:
  listen_addr: "127.0.0.1:$rest"
  grpc_listen_addr: "127.0.0.1:$grpc"
gateway:
  address: "http://127.0.0.1:$gw"
pipeline:
  kv_connector: kv-nixl
  ec_connector: ec-nixl
  steps:
    - type: render
      params:
        address: "http://127.0.0.1:$render"
    - type: conditional-decode
    - type: encode
    - type: prefill
    - type: decode
control:
  listen_addr: "127.0.0.1:$control"
  token_file: "$work/control-token"
  membership:
    static: $static
YAML

"$work/coordinator" --config "$work/config.yaml" >"$work/coordinator.log" 2>&1 &
pids+=($!)

# /readyz turns 200 once both of the coordinator's public listeners serve;
# the control listener answers its token's ListWorkers.
for ((i = 0; ; i++)); do
	if curl -fsS -o /dev/null "http://127.0.0.1:$rest/readyz" 2>/dev/null &&
		curl -fsS -o /dev/null -H "Authorization: Bearer $(<"$work/control-token")" \
			"http://127.0.0.1:$control/v1/rl/workers" 2>/dev/null; then
		break
	fi
	for pid in "${pids[@]}"; do
		kill -0 "$pid" 2>/dev/null || { echo "sdk/run-tests.sh: a server exited during startup" >&2; exit 1; }
	done
	((i < 200)) || { echo "sdk/run-tests.sh: coordinator not ready after 20s" >&2; exit 1; }
	sleep 0.1
done
step "coordinator ready: REST 127.0.0.1:$rest, gRPC 127.0.0.1:$grpc, control 127.0.0.1:$control (simulator 127.0.0.1:$gw)"

export COORDINATOR_GRPC_ADDR="127.0.0.1:$grpc"
export COORDINATOR_REST_URL="http://127.0.0.1:$rest"
export COORDINATOR_CONTROL_ADDR="127.0.0.1:$control"
COORDINATOR_CONTROL_TOKEN=$(<"$work/control-token")
export COORDINATOR_CONTROL_TOKEN

step "GET /openapi.json"
curl -fsS "$COORDINATOR_REST_URL/openapi.json" | "$PYTHON" -c '
import json, sys
doc = json.load(sys.stdin)
want = {"/v1/chat/completions", "/v1/completions", "/inference/v1/generate", "/v1/responses", "/v1/messages", "/v1/responses/input_tokens", "/v1/messages/count_tokens", "/v1/requests/{id}", "/v1/conversations", "/healthz", "/readyz", "/metrics"}
missing = want - set(doc["paths"])
if missing:
    sys.exit(f"openapi.json lacks {sorted(missing)}")
print("openapi", doc["openapi"] + ":", len(doc["paths"]), "paths")'

step "Python SDK (sdk/python/test_sdk.py)"
"$PYTHON" sdk/python/test_sdk.py -v

step "TypeScript SDK (sdk/typescript, node --test)"
(cd sdk/typescript && npm test --silent)

step "examples/rl_rollout.py"
"$PYTHON" examples/rl_rollout.py --addr "$COORDINATOR_GRPC_ADDR"

step "examples/rl_loop.py"
"$PYTHON" examples/rl_loop.py --addr "$COORDINATOR_GRPC_ADDR" --control-addr "$COORDINATOR_CONTROL_ADDR" --max-tokens 256

step "examples/rl_loop.py --mode abort (rollouts continued across an abort pause)"
"$PYTHON" examples/rl_loop.py --addr "$COORDINATOR_GRPC_ADDR" --control-addr "$COORDINATOR_CONTROL_ADDR" --max-tokens 256 \
  --mode abort --n 1 --version v3

step "examples/openai_chat.mjs"
node examples/openai_chat.mjs --base-url "$COORDINATOR_REST_URL/v1"

step "examples/openai_responses.mjs"
node examples/openai_responses.mjs --base-url "$COORDINATOR_REST_URL/v1"

step "examples/openai_responses_stored.mjs"
node examples/openai_responses_stored.mjs --base-url "$COORDINATOR_REST_URL/v1"

step "examples/anthropic_messages.mjs"
node examples/anthropic_messages.mjs --base-url "$COORDINATOR_REST_URL"

step "sdk/run-tests.sh passed"
