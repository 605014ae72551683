#!/usr/bin/env bash
# Installs the Debian packages the build and the test tiers need, but only
# those whose command is missing, so running it again is cheap and silent.
#
# Usage: hack/install-deps.sh [COMMAND=PACKAGE ...]
#   With no argument it installs the default set below. Each argument names a
#   command to look for on PATH (or an absolute path that must be an
#   executable file) and the Debian package that provides it, for example:
#   hack/install-deps.sh etcd=etcd-server /usr/lib/cni/loopback=containernetworking-plugins
#
# Packages that ship a service (etcd-server, containerd) are installed without
# starting it: the tests start their own copies under a temporary root, and a
# system daemon on the default ports or sockets would only get in their way.
# Debian's maintainer scripts start services through invoke-rc.d, which asks
# /usr/sbin/policy-rc.d first; for the install this script puts one in place
# that answers 101 ("action forbidden") and restores what was there after.
#
# Needs root (or passwordless sudo) only when something is actually missing.
set -euo pipefail

# The commands every make target may need, as COMMAND=PACKAGE.
# protoc must be 3.21.12 (Debian bookworm): the generated headers record it.
DEFAULT_DEPS=(
	protoc=protobuf-compiler
)

# Services the packages above may have started anyway (an init system that
# ignores policy-rc.d): stopped through their own init script.
SERVICES=(etcd containerd)

die() {
	echo "install-deps: $*" >&2
	exit 1
}

# present COMMAND: COMMAND is on PATH, or is an absolute path to an
# executable file.
present() {
	if [[ $1 == /* ]]; then
		[[ -f $1 && -x $1 ]]
	else
		command -v "$1" >/dev/null 2>&1
	fi
}

deps=("$@")
if [[ ${#deps[@]} -eq 0 ]]; then
	deps=("${DEFAULT_DEPS[@]}")
fi

missing=()
for dep in "${deps[@]}"; do
	[[ "$dep" == *=* ]] || die "bad argument '$dep': want COMMAND=PACKAGE"
	if ! present "${dep%%=*}"; then
		missing+=("${dep#*=}")
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

policy=/usr/sbin/policy-rc.d
saved=''
log=$(mktemp)
restore() {
	rm -f "$log"
	if [[ -n $saved ]]; then
		"${sudo[@]}" mv -f "$saved" "$policy"
	else
		"${sudo[@]}" rm -f "$policy"
	fi
}
if [[ -e $policy ]]; then
	saved=$(mktemp -d)/policy-rc.d
	"${sudo[@]}" cp -p "$policy" "$saved"
fi
trap restore EXIT
printf '#!/bin/sh\n# hack/install-deps.sh: no service starts while it installs packages.\nexit 101\n' |
	"${sudo[@]}" tee "$policy.keymount" >/dev/null
"${sudo[@]}" chmod 0755 "$policy.keymount"
"${sudo[@]}" mv -f "$policy.keymount" "$policy"

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get update -qq >"$log" 2>&1 ||
	! "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
	cat "$log" >&2
	die "apt-get failed to install ${missing[*]}"
fi

for svc in "${SERVICES[@]}"; do
	if [[ -x /etc/init.d/$svc ]] && "${sudo[@]}" /etc/init.d/"$svc" status >/dev/null 2>&1; then
		echo "install-deps: the $svc package started a system $svc; stopping it" >&2
		"${sudo[@]}" /etc/init.d/"$svc" stop >/dev/null
	fi
done

for dep in "${deps[@]}"; do
	present "${dep%%=*}" ||
		die "installed ${dep#*=} but '${dep%%=*}' is still not there"
done
