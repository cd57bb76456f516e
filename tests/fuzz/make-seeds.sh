#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Make the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/)
# with our own format code: small images with a few PBKDF2 iterations,
# truncated after their key material (make-seed-luks1.c says how), and
# the bare headers of the same images for the header targets.
#
#   tests/fuzz/make-seeds.sh [BUILD-DIR]     (default: build)
#
# The images get new random keys and salts each time: rerun only to add
# seeds or after a format change, and commit the result.
set -eu

src=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
ninja -C "$build" tests/fuzz/make-seed-luks1 tests/fuzz/make-seed-luks2 \
    >/dev/null
seed_luks1="$build/tests/fuzz/make-seed-luks1"
seed_luks2="$build/tests/fuzz/make-seed-luks2"

corpus="$src/corpus"
for t in fuzz-luks1-open fuzz-luks1-header fuzz-luks2-open fuzz-luks2-header \
         fuzz-options; do
    mkdir -p "$corpus/$t"
done

# name, then make-seed-luks1 options; the open target's passphrase is fuzz.
luks1() {
    name=$1
    shift
    out="$corpus/fuzz-luks1-open/$name"
    "$seed_luks1" "$@" "$out"
    # The header target reads 592 bytes (the LUKS1 phdr) and nothing more.
    head -c 592 "$out" > "$corpus/fuzz-luks1-header/$name"
}

luks1 aes-256-xts-plain64-sha256 --passphrase fuzz
luks1 aes-128-cbc-essiv-sha1-2slots --cipher aes-128 --mode cbc \
    --ivgen essiv --ivgen-hash sha256 --hash sha1 \
    --passphrase other --passphrase fuzz
luks1 serpent-128-cbc-plain-sha512 --cipher serpent-128 --mode cbc \
    --ivgen plain --hash sha512 --passphrase fuzz
luks1 twofish-128-xts-plain64-ripemd160 --cipher twofish-128 --mode xts \
    --hash ripemd160 --passphrase fuzz
luks1 cast5-128-cbc-plain64-sha256 --cipher cast5-128 --mode cbc \
    --passphrase fuzz
luks1 des3-cbc-plain-sha256 --cipher 3des --mode cbc --ivgen plain \
    --passphrase fuzz
luks1 aes-128-ecb-sha256 --cipher aes-128 --mode ecb --passphrase fuzz
luks1 aes-128-ctr-plain64-sha224 --cipher aes-128 --mode ctr --hash sha224 \
    --passphrase fuzz
luks1 aes-128-lrw-benbi-sha256 --cipher aes-128 --mode lrw --ivgen benbi \
    --passphrase fuzz
luks1 aes-128-xts-essiv-sha256 --cipher aes-128 --mode xts --ivgen essiv \
    --ivgen-hash sha256 --passphrase fuzz
luks1 aes-128-cbc-plain64-whirlpool --cipher aes-128 --mode cbc \
    --hash whirlpool --passphrase fuzz
luks1 aes-128-cbc-plain64-detached --cipher aes-128 --mode cbc --detached \
    --passphrase fuzz
luks1 aes-128-cbc-plain64-wrong-passphrase --cipher aes-128 --mode cbc \
    --passphrase not-fuzz

# name, then make-seed-luks2 options; the same image's two header copies
# (2 x 16 KiB) seed the header target, and so does its JSON text alone
# (the target wraps JSON in headers of its own).
luks2() {
    name=$1
    shift
    "$seed_luks2" "$@" "$corpus/fuzz-luks2-open/$name"
    hdr="$corpus/fuzz-luks2-header/$name"
    "$seed_luks2" --header-only "$@" "$hdr"
    tail -c +4097 "$hdr" | head -c 12288 | tr -d '\000' > "$hdr.json"
}

luks2 aes-128-xts-argon2id-4k --passphrase fuzz
luks2 aes-128-xts-argon2i-512 --kdf argon2i --sector-size 512 \
    --passphrase fuzz
luks2 aes-128-xts-pbkdf2-sha256 --kdf pbkdf2 --passphrase fuzz
luks2 aes-128-cbc-essiv-pbkdf2-sha1 --mode cbc --ivgen essiv \
    --ivgen-hash sha256 --kdf pbkdf2 --hash sha1 --passphrase fuzz
luks2 twofish-128-cbc-plain64-2slots --cipher twofish-128 --mode cbc \
    --passphrase other --passphrase fuzz
luks2 serpent-128-xts-label --cipher serpent-128 --label fuzz-label \
    --passphrase fuzz
luks2 aes-128-cbc-plain64-whirlpool --mode cbc --kdf pbkdf2 \
    --hash whirlpool --passphrase fuzz
luks2 aes-128-xts-detached --detached --passphrase fuzz
luks2 aes-128-cbc-plain64-wrong-passphrase --mode cbc --passphrase not-fuzz

# Option strings as the command line gives them.
opt() {
    printf '%s' "$2" > "$corpus/fuzz-options/$1"
}
opt object-secret-data 'secret,id=sec0,data=fuzz'
opt object-secret-base64 'secret,id=sec0,data=ZnV6eg==,format=base64'
opt object-secret-file 'secret,id=sec0,file=/dev/null'
opt image-opts-luks 'driver=luks,key-secret=sec0,file.filename=disk.img'
opt image-opts-detached \
    'driver=luks,key-secret=sec0,file.driver=file,file.filename=d.img,header.filename=h.img,file.locking=off'
opt image-opts-implied 'disk,,with,,commas.img'
opt create-luks1 \
    'key-secret=sec0,cipher-alg=aes-256,cipher-mode=xts,ivgen-alg=plain64,hash-alg=sha256,iter-time=10'
opt create-luks2 \
    'luks-version=2,key-secret=sec0,kdf=argon2id,kdf-memory=32,sector-size=4096,label=x'
opt create-sizes 'size=1.5G,align-payload=2048,preallocation=off'
opt create-multi 'key-secret=sec0
iter-time=10,detached-header=on
size=4k'
opt size-fraction '1.5G'
opt size-bytes '1073741824'
opt size-exabytes '15E'

du -sh "$corpus"/*
