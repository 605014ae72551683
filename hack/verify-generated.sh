#!/usr/bin/env bash
# Proves that the committed generated code is current.
#
# It copies the work tree (tracked and untracked files, minus what .gitignore
# ignores) into a scratch directory, runs `make generate` there, and fails if
# that changed, added or removed any file. The work tree itself is never
# touched, so this works the same in a fresh clone, in a tree with
# uncommitted changes, and while someone else is editing it.
#
# Usage: hack/verify-generated.sh   (normally through `make verify`)
# Environment: MAKE (default make); KEYMOUNT_CACHE is passed through as is.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/keymount-verify.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
tree=$scratch/tree
mkdir -p "$tree"

# The files that make up the source tree, NUL-separated.
list_files() {
	if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		# --cached also lists files deleted from the work tree but not from
		# the index: keep only those that exist.
		git -C "$root" ls-files -z --cached --others --exclude-standard --deduplicate |
			while IFS= read -r -d '' f; do
				if [[ -f "$f" || -L "$f" ]]; then printf '%s\0' "$f"; fi
			done
	else
		find . -path ./.git -prune -o -path ./bin -prune -o \( -type f -o -type l \) -printf '%P\0'
	fi
}

list_files >"$scratch/before"
tar -C "$root" --null -T "$scratch/before" -cf - | tar -C "$tree" -xf -

if ! "${MAKE:-make}" --no-print-directory -C "$tree" generate >"$scratch/generate.log" 2>&1; then
	cat "$scratch/generate.log" >&2
	echo "verify: make generate failed" >&2
	exit 1
fi

# Compare every file the generators left in the scratch tree with the work
# tree, and report files that exist on only one side.
stale=0
while IFS= read -r -d '' f; do
	if [[ ! -e "$root/$f" && ! -L "$root/$f" ]]; then
		echo "verify: make generate creates $f, which is not in the tree" >&2
		stale=1
	elif ! cmp -s "$root/$f" "$tree/$f"; then
		diff -u --label "a/$f" --label "b/$f" "$root/$f" "$tree/$f" >&2 || true
		stale=1
	fi
done < <(cd "$tree" && find . \( -type f -o -type l \) -printf '%P\0')

while IFS= read -r -d '' f; do
	if [[ ! -e "$tree/$f" && ! -L "$tree/$f" ]]; then
		echo "verify: make generate removes $f" >&2
		stale=1
	fi
done <"$scratch/before"

if [[ $stale -ne 0 ]]; then
	echo "verify: generated files are out of date: run 'make generate' and commit the result" >&2
	exit 1
fi
echo "verify: generated files are up to date"
