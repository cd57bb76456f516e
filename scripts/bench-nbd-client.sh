#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# The NBD client's speed (issue 22): convert from an nbdkit file export on
# a unix socket to a new local raw file and to a new local LUKS image,
# with qemu-img-lite and with qemu-img (also with -W -m 16), against
# nbdcopy copying the same plain data (--flush: a convert syncs its
# target too), on the disk and on tmpfs.
#
#   scripts/bench-nbd-client.sh [BUILD] [SIZE_MIB] [RUNS]
#
# The issue's targets: our convert >= 3x qemu-img convert, and within
# 1.25x of nbdcopy. Each figure is the minimum of RUNS runs, each after a
# sync (bench-lib.sh): the noise of a shared machine only adds time.
# The source file is in the page cache: the NBD path is timed, not the
# source disk.
#
# Environment:
#   BENCH_DISK_DIR   where the disk runs happen (default /var/tmp)
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

bench_dir() {
    local dir sock uri t_copy t_raw t_luks t_qraw='' t_qluks='' t_qrawW=''
    local t_qluksW=''

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

    t_copy=$(best copy.raw nbdcopy --flush "$uri" copy.raw)
    t_raw=$(best out.raw "$QIL" convert "${QIL_ARGS[@]}" -f raw -O raw \
            "$uri" out.raw)
    cmp src.raw out.raw
    t_luks=$(best out.luks "$QIL" convert "${QIL_ARGS[@]}" \
             --object "$SECRET" -f raw -O luks -o "$OPTS" "$uri" out.luks)
    if [ -n "$QEMU_IMG" ]; then
        t_qraw=$(best q.raw "$QEMU_IMG" convert -f raw -O raw "$uri" q.raw)
        t_qrawW=$(best q.raw "$QEMU_IMG" convert -W -m 16 -f raw -O raw \
                  "$uri" q.raw)
        t_qluks=$(best q.luks "$QEMU_IMG" convert --object "$SECRET" \
                  -f raw -O luks -o "$OPTS" "$uri" q.luks)
        t_qluksW=$(best q.luks "$QEMU_IMG" convert -W -m 16 \
                   --object "$SECRET" -f raw -O luks -o "$OPTS" "$uri" \
                   q.luks)
    fi
    kill "$SERVER"
    wait "$SERVER" || true
    SERVER=
    cd /

    echo "== $1 ($(df --output=fstype "$1" | tail -n 1)), ${SIZE_MIB} MiB," \
         "minimum of $RUNS"
    printf '%-34s %8s s\n' "nbdcopy --flush (plain data)" "$t_copy"
    printf '%-34s %8s s   %sx nbdcopy\n' "qemu-img-lite convert -O raw" \
           "$t_raw" "$(ratio "$t_raw" "$t_copy")"
    printf '%-34s %8s s   %sx nbdcopy\n' "qemu-img-lite convert -O luks" \
           "$t_luks" "$(ratio "$t_luks" "$t_copy")"
    if [ -n "$QEMU_IMG" ]; then
        printf '%-34s %8s s   ours %sx faster\n' "qemu-img convert -O raw" \
               "$t_qraw" "$(ratio "$t_qraw" "$t_raw")"
        printf '%-34s %8s s   ours %sx faster\n' \
               "qemu-img convert -W -m 16 -O raw" "$t_qrawW" \
               "$(ratio "$t_qrawW" "$t_raw")"
        printf '%-34s %8s s   ours %sx faster\n' "qemu-img convert -O luks" \
               "$t_qluks" "$(ratio "$t_qluks" "$t_luks")"
        printf '%-34s %8s s   ours %sx faster\n' \
               "qemu-img convert -W -m 16 -O luks" "$t_qluksW" \
               "$(ratio "$t_qluksW" "$t_luks")"
    fi
}

bench_dir "${BENCH_DISK_DIR:-/var/tmp}"
TMPFS=${BENCH_TMPFS_DIR:-}
if [ -z "$TMPFS" ] && [ "$(df --output=fstype /dev/shm | tail -n 1)" = tmpfs ]
then
    TMPFS=/dev/shm
fi
if [ -n "$TMPFS" ] && [ "$TMPFS" != none ]; then
    bench_dir "$TMPFS"
fi
