# durabench — two commands do all the set-up on a fresh machine:
#   make run    the default sweep on the embedded NATS world
#   make test   the tests, race detector on
GO ?= go
OUT ?= out/default
BENCHTIME ?= 1x

.PHONY: run test test-cluster bench build vet

build:
	$(GO) build -o bin/durabench ./cmd/durabench

run: build
	./bin/durabench sweep --out $(OUT)

test:
	$(GO) vet ./...
	$(GO) test -race -timeout 15m ./...

# The three-node NATS cluster conformance run (slower; CI runs it).
test-cluster:
	DURABENCH_NATS_CLUSTER=1 $(GO) test -race -timeout 10m -run Cluster ./world/nats/...

bench:
	$(GO) test -run '^$$' -bench . -benchmem -timeout 5m ./... | tee out/bench.txt
