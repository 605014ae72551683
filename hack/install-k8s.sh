#!/usr/bin/env bash
# Installs what the integration, end-to-end and real-node test tiers run: a
# real kube-apiserver, kube-controller-manager (for the garbage collector),
# kube-scheduler (for pods without a node, such as a DaemonSet's), kubelet and
# etcd, plus containerd, runc and the CNI plugins of the real node,
# all in one directory that controller-runtime's envtest reads through
# KUBEBUILDER_ASSETS:
#
#   $KEYMOUNT_CACHE/k8s/<version>/kube-apiserver           built from hack/k8s
#   $KEYMOUNT_CACHE/k8s/<version>/kube-controller-manager  built from hack/k8s
#   $KEYMOUNT_CACHE/k8s/<version>/kube-scheduler           built from hack/k8s
#   $KEYMOUNT_CACHE/k8s/<version>/kubelet                  built from hack/k8s
#   $KEYMOUNT_CACHE/k8s/<version>/etcd -> /usr/bin/etcd    Debian's etcd-server
#   $KEYMOUNT_CACHE/k8s/<version>/{containerd,containerd-shim-runc-v2,ctr}
#                                                          Debian's containerd
#   $KEYMOUNT_CACHE/k8s/<version>/runc                     Debian's runc
#   $KEYMOUNT_CACHE/k8s/<version>/cni -> /usr/lib/cni      Debian's containernetworking-plugins
#
# Debian's packages are installed without starting their services (see
# hack/install-deps.sh).
#
# <version> is the k8s.io/kubernetes version hack/k8s/go.mod requires (change
# it with hack/update-k8s.sh): the newest Kubernetes the tiers run. With
# K8S_VERSION set, the helper module under hack/ whose go.mod requires that
# version is built instead, the same way and into its own directory: e.g.
# hack/k8s-oldest, the oldest version docs/compatibility.md claims (the
# Makefile's k8s-env-oldest). The Kubernetes binaries are built, in one go build, from the
# Go module proxy with the helper module's committed go.sum, into a scratch directory
# under the cache, and renamed into place only once all of them built and run, so an
# interrupted build is never taken as done. When all exist the build is
# skipped, so running this again is cheap. The Go build cache is the default
# one and shared.
#
# Usage: hack/install-k8s.sh   (normally through `make k8s-env`)
#        hack/install-k8s.sh --print-assets-dir
# Environment: KEYMOUNT_CACHE (default ~/.cache/keymount), GO (default go),
# K8S_VERSION (default: hack/k8s's version).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${KEYMOUNT_CACHE:-$HOME/.cache/keymount}
go=${GO:-go}
binaries=(kube-apiserver kube-controller-manager kube-scheduler kubelet)

die() {
	echo "install-k8s: $*" >&2
	exit 1
}

# helper_module prints the helper module under hack/ whose go.mod requires
# k8s.io/kubernetes at version $1.
helper_module() {
	local d
	for d in "$root"/hack/k8s "$root"/hack/k8s-*; do
		if [[ -f $d/go.mod ]] &&
			awk -v v="$1" '$1 == "require" && $2 == "k8s.io/kubernetes" && $3 == v { found = 1 } END { exit !found }' "$d/go.mod"; then
			echo "$d"
			return 0
		fi
	done
	return 1
}

mod=$root/hack/k8s
if [[ -n "${K8S_VERSION:-}" ]]; then
	mod=$(helper_module "$K8S_VERSION") ||
		die "K8S_VERSION=$K8S_VERSION: no helper module under hack/ requires k8s.io/kubernetes $K8S_VERSION; create one with hack/update-k8s.sh $K8S_VERSION hack/k8s-NAME, or unset K8S_VERSION for hack/k8s's version"
fi

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

# The real-node tier (tests/node) also runs containerd, runc and the CNI
# loopback plugin, from Debian, linked into $assets like etcd so the tier
# finds every part of its node in one directory.
node_parts=(containerd containerd-shim-runc-v2 ctr runc)

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
# Debian's packages, installed without starting their services.
bash "$root/hack/install-deps.sh" etcd=etcd-server containerd=containerd runc=runc \
	/usr/lib/cni/loopback=containernetworking-plugins
etcd=$(command -v etcd)
"$etcd" --version >/dev/null || die "$etcd does not run"
build_k8s
ln -sfn "$etcd" "$assets/etcd"
for b in "${node_parts[@]}"; do
	p=$(command -v "$b") || die "$b is not on PATH after installing its package"
	ln -sfn "$p" "$assets/$b"
done
ln -sfn /usr/lib/cni "$assets/cni"
echo "install-k8s: KUBEBUILDER_ASSETS=$assets ($("$etcd" --version | head -1); $("$assets/containerd" --version))"
