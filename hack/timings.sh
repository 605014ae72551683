#!/usr/bin/env bash
# Measures what README's set-up section says a newcomer waits for: `make demo`
# and `make test` on a clean clone, cold (empty Go build and module caches,
# empty keymount cache: every tool, both Kubernetes builds, Vault and the
# images built from scratch) and then warm (the same caches, filled), with
# the time of every phase of `make test` (hack/phase.sh). It writes the
# result, with the date and the machine, between README's
# "test-timings" markers; commit that.
#
# Usage: hack/timings.sh [--warm]   (normally through `make test-timings`)
#   --warm  skip the cold runs: clone, then time `make demo` and `make test`
#           with this machine's caches (KEYMOUNT_CACHE, Go's), as they are;
#           README's cold row stays as it was.
#
# What cold cannot undo: Debian's packages (protoc, etcd, containerd, runc,
# the CNI plugins, buildah) stay installed; on a fresh machine apt-get adds
# their download and install, a minute or two. The cold runs need about 25 GB
# of disk under TIMINGS_DIR (default: KEYMOUNT_CACHE/tmp), removed at the end.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${KEYMOUNT_CACHE:-$HOME/.cache/keymount}
mode=cold
case "${1:-}" in
'') ;;
--warm) mode=warm ;;
*)
	echo "usage: $0 [--warm]" >&2
	exit 2
	;;
esac

if [[ $(id -u) -ne 0 ]]; then
	echo "timings: make test needs root (tmpfs, the real node): run it as root" >&2
	exit 1
fi
base=${TIMINGS_DIR:-$cache/tmp}
mkdir -p "$base"
work=$(mktemp -d "$base/timings.XXXXXX")
cleanup() {
	# The Go module cache is read-only on disk.
	chmod -R u+w "$work" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

git -C "$root" diff --quiet HEAD || echo "timings: the work tree has uncommitted changes; the clone measures HEAD ($(git -C "$root" rev-parse --short HEAD))" >&2
git clone --quiet --no-hardlinks "$root" "$work/keymount"
commit=$(git -C "$work/keymount" rev-parse --short HEAD)

envs=()
if [[ $mode == cold ]]; then
	envs=(KEYMOUNT_CACHE="$work/cache" GOCACHE="$work/gocache" GOMODCACHE="$work/gomod")
fi

# run NAME TARGET: times `make TARGET` in the clone, its output in a log;
# prints the seconds. A failure stops the measurement: a figure of a failed
# run would be no figure.
run() {
	local name=$1 target=$2 start took
	echo "timings: $name: make $target (log: $work/$name.log)" >&2
	start=$SECONDS
	if ! env "${envs[@]}" PHASE_LOG="$work/$name.phases" make -C "$work/keymount" "$target" >"$work/$name.log" 2>&1; then
		tail -n 40 "$work/$name.log" >&2
		echo "timings: $name: make $target failed; nothing written" >&2
		exit 1
	fi
	took=$((SECONDS - start))
	echo "timings: $name: $took s" >&2
	echo "$took"
}

minsec() { printf '%d min %02d s' $(($1 / 60)) $(($1 % 60)); }

# phases NAME: the phases of a make test run, as "phase N s" items.
phases() {
	awk -F'\t' '{ printf "%s%s %d s", (NR > 1 ? "; " : ""), $1, $2 }' "$work/$1.phases"
}

declare -A took
if [[ $mode == cold ]]; then
	took[cold-demo]=$(run cold-demo demo)
	took[cold-test]=$(run cold-test test)
fi
took[warm-demo]=$(run warm-demo demo)
took[warm-test]=$(run warm-test test)

cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/^MemTotal/ { printf "%d GiB", $2 / 1048576 }' /proc/meminfo)
block=$(mktemp)
{
	echo "<!-- test-timings: begin (written by make test-timings; do not edit by hand) -->"
	echo "Measured on $(date -u +%Y-%m-%d) by \`make test-timings\` (hack/timings.sh) on a clean clone of $commit, on a"
	echo "$(nproc)-core machine ($cpu, $mem):"
	echo
	echo "| run | \`make demo\` | \`make test\` | \`make test\`'s phases |"
	echo "|---|---|---|---|"
	if [[ $mode == cold ]]; then
		echo "| cold (empty caches) | $(minsec "${took[cold-demo]}") | $(minsec "${took[cold-test]}") | $(phases cold-test) |"
	else
		# --warm keeps the cold row README has, from its own run.
		grep '^| cold (empty caches) |' "$root/README.md" || true
	fi
	echo "| warm | $(minsec "${took[warm-demo]}") | $(minsec "${took[warm-test]}") | $(phases warm-test) |"
	echo "<!-- test-timings: end -->"
} >"$block"
cat "$block"

readme=$root/README.md
if ! grep -q '^<!-- test-timings: begin' "$readme"; then
	echo "timings: README.md has no test-timings markers; the table above was not written" >&2
	exit 1
fi
awk -v block="$block" '
	/^<!-- test-timings: begin/ { while ((getline line < block) > 0) print line; skip = 1; next }
	/^<!-- test-timings: end/ { skip = 0; next }
	!skip { print }
' "$readme" >"$readme.new"
mv "$readme.new" "$readme"
rm -f "$block"
echo "timings: README.md updated; review and commit it" >&2
