#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# make demo: the project's main job on a sample image. A raw disk image
# holding a FAT file system with a few files is converted to LUKS and back
# with qemu-img-lite, and the round trip is checked with compare.
# Every command is printed before it runs.
set -euo pipefail

BUILD=${1:-build}
# qemu-img-lite from the build, and mkfs.vfat (in /sbin) on the PATH
PATH=$(realpath "$BUILD/qemu-img-lite"):$PATH:/sbin:/usr/sbin
QIL=qemu-img-lite
WORK=$(mktemp -d "${TMPDIR:-/tmp}/qil-demo.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

# Print a command (quoted so it can be pasted back), then run it.
run() {
    local a out='$'
    for a in "$@"; do
        if [[ $a =~ ^[A-Za-z0-9_./:=,+%@-]+$ ]]; then
            out+=" $a"
        else
            out+=" '${a//\'/\'\\\'\'}'"
        fi
    done
    printf '\n%s\n' "$out"
    "$@"
}

# The passphrase is given as a secret object, never in image options.
SECRET="secret,id=sec0,data=correct horse battery staple"
# 200 ms of PBKDF2 per key slot instead of the default 2 s: the demo stays
# quick (each LUKS open or create pays it once) while the key slot still
# takes a real, calibrated number of iterations.
ITER_TIME=200

echo "== A 64 MiB raw disk image with a FAT file system and a few files =="
run truncate -s 64M disk.raw
run mkfs.vfat -n DEMO disk.raw
printf 'Hello from qemu-img-lite!\n' > hello.txt
seq 1 20000 > numbers.txt
head -c 3M /dev/urandom > random.bin
run mcopy -i disk.raw hello.txt numbers.txt random.bin ::/
run mdir -i disk.raw ::/
run "$QIL" info disk.raw

echo
echo "== Convert it to LUKS (aes-256-xts-plain64, as QEMU creates it) =="
run "$QIL" convert -p --object "$SECRET" -f raw -O luks \
    -o key-secret=sec0,iter-time=$ITER_TIME disk.raw disk.luks
run "$QIL" info disk.luks
run "$QIL" info --output=json disk.luks

echo
echo "== The same data, seen through the key, without decrypting to disk =="
run "$QIL" compare --object "$SECRET" --image-opts \
    driver=raw,file.filename=disk.raw \
    driver=luks,key-secret=sec0,file.filename=disk.luks

echo
echo "== Add a second passphrase (key slot 1) =="
run "$QIL" amend --object "$SECRET" \
    --object "secret,id=sec1,data=a second passphrase" \
    --image-opts driver=luks,key-secret=sec0,file.filename=disk.luks \
    -o state=active,new-secret=sec1,iter-time=$ITER_TIME

echo
echo "== Convert it back to raw, opened with the second passphrase =="
run "$QIL" convert -p --object "secret,id=sec1,data=a second passphrase" \
    --image-opts driver=luks,key-secret=sec1,file.filename=disk.luks \
    -O raw back.raw
run "$QIL" compare -f raw -F raw disk.raw back.raw
run mdir -i back.raw ::/
run mtype -i back.raw ::/hello.txt
if command -v qemu-img >/dev/null; then
    echo
    echo "== The real qemu-img reads the LUKS image too =="
    run qemu-img compare --object "$SECRET" --image-opts \
        driver=raw,file.filename=disk.raw \
        driver=luks,key-secret=sec0,file.filename=disk.luks
fi
echo
echo "Demo done."
