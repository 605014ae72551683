#!/usr/bin/env bash
# Runs go test with the given arguments, and when it fails, repeats at the
# end of the output what each failing test and package said: CI shows only
# the tail of a long run, where the driver's logs would otherwise bury the
# failure. It always ends with the slowest packages and their times. The
# exit status is go test's.
#
# Usage: hack/gotest.sh <go test arguments...>   (normally through make)
set -uo pipefail

go=${GO:-go}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

"$go" test "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

# Where the time went: the slowest packages (go test's own figure, the
# package's test binary from start to end; packages run two at a time on
# two cores).
echo
echo "=== slowest packages (go test's time per package) ==="
awk '$1 ~ /^(ok|FAIL)$/ && $3 ~ /^[0-9.]+s$/ { t = $3; sub(/s$/, "", t); printf "%8.1f s  %s %s\n", t, $1, $2 }' "$log" |
	sort -rn | head -n 12
if [[ $status -ne 0 ]]; then
	echo
	echo "=== what the failing tests said (repeated from above) ==="
	# A failing test's block: its "--- FAIL" line and the indented lines of
	# its t.Log/t.Error output right after it; a panic with its trace; the
	# package result lines.
	awk '
		/^[[:space:]]*--- FAIL: / { show = 1; print; next }
		/^panic: / || /^fatal error: / { show = 1; print; next }
		show && (/^[[:space:]]/ || /^goroutine / || /^$/) { print; next }
		/^FAIL[[:space:]]/ { print; show = 0; next }
		{ show = 0 }
	' "$log"
fi
exit "$status"
