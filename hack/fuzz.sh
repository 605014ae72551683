#!/usr/bin/env bash
# Runs every fuzz target in the main module, one at a time (go test -fuzz
# takes a single target), each for FUZZTIME.
#
# Targets are found by looking for `func FuzzXxx(f *testing.F)` in _test.go
# files, so a new fuzzer is picked up without touching this script. A failing
# input is written by go test to the package's testdata/fuzz/ directory;
# commit it with the fix so it becomes a regression test.
#
# Usage: hack/fuzz.sh [PACKAGE_DIR ...]   (normally through `make fuzz`)
# Environment: FUZZTIME (default 30s), FUZZ (regexp limiting target names).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

fuzztime=${FUZZTIME:-30s}
only=${FUZZ:-.}
dirs=("$@")
if [[ ${#dirs[@]} -eq 0 ]]; then
	dirs=(.)
fi

# "dir<TAB>FuzzName" lines, sorted, skipping testdata, vendor and .git.
mapfile -t targets < <(
	grep -rEo --include='*_test.go' --exclude-dir=testdata --exclude-dir=vendor --exclude-dir=.git \
		'^func Fuzz[A-Za-z0-9_]*\(' "${dirs[@]}" |
		sed -E 's#^(\./)?(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\($#\2\t\3#' |
		awk -F'\t' -v re="${only}" '$2 ~ re' |
		sort -u || true
)

if [[ ${#targets[@]} -eq 0 ]]; then
	if [[ "$only" != "." ]]; then
		echo "fuzz: no fuzz target matches FUZZ=${only}" >&2
		exit 1
	fi
	echo "fuzz: no fuzz targets found"
	exit 0
fi

echo "fuzz: ${#targets[@]} target(s), ${fuzztime} each"
failed=()
for t in "${targets[@]}"; do
	dir=${t%%$'\t'*}
	name=${t#*$'\t'}
	echo "==> (cd ${dir} && go test -run '^\$' -fuzz '^${name}\$' -fuzztime ${fuzztime} .)"
	# -C: the package may live in a nested module (hack/...).
	if ! go -C "${dir}" test -run '^$' -fuzz "^${name}\$" -fuzztime "${fuzztime}" .; then
		failed+=("./${dir} ${name}")
	fi
done

if [[ ${#failed[@]} -ne 0 ]]; then
	echo "fuzz: ${#failed[@]} of ${#targets[@]} target(s) failed:" >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "fuzz: all ${#targets[@]} target(s) passed"
