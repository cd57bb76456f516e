#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Install whatever of the build and test dependencies is missing (Debian 12).
# Idempotent, and quiet when everything is already there.
# --fuzz: also clang and its libFuzzer runtime (make fuzz).
set -euo pipefail

packages=(
    # build
    meson ninja-build pkg-config gcc make
    libglib2.0-dev nettle-dev
    # LUKS2 metadata and argon2 key slots
    libjson-glib-dev libargon2-dev
    # qcow2 compressed clusters
    zlib1g-dev libzstd-dev
    # interop tests: the real qemu-img and cryptsetup
    qemu-utils cryptsetup-bin
    # the NBD protocol driver (libnbd), and NBD servers and clients for
    # its interop tests (nbdkit, qemu-nbd from qemu-utils, nbdinfo)
    libnbd-dev nbdkit libnbd-bin
    # qemu-nbd-lite: an nbdkit plugin (nbdkit-plugin-dev); its tests mount
    # exports with nbdfuse (fuse3's fusermount3) and decrypt independently
    # (python3-cryptography); the NBD TLS tests (client and server) make
    # their keys and certificates with psktool and certtool (gnutls-bin)
    nbdkit-plugin-dev fuse3 gnutls-bin python3-cryptography
    # online re-encryption's test writes random blocks through NBD while
    # the server re-encrypts, from python (libnbd's bindings)
    python3-libnbd
    # manual pages from docs/*.md (meson install)
    pandoc
    # the RBD protocol driver (librbd-dev), and the throwaway Ceph cluster
    # of its tests (scripts/ceph-cluster.sh: a mon, an OSD, the ceph and
    # rbd commands; no ceph-mgr, slow to install and not needed), with
    # qemu-img's own rbd driver (qemu-block-extra) for the interop tests
    librbd-dev ceph-mon ceph-osd ceph-common qemu-block-extra
    # tests/cli/test_cache.py: which syncs a convert makes
    strace
    # the demo's sample file system and the shared test images
    dosfstools mtools xz-utils
)
if [ "${1:-}" = --fuzz ]; then
    packages+=(clang libclang-rt-dev)
fi

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
        missing+=("$p")
    fi
done

[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=sudo
    else
        echo "install-deps: missing packages (${missing[*]}) and not root" >&2
        exit 1
    fi
else
    SUDO=
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
