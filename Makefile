# Build and test entry points. `make` (or `make help`) lists the targets.

SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

# The version of install-mirror's and the release's builds (X.Y.Z on a tag,
# else 0.0.<commit time>), so that ipamctl version and the provider name the same one.
VERSION ?= $(shell bash scripts/release-version.sh 2>/dev/null || echo dev)
COMMIT := $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
TOOLS_BIN := $(CURDIR)/.tools/bin

# golangci-lint, goreleaser and tfplugindocs are `tool` directives of tools/go.mod (the pins).

.PHONY: help build install fmt vet lint test quick check unit acc e2e testacc docs demo demo-down release release-check install-mirror clean

help: ## Show this list of targets
	@echo "Usage: make TARGET"
	@echo
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z0-9_.-]+:.*## / { printf "  %-15s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

build: ## Build the provider (and ipamctl, if present) into bin/
	go build -ldflags "$(LDFLAGS)" -o bin/terraform-provider-ipam .
	@if [ -d cmd/ipamctl ]; then \
		echo go build -ldflags "$(LDFLAGS)" -o bin/ipamctl ./cmd/ipamctl; \
		go build -ldflags "$(LDFLAGS)" -o bin/ipamctl ./cmd/ipamctl; \
	fi

install: ## go install the provider (and ipamctl, if present) into GOBIN
	go install -ldflags "$(LDFLAGS)" .
	@if [ -d cmd/ipamctl ]; then \
		echo go install -ldflags "$(LDFLAGS)" ./cmd/ipamctl; \
		go install -ldflags "$(LDFLAGS)" ./cmd/ipamctl; \
	fi

fmt: ## Format Go code (gofmt -s) and the Terraform examples
	find . -name '*.go' -not -path './.tools/*' -not -path './vendor/*' -not -path './.demo/*' -print0 | xargs -0 -r gofmt -s -w
	@if [ -d examples ]; then \
		tf=$$(bash scripts/ensure-terraform.sh) && echo "terraform fmt -recursive examples/" && "$$tf" fmt -recursive examples/; \
	fi

vet: ## Run go vet
	go vet ./...

lint: ## Run golangci-lint (.golangci.yml; the version tools/go.mod pins)
	bash scripts/lint.sh

test: ## The test command CI runs: check, then the e2e, acc and unit tiers in one go test run (names the tiers that fail)
	bash scripts/test.sh all

quick: ## The core's short tier: go test -short ./ipam/... ./migrations/... (throwaway PostgreSQL; without the interleaving explorer, the randomized model test and the linearizability test, which make test runs)
	bash scripts/with-postgres.sh go test -short -count=1 ./ipam/... ./migrations/...

check: ## Tier check: gofmt, go vet, golangci-lint, docs/ fresh
	bash scripts/test.sh check

unit: ## Tier unit: core, public Go API, ipamctl, benchmark harness, migrations (throwaway PostgreSQL)
	bash scripts/test.sh unit

acc: ## Tier acc: the provider's acceptance tests with the real terraform (throwaway PostgreSQL)
	bash scripts/test.sh acc

e2e: ## Tier e2e: end-to-end and reliability tests (terraform, ipamctl, faults)
	bash scripts/test.sh e2e

testacc: acc ## Same as acc

docs: ## Generate docs/ with tfplugindocs (needs the tools/ module)
	bash scripts/docs.sh

demo: ## Start a local PostgreSQL and apply examples/quickstart with the freshly built provider
	bash scripts/demo.sh up

demo-down: ## Destroy the demo resources, stop its PostgreSQL and remove .demo/
	bash scripts/demo.sh down

release: ## Build the release into dist/ with goreleaser: provider zips for every platform, SHA256SUMS, manifest (a snapshot 0.0.<commit time> unless HEAD is on a tag vX.Y.Z)
	bash scripts/release.sh

install-mirror: ## Install the provider into a mirror that terraform/tofu init read (MIRROR_DIR, default ~/.terraform.d/plugins; DIST=dist: make release's platforms) and print the CLI configuration
	@MIRROR_DIR="$(MIRROR_DIR)" DIST="$(DIST)" bash scripts/install-mirror.sh

release-check: ## Validate .goreleaser.yml with goreleaser check (RELEASE_CHECK_BUILD=1: also a snapshot build)
	bash scripts/release-check.sh

clean: ## Remove build output (bin/) and demo state (.demo/)
	@if [ -d .demo/pg ]; then bash scripts/pg.sh stop .demo/pg || true; fi
	rm -rf bin/ .demo/

.PHONY: bench bench-smoke fuzz soak failover mutants
mutants: ## Apply each deliberate breakage of a guard (scripts/mutants.sh) to a copy of the tree; its tests must fail. Prints killed and survived
	bash scripts/mutants.sh

fuzz: ## Run every Go fuzz target for FUZZTIME each (default 60s; make test runs their seed corpora only)
	bash scripts/fuzz.sh $(or $(FUZZTIME),60s)

soak: ## Long reliability runs (IPAM_SOAK=1): every pair of the interleaving explorer, the core's randomized model test for 30 minutes, 12 rounds of the Terraform-level one, 16 concurrent applies x 3 rounds, 50 applies each of a cluster with 3 and with 20 node addresses (all ::1..::N), 300-resource outage, long failover, the Patroni failover
	IPAM_SOAK=1 IPAM_PATRONI=1 TF_ACC=1 CHECKPOINT_DISABLE=1 TF_ACC_TERRAFORM_PATH=$$(bash scripts/ensure-terraform.sh) \
		bash scripts/with-postgres.sh go test -count=1 -timeout 120m -v -run '^(TestExploreInterleavings|TestModelCore|TestModelTerraform|TestApplyHandsOutConsecutiveNodeAddresses|TestLoadStorm|TestFault.*|TestFailoverBound|TestPatroniFailover|TestPgBouncer)$$' ./ipam/internal/engine/ ./internal/e2e/

failover: ## The failover tests: a Patroni cluster (3 members, etcd; installed when missing) with a switchover and a killed primary under a storm of allocations and applies, the hand-promoted standby, the failover bound
	IPAM_PATRONI=1 TF_ACC=1 CHECKPOINT_DISABLE=1 TF_ACC_TERRAFORM_PATH=$$(bash scripts/ensure-terraform.sh) \
		bash scripts/with-postgres.sh go test -count=1 -timeout 30m -v -run '^(TestPatroniFailover|TestFaultFailoverToStandby|TestFailoverBound)$$' ./internal/e2e/

bench: ## Run the performance suite on a throwaway durable PostgreSQL and write BENCHMARKS.md (many minutes)
	bash scripts/bench.sh

bench-smoke: ## Run the performance suite at small sizes (quick; CI keeps the harness from rotting)
	bash scripts/bench.sh --smoke
