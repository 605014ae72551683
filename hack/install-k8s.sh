#!/usr/bin/env bash
# Installs the control plane of the integration and end-to-end test tiers: a
# real kube-apiserver, kube-controller-manager (for the garbage collector) and
# etcd, all in one directory that controller-runtime's envtest reads through
# KUBEBUILDER_ASSETS:
#
#   $KEYMOUNT_CACHE/k8s/<version>/kube-apiserver           built from hack/k8s
#   $KEYMOUNT_CACHE/k8s/<version>/kube-controller-manager  built from hack/k8s
#   $KEYMOUNT_CACHE/k8s/<version>/etcd -> /usr/bin/etcd    Debian's etcd-server
#
# <version> is the k8s.io/kubernetes version hack/k8s/go.mod requires (change
# it with hack/update-k8s.sh). The two Kubernetes binaries are built from the
# Go module proxy with the committed hack/k8s/go.sum, into a scratch directory
# under the cache, and renamed into place only once both built and run, so an
# interrupted build is never taken as done. When both exist the build is
# skipped, so running this again is cheap. The Go build cache is the default
# one and shared.
#
# Usage: hack/install-k8s.sh   (normally through `make k8s-env`)
#        hack/install-k8s.sh --print-assets-dir
# Environment: KEYMOUNT_CACHE (default ~/.cache/keymount), GO (default go).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${KEYMOUNT_CACHE:-$HOME/.cache/keymount}
go=${GO:-go}
mod=$root/hack/k8s
binaries=(kube-apiserver kube-controller-manager)

die() {
	echo "install-k8s: $*" >&2
	exit 1
}

# The k8s.io/kubernetes version hack/k8s builds, and when it was released
# (the build date the binaries report, so a rebuild is reproducible).
read -r version released < <(
	cd "$mod" && GOWORK=off "$go" list -m -f '{{.Version}} {{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes
) || die "cannot read the k8s.io/kubernetes version from $mod/go.mod"
[[ "$version" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]] || die "unexpected k8s.io/kubernetes version '$version' in $mod/go.mod"
major=${BASH_REMATCH[1]}
minor=${BASH_REMATCH[2]}
assets=$cache/k8s/$version

if [[ "${1:-}" == --print-assets-dir ]]; then
	echo "$assets"
	exit 0
fi
[[ $# -eq 0 ]] || die "usage: $0 [--print-assets-dir]"

as_root=()
if [[ "$(id -u)" -ne 0 ]]; then
	as_root=(sudo)
fi

# install_etcd installs Debian's etcd-server without starting it. Its
# postinst runs `invoke-rc.d etcd start`, which on a machine without systemd
# starts a system etcd on 127.0.0.1:2379 through /etc/init.d; a policy-rc.d
# that answers 101 ("action forbidden") keeps it stopped. Docker images ship
# one; when this machine has none (or one that allows), put one in place for
# the install and restore what was there afterwards.
install_etcd() {
	if command -v etcd >/dev/null 2>&1; then
		return 0
	fi
	local policy=/usr/sbin/policy-rc.d saved=''
	local rc=0
	if [[ -x $policy ]]; then
		"$policy" etcd start >/dev/null 2>&1 || rc=$?
	fi
	if [[ $rc -ne 101 ]]; then
		if [[ -e $policy ]]; then
			saved=$(mktemp "$cache/tmp/policy-rc.d.XXXXXX")
			"${as_root[@]}" cp -p "$policy" "$saved"
		fi
		# shellcheck disable=SC2064 # expand $saved now
		trap "restore_policy '$saved'" EXIT
		printf '#!/bin/sh\n# hack/install-k8s.sh: no service starts while it installs etcd-server.\nexit 101\n' |
			"${as_root[@]}" tee "$policy.keymount" >/dev/null
		"${as_root[@]}" chmod 0755 "$policy.keymount"
		"${as_root[@]}" mv -f "$policy.keymount" "$policy"
	fi
	bash "$root/hack/install-deps.sh" etcd=etcd-server
	if [[ $rc -ne 101 ]]; then
		restore_policy "$saved"
		trap - EXIT
	fi
	# A service started anyway (an init system this script did not foresee):
	# stop it through its own init script rather than guess at processes.
	if [[ -x /etc/init.d/etcd ]] && "${as_root[@]}" /etc/init.d/etcd status >/dev/null 2>&1; then
		echo "install-k8s: the etcd-server package started a system etcd; stopping it" >&2
		"${as_root[@]}" /etc/init.d/etcd stop >/dev/null
	fi
}

restore_policy() {
	local saved=$1 policy=/usr/sbin/policy-rc.d
	if [[ -n $saved ]]; then
		"${as_root[@]}" mv -f "$saved" "$policy"
	else
		"${as_root[@]}" rm -f "$policy"
	fi
}

# build_k8s builds the Kubernetes binaries into a scratch directory and moves
# each into $assets with one rename once all of them built and run.
build_k8s() {
	local missing=0 b
	for b in "${binaries[@]}"; do
		[[ -x $assets/$b ]] || missing=1
	done
	if [[ $missing -eq 0 ]]; then
		return 0
	fi

	# Scratch directories of builds killed hard (no EXIT trap) pile up: drop
	# those untouched for a day.
	find "$cache/tmp" -maxdepth 1 -name 'k8s-build.*' -mmin +1440 -exec rm -rf {} + 2>/dev/null || true
	local tmp
	tmp=$(mktemp -d "$cache/tmp/k8s-build.XXXXXX")
	# shellcheck disable=SC2064 # expand $tmp now
	trap "rm -rf '$tmp'" EXIT
	mkdir -p "$tmp/gotmp" "$tmp/out"

	# What hack/lib/version.sh in the Kubernetes repo passes, for both copies
	# of the version package, so `kubectl version` and /version are sane.
	local ldflags=(-s -w) key val pkg
	for kv in "gitVersion=$version" "gitMajor=$major" "gitMinor=$minor" \
		"gitTreeState=clean" "buildDate=$released"; do
		key=${kv%%=*}
		val=${kv#*=}
		for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
			ldflags+=("-X=$pkg.$key=$val")
		done
	done

	echo "install-k8s: building ${binaries[*]} $version into $assets (a cold build takes a while)" >&2
	local start=$SECONDS
	CGO_ENABLED=0 GOWORK=off GOTMPDIR="$tmp/gotmp" \
		"$go" build -C "$mod" -trimpath -ldflags="${ldflags[*]}" -o "$tmp/out/" \
		"${binaries[@]/#/k8s.io/kubernetes/cmd/}"
	for b in "${binaries[@]}"; do
		local got
		got=$("$tmp/out/$b" --version) || die "$b does not run"
		[[ "$got" == "Kubernetes $version" ]] || die "$b reports '$got', want 'Kubernetes $version'"
	done
	mkdir -p "$assets"
	for b in "${binaries[@]}"; do
		mv -f "$tmp/out/$b" "$assets/$b"
	done
	echo "install-k8s: built ${binaries[*]} $version in $((SECONDS - start))s" >&2
}

mkdir -p "$cache/tmp"
install_etcd
etcd=$(command -v etcd)
"$etcd" --version >/dev/null || die "$etcd does not run"
build_k8s
ln -sfn "$etcd" "$assets/etcd"
echo "install-k8s: KUBEBUILDER_ASSETS=$assets ($("$etcd" --version | head -1))"
