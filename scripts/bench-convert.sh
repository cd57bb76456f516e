#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Time converting a raw file in the page cache to LUKS (aes-256-xts-plain64)
# and back, with qemu-img-lite and with qemu-img, against `dd bs=256K` of
# the same file, on the disk and on tmpfs; then a 2 TiB sparse raw file.
#
#   scripts/bench-convert.sh [BUILD] [SIZE_MIB] [RUNS]
#
# The yardstick is dd, not cp: coreutils cp uses copy_file_range, which
# never brings the data to user space, while a convert must (to encrypt).
# Each command runs RUNS times with a sync before each (so one run's
# writeback does not land on the next) and the minimum counts: the noise
# here only ever adds time (writeback, first touch of fresh memory, other
# jobs on the machine).
#
# Environment:
#   BENCH_DISK_DIR   where the disk runs happen (default /var/tmp)
#   BENCH_TMPFS_DIR  where the tmpfs runs happen (default: /dev/shm or /tmp,
#                    whichever is tmpfs; "none" skips them)
#   BENCH_QEMU_IMG=0 skip qemu-img (its runs take ten times ours)
#   BENCH_SPARSE=0   skip the sparse file
#   BENCH_DIRECT=0   skip the O_DIRECT runs (-t none -T none against
#                    dd iflag=direct oflag=direct)
#
# Needs 3 x SIZE free in each directory (and as much RAM for the page
# cache). PBKDF2 is kept at iter-time=10 for both tools so the data path is
# timed, not the key slot.
set -euo pipefail
# best OUT CMD... and row NAME TIME DD [QEMU_IMG_TIME]
source "$(dirname "$0")/bench-lib.sh"

BUILD=${1:-build}
SIZE_MIB=${2:-1024}
RUNS=${3:-3}
QIL=$(realpath "$BUILD/qemu-img-lite/qemu-img-lite")
QEMU_IMG=$(command -v qemu-img || true)
[ "${BENCH_QEMU_IMG:-1}" = 0 ] && QEMU_IMG=

SECRET="secret,id=s0,data=benchmark passphrase"
OPTS="key-secret=s0,iter-time=10"
LUKS_OPEN="driver=luks,key-secret=s0,file.filename="

fstype() {
    df --output=fstype "$1" | tail -n 1
}

tmpfs_dir() {
    local d
    for d in /dev/shm /tmp; do
        if [ -d "$d" ] && [ -w "$d" ] && [ "$(fstype "$d")" = tmpfs ]; then
            echo "$d"
            return
        fi
    done
}

# Scratch directories, removed however the script ends.
SCRATCH=()
trap 'rm -rf "${SCRATCH[@]+"${SCRATCH[@]}"}"' EXIT

# bench_dir DIR: the dense 1 GiB runs in a scratch directory under DIR.
bench_dir() {
    local dir t_dd t_ddf t_encu t_decu t_enc t_encn t_dec t_q_enc='' t_q_dec=''
    local t_ddd='' t_encd='' t_decd=''

    dir=$(mktemp -d "$1/qil-bench.XXXXXX")
    SCRATCH+=("$dir")
    cd "$dir"
    head -c "${SIZE_MIB}M" /dev/urandom > src.raw
    cat src.raw > /dev/null                 # into the page cache

    t_dd=$(best dd.raw dd if=src.raw of=dd.raw bs=256K)
    # dd that makes its copy durable too, as a convert does by default
    t_ddf=$(best dd.raw dd if=src.raw of=dd.raw bs=256K conv=fsync)
    rm -f dd.raw
    # qemu-img-lite (the last run's output is kept: decrypt it, check it)
    t_enc=$(best qil.luks "$QIL" convert --object "$SECRET" -f raw -O luks \
            -o "$OPTS" src.raw qil.luks)
    t_dec=$(best qil.raw "$QIL" convert --object "$SECRET" --image-opts \
            "${LUKS_OPEN}qil.luks" -O raw qil.raw)
    cmp src.raw qil.raw
    rm -f qil.raw
    # -t unsafe by name: no sync of the new target, as dd without fsync
    t_encu=$(best qil.luks "$QIL" convert -t unsafe --object "$SECRET" \
             -f raw -O luks -o "$OPTS" src.raw qil.luks)
    t_decu=$(best qil.raw "$QIL" convert -t unsafe --object "$SECRET" \
             --image-opts "${LUKS_OPEN}qil.luks" -O raw qil.raw)
    cmp src.raw qil.raw
    rm -f qil.raw
    # The data path alone: into the existing image (-n), no LUKS header
    t_encn=$(best none "$QIL" convert -n --object "$SECRET" -f raw \
             --target-image-opts src.raw "${LUKS_OPEN}qil.luks")
    rm -f qil.luks
    # Around the page cache (O_DIRECT), where the file system takes it
    if [ "${BENCH_DIRECT:-1}" != 0 ] &&
       dd if=src.raw of=probe.raw bs=4K count=1 iflag=direct oflag=direct \
           status=none 2>/dev/null; then
        rm -f probe.raw
        t_ddd=$(best dd.raw dd if=src.raw of=dd.raw bs=256K iflag=direct \
                oflag=direct)
        rm -f dd.raw
        t_encd=$(best qil.luks "$QIL" convert -t none -T none \
                 --object "$SECRET" -f raw -O luks -o "$OPTS" src.raw \
                 qil.luks)
        t_decd=$(best qil.raw "$QIL" convert -t none -T none \
                 --object "$SECRET" --image-opts "${LUKS_OPEN}qil.luks" \
                 -O raw qil.raw)
        cmp src.raw qil.raw
        rm -f qil.raw qil.luks
    fi

    if [ -n "$QEMU_IMG" ]; then
        t_q_enc=$(best q.luks "$QEMU_IMG" convert --object "$SECRET" \
                  -f raw -O luks -o "$OPTS" src.raw q.luks)
        # its last attempt may have failed (calibration): make sure of it
        until [ -s q.luks ] && "$QEMU_IMG" info q.luks >/dev/null 2>&1; do
            rm -f q.luks
            "$QEMU_IMG" convert --object "$SECRET" -f raw -O luks \
                -o "$OPTS" src.raw q.luks 2>/dev/null || true
        done
        t_q_dec=$(best q.raw "$QEMU_IMG" convert --object "$SECRET" \
                  --image-opts "${LUKS_OPEN}q.luks" -O raw q.raw)
        cmp src.raw q.raw
    fi

    echo "== $1 ($(fstype "$1")), ${SIZE_MIB} MiB, minimum of $RUNS"
    row "dd bs=256K" "$t_dd" "$t_dd"
    row "dd bs=256K conv=fsync" "$t_ddf" "$t_dd"
    row "raw -> luks" "$t_enc" "$t_dd" "$t_q_enc"
    row "raw -> luks -t unsafe" "$t_encu" "$t_dd" "$t_q_enc"
    row "raw -> luks (-n)" "$t_encn" "$t_dd"
    row "luks -> raw" "$t_dec" "$t_dd" "$t_q_dec"
    row "luks -> raw -t unsafe" "$t_decu" "$t_dd" "$t_q_dec"
    if [ -n "$t_ddd" ]; then
        echo "-- O_DIRECT (convert -t none -T none; dd iflag/oflag=direct)"
        row "dd bs=256K direct" "$t_ddd" "$t_ddd"
        row "raw -> luks" "$t_encd" "$t_ddd"
        row "luks -> raw" "$t_decd" "$t_ddd"
    fi
    cd /
    rm -rf "$dir"       # give tmpfs its memory back now
}

# bench_sparse DIR: a 2 TiB sparse raw file with a few data extents,
# converted to raw and compared with the copy.
bench_sparse() {
    local dir t_conv t_cmp t_q_conv='' t_q_cmp=''

    dir=$(mktemp -d "$1/qil-bench.XXXXXX")
    SCRATCH+=("$dir")
    cd "$dir"
    truncate -s 2T sparse.raw
    for mib in 0 1000 1000000 2097151; do
        head -c 1M /dev/urandom | dd of=sparse.raw bs=1M seek="$mib" \
            conv=notrunc status=none
    done
    t_conv=$(best out.raw "$QIL" convert -f raw -O raw sparse.raw out.raw)
    t_cmp=$(best none "$QIL" compare -f raw -F raw sparse.raw out.raw)
    if [ -n "$QEMU_IMG" ]; then
        t_q_conv=$(best q.raw "$QEMU_IMG" convert -f raw -O raw sparse.raw \
                   q.raw)
        t_q_cmp=$(best none "$QEMU_IMG" compare -f raw -F raw sparse.raw \
                  q.raw)
    fi
    echo "== 2 TiB sparse raw (4 MiB of data) in $1 ($(fstype "$1"))"
    awk -v a="$t_conv" -v b="$t_q_conv" -v c="$t_cmp" -v d="$t_q_cmp" '
        function q(t) { return t == "" ? "" : sprintf("   qemu-img %7.3f s", t) }
        BEGIN {
            printf "%-24s %7.3f s%s\n", "convert -O raw", a, q(b)
            printf "%-24s %7.3f s%s\n", "compare", c, q(d)
        }'
    cd /
    rm -rf "$dir"
}

echo "load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs," \
     "qemu-img: ${QEMU_IMG:-not run}" \
     "${QEMU_IMG:+($("$QEMU_IMG" --version | head -n 1))}"
echo "cipher backend: ${QCRYPTO_CIPHER_BACKEND:-auto}"

bench_dir "${BENCH_DISK_DIR:-/var/tmp}"
TMPFS_DIR=${BENCH_TMPFS_DIR:-$(tmpfs_dir)}
if [ "$TMPFS_DIR" = none ]; then
    :
elif [ -n "$TMPFS_DIR" ]; then
    bench_dir "$TMPFS_DIR"
else
    echo "== no tmpfs found (/dev/shm, /tmp): set BENCH_TMPFS_DIR"
fi
if [ "${BENCH_SPARSE:-1}" != 0 ]; then
    bench_sparse "${BENCH_DISK_DIR:-/var/tmp}"
fi
