# EnergyScope developer targets. `make test` is what CI runs.
GO      ?= go
FUZZTIME ?= 500x

.PHONY: all build test deps vet unit race fuzz bench bench-pet clean

all: build

build:
	$(GO) build -o bin/es ./cmd/es

deps:
	bash scripts/install-deps.sh

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	GOOS=windows $(GO) vet ./...

unit:
	$(GO) test -count=1 ./...

race:
	$(GO) test -count=1 -race ./localcache/...

# Every decoder has a fuzz target; CI runs each for a fixed number of inputs
# (a count, not a duration, so a loaded machine cannot time out a worker
# still gathering its baseline; longer by hand:
# make fuzz FUZZTIME=10m).
FUZZ_TARGETS = \
	./server/cook:FuzzParsePeriod \
	./server/cook:FuzzReadCSV \
	./localcache/format:FuzzParseManifest \
	./localcache/format:FuzzOpenIndex \
	./localcache/format:FuzzOpenHash \
	./localcache/format:FuzzOpenData \
	./localcache/format:FuzzOpenTail \
	./localcache/delta:FuzzDecodeBatch \
	./localcache/delta:FuzzValidate \
	./localcache/delta:FuzzScanSegment \
	./functions/bridge:FuzzCalcDecode \
	./functions:FuzzParseDate \
	./functions:FuzzParseOptions \
	./functions:FuzzCall \
	./sync/protocol:FuzzDecodeMessage \
	./sync/protocol:FuzzDecodeBinary

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$pkg $$name"; \
		$(GO) test -run='^$$' -fuzz="^$$name$$" -fuzztime=$(FUZZTIME) $$pkg; \
	done

test: deps vet unit race fuzz

bench:
	cd bench && $(GO) run . --scale small

bench-pet:
	cd bench && $(GO) run . --scale pet

clean:
	rm -rf bin
