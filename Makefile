# durabench — two commands do all the set-up on a fresh machine:
#   make run    the default sweep on the embedded NATS world
#   make test   the tests, race detector on (after checking that go.mod is
#               tidy and linting the CI workflows)
GO ?= go
OUT ?= out/default

.PHONY: run test lint acceptance floor floor-interleaved tidy-check lint-workflows test-cluster bench build scale soak fuzz calibrate engines engine-workflow test-targets chaos

build:
	$(GO) build -o bin/durabench ./cmd/durabench

run: build
	./bin/durabench sweep --out $(OUT)
	./bin/durabench report $(OUT)/results.json --png $(OUT)/charts > /dev/null

test: tidy-check lint-workflows lint
	$(GO) test -race -timeout 15m ./...

# Every Go file gofmt'd, go vet and staticcheck clean, the build-tagged
# suites (acceptance, floor, scale) included, so that they cannot rot
# unbuilt. staticcheck is a tool of the tools module (tools/go.mod),
# built into bin/.
TAGS := acceptance,floor,scale
lint: bin/staticcheck
	@unformatted=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); \
	  [ -z "$$unformatted" ] || { echo "make test: gofmt would change (run gofmt -w):" $$unformatted >&2; exit 1; }
	$(GO) vet -tags $(TAGS) ./...
	./bin/staticcheck -tags $(TAGS) ./...
bin/staticcheck: tools/go.mod tools/go.sum
	cd tools && $(GO) build -o ../bin/staticcheck honnef.co/go/tools/cmd/staticcheck

# go.mod and go.sum must be what `go mod tidy` makes of them (the tools
# module's too): a stale or missing requirement fails make test before
# anything else runs.
tidy-check:
	@$(GO) mod tidy -diff || { echo "make test: go.mod/go.sum are not tidy (diff above): run 'go mod tidy' and commit the result" >&2; exit 1; }
	@cd tools && $(GO) mod tidy -diff || { echo "make test: tools/go.mod/go.sum are not tidy (diff above): run 'cd tools && go mod tidy' and commit the result" >&2; exit 1; }

# actionlint over the CI workflows (shellcheck on their scripts when it is
# installed). It is a tool of the separate tools module (tools/go.mod), so it
# stays out of durabench's own module graph.
lint-workflows:
	cd tools && $(GO) tool actionlint ../.github/workflows/*.yml ../examples/sdk-pr-workflow.yml

# Target adapters (docs/targets.md): each adapters/NAME/ is a Go module of its
# own (an engine's dependencies never enter durabench's module or binary) that
# builds the executable durabench-target-NAME; `durabench sweep --targets NAME`
# finds it next to bin/durabench.
engines: build
	@for d in adapters/*/; do n=$$(basename $$d); [ -f $$d/go.mod ] || continue; echo "engines: bin/durabench-target-$$n"; \
	  $(GO) build -C $$d -o ../../bin/durabench-target-$$n . || exit 1; done
	@$(MAKE) --no-print-directory engine-workflow

# The Workflow SDK adapter (adapters/workflow, Node.js; its README): each SDK
# version under adapters/workflow/sdk/ installed from its own lockfile (npm ci,
# again only when the lockfile changes) and built by the SDK's own workflow
# build (again when the workloads change); bin/durabench-target-workflow
# runs adapter.mjs with node. Node and npm are its only tools.
WF := adapters/workflow
WF_BUILDS := $(patsubst %,$(WF)/sdk/%/.well-known/workflow/v1/manifest.json,$(notdir $(wildcard $(WF)/sdk/*)))
engine-workflow: $(WF_BUILDS)
	@echo "engines: bin/durabench-target-workflow ($(notdir $(wildcard $(WF)/sdk/*)))"
	@mkdir -p bin && printf '#!/bin/sh\nexec node "$$(dirname "$$0")/../$(WF)/adapter.mjs" "$$@"\n' > bin/durabench-target-workflow && chmod +x bin/durabench-target-workflow
.PRECIOUS: $(WF)/sdk/%/node_modules/.package-lock.json
$(WF)/sdk/%/node_modules/.package-lock.json: $(WF)/sdk/%/package-lock.json $(WF)/sdk/%/package.json
	cd $(WF)/sdk/$* && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
$(WF)/sdk/%/.well-known/workflow/v1/manifest.json: $(WF)/sdk/%/node_modules/.package-lock.json $(WF)/workflows/bench.js
	rm -rf $(WF)/sdk/$*/workflows && cp -r $(WF)/workflows $(WF)/sdk/$*/
	cd $(WF)/sdk/$* && npx --no-install workflow build > /dev/null

# Each adapter module: tidy, vetted, its tests (the conformance checker
# in-process and through its executable), then `durabench target check`
# against the executable make engines built. The race detector is on but
# for the modules in NORACE_TARGETS: instrumenting the whole Temporal
# server is a second build of 13 minutes on 2 cores (its adapter's tests
# then reuse make engines' build).
NORACE_TARGETS ?= temporal
test-targets: engines
	@for d in adapters/*/; do n=$$(basename $$d); race=-race; [ -f $$d/go.mod ] || continue; \
	  case " $(NORACE_TARGETS) " in *" $$n "*) race=;; esac; echo "test-targets: $$n $$race"; \
	  (cd $$d && $(GO) mod tidy -diff && $(GO) vet ./... && $(GO) test $$race -timeout 15m ./...) || exit 1; \
	  ./bin/durabench target check $$n --runs 2 || exit 1; done
	@echo "test-targets: workflow (tsc --noEmit and unit tests, node --test per SDK, then target check on world-local and world-postgres, and 5.0 on world-local)"
	cd $(WF) && npm ci --no-audit --no-fund --loglevel=error && npx --no-install tsc --noEmit -p . && node --test test/unit/
	@for v in $(notdir $(wildcard $(WF)/sdk/*)); do echo "test-targets: workflow SDK $$v: node --test"; \
	  (cd $(WF) && WORKFLOW_TEST_SDK=$$v node --test test/adapter.test.mjs > /tmp/durabench-workflow-test.log 2>&1) || { cat /tmp/durabench-workflow-test.log; exit 1; }; \
	  grep '^# \(pass\|fail\)' /tmp/durabench-workflow-test.log; done
	./bin/durabench target check workflow --runs 2
	./bin/durabench target check 'workflow --world=postgres' --runs 2
	./bin/durabench target check 'workflow --sdk=5.0.0-beta.55' --runs 2

# The heavy suites are picked by make targets, one each: test-cluster,
# chaos, scale, soak, calibrate, fuzz, acceptance and floor (the environment
# variables and build tags they set are theirs alone).

# The sim acceptance checks (issue 7): about a hundred sweeps in virtual
# time, about a minute on 2 cores.
acceptance:
	$(GO) test -tags acceptance -count=1 -run SimAcceptance -timeout 30m ./internal/stats/

# The detection floor of compare (docs/compare-gate-ci.md): FLOOR_PAIRS ABA
# triples of real sweeps per world; 20 pairs take well over an hour.
FLOOR_PAIRS ?= 20
floor:
	$(GO) test -tags floor -count=1 -run TestDetectionFloor -v -timeout 3h ./cmd/durabench/ -floor.pairs $(FLOOR_PAIRS)

# The interleaved detection floor (docs/compare-gate-ci.md): FLOOR_SWEEPS
# interleaved A/A sweeps on embedded NATS, compared side against side; 400
# take about four minutes. It fails when the share of significant paired
# tests is shown to be over 5% (its 95% interval, the sweeps as clusters,
# above 5%).
FLOOR_SWEEPS ?= 400
floor-interleaved:
	$(GO) test -tags floor -count=1 -run TestInterleavedFloor -v -timeout 1h ./cmd/durabench/ -floor.pairs $(FLOOR_SWEEPS)

# The three-node NATS cluster runs (slower; CI runs them): the world's
# conformance suite, and a distributed sweep (driver + two durabench workers).
test-cluster:
	DURABENCH_NATS_CLUSTER=1 $(GO) test -race -timeout 10m -run Cluster ./world/nats/... ./internal/cluster/...

# Each benchmark runs with its floor in the same process and reports the
# ratio; internal/bench/summary turns the raw output (out/bench.txt) into the table.
# A failing package does not stop the others; make bench fails at the end.
# Budget: under 5 minutes on 2 cores (about 2 minutes measured, plus the
# PostgreSQL fan-out: 103 s under a load average of 9-11).
bench:
	@mkdir -p out && : > out/bench.txt
	@echo "bench: recording vs time.Now (metrics)"
	-$(GO) test -run '^$$' -bench 'Perf|RecorderStepBody$$' -benchmem -benchtime=100ms -count=3 -timeout 2m ./metrics/ >> out/bench.txt
	@echo "bench: span recording vs none, 256-branch fan-out on mem (paired-ratio target <= 1.05)"
	-$(GO) test -run '^$$' -bench 'SpansMem256$$' -benchtime=100x -count=3 -timeout 6m ./engine/ >> out/bench.txt
	@echo "bench: engine vs floor on mem, 1/20/256 branches, every version"
	-$(GO) test -run '^$$' -bench 'FanOutMem' -benchmem -benchtime=20x -count=2 -timeout 4m ./engine/ >> out/bench.txt
	@echo "bench: each NATS world operation vs the raw JetStream call it wraps"
	-$(GO) test -run '^$$' -bench . -benchmem -benchtime=1000x -count=3 -timeout 3m ./world/nats/ >> out/bench.txt
	@echo "bench: each PostgreSQL world operation vs the raw pgx statement it wraps (throwaway server, fsync on)"
	-$(GO) test -run '^$$' -bench . -benchmem -benchtime=300x -count=3 -timeout 3m ./world/postgres/ >> out/bench.txt
	@echo "bench: engine vs raw SQL statements on PostgreSQL, 20/64/256 branches (two throwaway servers, fsync on)"
	-$(GO) test -run '^$$' -bench 'FanOutPG' -benchmem -benchtime=5x -timeout 5m ./internal/bench/rawpg/ >> out/bench.txt
	@echo "bench: engine vs raw JetStream on embedded NATS"
	-$(GO) test -run '^$$' -bench 'FanOutNATS' -benchmem -benchtime=5x -timeout 4m ./internal/bench/rawjs/ >> out/bench.txt
	@echo "bench: closed-loop soak on embedded NATS vs raw JetStream, 64 runs in flight x 256 branches, 10 s each"
	-DURABENCH_SOAK=10s $(GO) test -run '^$$' -bench 'SoakNATS' -benchtime=1x -timeout 5m ./internal/bench/rawjs/ >> out/bench.txt
	@echo "bench: sim world throughput, 256 branches"
	-$(GO) test -run '^$$' -bench 'FanOut256' -benchmem -benchtime=20x -timeout 2m ./internal/simcheck/ >> out/bench.txt
	@echo "bench: a fan-out cell of the built-in engine on embedded NATS, directly and through the target protocol"
	-$(GO) test -run '^$$' -bench 'ProtocolOverhead' -benchtime=20x -count=2 -timeout 3m ./internal/target/ >> out/bench.txt
	@echo "bench: open pacing's driver lag, precise vs coarse, 500/5,000/20,000 runs/s; one driver's runs/s in process"
	-$(GO) test -run '^$$' -bench 'Pacer|Capacity|SleepOvershoot' -benchtime=1x -count=3 -timeout 4m ./internal/driver/ >> out/bench.txt
	@echo "bench: through the protocol, target in another process: precise vs coarse pacing; runs/s at 10,000/s vs the loopback HTTP floor"
	-$(GO) test -run '^$$' -bench 'ProtocolPacing' -benchtime=5x -count=2 -timeout 3m ./internal/target/ >> out/bench.txt
	-$(GO) test -run '^$$' -bench 'CapacityProtocol' -benchtime=1x -count=2 -timeout 4m ./internal/target/ >> out/bench.txt
	-$(GO) test -run '^$$' -bench 'StreamLine' -benchtime=2000x -count=3 -timeout 2m ./protocol/ >> out/bench.txt
	@echo "bench: extraction and rendering of a 10,000-run results file"
	-$(GO) test -run '^$$' -bench 'PerfReport10k' -benchmem -benchtime=3x -timeout 2m ./reporters/ >> out/bench.txt
	@echo
	@$(GO) run ./internal/bench/summary out/bench.txt
	@! grep -q '^FAIL' out/bench.txt || { echo "bench: a benchmark failed, see out/bench.txt"; exit 1; }

# The fault cases (issue 32, docs/reliability.md): a node of a three-node
# R3 NATS cluster SIGKILLed (leader, then follower) and restarted, the
# PostgreSQL server restarted (under the PostgreSQL world, and under the
# DBOS adapter, built here), a target adapter SIGKILLed, and a TCP proxy
# adding latency, resets and a 5 s blackhole in front of NATS, PostgreSQL
# and a target, each mid-cell: every run finished or counted with its
# reason, none lost. Writes out/chaos.md. About 5 minutes on 2 cores.
chaos:
	DURABENCH_CHAOS=1 $(GO) test -race -count=1 -timeout 15m -v ./internal/chaos/

# The scale ladder (issue 14): fan-outs of 1,024 / 4,096 / 10,000 branches
# on embedded NATS (file and memory storage), a nats-server process over TCP
# and a three-node R3 cluster of nats-server processes (built from the
# version go.mod pins), each cell with 0 stalls, 0 errors and 0 world
# incidents. Writes out/scale.md. About 5 minutes on 2 cores.
scale:
	$(GO) test -tags scale -count=1 -run ScaleLadder -timeout 30m -v ./cmd/durabench/

# The soak (issue 14): 64 runs in flight x 256-branch fan-outs for 60 s on
# embedded NATS after the dedup window's minute of warm-up, then the raw
# floor's closed loop: 0 lost runs, 0 incidents, heap at the end within 1.5x
# of the heap after warm-up, steps/s next to the floor's. About 4 minutes.
soak:
	DURABENCH_SOAK=60s $(GO) test -run '^$$' -bench SoakNATS -benchtime 1x -timeout 15m -v ./internal/bench/rawjs/

# Fuzzing (issue 20): every native fuzz target in the module (func FuzzXxx
# in a _test.go file) for FUZZTIME each, one after the other: 30 s here,
# a few seconds in CI. A finding fails its target and is saved under the
# package's testdata/fuzz/FuzzXxx/: fix the code and commit the entry, so
# plain go test checks it from then on. Prints each target's execs; logs in
# out/fuzz/. About 15 minutes on 2 cores. Each new interesting input is
# minimized in 20 runs at most, not Go's default of a minute: with inputs of
# kilobytes (results files, profiles) the default left a target minimizing
# most of its 30 s (FuzzReport: 32 execs instead of 160,000 in 20 s).
# A run that fails with "context deadline exceeded" and no failing input
# written is the fuzzing engine running out of its own time (a worker still
# busy when -fuzztime ends, seen once in CI with a 3 s budget); it is run
# once more. A failing input always fails the target.
FUZZTIME ?= 30s
fuzz:
	@mkdir -p out/fuzz && : > out/fuzz/summary.txt
	@fail=0; \
	for pkg in $$(grep -rl --include='*_test.go' '^func Fuzz' . | grep -v '^./tools/\|^./adapters/' | xargs -n1 dirname | sort -u); do \
	  for t in $$(grep -h '^func Fuzz' $$pkg/*_test.go | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do \
	    log=out/fuzz/$$(echo $${pkg#./} | tr / -)-$$t.txt; \
	    for try in 1 2; do \
	      if $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 20x $$pkg > $$log 2>&1; then res=ok; break; fi; \
	      res=FAIL; \
	      if grep -q 'Failing input written to' $$log || ! grep -q 'context deadline exceeded' $$log; then break; fi; \
	      echo "fuzz: $$t: the fuzzing engine stopped on its own deadline with no failing input (context deadline exceeded); once more"; \
	    done; \
	    if [ $$res = FAIL ]; then fail=1; fi; \
	    execs=$$(grep -o 'execs: [0-9]*' $$log | tail -1 | cut -d' ' -f2); \
	    printf '%-4s %-16s %-20s %10s execs\n' $$res $${pkg#./} $$t "$$execs" | tee -a out/fuzz/summary.txt; \
	    if [ $$res = FAIL ]; then tail -20 $$log; fi; \
	  done; \
	done; \
	exit $$fail

# The shipped cloud profile is what `durabench calibrate examples/published.yaml`
# writes, byte for byte (the fit's fixed point; issue 18). About a minute on
# 2 cores. After changing the engine, the sim world or the table, refit:
#   go run ./cmd/durabench calibrate examples/published.yaml --out world/profile/builtin/cloud.yaml
# (repeat until it writes the same file) and update the fidelity table:
#   go test ./internal/calibrate -run TestFidelity -update
calibrate:
	DURABENCH_CALIBRATE=1 $(GO) test -count=1 -run TestCalibratePublishedWritesCloud -timeout 10m ./cmd/durabench/
