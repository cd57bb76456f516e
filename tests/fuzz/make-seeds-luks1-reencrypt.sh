#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Make the seed corpus of fuzz-luks1-reencrypt (tests/fuzz/corpus/) with
# the real tools: small LUKS1 images made by qemu-img-lite, qemu-img and
# cryptsetup, given a new volume key by qemu-img-lite with --init-only, or
# killed (SIGKILL, injected by strace at the Nth fdatasync or pwrite) in
# the middle of the run or of a resume. The passphrase is "fuzz", the KDF
# PBKDF2 at its cheapest (ours and qemu-img: iter-time=1;
# cryptsetup: 1000 iterations), the cipher AES-128 (its key material is
# the smallest), the data 64 KiB: a seed is about 600 KiB, mostly zeros.
#
#   tests/fuzz/make-seeds-luks1-reencrypt.sh [BUILD-DIR]   (default: build)
#
# Needs cryptsetup, qemu-img and strace. The digests of the pointer and of
# both record copies are zeroed: the target fills them in, so mutated
# metadata gets past them. New random keys each time: rerun only to add
# seeds, and commit the result.
set -eu

src=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
ninja -C "$build" qemu-img-lite/qemu-img-lite >/dev/null
tool=$(cd "$build" && pwd)/qemu-img-lite/qemu-img-lite
out="$src/corpus/fuzz-luks1-reencrypt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
printf fuzz > "$tmp/key"
printf other > "$tmp/other-key"
head -c 65536 /dev/urandom > "$tmp/data"
SECRETS="--object secret,id=s,data=fuzz --object secret,id=t,data=other"
XTS="cipher-alg=aes-128"
ESSIV="cipher-alg=aes-128,cipher-mode=cbc,ivgen-alg=essiv,ivgen-hash-alg=sha256"

# be64 FILE OFFSET
be64() {
    od -An -tu8 --endian=big -j "$2" -N 8 "$1" | tr -d ' '
}

# zero FILE OFFSET BYTES
zero() {
    dd if=/dev/zero of="$1" bs=1 seek="$2" count="$3" conv=notrunc \
       status=none
}

# keep FILE NAME: the digests zeroed (if the run left its metadata), as NAME
keep() {
    if [ "$(dd if="$1" bs=1 skip=640 count=8 status=none)" = QILL1PTR ]; then
        zero "$1" 688 16
        area=$(be64 "$1" 656)
        for c in 0 4096; do
            zero "$1" $((area + c + 64)) 32     # the zone's checksums
            zero "$1" $((area + c + 1280)) 32   # the record
        done
    fi
    cp "$1" "$out/$2"
}

# ours NAME OPTIONS: a LUKS1 image of qemu-img-lite
ours() {
    "$tool" convert --object secret,id=s,data=fuzz -f raw -O luks \
        -o "key-secret=s,iter-time=1,luks-version=1,$2" "$tmp/data" \
        "$tmp/$1"
}

# theirs NAME OPTIONS: a LUKS1 image of qemu-img (it retries its PBKDF2
# calibration, which fails at random on a VM)
theirs() {
    i=0
    until qemu-img convert --object secret,id=s,data=fuzz -f raw -O luks \
            -o "key-secret=s,iter-time=1,$2" "$tmp/data" "$tmp/$1" \
            2>/dev/null; do
        i=$((i + 1))
        [ $i -lt 60 ] || { echo "qemu-img convert keeps failing" >&2; exit 1; }
    done
}

# cs NAME CIPHER KEY-BITS: a LUKS1 image of cryptsetup, filled by us
cs() {
    truncate -s $((1024 * 1024 + 65536)) "$tmp/$1"
    cryptsetup luksFormat --batch-mode --type luks1 --cipher "$2" \
        --key-size "$3" --pbkdf-force-iterations 1000 --align-payload 2048 \
        --key-file "$tmp/key" "$tmp/$1"
    "$tool" convert --object secret,id=s,data=fuzz -n -f raw "$tmp/data" \
        --target-image-opts "driver=luks,key-secret=s,file.filename=$tmp/$1"
}

# init NAME FROM [OPTIONS]: our --init-only of FROM, kept as NAME.init too
init() {
    cp "$tmp/$2" "$tmp/$1"
    # shellcheck disable=SC2086
    "$tool" reencrypt $SECRETS --init-only -o "iter-time=1${3:-}" \
        --image-opts "driver=luks,key-secret=s,file.filename=$tmp/$1"
    cp "$tmp/$1" "$tmp/$1.init"
    keep "$tmp/$1" "$1"
}

# kill NAME FROM SYSCALL N: our resume of FROM.init killed at the Nth SYSCALL
kill_at() {
    cp "$tmp/$2.init" "$tmp/$1"
    strace -f -o /dev/null -e trace="$3" -e inject="$3":signal=KILL:when="$4" \
        "$tool" reencrypt --object secret,id=s,data=fuzz --resume-only \
        --hotzone-size 16k --image-opts \
        "driver=luks,key-secret=s,file.filename=$tmp/$1" >/dev/null 2>&1 ||
        true
    keep "$tmp/$1" "$1"
}

ours ours-xts "$XTS"
ours ours-essiv "$ESSIV"
theirs qemu-essiv "$ESSIV"
cs cs-essiv aes-cbc-essiv:sha256 128
cp "$tmp/ours-essiv" "$tmp/ours-two"
"$tool" amend $SECRETS --image-opts \
    "driver=luks,key-secret=s,file.filename=$tmp/ours-two" \
    -o "state=active,new-secret=t,iter-time=1,keyslot=3"

init ours-xts-init ours-xts
init ours-essiv-init ours-essiv
init qemu-essiv-init qemu-essiv
init cs-essiv-init cs-essiv
init ours-two-init ours-two ",slot-secrets=s:t"
init ours-xts-to-essiv-init ours-xts ",$ESSIV"
kill_at ours-kill-fdatasync-1 ours-essiv-init fdatasync 1
kill_at ours-kill-fdatasync-2 ours-essiv-init fdatasync 2
kill_at ours-kill-fdatasync-3 ours-essiv-init fdatasync 3
kill_at ours-kill-pwrite-4 ours-essiv-init pwrite64 4
kill_at ours-kill-last qemu-essiv-init fdatasync 10
kill_at cs-kill-fdatasync-2 cs-essiv-init fdatasync 2

ls "$out" | wc -l
du -sh "$out"
