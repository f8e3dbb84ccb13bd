# bulkreg — the two commands a newcomer needs are `make demo` and `make test`.
GO      ?= go
# Every go command here runs the toolchain go.mod pins, whatever go is
# installed (it is fetched through the module proxy once): the tests run on
# the standard library the binaries ship and `make vulncheck` scans, and
# the tests' builds and `make build` share one build cache.
TOOLCHAIN := $(shell sed -n 's/^toolchain //p' go.mod)
export GOTOOLCHAIN := $(TOOLCHAIN)
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
FUZZTIME ?= 3s
# axe-core, injected into the seller pages by the browser tests; make test
# names it in BULKREG_AXE, so a missing copy fails the tests instead of
# leaving the accessibility checks out.
AXE_VERSION := 4.14.1
AXE_DIR     := $(HOME)/.cache/bulkreg/axe
AXE         := $(AXE_DIR)/node_modules/axe-core/axe.min.js

.PHONY: test demo deps build lint fuzz bench soak fault-review

# MODULES are the repository's Go modules: . (the main module, what the
# binaries are built from) and deploy (deploy/go.mod: the tests of the
# manifests, Compose files, alerts and dashboard, internal/kubecheck and the
# autoscaling model, with Kubernetes' API types and kustomize, which no
# binary links, so the main module's graph holds only what the binaries
# use). go's ./... stops at a nested go.mod, so vet, test, fuzz, lint and
# vulncheck's source scan run each module with go -C; layout_test.go holds
# this list to the go.mod files in the tree.
MODULES := . deploy

# deps installs the outside programs the tests start for real: redis-server
# (Redis and Redis Cluster in tests), kcat (an independent Kafka client
# that reads what the producer published), promtool (Debian's prometheus
# package: the alert rules' unit tests) and chromium (headless, driven by
# the seller pages' browser tests), with a Korean font for their screenshots,
# npm for axe-core (the pages' accessibility checks), zsh and fish, which
# load the completion scripts the commands print, and LibreOffice Calc
# (headless), which opens the template and the fix file bulkreg writes.
# axe-core is held to AXE_VERSION, not to a file being there: a copy of an
# older one is replaced.
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
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	command -v zsh >/dev/null 2>&1 || missing="$$missing zsh"; \
	command -v fish >/dev/null 2>&1 || missing="$$missing fish"; \
	command -v soffice >/dev/null 2>&1 || missing="$$missing libreoffice-calc-nogui"; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@[ -f "$(AXE)" ] && grep -qs '"version": "$(AXE_VERSION)"' "$(AXE_DIR)/node_modules/axe-core/package.json" || \
	{ echo "installing axe-core@$(AXE_VERSION) (npm) for the pages' accessibility checks"; \
		npm install --silent --no-audit --no-fund --prefix "$(AXE_DIR)" axe-core@$(AXE_VERSION); }

# test runs every test against real redis-server processes and the embedded
# Kafka broker, then runs each fuzz target briefly. Three packages run at
# once (go test -p; the default is one per core): the long packages mostly
# wait (on windows, answers, a browser), so two at a time keep two cores
# about half busy; the tests' timing bounds hold on a busy machine.
TESTP ?= 3
test: deps
	@set -e; for m in $(MODULES); do echo "$(GO) -C $$m vet ./..."; $(GO) -C $$m vet ./...; done
	$(MAKE) vulncheck
	@set -e; for m in $(MODULES); do echo "$(GO) -C $$m test -p $(TESTP) -count=1 -timeout 9m ./..."; \
		BULKREG_AXE="$(AXE)" $(GO) -C $$m test -p $(TESTP) -count=1 -timeout 9m ./...; done
	$(MAKE) fuzz

# Each package with fuzz targets gets one instrumented test binary (go test
# -c -fuzz: the instrumentation is the package's, whichever target is
# named), and each target runs from it in the package's directory, so a
# failing input is written to its testdata/fuzz as go test -fuzz writes it,
# and the corpus it grows is go test's own (GOCACHE/fuzz/<import path>).
# Building once per package rather than once per target is what keeps the
# step within make test's budget. A bare "context deadline exceeded" with no
# failing input written is Go's own fuzz coordinator racing its -fuzztime
# deadline (golang/go#75804, fixed in Go 1.27), not a finding; anything else
# fails the run.
fuzz:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; cache=$$($(GO) env GOCACHE)/fuzz; \
	for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		fns=$$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$dir/*_test.go); \
		bin=$$tmp/$$(echo $$dir | tr ./ __).test; \
		$(GO) -C $$dir test -c -o $$bin -fuzz "^$$(echo $$fns | cut -d' ' -f1)\$$" .; \
		pkg=$$($(GO) -C $$dir list .); \
		for fn in $$fns; do \
			echo "fuzz $$dir $$fn ($(FUZZTIME))"; \
			out=$$(cd $$dir && $$bin -test.run '^$$' -test.fuzz "^$$fn\$$" -test.fuzztime $(FUZZTIME) -test.fuzzminimizetime 10x -test.fuzzcachedir "$$cache/$$pkg" 2>&1) && continue; \
			if echo "$$out" | grep -qx '    context deadline exceeded' && ! echo "$$out" | grep -q 'Failing input written'; then \
				echo "  $$fn: the fuzz coordinator hit its own deadline (golang/go#75804), no failing input: not a finding"; \
			else echo "$$out"; exit 1; fi; \
		done; \
	done

# demo runs the whole system in one process (window shrunk to 12s so it takes
# about a minute) and prints the compliance report.
demo:
	$(GO) run ./cmd/devstack demo --window 12s

# build makes the binaries with the toolchain go.mod pins (GOTOOLCHAIN set to
# its toolchain line, whatever go is installed or GOTOOLCHAIN says), so their
# standard library is the one `make vulncheck` scans and the images ship. An
# installed go that cannot run the pinned one (older, with no module proxy
# to fetch it from) refuses the build rather than make binaries with its own.
build:
	@GOTOOLCHAIN=$(TOOLCHAIN) $(GO) version >/dev/null 2>&1 || { \
		echo "build: go.mod pins $(TOOLCHAIN), but the installed go is $$(GOTOOLCHAIN=local $(GO) env GOVERSION) and could not fetch $(TOOLCHAIN) through GOPROXY=$$(GOTOOLCHAIN=local $(GO) env GOPROXY): install $(TOOLCHAIN) (https://go.dev/dl/), or let go fetch it (GOPROXY=https://proxy.golang.org,direct), then run make build again" >&2; \
		exit 1; }
	GOTOOLCHAIN=$(TOOLCHAIN) CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/...

# What every binary says of itself (--version, bulkreg_build_info): git's
# description of the checkout, its commit and the commit's date, stamped by
# the linker (internal/buildinfo). An image's build context has no .git
# (.dockerignore), so `make image` passes the same three as build arguments;
# `docker compose build` reads them from BULKREG_VERSION, BULKREG_COMMIT and
# BULKREG_DATE.
BUILD_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
BUILD_COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
BUILD_DATE    ?= $(shell git log -1 --format=%cI 2>/dev/null)
BUILDINFO     := github.com/bulkreg/bulkreg/internal/buildinfo
LDFLAGS        = -X $(BUILDINFO).version=$(BUILD_VERSION) -X $(BUILDINFO).commit=$(BUILD_COMMIT) -X $(BUILDINFO).date=$(BUILD_DATE)
IMAGE_TAG     ?= local

.PHONY: image vulncheck
image:
	docker build --build-arg VERSION=$(BUILD_VERSION) --build-arg COMMIT=$(BUILD_COMMIT) \
		--build-arg DATE=$(BUILD_DATE) -t bulkreg:$(IMAGE_TAG) .

# vulncheck fails on a vulnerability advisory our code reaches, without
# vuln.go.dev: the Go vulnerability database is the golang.org/x/vulndb
# module at a pinned version, fetched through the module proxy and indexed
# once per version into $(VULNDB_CACHE) (its cmd/indexdb over data/osv);
# a pinned govulncheck, installed there once, reads it with -db file://.
# It scans twice: the source (./... of each of MODULES, its go commands
# running the toolchain go.mod pins) for what our code reaches, and then,
# in binary mode, each binary `make build` wrote, so what ships is what was
# scanned: its standard library and module versions as linked, not as
# go.mod says.
# docs/dependencies.md says how to move the pins.
# Both land in the cache by a rename of a finished copy, so an interrupted
# run leaves nothing the next one would take as done (a directory at the
# database's place without its index, from a copy made by hand, is
# replaced); the half-made copies go with the interrupted shell.
VULNDB_VERSION      ?= v0.0.0-20261105234957-e22db6528018
GOVULNCHECK_VERSION ?= v1.9.0
VULNDB_CACHE        ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/bulkreg/vulndb
# What `make build` writes: one binary per directory of cmd/.
BINARIES            := $(patsubst cmd/%/,bin/%,$(wildcard cmd/*/))

vulncheck: build
	@set -e; db="$(VULNDB_CACHE)/$(VULNDB_VERSION)"; bin="$(VULNDB_CACHE)/govulncheck-$(GOVULNCHECK_VERSION)"; \
	tmp=; gobin=; trap 'rm -rf "$$tmp" "$$gobin"' EXIT; trap 'exit 130' INT TERM HUP; \
	if [ ! -f "$$db/index/db.json" ]; then \
		echo "vulncheck: indexing golang.org/x/vulndb@$(VULNDB_VERSION) into $$db (once)"; \
		mkdir -p "$(VULNDB_CACHE)"; tmp=$$(mktemp -d "$(VULNDB_CACHE)/.new.XXXXXX"); \
		src=$$(cd "$$tmp" && $(GO) mod download golang.org/x/vulndb@$(VULNDB_VERSION) && \
			$(GO) list -m -f '{{.Dir}}' golang.org/x/vulndb@$(VULNDB_VERSION)); \
		(cd "$$tmp" && $(GO) run golang.org/x/vulndb/cmd/indexdb@$(VULNDB_VERSION) -vulns "$$src/data/osv" -out "$$tmp/db"); \
		[ -f "$$db/index/db.json" ] || rm -rf "$$db"; \
		mv -T "$$tmp/db" "$$db" 2>/dev/null || [ -f "$$db/index/db.json" ]; \
	fi; \
	if [ ! -x "$$bin/govulncheck" ]; then \
		mkdir -p "$$bin"; gobin=$$(mktemp -d "$(VULNDB_CACHE)/.bin.XXXXXX"); \
		GOBIN="$$gobin" $(GO) install golang.org/x/vuln/cmd/govulncheck@$(GOVULNCHECK_VERSION); \
		mv "$$gobin/govulncheck" "$$bin/govulncheck"; \
	fi; \
	for m in $(MODULES); do \
		echo "vulncheck: the source of $$m"; \
		GOTOOLCHAIN=$(TOOLCHAIN) "$$bin/govulncheck" -db "file://$$db" -C "$$m" ./...; \
	done; \
	for b in $(BINARIES); do \
		echo "vulncheck: $$b as built ($$($(GO) version "$$b" | sed 's/.*: //'), -mode=binary)"; \
		"$$bin/govulncheck" -db "file://$$db" -mode=binary "$$b"; \
	done

lint:
	gofmt -l . | tee /dev/stderr | (! read)
	@set -e; for m in $(MODULES); do echo "$(GO) -C $$m vet ./... && staticcheck"; \
		$(GO) -C $$m vet ./...; \
		$(GO) -C $$m run honnef.co/go/tools/cmd/staticcheck@v0.7.0 ./...; done

bench: deps
	$(GO) test -run '^$$' -bench . -benchmem ./...

# soak runs the seeded fault simulation (sim/, issue 26): seeds one after
# another for DURATION, or the one SEED a failing run printed, to replay it.
# `make test` runs a short one (TestSimulation, two seeds).
DURATION ?= 10m
soak: deps
	$(GO) test -count=1 -v -timeout 0 -run '^TestSoak$$' ./sim $(if $(SEED),-sim.seed=$(SEED),-sim.duration=$(DURATION) $(if $(FIRST),-sim.first=$(FIRST)))

# fault-review runs only the fault review's named scenarios (sim/
# faultreview_test.go, part of make test too; about 2 minutes): a consumer
# killed during an API slowdown, one paused past the window, a deploy while
# a consumer's Redis link is cut (each must end with 0 × 429), and a Redis
# Cluster resharded under a busy seller (no loss warned, no hold).
fault-review: deps
	$(GO) test -count=1 -v -timeout 15m -run '^TestFaultReview' ./sim
