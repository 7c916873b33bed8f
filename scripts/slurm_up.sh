#!/usr/bin/env bash
# Bring up a single-node SLURM 22.05 cluster on this machine (127.0.0.1), for the sweep tests.
#
#     sudo bash scripts/slurm_up.sh          # idempotent: a no-op when the cluster is already up
#     sudo bash scripts/slurm_down.sh        # stops exactly the daemons this script started
#
# Why each piece is here (measured on Debian 12, root, no systemd, 2 cores):
# - Debian's packages, not the slurm-wlm metapackage (43 packages): munge, slurm-client,
#   slurmctld, slurmd, plus slurmdbd and mariadb-server for accounting. Accounting is not
#   optional for us: submitit learns a job's fate from `sacct`, and without it `job.result()` waits
#   forever for a job that died without writing a result (SIGKILL, scancel).
# - No systemd: the daemons are started directly, each writes a pid file under $STATE, and
#   slurm_down.sh stops them by those pids only. A temporary policy-rc.d (exit 101) keeps the
#   package installs from starting daemons we would not own.
# - cgroup-free: proctrack/linuxproc, task/none, jobacct_gather/none.
# - The node advertises $SLURM_UP_CPUS CPUs (default 4, `config_overrides`) so that a 4-run job
#   array of 1-thread tiny runs runs at once on 2 cores.
# - batch_sched_delay=0 and a 1 s scheduler interval remove the ~3 s waves between array tasks;
#   KillWait=3 makes `scontrol requeue` (SIGTERM, then SIGKILL) take seconds, not 30 s.
# Nothing here is reachable from outside: slurmctld/slurmd/slurmdbd bind 127.0.0.1, MariaDB listens
# on its unix socket only.
set -euo pipefail

STATE=/run/rlablate-slurm          # pid files of the daemons we started
LOGS=/var/log/rlablate-slurm
CPUS=${SLURM_UP_CPUS:-4}
CLUSTER=rlablate
DB_PASS=rlablate-local             # MariaDB reachable only through its unix socket

log() { echo "slurm_up: $*" >&2; }
die() { echo "slurm_up: error: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (it installs packages and starts daemons)"

t0=$(date +%s)
HOST=$(hostname -s)

# A pid file names a live daemon when the pid exists and is not a zombie (PID 1 here is not a full
# init, so an exited daemon lingers as Z for a while).
alive() {  # alive PIDFILE
    local f=$1 pid st
    [ -s "$f" ] || return 1
    pid=$(tr -dc 0-9 <"$f")
    [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
    st=$(sed -E 's/^[0-9]+ \(.*\) ([A-Za-z]).*/\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
    [ "$st" != Z ] && [ "$st" != X ]
}

node_state() { sinfo -h -n "$HOST" -o %t 2>/dev/null | head -1 || true; }

# ---------------------------------------------------------------------------------- fast path
if command -v sinfo >/dev/null && [ -f /etc/slurm/slurm.conf ] \
   && alive $STATE/munged.pid && alive $STATE/mariadbd.pid && alive $STATE/slurmdbd.pid \
   && alive $STATE/slurmctld.pid && alive $STATE/slurmd.pid \
   && [[ "$(node_state)" =~ ^(idle|mix|alloc)$ ]]; then
    log "already up ($(node_state)); nothing to do"
    exit 0
fi

# ---------------------------------------------------------------------------------- packages
PKGS="munge slurm-client slurmctld slurmd slurmdbd mariadb-server mariadb-client"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    log "installing:$missing"
    made_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        made_policy=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
    [ $made_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
    log "installed in $(( $(date +%s) - t0 )) s"
fi

mkdir -p $STATE $LOGS
chmod 755 $STATE

# ---------------------------------------------------------------------------------- munge
mkdir -p /etc/munge /run/munge /var/lib/munge /var/log/munge
if [ ! -s /etc/munge/munge.key ]; then
    if command -v mungekey >/dev/null; then mungekey --create --keyfile=/etc/munge/munge.key
    else dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none; fi
fi
chown munge:munge /etc/munge /etc/munge/munge.key /run/munge /var/lib/munge /var/log/munge
chmod 700 /etc/munge; chmod 400 /etc/munge/munge.key; chmod 755 /run/munge

# ---------------------------------------------------------------------------------- configs
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/slurm
chown slurm:slurm /var/spool/slurmctld /var/log/slurm /run/slurm
# CPU topology and memory as slurmd sees them; the node line then overrides the CPU count.
MEM=$(slurmd -C 2>/dev/null | sed -nE 's/.*RealMemory=([0-9]+).*/\1/p' | head -1)
MEM=${MEM:-4096}
MEM=$(( MEM * 9 / 10 ))

write_if_changed() {  # write_if_changed PATH MODE OWNER  (content on stdin); prints 1 if changed
    local tmp; tmp=$(mktemp)
    cat >"$tmp"
    if [ -f "$1" ] && cmp -s "$tmp" "$1"; then rm -f "$tmp"; echo 0; return; fi
    install -m "$2" -o "${3%%:*}" -g "${3##*:}" "$tmp" "$1"; rm -f "$tmp"; echo 1
}

changed=$(write_if_changed /etc/slurm/slurm.conf 644 root:root <<EOF
# Written by rlablate scripts/slurm_up.sh: a single-node test cluster on 127.0.0.1.
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=slurm
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=6819
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_interval=1,bf_interval=1
SlurmdParameters=config_overrides
ReturnToService=2
MaxArraySize=10001
KillWait=3
MinJobAge=60
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
MpiDefault=none
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
)
dbd_changed=$(write_if_changed /etc/slurm/slurmdbd.conf 600 slurm:slurm <<EOF
# Written by rlablate scripts/slurm_up.sh
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=slurm
PidFile=/run/slurm/slurmdbd.pid
LogFile=/var/log/slurm/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
)

stop_one() {  # stop_one NAME: SIGTERM the pid in its pid file, wait until gone (or zombie)
    local f=$STATE/$1.pid
    if alive "$f"; then
        kill "$(tr -dc 0-9 <"$f")" 2>/dev/null || true
        for _ in $(seq 50); do alive "$f" || break; sleep 0.2; done
    fi
    rm -f "$f"
}
# A changed config takes effect by restarting the daemons that read it.
if [ "$changed" = 1 ]; then stop_one slurmd; stop_one slurmctld; fi
if [ "$dbd_changed" = 1 ]; then stop_one slurmctld; stop_one slurmdbd; fi

# Wait until `pidof`-free: record the pid of the daemon itself (they fork), read from its own file.
wait_pidfile() {  # wait_pidfile SRC DEST NAME: copy the daemon's pid file to ours once it appears
    for _ in $(seq 100); do
        if [ -s "$1" ] && alive "$1"; then cp "$1" "$2"; return 0; fi
        sleep 0.1
    done
    die "$3 did not start; see its log in $LOGS or /var/log/slurm"
}

# ---------------------------------------------------------------------------------- start
if ! alive $STATE/munged.pid; then
    rm -f /run/munge/munged.pid
    runuser -u munge -- /usr/sbin/munged --log-file=/var/log/munge/munged.log \
        --pid-file=/run/munge/munged.pid 2>>$LOGS/munged.err || die "munged failed: $(cat $LOGS/munged.err)"
    wait_pidfile /run/munge/munged.pid $STATE/munged.pid munged
    log "munged up"
fi

if ! alive $STATE/mariadbd.pid; then
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
    if [ ! -d /var/lib/mysql/mysql ]; then
        mariadb-install-db --user=mysql --datadir=/var/lib/mysql --skip-test-db >$LOGS/mariadb-install.log 2>&1 \
            || die "mariadb-install-db failed; see $LOGS/mariadb-install.log"
    fi
    rm -f /run/mysqld/mysqld.pid
    # --skip-networking: the socket only. Started in the background; it writes its own pid file.
    setsid /usr/sbin/mariadbd --user=mysql --datadir=/var/lib/mysql --skip-networking \
        --socket=/run/mysqld/mysqld.sock --pid-file=/run/mysqld/mysqld.pid \
        --log-error=$LOGS/mariadbd.log </dev/null >/dev/null 2>&1 &
    wait_pidfile /run/mysqld/mysqld.pid $STATE/mariadbd.pid mariadbd
    for _ in $(seq 100); do mariadb -e 'select 1' >/dev/null 2>&1 && break; sleep 0.2; done
    mariadb -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
                ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
                CREATE DATABASE IF NOT EXISTS slurm_acct_db;
                GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';" \
        || die "could not create the accounting database user"
    log "mariadbd up"
fi

if ! alive $STATE/slurmdbd.pid; then
    rm -f /run/slurm/slurmdbd.pid
    /usr/sbin/slurmdbd 2>>$LOGS/slurmdbd.err || die "slurmdbd failed: $(tail -3 /var/log/slurm/slurmdbd.log)"
    wait_pidfile /run/slurm/slurmdbd.pid $STATE/slurmdbd.pid slurmdbd
    for _ in $(seq 100); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.2; done
    log "slurmdbd up"
fi
# The cluster must exist in the accounting database before slurmctld registers with it.
if ! sacctmgr -n -P list cluster format=cluster 2>/dev/null | grep -qx $CLUSTER; then
    sacctmgr -i add cluster $CLUSTER >/dev/null
fi

if ! alive $STATE/slurmctld.pid; then
    rm -f /run/slurm/slurmctld.pid
    # -c: a cold start forgets the jobs of a previous cluster (their processes are gone, and their
    # results dirs with them): a test cluster starts empty.
    /usr/sbin/slurmctld -c 2>>$LOGS/slurmctld.err || die "slurmctld failed: $(tail -3 /var/log/slurm/slurmctld.log)"
    wait_pidfile /run/slurm/slurmctld.pid $STATE/slurmctld.pid slurmctld
    log "slurmctld up"
fi

if ! alive $STATE/slurmd.pid; then
    rm -f /run/slurm/slurmd.pid
    /usr/sbin/slurmd -N "$HOST" 2>>$LOGS/slurmd.err || die "slurmd failed: $(tail -3 /var/log/slurm/slurmd.log)"
    wait_pidfile /run/slurm/slurmd.pid $STATE/slurmd.pid slurmd
    log "slurmd up"
fi

# ---------------------------------------------------------------------------------- ready?
for i in $(seq 300); do
    st=$(node_state)
    case "$st" in
        idle|mix|alloc) log "node $HOST $st, partition debug, $CPUS CPUs; up in $(( $(date +%s) - t0 )) s"; exit 0 ;;
        down*|drain*|fail*|unk*|"") [ $((i % 10)) = 0 ] && scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    sleep 0.2
done
die "node $HOST is '$(node_state)' after 60 s; see /var/log/slurm/slurmd.log and slurmctld.log"
