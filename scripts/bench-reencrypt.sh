#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Time in-place encryption of a raw file into LUKS2 (aes-xts-plain64,
# 512-bit key, datashift resilience): `qemu-img-lite reencrypt --encrypt`
# against `cryptsetup reencrypt --encrypt --reduce-device-size 32M
# --force-offline-reencrypt` on the same data (cryptsetup's file is 32 MiB
# longer: it needs that room at the end, we grow the file instead).
#
#   scripts/bench-reencrypt.sh [BUILD] [SIZE_MIB] [RUNS] [MODE]
#
# MODE "encrypt" (the default) times the above; MODE "rekey" times a new
# volume key for a LUKS2 image (aes-xts-plain64, 512-bit key, 512-byte
# sectors, the 16 MiB data offset of luksFormat): `qemu-img-lite reencrypt`
# against `cryptsetup reencrypt --force-offline-reencrypt`, both with
# checksum resilience (the default of both) and their default hot zones.
# MODE "rekey-luks1" times ours on a cryptsetup LUKS1 image against ours
# on the LUKS2 one (cryptsetup's LUKS1 run needs device-mapper).
# MODE "decrypt" times in-place decryption of the same LUKS2 image:
# `qemu-img-lite reencrypt --decrypt` against `cryptsetup reencrypt
# --decrypt --header HDR --force-offline-reencrypt` (both move the header
# to a file of its own and the data back by 16 MiB, datashift-checksum).
#
# Each tool runs RUNS times on a fresh copy of the file (the copy and a
# sync are not timed) and the fastest run counts (the noise here only ever
# adds time). Both use the default hot zone (the 16 MiB data shift) and
# PBKDF2 with a minimal cost, so the data path is timed, not the key slot.
#
# Environment:
#   BENCH_DIR   where the files live (default /var/tmp); needs 3 x SIZE.
set -euo pipefail
# row NAME TIME DD
source "$(dirname "$0")/bench-lib.sh"

BUILD=${1:-build}
SIZE_MIB=${2:-512}
RUNS=${3:-3}
MODE=${4:-encrypt}
QIL=$(realpath "$BUILD/qemu-img-lite/qemu-img-lite")
CRYPTSETUP=$(command -v cryptsetup || echo /usr/sbin/cryptsetup)
DIR=$(mktemp -d "${BENCH_DIR:-/var/tmp}/bench-reencrypt.XXXXXX")
trap 'rm -rf "$DIR"' EXIT

SRC=$DIR/src.raw
WORK=$DIR/work.img
KEY=$DIR/key
printf 'benchmark passphrase' > "$KEY"
head -c $((SIZE_MIB << 20)) /dev/urandom > "$SRC"

# timed PREP_EXTRA_MIB CMD...: RUNS times copy SRC to WORK (grown by
# PREP_EXTRA_MIB), sync, time CMD; print the fastest time in seconds.
timed() {
    local extra=$1; shift
    local min='' t start end
    for _ in $(seq "$RUNS"); do
        cp "$SRC" "$WORK"
        [ "$extra" = 0 ] || truncate -s +"${extra}M" "$WORK"
        sync
        start=$(date +%s%N)
        "$@" >/dev/null 2>&1 || { echo failed; return; }
        end=$(date +%s%N)
        t=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
        if [ -z "$min" ] || awk "BEGIN{exit !($t < $min)}"; then
            min=$t
        fi
    done
    echo "$min"
}

dd_time=$(timed 0 dd if="$SRC" of="$DIR/dd.out" bs=256K conv=fsync)

if [ "$MODE" = rekey-luks1 ]; then
    # SRC becomes a cryptsetup LUKS1 image (2 MiB payload offset, 512-bit
    # key) of the random bytes; ours on it, against ours on LUKS2 (the
    # rekey mode's image). cryptsetup's LUKS1 re-encryption needs
    # device-mapper, which this kernel lacks: not timed.
    mv "$SRC" "$DIR/payload"
    truncate -s $(((SIZE_MIB + 2) << 20)) "$SRC"
    "$CRYPTSETUP" luksFormat --batch-mode --type luks1 --key-file "$KEY" \
        --pbkdf-force-iterations 1000 --key-size 512 "$SRC"
    dd if="$DIR/payload" of="$SRC" bs=1M seek=2 conv=notrunc status=none
    luks1=$(timed 0 "$QIL" reencrypt --object "secret,id=s0,file=$KEY" \
            -o iter-time=10 --image-opts \
            "driver=luks,key-secret=s0,file.filename=$WORK")
    truncate -s $(((SIZE_MIB + 16) << 20)) "$SRC"
    "$CRYPTSETUP" luksFormat --batch-mode --type luks2 --key-file "$KEY" \
        --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-size 512 \
        --sector-size 512 "$SRC"
    dd if="$DIR/payload" of="$SRC" bs=1M seek=16 conv=notrunc status=none
    rm -f "$DIR/payload"
    luks2=$(timed 0 "$QIL" reencrypt --object "secret,id=s0,file=$KEY" \
            -o iter-time=10,kdf=pbkdf2 --image-opts \
            "driver=luks,key-secret=s0,file.filename=$WORK")
    echo "New volume key for $SIZE_MIB MiB in $DIR (best of $RUNS)"
    row "dd (copy, fsync)" "$dd_time" "$dd_time"
    row "qemu-img-lite reencrypt LUKS1" "$luks1" "$dd_time"
    row "qemu-img-lite reencrypt LUKS2" "$luks2" "$dd_time"
    awk -v a="$luks1" -v b="$luks2" -v s="$SIZE_MIB" 'BEGIN {
        printf "LUKS1 %.0f MiB/s, LUKS2 %.0f MiB/s: LUKS1 takes %.2fx LUKS2\n",
            s / a, s / b, a / b }'
    exit 0
fi
if [ "$MODE" = rekey ] || [ "$MODE" = decrypt ]; then
    # SRC becomes a LUKS2 image whose payload is the random bytes (what
    # they decrypt to does not matter for the time).
    mv "$SRC" "$DIR/payload"
    truncate -s $(((SIZE_MIB + 16) << 20)) "$SRC"
    "$CRYPTSETUP" luksFormat --batch-mode --type luks2 --key-file "$KEY" \
        --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-size 512 \
        --sector-size 512 "$SRC"
    dd if="$DIR/payload" of="$SRC" bs=1M seek=16 conv=notrunc status=none
    rm -f "$DIR/payload"
    if [ "$MODE" = decrypt ]; then
        # The header files of the last run go first (not timed: rm only).
        ours=$(timed 0 sh -c 'rm -f "$3.luks2-header" && exec "$1" reencrypt \
               --object "secret,id=s0,file=$2" --decrypt --image-opts \
               "driver=luks,key-secret=s0,file.filename=$3"' \
               sh "$QIL" "$KEY" "$WORK")
        cs=$(timed 0 sh -c 'rm -f "$3.hdr" && exec "$1" reencrypt --decrypt \
             --header "$3.hdr" --force-offline-reencrypt --batch-mode \
             --key-file "$2" "$3"' sh "$CRYPTSETUP" "$KEY" "$WORK")
        echo "In-place decryption of $SIZE_MIB MiB in $DIR (best of $RUNS)"
        row "dd (copy, fsync)" "$dd_time" "$dd_time"
        row "qemu-img-lite reencrypt --decrypt" "$ours" "$dd_time"
        row "cryptsetup reencrypt --decrypt" "$cs" "$dd_time"
        awk -v o="$ours" -v c="$cs" -v s="$SIZE_MIB" 'BEGIN {
            printf "ours %.0f MiB/s, cryptsetup %.0f MiB/s: cryptsetup takes %.2fx ours\n",
                s / o, s / c, c / o }'
        exit 0
    fi
    ours=$(timed 0 "$QIL" reencrypt --object "secret,id=s0,file=$KEY" \
           -o iter-time=10,kdf=pbkdf2 --image-opts \
           "driver=luks,key-secret=s0,file.filename=$WORK")
    cs=$(timed 0 "$CRYPTSETUP" reencrypt --force-offline-reencrypt \
         --batch-mode --key-file "$KEY" --pbkdf pbkdf2 \
         --pbkdf-force-iterations 1000 "$WORK")
    echo "New volume key for $SIZE_MIB MiB in $DIR (best of $RUNS)"
    row "dd (copy, fsync)" "$dd_time" "$dd_time"
    row "qemu-img-lite reencrypt" "$ours" "$dd_time"
    row "cryptsetup reencrypt" "$cs" "$dd_time"
    awk -v o="$ours" -v c="$cs" -v s="$SIZE_MIB" 'BEGIN {
        printf "ours %.0f MiB/s, cryptsetup %.0f MiB/s: cryptsetup takes %.2fx ours\n",
            s / o, s / c, c / o }'
    exit 0
fi
ours=$(timed 0 "$QIL" reencrypt --object "secret,id=s0,file=$KEY" --encrypt \
       -o key-secret=s0,iter-time=10,kdf=pbkdf2,sector-size=512 "$WORK")
cs=$(timed 32 "$CRYPTSETUP" reencrypt --encrypt --type luks2 \
     --reduce-device-size 32M --force-offline-reencrypt --batch-mode \
     --key-file "$KEY" --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
     --key-size 512 --sector-size 512 "$WORK")

echo "In-place encryption of $SIZE_MIB MiB in $DIR (best of $RUNS)"
row "dd (copy, fsync)" "$dd_time" "$dd_time"
row "qemu-img-lite reencrypt" "$ours" "$dd_time"
row "cryptsetup reencrypt" "$cs" "$dd_time"
awk -v o="$ours" -v c="$cs" -v s="$SIZE_MIB" 'BEGIN {
    printf "ours %.0f MiB/s, cryptsetup %.0f MiB/s: cryptsetup takes %.2fx ours\n",
        s / o, s / c, c / o }'
