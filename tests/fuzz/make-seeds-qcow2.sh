#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Make the seed corpora of the qcow2 fuzz targets
# (tests/fuzz/corpus/fuzz-qcow2-open/ and fuzz-qcow2-header/) with the
# real qemu-img and qemu-io (7.2): small images of each layout and feature
# qemu-img writes, with a little data written by qemu-io.
#
#   tests/fuzz/make-seeds-qcow2.sh
#
# An open seed is the image without its trailing zeros (the target reads
# zeros past the input, see fuzz-qcow2-open.c); a header seed is its first
# 16 KiB (the header, extensions and, with small clusters, the first
# tables). Encrypted images use the target's secret "fuzz" and the
# fewest PBKDF2 iterations qemu-img makes (encrypt.iter-time=1: at least
# 1000, its minimum). LUKS images get a 128-bit key where data is written,
# to keep their key slot area (8 slots of key-bytes x 4000 stripes, data
# after it) small. New keys and salts each run: rerun only to add seeds,
# and commit the result.
set -eu

src=$(cd "$(dirname "$0")" && pwd)
open="$src/corpus/fuzz-qcow2-open"
header="$src/corpus/fuzz-qcow2-header"
work=$(mktemp -d "${TMPDIR:-/tmp}/qcow2-seeds.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$open" "$header"
cd "$work"

SECRET=secret,id=sec0,data=fuzz
LUKS=encrypt.format=luks,encrypt.key-secret=sec0,encrypt.iter-time=1

# keep NAME FILE: FILE as the seeds called NAME.
keep() {
    python3 - "$2" "$open/$1" "$header/$1" <<'EOF'
import sys
data = open(sys.argv[1], "rb").read().rstrip(b"\0")
open(sys.argv[2], "wb").write(data)
open(sys.argv[3], "wb").write(data[:16384])
EOF
}

img() {
    qemu-img create -q "$@"
}

# io FILE COMMAND...: qemu-io commands on a plain qcow2 image.
io() {
    f=$1
    shift
    for c in "$@"; do
        set -- "$@" -c "$c"
        shift
    done
    qemu-io -f qcow2 "$@" "$f" >/dev/null
}

# io_enc FILE COMMAND...: the same on an encrypted image.
io_enc() {
    f=$1
    shift
    for c in "$@"; do
        set -- "$@" -c "$c"
        shift
    done
    qemu-io --object "$SECRET" --image-opts "$@" \
        "driver=qcow2,encrypt.key-secret=sec0,file.filename=$f" >/dev/null
}

# Scattered writes: data, a zero cluster, data in another L2 table.
WRITES="write -P 0x11 0 8k|write -P 0x22 1M 4k|write -z 64k 4k|write -P 0x33 3M 512"

scattered() {
    f=$1
    old=$IFS
    IFS='|'
    # shellcheck disable=SC2086
    set -- $WRITES
    IFS=$old
    io "$f" "$@"
}

# qemu-img's default layout: version 3, 64 KiB clusters.
img -f qcow2 default-64k.qcow2 4M
io default-64k.qcow2 "write -P 0x5a 0 4k"
keep v3-64k-default default-64k.qcow2

for cs in 512 4k; do
    img -f qcow2 -o cluster_size=$cs v3-$cs.qcow2 4M
    scattered v3-$cs.qcow2
    keep v3-$cs v3-$cs.qcow2
done

img -f qcow2 -o compat=0.10,cluster_size=4k v2-4k.qcow2 4M
scattered v2-4k.qcow2
keep v2-4k v2-4k.qcow2

for bits in 1 64; do
    img -f qcow2 -o cluster_size=4k,refcount_bits=$bits rc$bits.qcow2 4M
    scattered rc$bits.qcow2
    keep v3-4k-refcount$bits rc$bits.qcow2
done

# Subclusters: 16 KiB clusters of 32 x 512 bytes.
img -f qcow2 -o cluster_size=16k,extended_l2=on extl2.qcow2 4M
io extl2.qcow2 "write -P 0x44 512 512" "write -z 4k 1k" \
    "write -P 0x55 1M 16k" "write -P 0x66 2M 3k"
keep v3-16k-extended-l2 extl2.qcow2

# Compressed clusters: convert -c of compressible data, zlib and zstd.
{ seq 1 20000; head -c 32768 /dev/zero | tr '\0' 'q'; } > text.raw
truncate -s 1M text.raw
for ct in zlib zstd; do
    for cs in 512 4k; do
        qemu-img convert -q -c -f raw -O qcow2 \
            -o cluster_size=$cs,compression_type=$ct text.raw c.qcow2
        keep v3-$cs-compressed-$ct c.qcow2
        rm c.qcow2
    done
done

# A backing file reference (the target never opens it), and lazy
# refcounts left dirty.
head -c 1M /dev/urandom > base.raw
img -f qcow2 -o cluster_size=4k -b base.raw -F raw overlay.qcow2 4M
io overlay.qcow2 "write -P 0x77 512k 4k"
keep v3-4k-backing-raw overlay.qcow2
img -f qcow2 -o cluster_size=4k,lazy_refcounts=on lazy.qcow2 4M
io lazy.qcow2 "write -P 0x78 0 4k" "sigraise 9" 2>/dev/null || true
keep v3-4k-lazy-refcounts lazy.qcow2

# An external data file (the target gives the input itself as the file).
img -f qcow2 -o cluster_size=4k,data_file=data.raw,data_file_raw=on \
    datafile.qcow2 4M
io datafile.qcow2 "write -P 0x79 0 8k"
keep v3-4k-data-file datafile.qcow2

# LUKS inside qcow2: qemu-img's default cipher (aes-256-xts) with no data
# written (its 2 MiB key slot area comes before any data), and aes-128
# cbc-plain64 with data.
img --object "$SECRET" -f qcow2 -o cluster_size=4k,$LUKS luks256.qcow2 4M
keep v3-4k-luks-aes-256-xts luks256.qcow2
img --object "$SECRET" -f qcow2 \
    -o cluster_size=4k,$LUKS,encrypt.cipher-alg=aes-128,encrypt.cipher-mode=cbc,encrypt.ivgen-alg=plain64 \
    luks128.qcow2 4M
io_enc luks128.qcow2 "write -P 0x7a 0 8k" "write -P 0x7b 1M 4k"
keep v3-4k-luks-aes-128-cbc-plain64 luks128.qcow2

# Legacy AES (the key is the passphrase).
img --object "$SECRET" -f qcow2 \
    -o cluster_size=4k,encrypt.format=aes,encrypt.key-secret=sec0 aes.qcow2 4M
io_enc aes.qcow2 "write -P 0x7c 0 8k" "write -P 0x7d 1M 4k"
keep v3-4k-aes aes.qcow2

du -sh "$open" "$header"
