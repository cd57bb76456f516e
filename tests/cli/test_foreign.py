# SPDX-License-Identifier: GPL-2.0-or-later
"""Images of the formats qemu-img knows and qemu-img-lite does not read
(vmdk, vhdx, vdi, vpc, qed, qcow, parallels, dmg, cloop, bochs): every
command refuses them naming the format, exit 1, never reads them as raw,
and leaves no output file and the image untouched. -f raw still reads the
bytes, as qemu-img lets one.

The images come from the real qemu-img where it can create the format;
dmg, cloop and bochs images are built here after each format's layout, and
the real qemu-img, when installed, must open them as that format.
"""
import base64
import hashlib
import json
import os
import struct
import zlib

from qiltest import (ITER_TIME, QEMU_IMG, SECRET, TestCase, main, qemu_img,
                     qil, random_file)

# The formats qemu-img creates, with the options that make each kind.
QEMU_IMG_MADE = [
    ("vmdk", "a.vmdk", []),
    ("vmdk", "stream.vmdk", ["-o", "subformat=streamOptimized"]),
    ("vmdk", "flat.vmdk", ["-o", "subformat=monolithicFlat"]),
    ("vhdx", "a.vhdx", []),
    ("vdi", "a.vdi", []),
    ("vpc", "dynamic.vhd", []),
    ("vpc", "fixed.vhd", ["-o", "subformat=fixed"]),
    ("qed", "a.qed", []),
    ("qcow", "a.qcow", []),
    ("parallels", "a.parallels", []),
]

ALL_FORMATS = ["vmdk", "vhdx", "vdi", "vpc", "qed", "qcow", "parallels",
               "dmg", "cloop", "bochs"]


def make_bochs(path, disk_size=1 << 20, extent_size=4096):
    """A Bochs "growing" redolog: a 512-byte little-endian header
    (NUL-terminated magic, type and subtype; version 2.0, header size,
    catalog entries, bitmap and extent sizes, disk size), then the catalog,
    every extent unallocated (0xffffffff)."""
    catalog = disk_size // extent_size
    hdr = bytearray(512)
    hdr[0:23] = b"Bochs Virtual HD Image\0"
    hdr[32:40] = b"Redolog\0"
    hdr[48:56] = b"Growing\0"
    struct.pack_into("<IIIIIIQ", hdr, 64, 0x00020000, 512, catalog, 512,
                     extent_size, 0, disk_size)
    with open(path, "wb") as f:
        f.write(bytes(hdr) + b"\xff" * (4 * catalog))


CLOOP_SCRIPT = (b"#!/bin/sh\n#V2.0 Format\n"
                b"modprobe cloop file=$0 && mount -r -t iso9660 "
                b"/dev/cloop $1\n")


def make_cloop(path, block_size=65536):
    """A cloop 2.0 image: the mount script in the first 128 bytes, then the
    block size and block count (big-endian), the blocks' file offsets
    (count + 1, big-endian 64-bit) and one zlib-compressed block."""
    block = zlib.compress(bytes(block_size))
    head = CLOOP_SCRIPT.ljust(128, b"\0") + struct.pack(">II", block_size, 1)
    first = len(head) + 16
    head += struct.pack(">QQ", first, first + len(block))
    with open(path, "wb") as f:
        f.write(head + block)


def make_dmg(path, sectors=2048):
    """An Apple UDIF (dmg) image: a property list whose <data> holds a
    "mish" block table (one chunk of zeroes, then the terminator), and the
    512-byte big-endian "koly" trailer at the very end (version 4, header
    size 512, where the XML is, the sector count). No header at the start:
    only the trailer says what this file is."""
    mish = bytearray(204)
    struct.pack_into(">4sIQQQII", mish, 0, b"mish", 1, 0, sectors, 0, 0, 2)
    struct.pack_into(">I", mish, 200, 2)
    mish += struct.pack(">IIQQQQ", 0, 0, 0, sectors, 0, 0)          # zeroes
    mish += struct.pack(">IIQQQQ", 0xffffffff, 0, sectors, 0, 0, 0)  # end
    xml = (b'<?xml version="1.0"?>\n<plist version="1.0"><dict>'
           b"<key>blkx</key><array><dict><key>Data</key><data>" +
           base64.b64encode(bytes(mish)) +
           b"</data></dict></array></dict></plist>\n")
    koly = bytearray(512)
    struct.pack_into(">4sII", koly, 0, b"koly", 4, 512)
    struct.pack_into(">QQ", koly, 0xd8, 0, len(xml))
    struct.pack_into(">Q", koly, 0x1ec, sectors)
    with open(path, "wb") as f:
        f.write(xml + bytes(koly))


HAND_MADE = [
    ("bochs", "a.bochs", make_bochs),
    ("cloop", "a.cloop", make_cloop),
    # named .img: the trailer, not the name, says dmg
    ("dmg", "dmg.img", make_dmg),
]


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class Foreign(TestCase):
    def images(self):
        """(format, path) of every image: qemu-img's (if installed) and the
        hand-made ones, which qemu-img must take for what they are."""
        images = []
        for fmt, name, make in HAND_MADE:
            path = self.path(name)
            make(path)
            if QEMU_IMG:
                info = json.loads(qemu_img("info", "-f", fmt,
                                           "--output=json", path).stdout)
                self.assertEqual(info["format"], fmt)
                self.assertGreater(info["virtual-size"], 0)
            images.append((fmt, path))
        if QEMU_IMG:
            for fmt, name, opts in QEMU_IMG_MADE:
                path = self.path(name)
                qemu_img("create", "-q", "-f", fmt, *opts, path, "4M")
                images.append((fmt, path))
        return images

    def assertRefused(self, args, fmt, rc=1):
        proc = self.assertFails(args, f"This is a {fmt} image; "
                                "qemu-img-lite reads raw", rc=rc)
        self.assertNotIn("raw", proc.stdout)
        return proc

    def test_every_command_refuses(self):
        raw = self.path("disk.raw")
        random_file(raw, 4 << 20)
        out = self.path("out.img")
        for fmt, img in self.images():
            with self.subTest(image=os.path.basename(img)):
                before = digest(img)
                self.assertRefused(["info", img], fmt)
                self.assertRefused(["info", "--output=json", img], fmt)
                self.assertRefused(["info", "--image-opts",
                                    f"file.filename={img}"], fmt)
                self.assertRefused(["convert", "-O", "raw", img, out], fmt)
                self.assertRefused(["convert", "--object", SECRET, "-O",
                                    "luks", "-o", "key-secret=sec0,"
                                    f"iter-time={ITER_TIME}", img, out], fmt)
                self.assertFalse(os.path.exists(out))
                # an existing target is opened, and refused, too
                self.assertRefused(["convert", "-n", "-f", "raw", raw, img],
                                   fmt)
                self.assertRefused(["compare", img, raw], fmt, rc=2)
                self.assertRefused(["compare", "-f", "raw", raw, img], fmt,
                                   rc=2)
                self.assertRefused(["measure", "-O", "raw", img], fmt)
                self.assertRefused(["amend", "-o", "size=8M", img], fmt)
                self.assertRefused(["resize", img, "+1M"], fmt)
                self.assertEqual(digest(img), before)

    def test_explicit_raw_reads_the_bytes(self):
        """-f raw is the user's choice: the container's bytes, as qemu-img."""
        for fmt, img in self.images():
            with self.subTest(image=os.path.basename(img)):
                info = json.loads(qil("info", "-f", "raw", "--output=json",
                                      img).stdout)
                self.assertEqual(info["format"], "raw")
                self.assertEqual(info["virtual-size"],
                                 -(-os.path.getsize(img) // 512) * 512)

    def test_format_named_for_another_file(self):
        raw = self.path("disk.raw")
        random_file(raw, 1 << 20)
        for fmt in ALL_FORMATS:
            with self.subTest(fmt=fmt):
                self.assertFails(["info", "-f", fmt, raw],
                                 f"Image format '{fmt}' is not supported; "
                                 "qemu-img-lite reads raw")
                self.assertFails(["info", "--image-opts",
                                  f"driver={fmt},file.filename={raw}"],
                                 f"Image format '{fmt}' is not supported")

    def test_not_created(self):
        raw = self.path("disk.raw")
        random_file(raw, 1 << 20)
        for fmt in ALL_FORMATS:
            with self.subTest(fmt=fmt):
                new = self.path(f"new.{fmt}")
                message = (f"Image format '{fmt}' is not supported; "
                           "qemu-img-lite creates raw")
                proc = self.assertFails(["create", "-f", fmt, new, "1M"],
                                        message)
                self.assertNotIn("does not support image creation",
                                 proc.stderr)
                self.assertFails(["convert", "-O", fmt, raw, new], message)
                self.assertFalse(os.path.exists(new))
                self.assertFails(["measure", "-O", fmt, "--size", "1M"],
                                 message)
                self.assertFails(["measure", "-O", fmt, raw], message)


if __name__ == "__main__":
    main()
