#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Make the seed corpus of fuzz-qcow2-bitmap (tests/fuzz/corpus/
# fuzz-qcow2-bitmap/) with the real qemu-img and qemu-io (7.2): qcow2
# images with persistent bitmaps, enabled and disabled, of several
# granularities and cluster sizes, with dirty bits from qemu-io's writes,
# one left in use by a qemu-io that aborted, one LUKS-encrypted. Each seed
# is the image without its trailing zeros (the target reads zeros past
# the input).
#
#   tests/fuzz/make-seeds-qcow2-bitmap.sh
set -eu

src=$(cd "$(dirname "$0")" && pwd)
out="$src/corpus/fuzz-qcow2-bitmap"
work=$(mktemp -d "${TMPDIR:-/tmp}/bitmap-seeds.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
cd "$work"

keep() {
    python3 - "$2" "$out/$1" <<'PY'
import sys
data = open(sys.argv[1], "rb").read().rstrip(b"\0")
open(sys.argv[2], "wb").write(data)
PY
}

mk() {
    rm -f t.qcow2
    qemu-img create -q -f qcow2 "$@" t.qcow2 4M
}

mk -o cluster_size=4k
qemu-img bitmap --add t.qcow2 b0
keep one-empty t.qcow2

mk -o cluster_size=4k
qemu-img bitmap --add -g 512 t.qcow2 fine
qemu-img bitmap --add --disable -g 64k t.qcow2 off
qemu-io -c 'write 0 12k' -c 'write 1M 3000' -c 'write 4090k 6k' t.qcow2 >/dev/null
qemu-img bitmap --merge fine t.qcow2 off
keep dirty-4k-clusters t.qcow2

mk -o cluster_size=512
qemu-img bitmap --add -g 1k t.qcow2 small
qemu-io -c 'write 0 100k' t.qcow2 >/dev/null
keep dirty-512-clusters t.qcow2

mk -o cluster_size=16k,extended_l2=on
qemu-img bitmap --add t.qcow2 a
qemu-img bitmap --add -g 2G t.qcow2 huge
qemu-io -c 'write 2M 4k' t.qcow2 >/dev/null
qemu-io -c abort t.qcow2 2>/dev/null || true
qemu-img bitmap --add t.qcow2 after
keep in-use-extl2 t.qcow2

mk -o cluster_size=4k
for i in 1 2 3 4 5 6; do qemu-img bitmap --add -g $((512 << i)) t.qcow2 "bitmap-$i"; done
qemu-io -c 'write 0 512' -c 'write 1M 512' -c 'write 3M 512' t.qcow2 >/dev/null
keep many-scattered t.qcow2

rm -f t.qcow2
qemu-img create -q -f qcow2 --object secret,id=sec0,data=fuzz \
    -o encrypt.format=luks,encrypt.key-secret=sec0,encrypt.iter-time=1 \
    -o encrypt.cipher-alg=aes-128,cluster_size=4k t.qcow2 1M
qemu-img bitmap --object secret,id=sec0,data=fuzz --add --image-opts \
    driver=qcow2,file.filename=t.qcow2,encrypt.key-secret=sec0 b0
qemu-io --object secret,id=sec0,data=fuzz -c 'write 64k 4k' --image-opts \
    driver=qcow2,file.filename=t.qcow2,encrypt.key-secret=sec0 >/dev/null
keep luks t.qcow2
