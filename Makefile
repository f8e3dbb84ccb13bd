# bulkreg — the two commands a newcomer needs are `make demo` and `make test`.
GO      ?= go
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
FUZZTIME ?= 5s

.PHONY: test demo deps build lint fuzz bench soak

# deps installs the outside programs the tests start for real: redis-server
# (Redis and Redis Cluster in tests), kcat (an independent Kafka client
# that reads what the producer published), promtool (Debian's prometheus
# package: the alert rules' unit tests) and chromium (headless, driven by
# the seller pages' browser tests), with a Korean font for their screenshots.
deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v redis-cli >/dev/null 2>&1 || missing="$$missing redis-tools"; \
	command -v redis-benchmark >/dev/null 2>&1 || missing="$$missing redis-tools"; \
	command -v kcat >/dev/null 2>&1 || missing="$$missing kcat"; \
	command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	command -v redis-sentinel >/dev/null 2>&1 || missing="$$missing redis-sentinel"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	[ -d /usr/share/fonts/truetype/nanum ] || missing="$$missing fonts-nanum"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

# test runs every test against real redis-server processes and the embedded
# Kafka broker, then runs each fuzz target briefly.
test: deps
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 9m ./...
	$(MAKE) fuzz

# A bare "context deadline exceeded" with no failing input written is Go's own
# fuzz coordinator racing its -fuzztime deadline (golang/go#75804, fixed in
# Go 1.27), not a finding; anything else fails the run.
fuzz:
	@for file in $$(grep -rl --include='*_test.go' '^func Fuzz' .); do \
		dir=$$(dirname $$file); \
		for fn in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$file); do \
			echo "fuzz $$dir $$fn ($(FUZZTIME))"; \
			out=$$($(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 10x $$dir 2>&1) && continue; \
			if echo "$$out" | grep -qx '    context deadline exceeded' && ! echo "$$out" | grep -q 'Failing input written'; then \
				echo "  $$fn: the fuzz coordinator hit its own deadline (golang/go#75804), no failing input: not a finding"; \
			else echo "$$out"; exit 1; fi; \
		done; \
	done

# demo runs the whole system in one process (window shrunk to 12s so it takes
# about a minute) and prints the compliance report.
demo:
	$(GO) run ./cmd/devstack demo --window 12s

build:
	CGO_ENABLED=0 $(GO) build -o bin/ ./cmd/...

lint:
	gofmt -l . | tee /dev/stderr | (! read)
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.7.0 ./...

bench: deps
	$(GO) test -run '^$$' -bench . -benchmem ./...

# soak runs the seeded fault simulation (sim/, issue 26): seeds one after
# another for DURATION, or the one SEED a failing run printed, to replay it.
# `make test` runs a short one (TestSimulation, two seeds).
DURATION ?= 10m
soak: deps
	$(GO) test -count=1 -v -timeout 0 -run '^TestSoak$$' ./sim $(if $(SEED),-sim.seed=$(SEED),-sim.duration=$(DURATION) $(if $(FIRST),-sim.first=$(FIRST)))
