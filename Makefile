# keymount: build, test and release tasks. `make` (or `make help`) lists them.
#
# Tools are pinned below and installed outside the work tree, into
# $(KEYMOUNT_CACHE)/bin, under versioned names: a clean clone reuses them and
# changing a pin installs the new version on the next run. protoc comes from
# Debian (hack/install-deps.sh installs it when it is missing).

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:
# Targets run one after the other even under -j, so `make test` output reads
# top to bottom (go itself builds and tests in parallel).
.NOTPARALLEL:
MAKEFLAGS += --no-builtin-rules --no-print-directory

# ---------------------------------------------------------------- settings

GO ?= go
GOFMT ?= $(shell $(GO) env GOROOT)/bin/gofmt

# The binaries under cmd/ that `make build` and the image ship.
BINARIES := keymount-driver keymount-provider-local keymount-provider-aws keymount-provider-vault keymount keymount-controller
BIN_DIR ?= bin

TEST_TIMEOUT ?= 30m
TEST_FLAGS ?= -race -count=1 -timeout $(TEST_TIMEOUT)

FUZZTIME ?= 30s
FUZZ ?= .
BENCH_PKGS ?= ./driver/... ./cluster/... ./controller/... ./internal/... ./provider/... ./tests/bench/...
BENCH ?= .
BENCHTIME ?=

# VERSION is stamped into the binaries (--version, GetPluginInfo, `keymount
# version`) and the image tags.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# REGISTRY is where a release publishes the images (see hack/image).
REGISTRY ?= ghcr.io/keymount
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64

KEYMOUNT_CACHE ?= $(HOME)/.cache/keymount
TOOLS_BIN := $(KEYMOUNT_CACHE)/bin
TOOLS_TMP := $(KEYMOUNT_CACHE)/tmp

# The control plane of the integration, end-to-end and real-node tiers
# (tests/k8senv, tests/nodeenv): kube-apiserver, kube-controller-manager,
# kube-scheduler and kubelet built from the helper module
# hack/k8s (its go.mod pins the Kubernetes version: change it with
# hack/update-k8s.sh), etcd from Debian, all in one versioned directory under
# the cache that `make k8s-env` fills and every go test run gets as
# KUBEBUILDER_ASSETS.
K8S_ASSETS = $(shell KEYMOUNT_CACHE='$(KEYMOUNT_CACHE)' GO='$(GO)' bash hack/install-k8s.sh --print-assets-dir)
# The oldest Kubernetes docs/compatibility.md claims, from the helper module
# hack/k8s-oldest (hack/update-k8s.sh VERSION hack/k8s-oldest changes it),
# built the same way into its own directory: `make test-node-oldest` runs the
# real-node tier against it (not yet part of `make test`: it has not run yet).
K8S_OLDEST_VERSION := $(shell awk '$$1 == "require" && $$2 == "k8s.io/kubernetes" { print $$3 }' hack/k8s-oldest/go.mod)
K8S_OLDEST_ASSETS = $(shell K8S_VERSION='$(K8S_OLDEST_VERSION)' KEYMOUNT_CACHE='$(KEYMOUNT_CACHE)' GO='$(GO)' bash hack/install-k8s.sh --print-assets-dir)

# The Vault server of the Vault tier (tests/vaultenv, provider/vault): HashiCorp
# Vault v1.14.2 (MPL-2.0) built from the helper module hack/vault against a
# patched copy of its sdk (hack/install-vault.sh says why), cached under
# KEYMOUNT_CACHE/vault/<version>; `make vault-env` builds it and every go test
# run gets its path as VAULT_BIN.
VAULT_BIN = $(shell KEYMOUNT_CACHE='$(KEYMOUNT_CACHE)' GO='$(GO)' bash hack/install-vault.sh --print-path)

# ------------------------------------------------------------- tool pins

# protoc is Debian bookworm's protobuf-compiler; the generated headers record
# its version, so another protoc would make `make verify` fail.
PROTOC_VERSION := 3.21.12
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
GOLANGCI_LINT_VERSION := v2.15.0
CONTROLLER_GEN_VERSION := v0.23.0
# The helm CLI: the version of the Helm SDK in go.mod (the chart's tests).
HELM_VERSION := v3.22.0

PROTOC_GEN_GO_PKG := google.golang.org/protobuf/cmd/protoc-gen-go
PROTOC_GEN_GO_GRPC_PKG := google.golang.org/grpc/cmd/protoc-gen-go-grpc
GOLANGCI_LINT_PKG := github.com/golangci/golangci-lint/v2/cmd/golangci-lint
CONTROLLER_GEN_PKG := sigs.k8s.io/controller-tools/cmd/controller-gen
HELM_PKG := helm.sh/helm/v3/cmd/helm

PROTOC_GEN_GO := $(TOOLS_BIN)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION)
PROTOC_GEN_GO_GRPC := $(TOOLS_BIN)/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION)
GOLANGCI_LINT := $(TOOLS_BIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
CONTROLLER_GEN := $(TOOLS_BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
HELM := $(TOOLS_BIN)/helm-$(HELM_VERSION)

# ------------------------------------------------------------ discovered

# Every .proto is compiled next to itself (paths=source_relative).
PROTO_FILES := $(shell find . -name '*.proto' -not -path './.git/*' -not -path './bin/*' -not -path '*/testdata/*' | LC_ALL=C sort)
# Every Go module in the repo (the root, plus any helper module under hack/).
GO_MODULES := $(patsubst %/go.mod,%,$(shell find . -name go.mod -not -path './.git/*' -not -path '*/testdata/*' | LC_ALL=C sort))

# ================================================================ targets

.PHONY: help
help: ## Show this list of targets
	@echo 'Usage: make [TARGET] [VAR=value ...]'
	@echo
	@awk 'BEGIN { FS = ":[^#]*## " } /^[a-zA-Z0-9_.-]+:[^#]*## / { printf "  %-16s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
	@echo
	@echo 'Variables: FUZZTIME=$(FUZZTIME) BENCH_PKGS="$(BENCH_PKGS)" VERSION=$(VERSION) REGISTRY=$(REGISTRY)'
	@echo '           KEYMOUNT_CACHE=$(KEYMOUNT_CACHE) (pinned tools live in its bin/, the test control plane in its k8s/)'

# ------------------------------------------------------------------ build

.PHONY: build
build: ## Build the binaries (static, -trimpath) into ./bin/
	@mkdir -p $(BIN_DIR)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-X main.version=$(VERSION)' -o $(BIN_DIR)/ $(addprefix ./cmd/,$(BINARIES))

# ------------------------------------------------------------------- test

# test runs each phase through hack/phase.sh, which prints how long it took
# as it ends (the heavy builds of a cold run print their own times too) and,
# at the end or at the first failure, a table of every phase: CI's log shows
# where the time went. PHASE_LOG keeps the table's lines.
PHASE_LOG ?= $(BIN_DIR)/test-phases.tsv
PHASE = PHASE_LOG='$(PHASE_LOG)' bash hack/phase.sh

.PHONY: test
test: require-root ## Everything CI runs: verify, lint, the control planes, Vault, the images, go test -race of every package (tiers integration, vault, release), then the oldest Kubernetes's node tests, each phase timed (needs root)
	@mkdir -p '$(dir $(PHASE_LOG))' && rm -f '$(PHASE_LOG)'
	@$(PHASE) verify $(MAKE) verify
	@$(PHASE) lint $(MAKE) lint
	@$(PHASE) k8s-env $(MAKE) k8s-env
	@$(PHASE) k8s-env-oldest $(MAKE) k8s-env-oldest
	@$(PHASE) vault-env $(MAKE) vault-env
	@$(PHASE) image $(MAKE) image
	@$(PHASE) buildah $(MAKE) buildah
	@$(PHASE) 'go test ./... (-race; integration, vault, release)' \
		env KUBEBUILDER_ASSETS='$(K8S_ASSETS)' VAULT_BIN='$(VAULT_BIN)' GO='$(GO)' bash hack/gotest.sh $(TEST_FLAGS) -tags integration,vault,release $(TEST_LONGEST_FIRST) ./...
	@$(PHASE) 'go test ./tests/node on the oldest Kubernetes' \
		env KUBEBUILDER_ASSETS='$(K8S_OLDEST_ASSETS)' GO='$(GO)' bash hack/gotest.sh $(TEST_FLAGS) -run '$(NODE_OLDEST_IN_TEST)' ./tests/node/...
	@$(PHASE) --summary

# TEST_LONGEST_FIRST: the packages whose tests take longest (minutes each:
# the real node, the hostile tier, the release and image builds, e2e, the
# chart, Vault), named before ./... so that go test starts them first and
# the shorter packages fill the other core meanwhile, instead of the real
# node starting last and running alone at the end. Every package still runs
# once (go test drops the repeats ./... matches).
TEST_LONGEST_FIRST = ./tests/node/... ./tests/hostile/... ./hack/release/... ./tests/e2e/... ./deploy/charts/keymount/... ./hack/image/... ./provider/vault/...

# NODE_OLDEST_IN_TEST: the real-node tests `make test` runs against the
# oldest Kubernetes as well (docs/compatibility.md): the one whose kubelet
# behaves differently there (it removes a volume's mount directory when a
# republish fails), and a pod reading its secrets. `make test-node-oldest`
# runs the whole tier.
NODE_OLDEST_IN_TEST = ^(TestFailedRepublishOfUnmountedTarget|TestPodReadsItsSecrets)$$

# test-timings: README's set-up times, measured (hack/timings.sh): make demo
# and make test on a clean clone, cold (empty caches: every tool, both
# Kubernetes builds, Vault, the images) then warm, each phase timed; the
# table goes into README between its test-timings markers. About two hours
# on 2 cores and 25 GB of scratch disk; TIMINGS_ARGS=--warm times the warm
# runs only.
.PHONY: test-timings
test-timings: require-root ## Measure make demo and make test, cold and warm, on a clean clone, and write the times into README.md (hack/timings.sh; hours)
	bash hack/timings.sh $(TIMINGS_ARGS)

.PHONY: test-release
# The release tier (build tag release): TestRelease (make release on a clean
# copy, every artifact, a crane push to a registry on 127.0.0.1),
# TestArtifacts and TestDockerfile (buildah, vfs, in a private mount
# namespace, builds the Dockerfile's targets offline, compared with make
# image's). `make test` runs it with everything else; this target runs it
# alone. What it adds to make test (docs/releasing.md): about 5 CPU-minutes,
# the longest test TestRelease (6 min on 2 loaded cores, warm).
test-release: require-root image buildah ## The release tier: make release end to end and the Dockerfile built with buildah (needs root)
	GO='$(GO)' bash hack/gotest.sh $(TEST_FLAGS) -tags release ./hack/...

# The Vault tier (build tag vault): tests/vaultenv, the Vault login cache
# (internal/vaultlogin), provider/vault, the SecretMirror and controller
# tests against a real Vault, and the Vault tests of the end-to-end suite
# (tests/e2e/vault_test.go). `make test` runs it with everything else; this
# target runs it alone.
.PHONY: test-vault
test-vault: require-root k8s-env vault-env ## The Vault tier: a real Vault v1.14.2 (built once) with the real API server (needs root)
	KUBEBUILDER_ASSETS='$(K8S_ASSETS)' VAULT_BIN='$(VAULT_BIN)' GO='$(GO)' bash hack/gotest.sh $(TEST_FLAGS) -tags integration,vault ./tests/vaultenv/... ./internal/vaultlogin/... ./provider/vault/... ./internal/vaultkv/... ./controller/secretmirror/... ./cmd/keymount-controller/... ./cmd/keymount/internal/convert/...
	KUBEBUILDER_ASSETS='$(K8S_ASSETS)' VAULT_BIN='$(VAULT_BIN)' GO='$(GO)' bash hack/gotest.sh $(TEST_FLAGS) -tags vault -run '^TestVault' ./tests/e2e/...

.PHONY: test-unit
test-unit: require-root ## Unit tests only: every package outside tests/, without the tests tagged integration (no control plane; needs root for the tmpfs tests)
	GO='$(GO)' bash hack/gotest.sh $(TEST_FLAGS) $$($(GO) list ./... | grep -v '^github.com/keymount/keymount/tests/')

.PHONY: test-sanity
test-sanity: require-root ## CSI conformance: csi-sanity against the driver over a real socket (needs root)
	GO='$(GO)' bash hack/gotest.sh $(TEST_FLAGS) ./tests/sanity/...

.PHONY: test-integration
test-integration: k8s-env ## Integration tests against a real kube-apiserver + etcd: the packages with *_integration_test.go files (build tag integration), with their unit tests, and tests/k8senv
	KUBEBUILDER_ASSETS='$(K8S_ASSETS)' GO='$(GO)' bash hack/gotest.sh $(TEST_FLAGS) -tags integration $$(for f in $$(find . -name '*_integration_test.go' -not -path './tests/*'); do echo ./$$(dirname $$f); done | sort -u) ./tests/k8senv/...

.PHONY: test-e2e
test-e2e: require-root k8s-env ## End-to-end tests: the kubelet-emulating harness against the real API server (needs root)
	KUBEBUILDER_ASSETS='$(K8S_ASSETS)' GO='$(GO)' bash hack/gotest.sh $(TEST_FLAGS) ./tests/e2e/...

.PHONY: test-node
test-node: require-root k8s-env vault-env ## The real-node tier: kubelet + containerd + runc run pods that read their secrets through keymount, the Vault provider's against a real Vault (needs root)
	KUBEBUILDER_ASSETS='$(K8S_ASSETS)' VAULT_BIN='$(VAULT_BIN)' GO='$(GO)' bash hack/gotest.sh $(TEST_FLAGS) -tags vault ./tests/nodeenv/... ./tests/node/...

# NODE_OLDEST_RUN narrows test-node-oldest to the tests matching a go test
# -run pattern (empty: the whole tier, as docs/compatibility.md says).
NODE_OLDEST_RUN ?=

.PHONY: test-integration-oldest
test-integration-oldest: require-root k8s-env-oldest ## The integration tier (tests/k8senv, cluster, controller, deploy, cmd) against the oldest Kubernetes docs/compatibility.md claims (needs root)
	KUBEBUILDER_ASSETS='$(K8S_OLDEST_ASSETS)' GO='$(GO)' bash hack/gotest.sh $(TEST_FLAGS) -tags integration ./tests/k8senv/... ./cluster/... ./controller/... ./deploy/... ./cmd/...

.PHONY: test-node-oldest
test-node-oldest: require-root k8s-env-oldest ## The real-node tier against the oldest Kubernetes docs/compatibility.md claims (hack/k8s-oldest): its kubelet and API server (needs root; NODE_OLDEST_RUN)
	KUBEBUILDER_ASSETS='$(K8S_OLDEST_ASSETS)' GO='$(GO)' bash hack/gotest.sh $(TEST_FLAGS) $(if $(NODE_OLDEST_RUN),-run '$(NODE_OLDEST_RUN)') ./tests/nodeenv/... ./tests/node/...

# k8s-env: install etcd, containerd, runc and the CNI plugins (Debian, never
# started as services) and build kube-apiserver, kube-controller-manager,
# kube-scheduler and kubelet once per Kubernetes version (a cold build takes
# minutes; later runs find the binaries and return).
.PHONY: k8s-env
k8s-env: ## Install the test control plane and node into KEYMOUNT_CACHE/k8s/<version> (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, containerd, runc, CNI)
	@KEYMOUNT_CACHE='$(KEYMOUNT_CACHE)' GO='$(GO)' bash hack/install-k8s.sh

.PHONY: vault-env
vault-env: ## Build the Vault server of the Vault tier once into KEYMOUNT_CACHE/vault/<version> (hack/install-vault.sh; a cold build takes minutes)
	@KEYMOUNT_CACHE='$(KEYMOUNT_CACHE)' GO='$(GO)' bash hack/install-vault.sh
.PHONY: k8s-env-oldest
k8s-env-oldest: ## The same for the oldest Kubernetes docs/compatibility.md claims (hack/k8s-oldest), into KEYMOUNT_CACHE/k8s/<that version>
	@K8S_VERSION='$(K8S_OLDEST_VERSION)' KEYMOUNT_CACHE='$(KEYMOUNT_CACHE)' GO='$(GO)' bash hack/install-k8s.sh

.PHONY: require-root
require-root:
	@if [[ $$(id -u) -ne 0 ]]; then \
		echo 'The tests mount tmpfs and bind mounts, which needs root: run make as root (e.g. sudo -E make $(MAKECMDGOALS)).' >&2; \
		exit 1; \
	fi

.PHONY: bench
bench: require-root k8s-env vault-env ## Run the benchmarks (some against a real kube-apiserver) and record them in BENCHMARKS.md (BENCH_PKGS, BENCH, BENCHTIME)
	KUBEBUILDER_ASSETS='$(K8S_ASSETS)' VAULT_BIN='$(VAULT_BIN)' BENCH_PKGS='$(BENCH_PKGS)' BENCH='$(BENCH)' BENCHTIME='$(BENCHTIME)' bash hack/bench.sh

.PHONY: fuzz
fuzz: ## Run every Fuzz* target, one at a time, for FUZZTIME each (default 30s; FUZZ=regexp to pick)
	FUZZTIME='$(FUZZTIME)' FUZZ='$(FUZZ)' bash hack/fuzz.sh

# ------------------------------------------------------ lint and verify

.PHONY: lint
# --allow-serial-runners: a second make test on the machine (or an editor's
# golangci-lint) waits for golangci-lint's lock instead of failing the run.
lint: $(GOLANGCI_LINT) ## Run golangci-lint (pinned) over the module
	$(GOLANGCI_LINT) config verify
	$(GOLANGCI_LINT) run --allow-serial-runners ./...

CHART := deploy/charts/keymount
CHART_VALUES := $(wildcard $(CHART)/testdata/*.yaml)

.PHONY: chart-lint
chart-lint: $(HELM) ## helm lint --strict and helm template of deploy/charts/keymount with its defaults and each testdata values file, for the oldest Kubernetes the chart supports (helm pinned, from the Go module proxy; a helm built so reports Kubernetes v1.20, below the chart's kubeVersion)
	$(GO) test -count=1 -run '^(TestLint|TestRenders|TestChartCRDsAreDeploys)$$' ./$(CHART)/
	$(HELM) lint --strict --kube-version $(K8S_OLDEST_VERSION) $(CHART)
	$(HELM) template keymount $(CHART) --namespace kube-system --kube-version $(K8S_OLDEST_VERSION) --include-crds >/dev/null
	@for f in $(CHART_VALUES); do \
		echo "helm lint and template with $$f"; \
		$(HELM) lint --strict --quiet --kube-version $(K8S_OLDEST_VERSION) $(CHART) -f "$$f" && \
		$(HELM) template keymount $(CHART) --namespace kube-system --kube-version $(K8S_OLDEST_VERSION) --include-crds -f "$$f" >/dev/null || exit 1; \
	done

.PHONY: fmt
fmt: $(GOLANGCI_LINT) ## Format the Go code (gofmt + goimports with local imports last)
	$(GOLANGCI_LINT) fmt ./...

.PHONY: verify
verify: verify-generated verify-gofmt verify-mod ## Fail if generated code is stale, Go code is unformatted or go.mod is untidy

.PHONY: verify-generated
verify-generated: tools-generate
	@KEYMOUNT_CACHE='$(KEYMOUNT_CACHE)' MAKE='$(MAKE)' bash hack/verify-generated.sh

.PHONY: verify-gofmt
verify-gofmt:
	@files=$$(find . -name '*.go' -not -path './.git/*' -not -path './bin/*' -not -path '*/testdata/*' -print0 | xargs -0 -r $(GOFMT) -l); \
	if [[ -n "$$files" ]]; then \
		echo 'verify: these files are not gofmt-ed (run make fmt):' >&2; echo "$$files" >&2; exit 1; \
	fi; \
	echo 'verify: gofmt clean'

.PHONY: verify-mod
verify-mod:
	@for m in $(GO_MODULES); do \
		if ! $(GO) -C "$$m" mod tidy -diff; then \
			echo "verify: $$m/go.mod or go.sum is not tidy: run 'go mod tidy' in $$m" >&2; exit 1; \
		fi; \
	done; \
	echo 'verify: go.mod tidy'

# --------------------------------------------------------------- generate

# Each generator is its own generate-<name> target; add new ones to
# GENERATORS and to tools-generate.
GENERATORS := generate-proto generate-api

.PHONY: generate
generate: $(GENERATORS) ## Regenerate all generated code: protobuf, API deepcopy, CRDs

# generate-api: deepcopy functions of the API types and the CRD manifests in
# deploy/crds (controller-gen reads the +kubebuilder markers in apis/).
.PHONY: generate-api
generate-api: $(CONTROLLER_GEN)
	@echo "controller-gen apis/ -> zz_generated.deepcopy.go, deploy/crds"
	@$(CONTROLLER_GEN) object paths=./apis/...
	@$(CONTROLLER_GEN) crd:crdVersions=v1 paths=./apis/... output:crd:artifacts:config=deploy/crds

.PHONY: generate-proto
generate-proto: protoc $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC)
	@for f in $(PROTO_FILES); do \
		d=$$(dirname "$$f"); \
		echo "protoc $$f"; \
		protoc \
			--plugin=protoc-gen-go=$(PROTOC_GEN_GO) \
			--plugin=protoc-gen-go-grpc=$(PROTOC_GEN_GO_GRPC) \
			--proto_path="$$d" \
			--go_out="$$d" --go_opt=paths=source_relative \
			--go-grpc_out="$$d" --go-grpc_opt=paths=source_relative \
			"$$(basename "$$f")"; \
	done

# ------------------------------------------------------------------ tools

.PHONY: tools
tools: tools-generate $(GOLANGCI_LINT) ## Install the pinned tools (protoc from Debian, the rest into KEYMOUNT_CACHE/bin)
	@echo "tools: protoc $(PROTOC_VERSION), protoc-gen-go $(PROTOC_GEN_GO_VERSION), protoc-gen-go-grpc $(PROTOC_GEN_GO_GRPC_VERSION), controller-gen $(CONTROLLER_GEN_VERSION), golangci-lint $(GOLANGCI_LINT_VERSION) in $(TOOLS_BIN)"

.PHONY: tools-generate
tools-generate: protoc $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC) $(CONTROLLER_GEN)

# protoc: install Debian's protobuf-compiler when missing, and insist on the
# pinned version.
.PHONY: protoc
protoc:
	@bash hack/install-deps.sh protoc=protobuf-compiler
	@v=$$(protoc --version); \
	if [[ "$$v" != 'libprotoc $(PROTOC_VERSION)' ]]; then \
		echo "protoc: found '$$v' at $$(command -v protoc), need 'libprotoc $(PROTOC_VERSION)' (Debian bookworm protobuf-compiler): the generated headers record the version" >&2; \
		exit 1; \
	fi

# $(call go-install,DEST,PACKAGE,VERSION): go install PACKAGE@VERSION with a
# private GOBIN and GOTMPDIR under the cache, then move the binary to DEST in
# one rename (so a concurrent make never sees half a file) and point the
# unversioned name at it (for putting $(TOOLS_BIN) on PATH).
define go-install
	@mkdir -p '$(TOOLS_BIN)' '$(TOOLS_TMP)'
	@echo 'installing $(2)@$(3)'
	@tmp=$$(mktemp -d '$(TOOLS_TMP)/install.XXXXXX'); \
	trap 'rm -rf "$$tmp"' EXIT; \
	start=$$SECONDS; \
	GOTMPDIR="$$tmp" GOBIN="$$tmp/bin" GOWORK=off $(GO) install '$(2)@$(3)'; \
	mv -f "$$tmp/bin/$(notdir $(2))" '$(1)'; \
	echo "installed $(notdir $(2)) $(3) in $$((SECONDS - start)) s"
	@ln -sfn '$(notdir $(1))' '$(TOOLS_BIN)/$(notdir $(2))'
endef

$(PROTOC_GEN_GO):
	$(call go-install,$@,$(PROTOC_GEN_GO_PKG),$(PROTOC_GEN_GO_VERSION))

$(PROTOC_GEN_GO_GRPC):
	$(call go-install,$@,$(PROTOC_GEN_GO_GRPC_PKG),$(PROTOC_GEN_GO_GRPC_VERSION))

$(GOLANGCI_LINT):
	$(call go-install,$@,$(GOLANGCI_LINT_PKG),$(GOLANGCI_LINT_VERSION))

$(CONTROLLER_GEN):
	$(call go-install,$@,$(CONTROLLER_GEN_PKG),$(CONTROLLER_GEN_VERSION))

$(HELM):
	$(call go-install,$@,$(HELM_PKG),$(HELM_VERSION))

# ------------------------------------------------------------ demo, image

# demo builds only what hack/demo.sh runs, the keymount CLI (its in-process
# driver and local provider): not the other binaries, the tools or a control
# plane, so a fresh clone's first `make demo` compiles about 570 packages.
.PHONY: demo
demo: ## Build the keymount CLI, then run the local demo (hack/demo.sh): the local provider, no cluster, no cloud account
	@mkdir -p $(BIN_DIR)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-X main.version=$(VERSION)' -o $(BIN_DIR)/ ./cmd/keymount
	bash hack/demo.sh

.PHONY: image
image: ## Build the OCI images of the driver and the providers without a container engine (bin/images; VERSION, REGISTRY, IMAGE_PLATFORMS)
	@test -f /etc/ssl/certs/ca-certificates.crt || bash hack/install-deps.sh update-ca-certificates=ca-certificates
	$(GO) run ./hack/image -out $(BIN_DIR)/images -version '$(VERSION)' -registry '$(REGISTRY)' -platforms '$(IMAGE_PLATFORMS)' -go '$(GO)'

# buildah (Debian's, vfs storage, chroot isolation) builds the Dockerfile's
# final stages in TestDockerfile (hack/image) from binaries the test built:
# nothing is pulled and no daemon runs. /var/lib/containers is the mount
# point the test binds a directory of its own on, in a private mount
# namespace (buildah 1.28 writes a cache there whatever --root says); made
# here once, so that two test runs on one machine never race over it.
.PHONY: buildah
buildah:
	@bash hack/install-deps.sh buildah=buildah
	@test -d /var/lib/containers || install -d -m 0700 /var/lib/containers

.PHONY: release
release: ## Cut release VERSION=vX.Y.Z from a clean tree into dist/VERSION, without a container engine: images (OCI layouts, IMAGE_PLATFORMS), SBOMs, chart, manifests pinned by digest, notes, SHA256SUMS (docs/releasing.md)
	@test -f /etc/ssl/certs/ca-certificates.crt || bash hack/install-deps.sh update-ca-certificates=ca-certificates
	$(GO) run ./hack/release -version '$(VERSION)' -registry '$(REGISTRY)' -platforms '$(IMAGE_PLATFORMS)' -out dist -go '$(GO)'

.PHONY: clean
clean: ## Remove build and coverage output (the tool cache is kept)
	rm -rf $(BIN_DIR) dist coverage.out coverage.html cover.out *.coverprofile
