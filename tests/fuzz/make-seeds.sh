#!/bin/sh
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
ninja -C "$build" tests/fuzz/make-seed-luks1 >/dev/null
seed_luks1="$build/tests/fuzz/make-seed-luks1"

corpus="$src/corpus"
mkdir -p "$corpus/fuzz-luks1-open" "$corpus/fuzz-luks1-header"

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

du -sh "$corpus"/*
