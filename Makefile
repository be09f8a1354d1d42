# Build and test entry points. `make` (or `make help`) lists the targets.

SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
TOOLS_BIN := $(CURDIR)/.tools/bin

GOLANGCI_LINT_VERSION := v2.15.0
GORELEASER_VERSION := v2.18.2

.PHONY: help build install fmt vet lint test testacc docs demo demo-down release-check clean

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

lint: ## Run golangci-lint (go vet if there is no .golangci.yml)
	@if [ -f .golangci.yml ]; then \
		lint=$$(command -v golangci-lint || true); \
		if [ -x "$(TOOLS_BIN)/golangci-lint" ]; then lint="$(TOOLS_BIN)/golangci-lint"; fi; \
		if [ -z "$$lint" ]; then \
			echo "installing golangci-lint $(GOLANGCI_LINT_VERSION) into .tools/bin"; \
			GOBIN="$(TOOLS_BIN)" GOTOOLCHAIN=auto go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION) || exit 1; \
			lint="$(TOOLS_BIN)/golangci-lint"; \
		fi; \
		echo "$$lint run ./..."; \
		"$$lint" run ./...; \
	else \
		echo "lint: no .golangci.yml lint config found; running go vet only"; \
		go vet ./...; \
	fi

test: ## Run all checks and tests (gofmt, vet, docs, unit + acceptance tests against a throwaway PostgreSQL)
	bash scripts/test.sh

testacc: ## Same as test (acceptance tests always run)
	bash scripts/test.sh

docs: ## Generate docs/ with tfplugindocs (needs the tools/ module)
	bash scripts/docs.sh

demo: ## Start a local PostgreSQL and apply examples/quickstart with the freshly built provider
	bash scripts/demo.sh up

demo-down: ## Destroy the demo resources, stop its PostgreSQL and remove .demo/
	bash scripts/demo.sh down

release-check: ## Validate .goreleaser.yml with goreleaser check
	@gr=$$(command -v goreleaser || true); \
	if [ -x "$(TOOLS_BIN)/goreleaser" ]; then gr="$(TOOLS_BIN)/goreleaser"; fi; \
	if [ -z "$$gr" ]; then \
		echo "installing goreleaser $(GORELEASER_VERSION) into .tools/bin"; \
		GOBIN="$(TOOLS_BIN)" GOTOOLCHAIN=auto go install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION) || exit 1; \
		gr="$(TOOLS_BIN)/goreleaser"; \
	fi; \
	echo "$$gr check"; \
	"$$gr" check

clean: ## Remove build output (bin/) and demo state (.demo/)
	@if [ -d .demo/pg ]; then bash scripts/pg.sh stop .demo/pg || true; fi
	rm -rf bin/ .demo/
