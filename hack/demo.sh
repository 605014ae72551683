#!/usr/bin/env bash
# keymount demo: mount the example SecretProviderClass (examples/local) with
# the keymount CLI, through the same pipeline the node plugin runs for a pod,
# look at what a pod would see, then unmount. `make demo` builds bin/keymount
# and runs it; it needs root because every volume is a private tmpfs.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
keymount=${BIN_DIR:-bin}/keymount
class=examples/local/secretproviderclass.yaml
secrets=examples/local/secrets

if [[ $(id -u) -ne 0 ]]; then
	echo "demo: keymount mounts a tmpfs, which needs root: run 'sudo make demo'" >&2
	exit 1
fi
if [[ ! -x $keymount ]]; then
	echo "demo: $keymount is missing: run 'make demo', which builds it" >&2
	exit 1
fi

tmp=$(mktemp -d /tmp/keymount-demo.XXXXXX)
mnt=$tmp/mnt
state=$tmp/state

# mounts_under DIR: the mount points under DIR, deepest first.
mounts_under() {
	awk -v dir="$1/" 'index($5, dir) == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

# On any exit: unmount what is left (keymount first, then by force), and
# remove the temp dir without crossing into a mount.
cleanup() {
	local rc=$?
	"$keymount" unmount "$mnt" --state-dir "$state" >/dev/null 2>&1 || true
	mounts_under "$tmp" | while read -r mp; do umount -l "$mp" || true; done
	rm -rf --one-file-system "$tmp"
	if [[ $rc -ne 0 ]]; then echo "demo: FAILED (exit $rc)" >&2; fi
	exit "$rc"
}
trap cleanup EXIT

step() { printf '\n== %s\n' "$*"; }

step "keymount mount: $class, local provider serving $secrets"
echo "\$ keymount mount -f $class --local-root $secrets --target \$TMP/mnt --state-dir \$TMP/state --read-only"
"$keymount" mount -f "$class" --local-root "$secrets" --target "$mnt" --state-dir "$state" --read-only

step "what the pod sees: names are symlinks into ..data, which a refresh swaps in one rename"
ls -la "$mnt"

step "the files (following the symlinks, without the ..data internals)"
(cd "$mnt" && find -L . -type f -not -path '*/..*' -printf '%M %4s  %P\n' | sort -k3)

step "one value: db/password (a fake demo value)"
cat "$mnt/db/password"

step "the volume is read-only"
if err=$( { echo oops >"$mnt/db/password"; } 2>&1 ); then
	echo "demo: writing into the volume succeeded; it should be read-only" >&2
	exit 1
fi
echo "write refused: ${err##*: }"

step "keymount unmount"
"$keymount" unmount "$mnt" --state-dir "$state"
left=$(mounts_under "$tmp")
if [[ -n $left ]]; then
	echo "demo: still mounted after unmount:" >&2
	echo "$left" >&2
	exit 1
fi
echo "nothing left mounted under \$TMP"

step "done"
