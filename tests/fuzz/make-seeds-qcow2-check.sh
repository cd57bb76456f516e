#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Make the seed corpus of fuzz-qcow2-check (tests/fuzz/corpus/
# fuzz-qcow2-check/) with the real qemu-img and qemu-io (7.2): the
# fuzz-qcow2-open seeds (every layout qemu-img writes), plus images with
# what only check walks (internal snapshots, persistent bitmaps) and
# images damaged as tests/cli/test_check.py damages them (a leak, a
# zeroed refcount, two L2 entries on one cluster, a bad L1 entry, a
# refcount block past the end of the file).
#
#   tests/fuzz/make-seeds-qcow2-check.sh
#
# A seed is the image without its trailing zeros (the target reads zeros
# past the input). Rerun only to add seeds, and commit the result.
set -eu

src=$(cd "$(dirname "$0")" && pwd)
out="$src/corpus/fuzz-qcow2-check"
work=$(mktemp -d "${TMPDIR:-/tmp}/qcow2-check-seeds.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
cp "$src"/corpus/fuzz-qcow2-open/* "$out"/
cd "$work"

# keep NAME FILE [EDIT]: FILE, damaged by the Python statement EDIT (on
# the header fields h, with rd/wr helpers), as the seed NAME.
keep() {
    python3 - "$2" "$out/$1" "${3:-}" <<'PY'
import struct, sys
path, dest, edit = sys.argv[1:4]
data = bytearray(open(path, "rb").read())
def u64(off): return struct.unpack(">Q", data[off:off + 8])[0]
def put64(off, v): data[off:off + 8] = struct.pack(">Q", v)
def put16(off, v): data[off:off + 2] = struct.pack(">H", v)
l1 = u64(40)
reftable = u64(48)
refblock = u64(reftable)
l2 = u64(l1) & 0x00fffffffffffe00
exec(edit)
open(dest, "wb").write(bytes(data).rstrip(b"\0"))
PY
}

small() {
    rm -f "$1"
    qemu-img create -q -f qcow2 -o cluster_size=4k "$1" 1M
    qemu-io -f qcow2 -c "write -P 0x11 0 8k" -c "write -P 0x22 512k 4k" \
        "$1" >/dev/null
}

small snap.qcow2
qemu-img snapshot -c s1 snap.qcow2
qemu-io -f qcow2 -c "write -P 0x33 0 4k" snap.qcow2 >/dev/null
qemu-img snapshot -c s2 snap.qcow2
keep check-snapshots snap.qcow2

small bitmap.qcow2
qemu-img bitmap --add -g 4k bitmap.qcow2 bm0
qemu-io -f qcow2 -c "write -P 0x44 64k 8k" bitmap.qcow2 >/dev/null
keep check-bitmaps bitmap.qcow2

small base.qcow2
# Cluster 5 is the first data cluster of base.qcow2 (4 KiB clusters).
keep check-leak base.qcow2 "put16(refblock + 2 * 5, 2)"
keep check-zero-refcount base.qcow2 "put16(refblock + 2 * 5, 0)"
keep check-overlap base.qcow2 "put64(l2 + 8 * 3, u64(l2))"
keep check-l1-past-end base.qcow2 "put64(l1, (1 << 63) | 0x40000000)"
keep check-l1-unaligned base.qcow2 "put64(l1, u64(l1) + 0x200)"
keep check-refblock-past-end base.qcow2 "put64(reftable + 8, 0x100000)"
keep check-copied-flags base.qcow2 "put64(l1, u64(l1) & ~(1 << 63))"
