#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Make the seed corpus of fuzz-luks2-reencrypt (tests/fuzz/corpus/) with
# the real tools: small raw images put into LUKS2 re-encryption state
# (in-place encryption, datashift) by cryptsetup 2.6 and by qemu-img-lite,
# with --init-only, and killed (SIGKILL, injected by strace at the Nth
# fsync/fdatasync or write) in the middle of a resume; and a new volume key
# stopped before its final header (see the end). The passphrase is
# "fuzz", the KDF PBKDF2 at its cheapest (cryptsetup: 1000 iterations;
# ours: iter-time=1), the data 64 to 384 KiB, the data shift 168 KiB
# (cryptsetup: --reduce-device-size 336k) or 288 KiB (ours:
# align-payload=576), so a seed is 400 KiB to 1 MiB, mostly zeros.
#
#   tests/fuzz/make-seeds-reencrypt.sh [BUILD-DIR]     (default: build)
#
# Needs root (cryptsetup), cryptsetup 2.6 and strace. The checksum fields
# of both header copies are zeroed: the target fills them in (fuzz-luks2.h),
# so mutated metadata gets past the checksum. New random keys each time:
# rerun only to add seeds, and commit the result.
set -eu

src=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
ninja -C "$build" qemu-img-lite/qemu-img-lite >/dev/null
tool=$(cd "$build" && pwd)/qemu-img-lite/qemu-img-lite
out="$src/corpus/fuzz-luks2-reencrypt"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
printf fuzz > "$tmp/key"
printf other > "$tmp/other-key"
cs_key="$tmp/key"

CS_PBKDF="--pbkdf pbkdf2 --pbkdf-force-iterations 1000"
QIL_OPTS="key-secret=s,iter-time=1,kdf=pbkdf2,cipher-alg=aes-128,align-payload=576"

# raw FILE BYTES: compressible but not uniform data
raw() {
    i=0
    while [ $i -lt $(($2 / 4096 + 1)) ]; do
        printf 'fuzz-luks2-reencrypt block %08d ' $i
        head -c 4062 /dev/zero | tr '\0' "$(echo ABCDEFGHIJKLMNOPQRSTUVWXYZ |
            cut -c $((i % 26 + 1)))"
        printf '\n'
        i=$((i + 1))
    done | head -c "$2" > "$1"
}

# keep FILE NAME: zero the checksums of both copies, store as NAME
keep() {
    hdr=$(od -An -tu8 --endian=big -j 8 -N 8 "$1" | tr -d ' ')
    for off in 0 "$hdr"; do
        dd if=/dev/zero of="$1" bs=1 seek=$((off + 448)) count=64 \
           conv=notrunc status=none
    done
    cp "$1" "$out/$2"
}

# cs NAME FILE-BYTES [cryptsetup options]: cryptsetup --init-only
cs() {
    name=$1 size=$2
    shift 2
    raw "$tmp/$name" "$size"
    # shellcheck disable=SC2086
    cryptsetup reencrypt --encrypt --init-only --batch-mode --type luks2 \
        $CS_PBKDF --reduce-device-size 336k --luks2-metadata-size 16k \
        --key-file "$cs_key" "$@" "$tmp/$name" 2>"$tmp/err" ||
        { cat "$tmp/err" >&2; exit 1; }
    cp "$tmp/$name" "$tmp/$name.init"
    keep "$tmp/$name" "$name"
}

# cs_kill NAME FROM SYSCALL N: cryptsetup's resume of FROM killed at the
# Nth SYSCALL
cs_kill() {
    cp "$tmp/$2.init" "$tmp/$1"
    strace -f -o /dev/null -e trace="$3" -e inject="$3":signal=KILL:when="$4" \
        cryptsetup reencrypt --resume-only --force-offline-reencrypt \
        --batch-mode --key-file "$tmp/key" --hotzone-size 16k "$tmp/$1" \
        >/dev/null 2>&1 || true
    keep "$tmp/$1" "$1"
}

# qil NAME DATA-BYTES [options]: ours, --init-only
qil() {
    name=$1 size=$2
    shift 2
    raw "$tmp/$name" "$size"
    "$tool" reencrypt --object secret,id=s,data=fuzz --encrypt --init-only \
        -o "$QIL_OPTS$*" "$tmp/$name"
    cp "$tmp/$name" "$tmp/$name.init"
    keep "$tmp/$name" "$name"
}

# qil_kill NAME FROM SYSCALL N: our resume of FROM killed at the Nth SYSCALL
qil_kill() {
    cp "$tmp/$2.init" "$tmp/$1"
    strace -f -o /dev/null -e trace="$3" -e inject="$3":signal=KILL:when="$4" \
        "$tool" reencrypt --object secret,id=s,data=fuzz --resume-only \
        --hotzone-size 16k --image-opts \
        "driver=luks,key-secret=s,file.filename=$tmp/$1" >/dev/null 2>&1 ||
        true
    keep "$tmp/$1" "$1"
}

# cryptsetup: data = file - 336k
cs cs-init-aes-xts-512 409600 --key-size 256
cs cs-init-aes-xts-4k 409600 --key-size 256 --sector-size 4096
cs cs-init-aes-cbc-essiv 409600 --cipher aes-cbc-essiv:sha256 --key-size 128
cs cs-init-label 409600 --key-size 256 --label fuzz-label
cs cs-init-data-gt-shift 606208 --key-size 256
cs_key="$tmp/other-key"
cs cs-init-wrong-passphrase 409600 --key-size 256
cs_key="$tmp/key"
cs_kill cs-kill-fsync-2 cs-init-data-gt-shift fsync 2
cs_kill cs-kill-fsync-3 cs-init-data-gt-shift fsync 3
cs_kill cs-kill-fsync-5 cs-init-data-gt-shift fsync 5
cs_kill cs-kill-write-4 cs-init-data-gt-shift write 4
cs_kill cs-kill-fsync-2-4k cs-init-aes-xts-4k fsync 2

# ours: the file is the data + 2 x 288k
qil qil-init-aes-xts-512 65536
qil qil-init-aes-xts-4k 65536 ,sector-size=4096
qil qil-init-aes-cbc-essiv 65536 ,cipher-mode=cbc,ivgen-alg=essiv
qil qil-init-data-gt-shift 393216
qil_kill qil-kill-fdatasync-2 qil-init-data-gt-shift fdatasync 2
qil_kill qil-kill-fdatasync-5 qil-init-data-gt-shift fdatasync 5
qil_kill qil-kill-fdatasync-9 qil-init-data-gt-shift fdatasync 9
qil_kill qil-kill-pwrite-7 qil-init-data-gt-shift pwrite64 7
cp "$tmp/qil-init-aes-xts-512.init" "$tmp/qil-last-state"
QIL_TEST_REENCRYPT_STOP_BEFORE_FINISH=1 "$tool" reencrypt \
    --object secret,id=s,data=fuzz --resume-only --hotzone-size 16k \
    --image-opts "driver=luks,key-secret=s,file.filename=$tmp/qil-last-state" \
    >/dev/null 2>&1 || true
keep "$tmp/qil-last-state" qil-last-state

# A new volume key (mode "reencrypt"), ours, stopped before its final
# header: cryptsetup's image (the key-slot area made room for a second
# slot and the resilience data), all data under the new key. Then the same
# with the old key's slot gone and its area zeroed, as cryptsetup leaves
# it when killed in its finish (resumed with the new key alone).
truncate -s $((576 * 1024 + 65536)) "$tmp/rekey-last-state"
# shellcheck disable=SC2086
cryptsetup luksFormat --batch-mode --type luks2 $CS_PBKDF \
    --luks2-metadata-size 16k --luks2-keyslots-size 512k --offset 1152 \
    --key-size 256 --key-file "$tmp/key" "$tmp/rekey-last-state" \
    >/dev/null 2>&1
QIL_TEST_REENCRYPT_STOP_BEFORE_FINISH=1 "$tool" reencrypt \
    --object secret,id=s,data=fuzz -o iter-time=1,kdf=pbkdf2 \
    --hotzone-size 16k --image-opts \
    "driver=luks,key-secret=s,file.filename=$tmp/rekey-last-state" \
    >/dev/null 2>&1 || true
cp "$tmp/rekey-last-state" "$tmp/rekey-old-slots-gone"
keep "$tmp/rekey-last-state" rekey-last-state
python3 - "$tmp/rekey-old-slots-gone" <<'PY'
import json, struct, sys
with open(sys.argv[1], "r+b") as f:
    hdr = struct.unpack(">Q", f.read(16)[8:16])[0]
    f.seek(4096)
    md = json.loads(f.read(hdr - 4096).split(b"\0")[0])
    prev = [k for k, s in md["segments"].items()
            if "backup-previous" in s.get("flags", [])][0]
    old = [d for d in md["digests"].values() if prev in d["segments"]][0]
    for k in old["keyslots"]:
        area = md["keyslots"].pop(k)["area"]
        f.seek(int(area["offset"]))
        f.write(bytes(int(area["size"])))
    old["keyslots"] = []
    text = json.dumps(md, separators=(",", ":")).encode()
    for off in (0, hdr):
        f.seek(off + 4096)
        f.write(text + bytes(hdr - 4096 - len(text)))
PY
keep "$tmp/rekey-old-slots-gone" rekey-old-slots-gone

ls "$out" | wc -l
du -sh "$out"
