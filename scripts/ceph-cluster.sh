#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# A throwaway single-node Ceph cluster on loopback, for the RBD tests and
# benchmarks (docs/rbd.md), from Debian 12's packages (ceph-mon, ceph-osd,
# ceph-common: scripts/install-deps.sh).
#
#   scripts/ceph-cluster.sh start DIR    # prints DIR/ceph.conf when healthy
#   scripts/ceph-cluster.sh stop DIR     # stops the daemons; DIR stays
#
# Everything lives in DIR (an empty or missing directory): ceph.conf, the
# keyrings, the monitor's store, the OSD's data, logs, pid files and admin
# sockets. Nothing outside it is read or written, so several clusters may
# run side by side (each mon on a port of its own). Clients use
#   -c DIR/ceph.conf  (rbd, ceph)   or   :conf=DIR/ceph.conf  (rbd: names)
# with the client.admin key DIR/keyring, which the conf names.
#
# The cluster: one mon (mon.a) on 127.0.0.1 at a free high port, msgr2
# only; one bluestore OSD (osd.0) in a sparse file; no mgr (ceph-mgr is
# slow to install and nothing here needs it); pool "rbd" of size 1, with
# the rbd application (rbd pool init).
set -euo pipefail

# How long start waits for HEALTH_OK (measured: 16-19 s on 2 vCPUs).
HEALTH_TIMEOUT=${CEPH_CLUSTER_TIMEOUT:-120}
# The OSD's sparse file: only what is written takes space.
OSD_SIZE=${CEPH_CLUSTER_OSD_SIZE:-$((20 << 30))}

die() {
    echo "ceph-cluster: $*" >&2
    exit 1
}

usage() {
    echo "usage: $0 start DIR | stop DIR" >&2
    exit 2
}

need() {
    for p in "$@"; do
        command -v "$p" >/dev/null 2>&1 ||
            die "$p not found (scripts/install-deps.sh installs ceph-mon," \
                "ceph-osd and ceph-common)"
    done
}

free_port() {
    # The kernel picks a free port; a race with another binder is possible
    # but the mon then fails to start, which start reports.
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

write_conf() {
    local dir=$1 fsid=$2 port=$3

    cat >"$dir/ceph.conf" <<EOF
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$port]
mon initial members = a
ms bind msgr1 = false
public network = 127.0.0.0/8
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $dir/keyring
# every path in the cluster's directory
run dir = $dir/run
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
log file = $dir/log/\$name.log
# one OSD: pools of size 1, placement over OSDs (not hosts)
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
# no mgr: without this the mon warns "no active mgr" after 120 s
mon mgr mkfs grace = 86400
# a shared machine's disk may be fuller than the 30 % the mon wants free
mon data avail warn = 2
mon data avail crit = 1
# fresh clients only (no HEALTH_WARN about global_id reclaim)
auth allow insecure global id reclaim = false
mon warn on insecure global id reclaim allowed = false
# a client that cannot reach the mon gives up (the default waits 300 s)
client mount timeout = 30

[mon.a]
mon data = $dir/mon/a

[osd.0]
osd data = $dir/osd/0
keyring = $dir/osd/0/keyring
osd objectstore = bluestore
bluestore block create = true
bluestore block size = $OSD_SIZE
bluestore fsck on mkfs = false
# small caches: the whole cluster stays near 100 MB
bluestore cache autotune = false
bluestore cache size = 64M
EOF
}

# Run a daemon detached from our stdout and stderr: a caller capturing
# them ($(...)) would otherwise wait for the daemon to exit.
spawn() {
    local log=$1
    shift
    "$@" </dev/null >>"$log" 2>&1
}

wait_health() {
    local dir=$1 deadline=$((SECONDS + HEALTH_TIMEOUT)) h=""

    while [ $SECONDS -lt $deadline ]; do
        h=$(timeout 10 ceph -c "$dir/ceph.conf" health 2>/dev/null || true)
        [ "$h" = HEALTH_OK ] && return 0
        sleep 1
    done
    die "no HEALTH_OK after ${HEALTH_TIMEOUT}s (last: ${h:-no answer});" \
        "logs in $dir/log"
}

start() {
    local dir=$1 fsid port osd_uuid osd_secret id

    need ceph-mon ceph-osd ceph ceph-authtool monmaptool uuidgen rbd python3
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    [ -e "$dir/ceph.conf" ] && die "$dir holds a cluster already"
    mkdir -p "$dir/run" "$dir/log" "$dir/mon/a" "$dir/osd/0"
    fsid=$(uuidgen)
    port=$(free_port)
    write_conf "$dir" "$fsid" "$port"
    local c=(-c "$dir/ceph.conf")

    # Keys: the mon's, client.admin's (imported into the mon's keyring, so
    # the new monitor knows it), the OSD's.
    ceph-authtool --create-keyring "$dir/mon.keyring" --gen-key -n mon. \
        --cap mon 'allow *' >/dev/null
    ceph-authtool --create-keyring "$dir/keyring" --gen-key \
        -n client.admin --cap mon 'allow *' --cap osd 'allow *' \
        --cap mgr 'allow *' >/dev/null
    ceph-authtool "$dir/mon.keyring" --import-keyring "$dir/keyring" \
        >/dev/null
    monmaptool --create --addv a "[v2:127.0.0.1:$port]" --fsid "$fsid" \
        "$dir/monmap" >/dev/null
    ceph-mon "${c[@]}" --mkfs -i a --monmap "$dir/monmap" \
        --keyring "$dir/mon.keyring" >/dev/null 2>&1 ||
        die "ceph-mon --mkfs failed (see $dir/log/mon.a.log)"
    spawn "$dir/log/mon.a.out" ceph-mon "${c[@]}" -i a ||
        die "ceph-mon did not start (see $dir/log)"

    # The OSD, as Ceph's manual deployment does it ("osd new" with the
    # key, then mkfs): its id is 0, the cluster's first.
    osd_uuid=$(uuidgen)
    osd_secret=$(ceph-authtool --gen-print-key)
    id=$(echo "{\"cephx_secret\": \"$osd_secret\"}" |
         timeout 60 ceph "${c[@]}" osd new "$osd_uuid" -i -) ||
        die "ceph osd new failed (is the mon up? see $dir/log)"
    [ "$id" = 0 ] || die "the new OSD got id '$id', not 0"
    ceph-authtool --create-keyring "$dir/osd/0/keyring" --name osd.0 \
        --add-key "$osd_secret" >/dev/null
    ceph-osd "${c[@]}" -i 0 --mkfs --osd-uuid "$osd_uuid" \
        >>"$dir/log/osd.0.out" 2>&1 ||
        die "ceph-osd --mkfs failed (see $dir/log/osd.0.log)"
    spawn "$dir/log/osd.0.out" ceph-osd "${c[@]}" -i 0 ||
        die "ceph-osd did not start (see $dir/log)"

    timeout 60 ceph "${c[@]}" osd pool create rbd >/dev/null 2>&1 ||
        die "could not create the pool rbd"
    timeout 60 rbd "${c[@]}" pool init rbd ||
        die "rbd pool init failed"
    wait_health "$dir"
    echo "$dir/ceph.conf"
}

# Stop the daemons by their pid files: TERM, then KILL after 20 s.
stop() {
    local dir=$1 pids=() pid f

    [ -d "$dir/run" ] || die "$dir holds no cluster"
    for f in "$dir"/run/*.pid; do
        [ -e "$f" ] || continue
        pid=$(cat "$f")
        # Only a ceph daemon of this cluster: a stale pid may be reused.
        if grep -qa "$dir/ceph.conf" "/proc/$pid/cmdline" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null && pids+=("$pid")
        fi
        rm -f "$f"
    done
    for _ in $(seq 200); do
        local alive=()
        for pid in "${pids[@]}"; do
            kill -0 "$pid" 2>/dev/null && alive+=("$pid")
        done
        pids=("${alive[@]}")
        [ ${#pids[@]} -eq 0 ] && return 0
        sleep 0.1
    done
    kill -KILL "${pids[@]}" 2>/dev/null || true
}

[ $# -eq 2 ] || usage
case "$1" in
start) start "$2" ;;
stop) stop "$2" ;;
*) usage ;;
esac
