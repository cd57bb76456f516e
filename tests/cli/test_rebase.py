#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite rebase (issue 26): safe rebase keeps what the overlay
reads, whatever the old and new backing files hold (also when one is
shorter, or absent, and for a LUKS-encrypted overlay); -b "" flattens;
-u only renames. Each result is checked by qemu-img (check, and the data
it reads) and compared with what qemu-img's own rebase makes."""
import json
import os
import shutil

from qiltest import (QEMU_IMG, SECRET, TestCase, file_bytes, main, qemu_img,
                     qil, run)

QEMU_IO = shutil.which("qemu-io")
CS = 65536


class Rebase(TestCase):
    def setUp(self):
        super().setUp()
        if not QEMU_IMG or not QEMU_IO:
            self.skipTest("qemu-img and qemu-io are needed (qemu-utils)")

    def io(self, img, *cmds, opts=None):
        args = [QEMU_IO]
        if opts:
            args += ["--object", SECRET, "--image-opts", opts]
        else:
            args += [img]
        for c in cmds:
            args[1:1] = ["-c", c]
        run(args)

    def img(self, name, size=6 * CS, backing=None, fmt="qcow2", encrypt=False):
        path = self.path(name)
        args = ["create", "-q", "-f", fmt]
        if backing:
            args += ["-b", backing, "-F", "qcow2"]
        if encrypt:
            args += ["--object", SECRET, "-o", "encrypt.format=luks,"
                     "encrypt.key-secret=sec0,encrypt.iter-time=10"]
        qemu_img(*args, path, str(size))
        return path

    def contents(self, img, opts=None):
        out = self.path("contents.raw")
        if os.path.exists(out):
            os.unlink(out)
        if opts:
            qemu_img("convert", "--object", SECRET, "--image-opts", opts,
                     "-O", "raw", out)
        else:
            qemu_img("convert", img, "-O", "raw", out)
        return file_bytes(out)

    def backing_of(self, img):
        info = json.loads(qemu_img("info", "--output=json", "-U",
                                   img).stdout)
        return info.get("backing-filename"), info.get(
            "backing-filename-format")

    def chain(self, tag):
        """old base, new base and overlay; the overlay reads X."""
        old = self.img(f"{tag}-old.qcow2")
        new = self.img(f"{tag}-new.qcow2", size=4 * CS)   # shorter
        self.io(old, f"write -P 0x11 0 {2 * CS}", f"write -P 0x33 {4 * CS} "
                f"{CS}")
        self.io(new, f"write -P 0x22 {CS} {2 * CS}", f"write -P 0x11 0 {CS}")
        top = self.img(f"{tag}-top.qcow2", backing=os.path.basename(old))
        self.io(top, f"write -P 0x44 {3 * CS} 4096")
        return old, new, top

    def test_safe_rebase_as_qemu_img(self):
        old, new, top = self.chain("ours")
        before = self.contents(top)
        qil("rebase", "-b", os.path.basename(new), "-F", "qcow2", top)
        self.assertEqual(self.backing_of(top),
                         (os.path.basename(new), "qcow2"))
        self.assertEqual(self.contents(top), before)
        qemu_img("check", top)
        # qemu-img's own rebase of the same chain: the same data, and the
        # same clusters kept by the overlay.
        _, new2, top2 = self.chain("theirs")
        qemu_img("rebase", "-b", os.path.basename(new2), "-F", "qcow2", top2)
        self.assertEqual(self.contents(top2), before)
        # Where qemu-img writes a cluster of zeroes as data, we mark it a
        # zero cluster (no space taken): both are the overlay's own.
        self.assertEqual(self.own_ranges(top), self.own_ranges(top2))

    @staticmethod
    def own_ranges(img):
        """The ranges the overlay holds itself (depth 0), merged."""
        out = []
        for e in json.loads(qemu_img("map", "--output=json", img).stdout):
            if e["depth"] != 0 or not (e["data"] or e["zero"]):
                continue
            if out and out[-1][1] == e["start"]:
                out[-1][1] += e["length"]
            else:
                out.append([e["start"], e["start"] + e["length"]])
        return out

    def test_flatten_and_from_nothing(self):
        """-b "" copies what the backing file gave into the overlay; then
        rebasing onto a base with data keeps the zeroes (qemu-iotests 252:
        explicit zero clusters, not holes)."""
        old, new, top = self.chain("f")
        before = self.contents(top)
        qil("rebase", "-b", "", top)
        self.assertEqual(self.backing_of(top), (None, None))
        self.assertEqual(self.contents(top), before)
        qemu_img("check", top)
        qil("rebase", "-b", os.path.basename(old), "-F", "qcow2", top)
        self.assertEqual(self.contents(top), before)
        qemu_img("check", top)

    def test_unsafe_and_refusals(self):
        old, new, top = self.chain("u")
        before = self.contents(top)
        self.assertFails(["rebase", top], "Must specify backing file (-b) "
                         "or use unsafe mode (-u)")
        self.assertFails(["rebase", "-u", "-b", os.path.basename(new), top],
                         "Could not change the backing file to '"
                         f"{os.path.basename(new)}': backing format must be "
                         "specified")
        self.assertFails(["rebase", "-b", "missing.qcow2", "-F", "qcow2",
                          top], "Could not open new backing file "
                         "'missing.qcow2'")
        self.assertEqual(self.contents(top), before)
        # -u: only the name; the old file moved away, the overlay follows.
        os.rename(old, self.path("moved.qcow2"))
        qil("rebase", "-u", "-b", "moved.qcow2", "-F", "qcow2", top)
        self.assertEqual(self.backing_of(top), ("moved.qcow2", "qcow2"))
        self.assertEqual(self.contents(top), before)

    def test_unknown_header_extension_kept(self):
        """-u rewrites the header: an extension of an unknown type stays
        (as QEMU keeps it: qemu-iotests 031), and -F takes any format
        name QEMU knows, host_device included, as it only stores it."""
        img = self.path("x.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", img, "1M")
        ext = (0x12345678).to_bytes(4, "big") + (31).to_bytes(4, "big") + \
            b"This is a test header extension" + bytes(1)
        with open(img, "r+b") as f:
            head = bytearray(f.read(65536))
            off = int.from_bytes(head[100:104], "big")     # header_length
            while int.from_bytes(head[off:off + 4], "big"):
                n = int.from_bytes(head[off + 4:off + 8], "big")
                off += 8 + (n + 7) // 8 * 8
            head[off:off + len(ext) + 8] = ext + bytes(8)
            f.seek(0)
            f.write(head)
        for args in (["-b", ""], ["-b", "/some/backing/file/path", "-F",
                                  "host_device"]):
            qil("rebase", "-u", *args, img)
            with open(img, "rb") as f:
                self.assertIn(ext[:39], f.read(65536), args)
            if not args[1]:
                qemu_img("check", img)      # (no backing file to open)
        self.assertEqual(self.backing_of(img),
                         ("/some/backing/file/path", "host_device"))
        self.assertFails(["rebase", "-u", "-b", "b", "-F", "nosuch", img],
                         "Invalid format name: 'nosuch'")

    def test_luks_overlay(self):
        """An encrypted overlay on a plain base: the data copied into it
        is encrypted with its key; qemu-img reads it back the same."""
        old = self.img("e-old.qcow2")
        new = self.img("e-new.qcow2")
        self.io(old, f"write -P 0x5a 0 {3 * CS}")
        top = self.img("e-top.qcow2", backing="e-old.qcow2", encrypt=True)
        opts = f"driver=qcow2,encrypt.key-secret=sec0,file.filename={top}"
        before = self.contents(top, opts)
        qil("rebase", "--object", SECRET, "--image-opts", opts, "-b",
            "e-new.qcow2", "-F", "qcow2")
        self.assertEqual(self.contents(top, opts), before)
        qemu_img("check", "--object", SECRET, "--image-opts", opts)
        # The plain text is not in the overlay's file.
        self.assertNotIn(b"\x5a" * 4096, file_bytes(top))


if __name__ == "__main__":
    main()
