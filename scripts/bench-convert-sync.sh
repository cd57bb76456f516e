#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# What it costs that a new convert target is synced before it gets its
# name (issue 15 item 3, block/file-create.c): convert raw -> raw and
# raw -> luks of a file in the page cache, with each BUILD given, against
# dd bs=256K without and with conv=fsync, on the disk and on tmpfs.
#
#   scripts/bench-convert-sync.sh SIZE_MIB RUNS BUILD...
#
# Two times per command, the minimum of RUNS each (see bench-lib.sh):
# the command alone, and the command followed by `sync FILE` (the time
# until the data is on disk: what a build that does not sync leaves to
# the page cache shows up there). Compare builds from before and after
# the change, or with another FILE_CREATE_WRITEBACK_STEP
# (meson setup -Dc_args=-DFILE_CREATE_WRITEBACK_STEP=...).
#
# Environment: BENCH_DISK_DIR (default /var/tmp), BENCH_TMPFS_DIR
# (default /dev/shm; "none" skips it). Needs 3 x SIZE free in each.
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"

SIZE_MIB=${1:?SIZE_MIB}
RUNS=${2:?RUNS}
shift 2
[ $# -gt 0 ] || { echo "usage: $0 SIZE_MIB RUNS BUILD..." >&2; exit 2; }
SECRET="secret,id=s0,data=benchmark passphrase"
OPTS="key-secret=s0,iter-time=10"

BUILDS=("$@")
QILS=()
for build in "$@"; do
    QILS+=("$(realpath "$build/qemu-img-lite/qemu-img-lite")")
done

SCRATCH=()
trap 'rm -rf "${SCRATCH[@]+"${SCRATCH[@]}"}"' EXIT

# line NAME T T_SYNC DD: one row, both times as multiples of plain dd.
line() {
    awk -v n="$1" -v t="$2" -v s="$3" -v d="$4" 'BEGIN {
        printf "%-34s %7.3f s %5.2fx dd   + sync %7.3f s %5.2fx dd\n",
               n, t, t / d, s, s / d }'
}

bench_dir() {
    local dir t_dd t_dds t_ddf t_ddfs i build qil t ts

    dir=$(mktemp -d "$1/qil-bench.XXXXXX")
    SCRATCH+=("$dir")
    cd "$dir"
    head -c "${SIZE_MIB}M" /dev/urandom > src.raw
    cat src.raw > /dev/null
    echo "== $1 ($(df --output=fstype "$1" | tail -n 1)), ${SIZE_MIB} MiB," \
         "minimum of $RUNS"
    t_dd=$(best out dd if=src.raw of=out bs=256K)
    t_dds=$(best out sh -c 'dd if=src.raw of=out bs=256K && sync out')
    t_ddf=$(best out dd if=src.raw of=out bs=256K conv=fsync)
    t_ddfs=$(best out sh -c 'dd if=src.raw of=out bs=256K conv=fsync &&
                             sync out')
    line "dd bs=256K" "$t_dd" "$t_dds" "$t_dd"
    line "dd bs=256K conv=fsync" "$t_ddf" "$t_ddfs" "$t_dd"
    for i in "${!BUILDS[@]}"; do
        build=${BUILDS[$i]}
        qil=${QILS[$i]}
        t=$(best out "$qil" convert -f raw -O raw src.raw out)
        ts=$(best out sh -c '"$0" convert -f raw -O raw src.raw out &&
                             sync out' "$qil")
        line "$build: -> raw" "$t" "$ts" "$t_dd"
        t=$(best out "$qil" convert --object "$SECRET" -f raw -O luks \
            -o "$OPTS" src.raw out)
        ts=$(best out sh -c '"$0" convert --object "$1" -f raw -O luks \
                             -o "$2" src.raw out && sync out' \
             "$qil" "$SECRET" "$OPTS")
        line "$build: -> luks" "$t" "$ts" "$t_dd"
    done
    cd - > /dev/null
    rm -rf "$dir"
}

echo "load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
bench_dir "${BENCH_DISK_DIR:-/var/tmp}"
if [ "${BENCH_TMPFS_DIR:-/dev/shm}" != none ]; then
    bench_dir "${BENCH_TMPFS_DIR:-/dev/shm}"
fi
