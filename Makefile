SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

BIN      := bin
BUF      := tools/buf/node_modules/.bin/buf
GO_TEST  := go test -race -count=1 -timeout 20m

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(BUF): tools/buf/package.json
	cd tools/buf && npm install --no-audit --no-fund --silent
	@touch $(BUF)

.PHONY: generate
generate: $(BUF) ## Regenerate gen/ from proto/ with buf (local plugins, no registry).
	$(BUF) lint
	$(BUF) generate

.PHONY: checkgenerate
checkgenerate: generate ## Fail if gen/ differs from what proto/ generates.
	@git diff --exit-code --stat -- gen/ || (echo "gen/ is stale: run make generate and commit" >&2; exit 1)
	@test -z "$$(git status --porcelain -- gen/)" || (git status --porcelain -- gen/; echo "gen/ has untracked output" >&2; exit 1)

.PHONY: build
build: ## Build the coordinator and the simulator into bin/.
	go build -o $(BIN)/coordinator ./cmd/coordinator
	go build -o $(BIN)/coordinator-sim ./cmd/coordinator-sim

.PHONY: test
test: ## Run every test with the race detector.
	$(GO_TEST) ./...

.PHONY: lint
lint: $(BUF) ## go vet, gofmt and buf lint.
	go vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/')); test -z "$$out" || (echo "gofmt: $$out" >&2; exit 1)
	$(BUF) lint
	@! go list -deps ./cmd/coordinator | grep -q '/coordinator/sim$$' || (echo "cmd/coordinator must not import the simulator" >&2; exit 1)

.PHONY: run
run: build ## Start the simulator and the coordinator on config/dev.yaml (REST :8080, gRPC :9090).
	@$(BIN)/coordinator-sim & sim=$$!; trap 'kill $$sim 2>/dev/null' EXIT; \
	$(BIN)/coordinator --config config/dev.yaml

.PHONY: bench
bench: ## Benchmark the coordinator against a bare reverse proxy (p50/p99, CPU per request).
	go run ./cmd/coordinator-bench
