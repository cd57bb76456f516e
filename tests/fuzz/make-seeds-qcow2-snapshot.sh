#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Make the seed corpus of fuzz-qcow2-snapshot-table
# (tests/fuzz/corpus/fuzz-qcow2-snapshot-table/) with the real qemu-img
# (7.2): images with internal snapshots qemu-img made, each seed the
# entry count (2 bytes, big-endian) and the snapshot table the header
# points at. Dates differ each run: rerun only to add seeds, and commit.
#
#   tests/fuzz/make-seeds-qcow2-snapshot.sh
set -eu

src=$(cd "$(dirname "$0")" && pwd)
out="$src/corpus/fuzz-qcow2-snapshot-table"
work=$(mktemp -d "${TMPDIR:-/tmp}/qcow2-snap-seeds.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
cd "$work"

# keep NAME IMAGE: the table of IMAGE as seed NAME.
keep() {
    python3 - "$2" "$out/$1" <<'PY'
import struct, sys
img = open(sys.argv[1], "rb").read()
nb, off = struct.unpack(">IQ", img[60:72])
end = off
for _ in range(nb):
    end = (end + 7) & ~7
    id_len, name_len = struct.unpack(">HH", img[end + 12:end + 16])
    extra, = struct.unpack(">I", img[end + 36:end + 40])
    end += 40 + extra + id_len + name_len
open(sys.argv[2], "wb").write(struct.pack(">H", nb) + img[off:end])
PY
}

qemu-img create -q -f qcow2 one.qcow2 1M
qemu-img snapshot -c first one.qcow2
keep one one.qcow2

qemu-img create -q -f qcow2 -o compat=0.10 v2.qcow2 1M
qemu-img snapshot -c old v2.qcow2
qemu-img snapshot -c older v2.qcow2
keep v2 v2.qcow2

qemu-img create -q -f qcow2 many.qcow2 64M
qemu-io -c 'write 0 64k' many.qcow2 >/dev/null
for n in a bb ccc "with space" "$(printf 'x%.0s' $(seq 1 200))" dup dup; do
    qemu-img snapshot -c "$n" many.qcow2
done
qemu-img snapshot -d bb many.qcow2
keep many many.qcow2

qemu-img create -q -f qcow2 resized.qcow2 1M
qemu-img snapshot -c small resized.qcow2
qemu-img resize -q resized.qcow2 3G
qemu-img snapshot -c big resized.qcow2
keep resized resized.qcow2
