# durabench — two commands do all the set-up on a fresh machine:
#   make run    the default sweep on the embedded NATS world
#   make test   the tests, race detector on
GO ?= go
OUT ?= out/default

.PHONY: run test test-cluster bench build

build:
	$(GO) build -o bin/durabench ./cmd/durabench

run: build
	./bin/durabench sweep --out $(OUT)
	./bin/durabench report $(OUT)/results.json --png $(OUT)/charts > /dev/null

test:
	$(GO) vet ./...
	$(GO) test -race -timeout 15m ./...

# The three-node NATS cluster runs (slower; CI runs them): the world's
# conformance suite, and a distributed sweep (driver + two durabench workers).
test-cluster:
	DURABENCH_NATS_CLUSTER=1 $(GO) test -race -timeout 10m -run Cluster ./world/nats/... ./cluster/...

# Each benchmark runs with its floor in the same process and reports the
# ratio; bench/summary turns the raw output (out/bench.txt) into the table.
# A failing package does not stop the others; make bench fails at the end.
# Budget: under 5 minutes on 2 cores (about 2 minutes measured).
bench:
	@mkdir -p out && : > out/bench.txt
	@echo "bench: recording vs time.Now (metrics)"
	-$(GO) test -run '^$$' -bench 'Perf|RecorderStepBody$$' -benchmem -benchtime=100ms -count=3 -timeout 2m ./metrics/ >> out/bench.txt
	@echo "bench: engine vs floor on mem, 1/20/256 branches, every version"
	-$(GO) test -run '^$$' -bench 'FanOutMem' -benchmem -benchtime=20x -count=2 -timeout 4m ./engine/ >> out/bench.txt
	@echo "bench: each NATS world operation vs the raw JetStream call it wraps"
	-$(GO) test -run '^$$' -bench . -benchmem -benchtime=1000x -count=3 -timeout 3m ./world/nats/ >> out/bench.txt
	@echo "bench: engine vs raw JetStream on embedded NATS"
	-$(GO) test -run '^$$' -bench 'FanOutNATS' -benchmem -benchtime=5x -timeout 4m ./bench/rawjs/ >> out/bench.txt
	@echo "bench: sim world throughput, 256 branches"
	-$(GO) test -run '^$$' -bench 'FanOut256' -benchmem -benchtime=20x -timeout 2m ./simcheck/ >> out/bench.txt
	@echo "bench: extraction and rendering of a 10,000-run results file"
	-$(GO) test -run '^$$' -bench 'PerfReport10k' -benchmem -benchtime=3x -timeout 2m ./reporters/ >> out/bench.txt
	@echo
	@$(GO) run ./bench/summary out/bench.txt
	@! grep -q '^FAIL' out/bench.txt || { echo "bench: a benchmark failed, see out/bench.txt"; exit 1; }
