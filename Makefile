# tailroot — the Makefile is the interface. `make help` lists the targets.

SHELL        := /bin/bash
GO           ?= go
BIN          := bin
DATA_DIR     ?= ./data
LISTEN       ?= 127.0.0.1:9490
VERSION      ?= $(shell cat VERSION 2>/dev/null || echo 0.1.0-dev)
REVISION     := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
BRANCH       := $(shell git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
LDFLAGS      := -X main.version=$(VERSION) -X main.revision=$(REVISION) -X main.branch=$(BRANCH) \
                -X main.buildUser=$(shell id -un)@$(shell hostname) -X main.buildDate=$(shell date -u +%Y%m%d-%H:%M:%S)
TEST_TIMEOUT ?= 25m
FUZZTIME     ?= 60s

# Debian packages the tests need: promtool for the compatibility and rules tests,
# Alertmanager for the alerting test,
# clang/llvm/libbpf for the eBPF programs, bpftool to regenerate vmlinux.h.
APT_PACKAGES := prometheus prometheus-alertmanager clang-14 llvm-14 libbpf-dev bpftool gcc python3

.PHONY: help
help: ## list targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-16s %s\n", $$1, $$2}'

.PHONY: build
build: ## build bin/tailroot
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/tailroot ./cmd/tailroot

.PHONY: run
run: build ## start tailroot on ./data (DATA_DIR=…) with the built-in workload simulator
	@echo
	@echo "tailroot: http://$(LISTEN)  (data in $(DATA_DIR), Ctrl-C to stop)"
	@echo "  Grafana: add a Prometheus datasource with URL http://$(LISTEN)"
	@echo "  try:     curl -s 'http://$(LISTEN)/api/v1/query' --data-urlencode 'query=histogram_quantile(0.99, sum by (le, model_name) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))'"
	@echo "  try:     curl -s 'http://$(LISTEN)/api/v1/query' --data-urlencode 'query=sum by (model_name) (rate(vllm:request_success_total[5m]))'"
	@echo
	$(BIN)/tailroot serve --listen $(LISTEN) --data-dir $(DATA_DIR) --simulate --web.enable-admin-api

.PHONY: test-deps
test-deps: ## install the Debian packages the tests need (root)
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

# Shared peer tools (the Thanos and Prometheus build scripts) live beside
# the checkout, as in CI.
SHARED       ?= ../shared
export TAILROOT_SHARED_DIR ?= $(abspath $(SHARED))

.PHONY: peers
peers: ## build the peer servers the end-to-end tests start (Thanos, Prometheus 3.16; cached, minutes when cold)
	@set -e; for s in build-thanos.sh build-peers.sh; do p=$(SHARED)/tools/peers/$$s; \
		if [ -f $$p ]; then bash $$p >/dev/null; else echo "peers: $$p not found; tests that need Thanos or Prometheus will skip"; fi; \
	done

.PHONY: test
test: test-deps peers ## install test dependencies, build the peers, run every test, smoke-run the benchmarks, test the plugin frontend
	$(GO) vet ./...
	$(GO) test -timeout $(TEST_TIMEOUT) -count=1 ./...
	$(GO) test -timeout $(TEST_TIMEOUT) -count=1 -run '^$$' -bench . -benchtime=1x ./... > /dev/null
	$(MAKE) -C grafana-plugin plugin-test

.PHONY: plugin
plugin: ## Grafana plugin: grafana-plugin/dist and tailroot-tailroot-datasource-$(VERSION).zip
	$(MAKE) -C grafana-plugin plugin

.PHONY: lint
lint: ## vet, staticcheck and gofumpt
	$(GO) vet ./...
	$(GO) tool staticcheck ./...
	@out="$$($(GO) tool gofumpt -l $$(git ls-files '*.go' | grep -v '_bpfel.go$$'))"; \
	if [ -n "$$out" ]; then echo "gofumpt wants changes in:"; echo "$$out"; exit 1; fi

.PHONY: generate
generate: ## regenerate eBPF objects (bpf2go, clang-14), the Thanos StoreAPI client (protoc) and the system call names (linux-libc-dev)
	$(GO) generate ./bpf/...
	$(GO) generate ./query/remote/storepb
	$(GO) generate ./agent/kernel

.PHONY: check-generated
check-generated: ## regenerate and fail if committed generated files differ
	./bpf/check-generated.sh

.PHONY: fuzz
fuzz: ## run every fuzz target for $(FUZZTIME) each
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz' || true); do \
			echo "== $$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done
	$(MAKE) -C grafana-plugin fuzz FUZZTIME=$(FUZZTIME)

.PHONY: soak
soak: peers ## long runs: kill -9 the server 100 times during mixed ingest, and forwarding with the receivers stopped for 5 minutes (TAILROOT_SOAK=1)
	TAILROOT_SOAK=1 $(GO) test -timeout 40m -count=1 -v -run '^TestCrashLoop$$|^TestForwardToThanosReceiveAndPrometheus$$' ./apptest/

.PHONY: ci-coverage
ci-coverage: ## the full coverage table of the quantile intervals (1000 repetitions per cell, a few minutes), as in docs/functions.md
	TAILROOT_CI_COVERAGE_REPS=1000 $(GO) test -timeout 30m -count=1 -v -run '^TestIntervalCoverageTable$$' ./attribution/

# Benchmarks by area, so that one area can be measured (and compared with
# benchstat) in a few minutes; `make bench` runs every group in turn.
BENCH_COUNT  ?= 6
BENCH_INGEST := ./ingest/... ./agent/...
BENCH_STORE  := ./tsdb/...
# The tail functions' benchmarks alone take minutes (every function × mode
# × population size), so they are their own area and bench-query is the rest
# of query/ (new packages included) and cmd/.
BENCH_TAILS  := ./query/tailfn/...
# The distributed benchmarks report bytes and rounds per query, which do not
# depend on how long they run; a shorter -benchtime keeps the area under 10
# minutes on 2 loaded cores.
BENCH_TAILS_TIME ?= 400ms
BENCH_QUERY   = $(shell $(GO) list ./query/... ./cmd/... | grep -v '/query/tailfn')
BENCH_STATS  := ./attribution/... ./sim/...
BENCH_BPF    := ./bpf/...

.PHONY: bench bench-ingest bench-store bench-query bench-tails bench-stats bench-bpf
bench-ingest: ## benchmarks of remote write, OTLP, records and the agent queue into bench-ingest.txt
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) $(BENCH_INGEST) | tee bench-ingest.txt
bench-store: ## benchmarks of the TSDB guard, records, Parquet history, evidence and forwarding into bench-store.txt
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) $(BENCH_STORE) | tee bench-store.txt
bench-query: ## benchmarks of the engine, MetricsQL, the global view and the import command into bench-query.txt
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) $(BENCH_QUERY) | tee bench-query.txt
bench-tails: ## benchmarks of the tail functions (records, distributed) into bench-tails.txt
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCH_TAILS_TIME) -count $(BENCH_COUNT) $(BENCH_TAILS) | tee bench-tails.txt
bench-stats: ## benchmarks of the attribution statistics and the simulator into bench-stats.txt
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) $(BENCH_STATS) | tee bench-stats.txt
bench-bpf: ## per-event overhead of the eBPF probes (root) into bench-bpf.txt
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCH_COUNT) $(BENCH_BPF) | tee bench-bpf.txt
bench: bench-ingest bench-store bench-query bench-tails bench-stats bench-bpf ## every benchmark group (BENCH_COUNT=6 each); compare runs with `go tool benchstat`

.PHONY: clean
clean: ## remove build outputs (not the data dir)
	rm -rf $(BIN)
