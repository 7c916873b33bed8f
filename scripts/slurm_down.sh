#!/usr/bin/env bash
# Stop the daemons that scripts/slurm_up.sh started, by the pids it recorded (never by name).
#
#     sudo bash scripts/slurm_down.sh
set -euo pipefail
STATE=/run/rlablate-slurm

alive() {
    local f=$1 pid st
    [ -s "$f" ] || return 1
    pid=$(tr -dc 0-9 <"$f")
    [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
    st=$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
    [ "$st" != Z ] && [ "$st" != X ]
}

for name in slurmd slurmctld slurmdbd mariadbd munged; do
    f=$STATE/$name.pid
    if alive "$f"; then
        kill "$(tr -dc 0-9 <"$f")" 2>/dev/null || true
        for _ in $(seq 100); do alive "$f" || break; sleep 0.2; done
        alive "$f" && echo "slurm_down: $name did not stop within 20 s" >&2
        echo "slurm_down: stopped $name" >&2
    fi
    rm -f "$f"
done
