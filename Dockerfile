# keymount's images for pipelines that build with a container engine (docker
# buildx, buildah, kaniko): the same images `make image` builds without one
# (hack/image, internal/ociimage) — static binaries in /usr/local/bin on an
# empty base, the CA certificates only in the AWS and Vault providers' images,
# the same entrypoint, user, environment and labels. One target per image:
#
#   docker buildx build --platform linux/amd64,linux/arm64 --build-arg VERSION=v0.1.0 \
#     --target keymount-driver -t registry.example.com/keymount/keymount-driver:v0.1.0 --push .
#
# and likewise for keymount-provider-local, keymount-provider-aws,
# keymount-provider-vault and keymount-controller. The release tier (make
# test-release; TestDockerfile in hack/image) builds every final stage with
# buildah offline: the build stage below is replaced by one that copies
# binaries the test built (its Go image cannot be pulled there) and is
# checked on its own (the Go version of go.mod, every program, the flags of
# internal/ociimage), and each image is compared with the one `make image`
# builds. Keep the two in step: a change to internal/ociimage's Programs or
# LDFlags belongs here too.

# The Go toolchain of go.mod. The build stage runs on the builder's platform
# and cross-compiles for the target's (no emulation).
ARG GO_IMAGE=golang:1.26.8-bookworm

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION}" -o /out/ \
      ./cmd/keymount-driver ./cmd/keymount ./cmd/keymount-provider-local \
      ./cmd/keymount-provider-aws ./cmd/keymount-provider-vault ./cmd/keymount-controller

# The node driver (with the keymount CLI, for debugging in the pod). Root: it
# mounts tmpfs volumes.
FROM scratch AS keymount-driver
ARG VERSION=dev
COPY --from=build /out/keymount-driver /out/keymount /usr/local/bin/
ENV PATH=/usr/local/bin
LABEL org.opencontainers.image.title="keymount-driver" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/keymount/keymount" \
      org.opencontainers.image.licenses="Apache-2.0"
ENTRYPOINT ["/usr/local/bin/keymount-driver"]

# The local provider (files from a directory).
FROM scratch AS keymount-provider-local
ARG VERSION=dev
COPY --from=build /out/keymount-provider-local /usr/local/bin/
ENV PATH=/usr/local/bin
LABEL org.opencontainers.image.title="keymount-provider-local" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/keymount/keymount" \
      org.opencontainers.image.licenses="Apache-2.0"
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/keymount-provider-local"]

# The AWS provider, with the CA certificates to reach AWS (the Go image's
# Debian bundle).
FROM scratch AS keymount-provider-aws
ARG VERSION=dev
COPY --from=build /out/keymount-provider-aws /usr/local/bin/
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV PATH=/usr/local/bin
LABEL org.opencontainers.image.title="keymount-provider-aws" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/keymount/keymount" \
      org.opencontainers.image.licenses="Apache-2.0"
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/keymount-provider-aws"]

# The Vault/OpenBao provider, with the CA certificates to reach a Vault
# served under a public CA.
FROM scratch AS keymount-provider-vault
ARG VERSION=dev
COPY --from=build /out/keymount-provider-vault /usr/local/bin/
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
ENV PATH=/usr/local/bin
LABEL org.opencontainers.image.title="keymount-provider-vault" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/keymount/keymount" \
      org.opencontainers.image.licenses="Apache-2.0"
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/keymount-provider-vault"]

# keymount-controller (SecretSync, restart on change, fan-out).
FROM scratch AS keymount-controller
ARG VERSION=dev
COPY --from=build /out/keymount-controller /usr/local/bin/
ENV PATH=/usr/local/bin
LABEL org.opencontainers.image.title="keymount-controller" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/keymount/keymount" \
      org.opencontainers.image.licenses="Apache-2.0"
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/keymount-controller"]
