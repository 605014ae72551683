#!/usr/bin/env bash
# Times the phases of `make test` (and `make test-timings`' runs of it), so
# every log, CI's included, says where the time went:
#
#   hack/phase.sh NAME COMMAND [ARG...]   runs COMMAND, prints
#                                         "phase NAME: 123 s (ok)", and adds a
#                                         line to $PHASE_LOG
#   hack/phase.sh --summary               prints the phases so far as a table
#
# A failing phase prints the table of the phases so far and exits with the
# command's status, so the log of a failed run says which phase failed and
# what ran before it.
#
# Environment: PHASE_LOG, the file the phases are recorded in (one line
# each: name, seconds, ok or FAILED, tab-separated); `make test` starts it
# empty.
set -uo pipefail

log=${PHASE_LOG:?PHASE_LOG names the file the phases are recorded in}

summary() {
	[[ -s $log ]] || return 0
	echo
	echo "=== time per phase (hack/phase.sh; 'make test-timings' measures cold and warm runs) ==="
	awk -F'\t' '
		{ printf "  %-44s %6d s  %s\n", $1, $2, $3; total += $2 }
		END { printf "  %-44s %6d s  (%d min %d s)\n", "total", total, total / 60, total % 60 }
	' "$log"
}

if [[ ${1:-} == --summary ]]; then
	summary
	exit 0
fi
if [[ $# -lt 2 ]]; then
	echo "usage: $0 NAME COMMAND [ARG...] | --summary" >&2
	exit 2
fi

name=$1
shift
echo "=== phase $name: started $(date -u +%H:%M:%S)"
start=$SECONDS
"$@"
status=$?
took=$((SECONDS - start))
result=ok
[[ $status -eq 0 ]] || result=FAILED
printf '%s\t%d\t%s\n' "$name" "$took" "$result" >>"$log"
echo "=== phase $name: $took s ($result)"
if [[ $status -ne 0 ]]; then
	summary
fi
exit "$status"
