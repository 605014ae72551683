# keymount image: the four binaries on Debian bookworm-slim.
#   make image            (docker build -t keymount:dev .)
# The DaemonSet (deploy/) runs /usr/local/bin/keymount-driver; the same image
# also carries keymount-provider-local, keymount-provider-aws and the keymount CLI.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS builder
WORKDIR /src
# Module downloads are cached in their own layer, keyed on go.mod/go.sum only.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY . .
# `make build`: CGO_ENABLED=0 -trimpath static binaries, the same command as
# a developer's.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    make build BIN_DIR=/out

# Not distroless: k8s.io/mount-utils runs mount(8) and umount(8) to mount the
# tmpfs volumes, so the image needs util-linux's mount tools.
FROM debian:bookworm-slim
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        ca-certificates \
        mount \
        util-linux \
    && rm -rf /var/lib/apt/lists/*
COPY --from=builder /out/ /usr/local/bin/
# No USER: a CSI node plugin mounts filesystems into pod volumes and
# propagates them to the host, which needs root (and a privileged container,
# see deploy/daemonset.yaml). Running as non-root is not possible here.
ENTRYPOINT ["/usr/local/bin/keymount-driver"]
