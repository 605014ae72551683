#!/usr/bin/env bash
# Installs the Debian packages the build and the test tiers need, but only
# those whose command is missing, so running it again is cheap and silent.
#
# Usage: hack/install-deps.sh [COMMAND=PACKAGE ...]
#   With no argument it installs the default set below. Each argument names a
#   command to look for on PATH and the Debian package that provides it,
#   for example: hack/install-deps.sh etcd=etcd-server
#
# Needs root (or passwordless sudo) only when something is actually missing.
set -euo pipefail

# The commands every make target may need, as COMMAND=PACKAGE.
# protoc must be 3.21.12 (Debian bookworm): the generated headers record it.
DEFAULT_DEPS=(
	protoc=protobuf-compiler
)

die() {
	echo "install-deps: $*" >&2
	exit 1
}

deps=("$@")
if [[ ${#deps[@]} -eq 0 ]]; then
	deps=("${DEFAULT_DEPS[@]}")
fi

missing=()
for dep in "${deps[@]}"; do
	[[ "$dep" == *=* ]] || die "bad argument '$dep': want COMMAND=PACKAGE"
	cmd=${dep%%=*}
	pkg=${dep#*=}
	if ! command -v "$cmd" >/dev/null 2>&1; then
		missing+=("$pkg")
	fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
	exit 0
fi

command -v apt-get >/dev/null 2>&1 ||
	die "missing ${missing[*]} and apt-get is not available: install them by hand"

sudo=()
if [[ "$(id -u)" -ne 0 ]]; then
	command -v sudo >/dev/null 2>&1 ||
		die "missing ${missing[*]}: run as root (or install sudo) so apt-get can install them"
	sudo=(sudo)
fi

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "${sudo[@]}" apt-get update -qq >"$log" 2>&1 ||
	! "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
	cat "$log" >&2
	die "apt-get failed to install ${missing[*]}"
fi

for dep in "${deps[@]}"; do
	cmd=${dep%%=*}
	command -v "$cmd" >/dev/null 2>&1 ||
		die "installed ${dep#*=} but '$cmd' is still not on PATH"
done
