#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Copying a raw image into RBD (docs/rbd.md): our convert, unencrypted and
# into LUKS2, against `rbd import` and `qemu-img convert -W -m 16` (raw,
# and LUKS2 through librbd's encryption), on one throwaway cluster
# (scripts/ceph-cluster.sh), each the minimum of RUNS.
#
#   scripts/bench-rbd.sh [BUILD_DIR] [SIZE_MIB] [RUNS]
#
# Defaults: build, 1024 MiB, 3 runs. CEPH_CONF=PATH uses a running
# cluster instead of starting one. The source is random data on the disk
# of $TMPDIR, read from the page cache after the first run.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
size_mib=${2:-1024}
runs=${3:-3}
Q=$build/qemu-img-lite/qemu-img-lite
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-rbd.XXXXXX")
cluster=""

cleanup() {
    if [ -n "$cluster" ]; then
        "$here/ceph-cluster.sh" stop "$cluster" || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

[ -x "$Q" ] || { echo "bench-rbd: no $Q (build first)" >&2; exit 1; }
if [ -n "${CEPH_CONF:-}" ]; then
    conf=$CEPH_CONF
else
    cluster=$work/cluster
    conf=$("$here/ceph-cluster.sh" start "$cluster")
fi

src=$work/src.raw
head -c $((size_mib << 20)) /dev/urandom >"$src"
printf 'bench pass' >"$work/pass.txt"
secret="secret,id=s0,file=$work/pass.txt"
n=0

# Seconds of one run of "$@" (a new image name in $img each time).
timed() {
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >/dev/null
    t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
}

rm_image() {
    rbd -c "$conf" rm --no-progress "rbd/$1" >/dev/null 2>&1 || true
}

ours_raw() {
    "$Q" convert -f raw -O raw "$src" "rbd:rbd/$1:conf=$conf"
}

ours_luks2() {
    "$Q" convert --object "$secret" -f raw -O luks \
        -o key-secret=s0,luks-version=2,iter-time=10 "$src" \
        "rbd:rbd/$1:conf=$conf"
}

rbd_import() {
    rbd -c "$conf" import --no-progress "$src" "rbd/$1"
}

qemu_raw() {
    qemu-img convert -W -m 16 -f raw -O raw "$src" "rbd:rbd/$1:conf=$conf"
}

# librbd's LUKS2, formatted before the clock starts (its argon2id
# calibration takes seconds): qemu-img writes through encrypt.format.
qemu_luks2_prepare() {
    rbd -c "$conf" create --size $((size_mib + 16))M "rbd/$1"
    rbd -c "$conf" encryption format "rbd/$1" luks2 "$work/pass.txt"
}

qemu_luks2() {
    qemu-img convert -n -W -m 16 --object "$secret" -f raw "$src" \
        --target-image-opts "driver=rbd,pool=rbd,image=$1,conf=$conf,encrypt.format=luks2,encrypt.key-secret=s0"
}

# The fixed costs inside the two LUKS2 times: our create with its KDF
# (argon2id, iter-time=10) on an empty image, and librbd's unlock
# (argon2id as rbd encryption format calibrated it) on opening one.
ours_luks2_fixed() {
    "$Q" create --object "$secret" -f luks \
        -o key-secret=s0,luks-version=2,iter-time=10 "rbd:rbd/$1:conf=$conf" 1M
}

qemu_luks2_fixed() {
    qemu-img info --object "$secret" --image-opts \
        "driver=rbd,pool=rbd,image=$1,conf=$conf,encrypt.format=luks2,encrypt.key-secret=s0"
}

declare -A best
cases=(ours_raw rbd_import qemu_raw ours_luks2 qemu_luks2 ours_luks2_fixed
       qemu_luks2_fixed)
for ((r = 0; r < runs; r++)); do
    for c in "${cases[@]}"; do
        n=$((n + 1))
        img="bench-$c-$n"
        if [ "$c" = qemu_luks2 ] || [ "$c" = qemu_luks2_fixed ]; then
            qemu_luks2_prepare "$img"
        fi
        t=$(timed "$c" "$img")
        rm_image "$img"
        if [ -z "${best[$c]:-}" ] || [ "$(echo "$t < ${best[$c]}" | bc)" = 1 ]; then
            best[$c]=$t
        fi
        printf '%-12s run %d: %.2f s\n' "$c" "$((r + 1))" "$t" >&2
    done
done

ratio() {
    echo "scale=2; $1 / $2" | bc
}

echo "raw -> RBD, ${size_mib} MiB, minimum of $runs runs:"
printf '  %-44s %7.2f s\n' "qemu-img-lite convert (raw)" "${best[ours_raw]}"
printf '  %-44s %7.2f s  (ours %sx of it)\n' "rbd import" \
    "${best[rbd_import]}" "$(ratio "${best[ours_raw]}" "${best[rbd_import]}")"
printf '  %-44s %7.2f s  (ours %sx of it)\n' "qemu-img convert -W -m 16 (raw)" \
    "${best[qemu_raw]}" "$(ratio "${best[ours_raw]}" "${best[qemu_raw]}")"
printf '  %-44s %7.2f s  (%sx our raw)\n' "qemu-img-lite convert -O luks (LUKS2)" \
    "${best[ours_luks2]}" "$(ratio "${best[ours_luks2]}" "${best[ours_raw]}")"
printf '  %-44s %7.2f s  (%sx ours)\n' \
    "qemu-img convert -W -m 16 (encrypt.format=luks2)" \
    "${best[qemu_luks2]}" "$(ratio "${best[qemu_luks2]}" "${best[ours_luks2]}")"
echo "fixed costs inside the LUKS2 times:"
printf '  %-44s %7.2f s\n' "our create of an empty LUKS2 image (KDF)" \
    "${best[ours_luks2_fixed]}"
printf '  %-44s %7.2f s\n' "qemu-img info through librbd's unlock" \
    "${best[qemu_luks2_fixed]}"
