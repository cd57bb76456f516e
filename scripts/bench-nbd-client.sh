#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The NBD client's speed (issue 22): convert from an nbdkit file export on
# a unix socket to a new local raw file and to a new local LUKS image,
# with qemu-img-lite and with qemu-img (also with -W -m 16), against
# nbdcopy copying the same plain data, on the disk and on tmpfs.
#
# Two sets: synced (our convert's default, nbdcopy --flush, qemu-img -t
# writeback: each makes its target durable) and unsynced (ours -t unsafe,
# nbdcopy, qemu-img's default: qemu-img convert's cache mode is "unsafe",
# it never syncs its target).
#
#   scripts/bench-nbd-client.sh [BUILD] [SIZE_MIB] [RUNS]
#
# The issue's targets: our convert >= 3x qemu-img convert, and within
# 1.25x of nbdcopy. Each row's ratio is its time over the reference's:
# "1.10x nbdcopy" takes 1.1 times nbdcopy's time, "4.00x ours" 4 times
# ours. Each figure is the minimum of RUNS runs, each after a
# sync (bench-lib.sh): the noise of a shared machine only adds time.
# The source file is in the page cache: the NBD path is timed, not the
# source disk.
#
# Environment:
#   BENCH_DISK_DIR   where the disk runs happen (default /tmp)
#   BENCH_TMPFS_DIR  where the tmpfs runs happen (default /dev/shm if it
#                    is tmpfs; "none" skips them)
#   BENCH_QEMU_IMG=0 skip qemu-img
#   BENCH_QIL_ARGS   extra convert options for qemu-img-lite (e.g. "-m 4")
set -euo pipefail
# best OUT CMD...
source "$(dirname "$0")/bench-lib.sh"

BUILD=${1:-build}
SIZE_MIB=${2:-1024}
RUNS=${3:-5}
QIL=$(realpath "$BUILD/qemu-img-lite/qemu-img-lite")
QEMU_IMG=$(command -v qemu-img || true)
[ "${BENCH_QEMU_IMG:-1}" = 0 ] && QEMU_IMG=
read -r -a QIL_ARGS <<< "${BENCH_QIL_ARGS:-}"
for t in nbdkit nbdcopy; do
    command -v "$t" >/dev/null || { echo "$t is not installed" >&2; exit 1; }
done

SECRET="secret,id=s0,data=benchmark passphrase"
OPTS="key-secret=s0,iter-time=10"

SCRATCH=()
SERVER=
cleanup() {
    [ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER" || true
    rm -rf "${SCRATCH[@]+"${SCRATCH[@]}"}"
}
trap cleanup EXIT

# ratio A B: "A/B" to two places
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a == "failed" || b == "failed" ||
                                         b == 0) print "-";
                                     else printf "%.2f", a / b }'
}

# line NAME TIME REF REFNAME: a row, with TIME/REF as "x REFNAME"
line() {
    printf '%-40s %8s s   %sx %s\n' "$1" "$2" "$(ratio "$2" "$3")" "$4"
}

bench_dir() {
    local dir sock uri luks=(--object "$SECRET" -O luks -o "$OPTS")
    local c cu raw rawu lk lku qraw qrawW qluks qluksW qrawS qluksS

    dir=$(mktemp -d "$1/qil-nbd-bench.XXXXXX")
    SCRATCH+=("$dir")
    cd "$dir"
    head -c "${SIZE_MIB}M" /dev/urandom > src.raw
    cat src.raw > /dev/null                 # into the page cache
    sock=$dir/nbd.sock
    nbdkit -f -U "$sock" file src.raw &
    SERVER=$!
    while [ ! -S "$sock" ]; do sleep 0.05; done
    uri="nbd+unix:///?socket=$sock"

    c=$(best copy.raw nbdcopy --flush "$uri" copy.raw)
    cu=$(best copy.raw nbdcopy "$uri" copy.raw)
    raw=$(best out.raw "$QIL" convert "${QIL_ARGS[@]}" -f raw -O raw \
          "$uri" out.raw)
    cmp src.raw out.raw
    rawu=$(best out.raw "$QIL" convert "${QIL_ARGS[@]}" -t unsafe -f raw \
           -O raw "$uri" out.raw)
    lk=$(best out.luks "$QIL" convert "${QIL_ARGS[@]}" -f raw "${luks[@]}" \
         "$uri" out.luks)
    lku=$(best out.luks "$QIL" convert "${QIL_ARGS[@]}" -t unsafe -f raw \
          "${luks[@]}" "$uri" out.luks)
    if [ -n "$QEMU_IMG" ]; then
        qraw=$(best q.raw "$QEMU_IMG" convert -f raw -O raw "$uri" q.raw)
        qrawW=$(best q.raw "$QEMU_IMG" convert -W -m 16 -f raw -O raw \
                "$uri" q.raw)
        qrawS=$(best q.raw "$QEMU_IMG" convert -t writeback -f raw -O raw \
                "$uri" q.raw)
        qluks=$(best q.luks "$QEMU_IMG" convert -f raw "${luks[@]}" "$uri" \
                q.luks)
        qluksW=$(best q.luks "$QEMU_IMG" convert -W -m 16 -f raw \
                 "${luks[@]}" "$uri" q.luks)
        qluksS=$(best q.luks "$QEMU_IMG" convert -t writeback -f raw \
                 "${luks[@]}" "$uri" q.luks)
    fi
    kill "$SERVER"
    wait "$SERVER" || true
    SERVER=
    cd /

    echo "== $1 ($(df --output=fstype "$1" | tail -n 1)), ${SIZE_MIB} MiB," \
         "minimum of $RUNS"
    echo "-- synced targets"
    printf '%-40s %8s s\n' "nbdcopy --flush (plain data)" "$c"
    line "qemu-img-lite convert -O raw" "$raw" "$c" nbdcopy
    line "qemu-img-lite convert -O luks" "$lk" "$c" nbdcopy
    if [ -n "$QEMU_IMG" ]; then
        line "qemu-img convert -t writeback -O raw" "$qrawS" "$raw" ours
        line "qemu-img convert -t writeback -O luks" "$qluksS" "$lk" ours
    fi
    echo "-- unsynced targets"
    printf '%-40s %8s s\n' "nbdcopy (plain data)" "$cu"
    line "qemu-img-lite convert -t unsafe -O raw" "$rawu" "$cu" nbdcopy
    line "qemu-img-lite convert -t unsafe -O luks" "$lku" "$cu" nbdcopy
    if [ -n "$QEMU_IMG" ]; then
        line "qemu-img convert -O raw" "$qraw" "$rawu" ours
        line "qemu-img convert -W -m 16 -O raw" "$qrawW" "$rawu" ours
        line "qemu-img convert -O luks" "$qluks" "$lku" ours
        line "qemu-img convert -W -m 16 -O luks" "$qluksW" "$lku" ours
    fi
}

bench_dir "${BENCH_DISK_DIR:-/tmp}"
TMPFS=${BENCH_TMPFS_DIR:-}
if [ -z "$TMPFS" ] && [ "$(df --output=fstype /dev/shm | tail -n 1)" = tmpfs ]
then
    TMPFS=/dev/shm
fi
if [ -n "$TMPFS" ] && [ "$TMPFS" != none ]; then
    bench_dir "$TMPFS"
fi
