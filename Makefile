# Developer and CI entry points. CI runs .ci/run, which ends in `make test`.

GO ?= go
# TESTFLAGS is passed to go test, e.g. make test TESTFLAGS='-run Zab -v'.
TESTFLAGS ?=
# COMPAREFLAGS is passed to the bench tool's compare mode in make bench.
COMPAREFLAGS ?=
# BENCHFLAGS is passed to go test in make bench-go, e.g. BENCHFLAGS=-benchmem.
BENCHFLAGS ?=
# FUZZTIME bounds each fuzz target in make fuzz.
FUZZTIME ?= 15s

.PHONY: all build run test image bench bench-go fmt lint fuzz tools console-screenshots

all: build

build:
	$(GO) build -o bin/janus .

run:
	$(GO) run .

test:
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 25m $(TESTFLAGS) ./...
	cd deploy && $(GO) vet ./... && $(GO) test -count=1 -timeout 10m $(TESTFLAGS) ./...
	$(MAKE) test-k8s

# image builds the container image as an OCI tarball (bin/janus-image.tar)
# without a container engine: a static binary, then deploy/image around it.
# `docker load -i bin/janus-image.tar` or podman load it; with an engine,
# deploy/container/Dockerfile builds the same image.
image:
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags=-buildid= -o bin/janus-static .
	cd deploy && $(GO) run ./image --binary ../bin/janus-static --out ../bin/janus-image.tar

# The Kubernetes API server's own storage tests against Janus: a module of
# its own (test/k8s), so its dependencies stay out of Janus's go.mod.
# K8STESTFLAGS is passed to its go test.
K8STESTFLAGS ?=
.PHONY: test-k8s
test-k8s:
	cd test/k8s && $(GO) vet ./...
	cd test/k8s && $(GO) test -count=1 -timeout 20m $(K8STESTFLAGS) ./...

# console-screenshots reruns the web console's browser tests with
# JANUS_CONSOLE_SCREENSHOTS set, rewriting docs/console/*.png (the README
# shows them). Normal test runs leave the committed pictures alone.
console-screenshots:
	JANUS_CONSOLE_SCREENSHOTS=1 $(GO) test -count=1 -run 'TestBrowser' ./console

# bench compares Janus with a real etcd and a real ZooKeeper on this
# machine and writes a report under bench/out/ (see docs/benchmarks.md).
bench:
	$(GO) run ./bench compare $(COMPAREFLAGS)

# bench-go runs the Go benchmarks of every package.
bench-go:
	$(GO) test -run '^$$' -bench . $(BENCHFLAGS) ./...

fmt:
	gofmt -l -w .

lint:
	$(GO) vet ./...
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then \
		echo "files not gofmt-ed (run make fmt):"; echo "$$unformatted"; exit 1; \
	fi

# Every Fuzz function of every package runs for FUZZTIME; go test -fuzz
# takes one target in one package at a time, hence the loops.
fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
		targets="$$($(GO) test -list '^Fuzz' "$$pkg")" || exit 1; \
		for target in $$(echo "$$targets" | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) "$$pkg"; \
		done; \
	done

# The reference etcd server, etcdctl and etcdutl, at the versions go.mod's tool block
# pins. Tests build them on demand too (internal/testenv); each binary is
# built beside its final name and renamed, so a concurrent test never runs a
# half-written file.
tools:
	@mkdir -p bin
	$(GO) build -o bin/etcdctl.tmp go.etcd.io/etcd/etcdctl/v3
	mv -f bin/etcdctl.tmp bin/etcdctl
	$(GO) build -o bin/etcdutl.tmp go.etcd.io/etcd/etcdutl/v3
	mv -f bin/etcdutl.tmp bin/etcdutl
	$(GO) build -o bin/etcd.tmp go.etcd.io/etcd/server/v3
	mv -f bin/etcd.tmp bin/etcd

# A 3-member ensemble on loopback (deploy/local-cluster.sh; NODES, RUN_DIR,
# BASE_PORT tune it). cluster-stop stops only the members it started.
.PHONY: cluster cluster-stop chaos
cluster: build
	JANUS_BIN=$(CURDIR)/bin/janus deploy/local-cluster.sh start

cluster-stop:
	deploy/local-cluster.sh stop

# The long form of the randomized fault tests: the same faults and checks
# as in make test, for CHAOS_DURATION per scenario: the process cluster
# (faults, whole-cluster kill -9) and Zab's in-memory chaos test; then
# CHAOS_KILLS SIGKILLs of a store child process, CHAOS_POWER_LOSSES
# simulated power losses of the log and CHAOS_SIM_SEEDS runs of the Zab
# simulator. Each logs its seed; JANUS_CLUSTER_SEED, -zab.seed, -store.seed,
# -zab.power.seed and -zabsim.seed replay one.
CHAOS_DURATION ?= 2m
CHAOS_KILLS ?= 100
CHAOS_POWER_LOSSES ?= 100000
CHAOS_SIM_SEEDS ?= 10000
chaos:
	JANUS_CHAOS_DURATION=$(CHAOS_DURATION) $(GO) test -count=1 -timeout 60m -v -run 'Test(Single|Cluster)' ./internal/cluster
	$(GO) test -count=1 -timeout 60m -v -run '^TestChaos$$' ./zab -zab.long -zab.long.duration=$(CHAOS_DURATION)
	JANUS_STORE_KILLS=$(CHAOS_KILLS) $(GO) test -count=1 -timeout 60m -v -run '^TestSIGKILLLoop(ValueLogGC)?$$' ./store
	$(GO) test -count=1 -timeout 60m -run '^TestLogSurvivesPowerLoss$$' ./zab -zab.power.losses=$(CHAOS_POWER_LOSSES)
	$(GO) test -count=1 -timeout 60m -v -run '^TestSimulate$$' ./zab/zabsim -zabsim.seeds=$(CHAOS_SIM_SEEDS)
