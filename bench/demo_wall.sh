#!/usr/bin/env bash
# Wall time of the two demo targets, end to end, as a user runs them (issue 7):
#   make demo-quick   the short demo
#   make demo         the full demo sweep (sweeps/study-m4.yaml since session 14)
# Usage: bash bench/demo_wall.sh [quick|full|both]   (default: both; the full sweep takes long)
# Prints one line per target with its wall seconds, the machine's cores and load average before
# and after; each target's output goes to bench/.work/demo-<target>.log.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p bench/.work
which="${1:-both}"
status=0

run() {  # run <make target>
    local target="$1" log="bench/.work/demo-$1.log" load0 load1 t0 t1 rc
    load0=$(cut -d' ' -f1-3 /proc/loadavg)
    t0=$(date +%s.%N)
    make "$target" >"$log" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    load1=$(cut -d' ' -f1-3 /proc/loadavg)
    printf 'make %-11s %8.1f s  exit %d  (%s cores; load avg %s -> %s; log %s)\n' \
        "$target" "$(awk "BEGIN{print $t1 - $t0}")" "$rc" "$(nproc)" "$load0" "$load1" "$log"
    [ "$rc" = 0 ] || status=1
}

case "$which" in
    quick) run demo-quick ;;
    full) run demo ;;
    both) run demo-quick; run demo ;;
    *) echo "usage: $0 [quick|full|both]" >&2; exit 2 ;;
esac
exit $status
