#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite bitmap and persistent dirty bitmaps in qcow2 (issue 26):
each operation done by us and by qemu-img on the same image gives the
same bitmaps (qemu-img info) and the same bits (read from the on-disk
tables below), qemu-img check stays clean either way; writes through our
tool dirty the enabled bitmaps as QEMU's writes do; convert --bitmaps as
qemu-img's; errors in qemu-img's words."""
import json
import os
import re
import shutil
import struct

from qiltest import (QEMU_IMG, SECRET, TestCase, file_bytes, main, qemu_img,
                     qil, random_file, run)

QEMU_IO = shutil.which("qemu-io")
SIZE = 8 << 20
BITMAPS_EXT = 0x23852875


def read_bitmaps(path):
    """{name: (granularity, flags, dirty granules)} from the image file:
    the spec's header extension, directory and tables, independently of
    both tools."""
    with open(path, "rb") as f:
        data = f.read()
    cluster = 1 << struct.unpack(">I", data[20:24])[0]
    size = struct.unpack(">Q", data[24:32])[0]
    autoclear = struct.unpack(">Q", data[88:96])[0]
    off = struct.unpack(">I", data[100:104])[0]
    nb = 0
    while off + 8 <= cluster:
        typ, length = struct.unpack(">II", data[off:off + 8])
        if typ == 0:
            break
        if typ == BITMAPS_EXT and autoclear & 1:
            nb, _, dsize, doff = struct.unpack(">IIQQ",
                                               data[off + 8:off + 32])
        off += 8 + (length + 7) // 8 * 8
    out = {}
    pos = doff if nb else 0
    for _ in range(nb):
        toff, tsize, flags, _, gbits, nlen, extra = struct.unpack(
            ">QIIBBHI", data[pos:pos + 24])
        name = data[pos + 24 + extra:pos + 24 + extra + nlen].decode()
        pos += (24 + extra + nlen + 7) // 8 * 8
        bits = bytearray()
        for i in range(tsize):
            e = struct.unpack(">Q", data[toff + 8 * i:toff + 8 * i + 8])[0]
            o = e & 0x00fffffffffffe00
            bits += data[o:o + cluster] if o else (
                b"\xff" if e & 1 else b"\0") * cluster
        granules = -(-size // (1 << gbits))
        dirty = frozenset(i for i in range(granules)
                          if bits[i // 8] >> (i % 8) & 1)
        out[name] = (1 << gbits, flags, dirty)
    return out


def qemu_bitmaps(path):
    info = json.loads(qemu_img("info", "-U", "--output=json", path).stdout)
    return info["format-specific"]["data"].get("bitmaps", [])


def ours_and_qemu_error(proc_ours, proc_qemu):
    """The messages of both tools, program and node names aside."""
    def norm(text):
        text = re.sub(r"^(qemu-img-lite|qemu-img): ", "", text, flags=re.M)
        return re.sub(r"persistent in '[^']*'", "persistent in N", text)
    return norm(proc_ours.stderr), norm(proc_qemu.stderr)


class Bitmap(TestCase):
    def setUp(self):
        super().setUp()
        if not QEMU_IMG or not QEMU_IO:
            self.skipTest("qemu-img and qemu-io are needed (qemu-utils)")

    def io(self, img, *cmds):
        args = [QEMU_IO]
        for c in cmds:
            args += ["-c", c]
        run(args + [img])

    def mk(self, name, *opts, size=SIZE):
        path = self.path(name)
        qemu_img("create", "-q", "-f", "qcow2", *opts, path, str(size))
        return path

    def twins(self, name="img", *opts):
        """Two identical images: one for us, one for qemu-img."""
        a = self.mk(name + ".ours.qcow2", *opts)
        b = self.path(name + ".qemu.qcow2")
        shutil.copy(a, b)
        return a, b

    def assertClean(self, path):
        qemu_img("check", path)
        qil("check", path)

    def assertSame(self, ours, theirs):
        self.assertEqual(qemu_bitmaps(ours), qemu_bitmaps(theirs))
        self.assertEqual(read_bitmaps(ours), read_bitmaps(theirs))
        # Our allocator only appends: the files' sizes differ.
        info = [json.loads(qil("info", "--output=json", p).stdout)
                for p in (ours, theirs)]
        for i in info:
            del i["actual-size"], i["filename"]
        self.assertEqual(info[0], info[1])
        self.assertClean(ours)
        self.assertClean(theirs)

    def both(self, ours, theirs, *args):
        qil("bitmap", *args[:-1], ours, args[-1])
        qemu_img("bitmap", *args[:-1], theirs, args[-1])

    # ---- Each operation, compared with qemu-img's

    def test_add(self):
        a, b = self.twins()
        self.both(a, b, "--add", "b0")
        self.both(a, b, "--add", "-g", "512", "fine")
        self.both(a, b, "--add", "--disable", "-g", "1M", "off")
        self.both(a, b, "--add", "-g", "2G", "huge")
        self.assertSame(a, b)
        self.assertEqual([(m["name"], m["flags"], m["granularity"])
                          for m in qemu_bitmaps(a)],
                         [("b0", ["auto"], 65536), ("fine", ["auto"], 512),
                          ("off", [], 1 << 20), ("huge", ["auto"], 1 << 31)])

    def test_default_granularity_follows_clusters(self):
        for cs in ("512", "2M"):
            a, b = self.twins("cs" + cs, "-o", "cluster_size=" + cs)
            self.both(a, b, "--add", "b0")
            self.assertSame(a, b)

    def dirty_image(self, name="img"):
        """qemu-img's bitmaps with bits set by qemu-io's writes."""
        a = self.mk(name + ".ours.qcow2")
        qemu_img("bitmap", "--add", a, "b0")
        qemu_img("bitmap", "--add", "-g", "4k", a, "fine")
        self.io(a, "write 1M 64k", "write 3000 5000", "write 7M 512")
        qemu_img("bitmap", "--add", "--disable", "-g", "128k", a, "off")
        qemu_img("bitmap", "--merge", "b0", a, "off")
        self.io(a, "write 5M 4k")
        b = self.path(name + ".qemu.qcow2")
        shutil.copy(a, b)
        return a, b

    def test_remove_clear_enable_disable(self):
        a, b = self.dirty_image()
        self.assertTrue(read_bitmaps(a)["fine"][2])
        self.both(a, b, "--clear", "fine")
        self.both(a, b, "--disable", "b0")
        self.both(a, b, "--enable", "off")
        self.both(a, b, "--remove", "b0")
        self.assertSame(a, b)
        self.assertEqual(read_bitmaps(a)["fine"][2], frozenset())

    def test_several_operations_in_order(self):
        a, b = self.dirty_image()
        args = ["--add", "-g", "8k", "--merge", "fine", "--merge", "b0",
                "--disable", "new"]
        self.both(a, b, *args)
        self.both(a, b, "--clear", "--merge", "off", "--enable", "b0")
        self.assertSame(a, b)

    def test_merge_granularities(self):
        a, b = self.dirty_image()
        for gran in ("512", "16k", "1M"):
            self.both(a, b, "--add", "-g", gran, "m" + gran)
            self.both(a, b, "--merge", "fine", "--merge", "off",
                      "m" + gran)
        self.assertSame(a, b)
        self.assertTrue(read_bitmaps(a)["m1M"][2])

    def test_merge_from_other_image(self):
        src, _ = self.dirty_image("src")
        a, b = self.twins()
        self.both(a, b, "--add", "-g", "32k", "copy")
        self.both(a, b, "-b", src, "-F", "qcow2", "--merge", "fine", "copy")
        self.both(a, b, "-b", src, "--merge", "off", "copy")
        self.assertSame(a, b)
        self.assertEqual(read_bitmaps(a)["copy"][2],
                         read_bitmaps(b)["copy"][2])

    def test_qemu_img_reads_and_changes_ours(self):
        # Ours made, qemu-img's operations on it, and back.
        a, b = self.twins()
        qil("bitmap", "--add", "-g", "4k", a, "x")
        qil("bitmap", "--add", "--disable", a, "y")
        qemu_img("bitmap", "--add", "-g", "4k", b, "x")
        qemu_img("bitmap", "--add", "--disable", b, "y")
        self.io(a, "write 100k 300k")
        self.io(b, "write 100k 300k")
        for img in (a, b):
            qemu_img("bitmap", "--merge", "x", "--enable", img, "y")
            qil("bitmap", "--merge", "y", "--disable", img, "x")
        self.assertSame(a, b)

    # ---- Writes through our tool

    def commit_twins(self, *base_opts):
        a, b = self.twins("base", *base_opts)
        for img in (a, b):
            qemu_img("bitmap", "--add", "-g", "512", img, "fine")
            qemu_img("bitmap", "--add", img, "coarse")
            qemu_img("bitmap", "--add", "--disable", img, "off")
        tops = []
        for img in (a, b):
            top = img + ".top"
            qemu_img("create", "-q", "-f", "qcow2", "-b", img, "-F", "qcow2",
                     top)
            self.io(top, "write 70000 100", "write 2M 200k", "write 8191k 1k")
            tops.append(top)
        return a, b, tops

    def test_commit_marks_bitmaps_as_qemu_img(self):
        a, b, (ta, tb) = self.commit_twins()
        qil("commit", "-q", ta)
        qemu_img("commit", "-q", tb)
        self.assertSame(a, b)
        bm = read_bitmaps(a)
        self.assertTrue(bm["coarse"][2])
        self.assertEqual(bm["off"][2], frozenset())

    def test_convert_n_marks_bitmaps(self):
        a, b = self.twins()
        raw = self.path("src.raw")
        random_file(raw, SIZE)
        for img in (a, b):
            qemu_img("bitmap", "--add", "-g", "1M", img, "b0")
            qemu_img("bitmap", "--add", "--disable", img, "off")
        qil("convert", "-n", "-f", "raw", "-O", "qcow2", raw, a)
        qemu_img("convert", "-n", "-f", "raw", "-O", "qcow2", raw, b)
        self.assertSame(a, b)
        self.assertEqual(len(read_bitmaps(a)["b0"][2]), 8)

    def test_killed_writer_leaves_bitmap_in_use(self):
        """Killed before its N-th write, a convert -n leaves every enabled
        bitmap either stored clean with its bits, or flagged in-use
        (QEMU's "inconsistent"): never clean and stale."""
        raw = self.path("src.raw")
        random_file(raw, 1 << 20)
        outcomes = set()
        for n in (2, 3, 6, 40):
            img = self.mk(f"k{n}.qcow2", size=1 << 20)
            qemu_img("bitmap", "--add", "-g", "64k", img, "b0")
            proc = qil("convert", "-n", "-f", "raw", raw,
                       "--target-image-opts",
                       f"driver=qcow2,file.driver=blkdebug,"
                       f"file.kill-write={n},file.file.filename={img}",
                       check=False)
            _, flags, dirty = read_bitmaps(img)["b0"]
            if flags & 1:
                outcomes.add("in-use")
            else:
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(len(dirty), 16)
                outcomes.add("stored")
            qemu_img("check", img, check=False)
        self.assertIn("in-use", outcomes)

    # ---- convert --bitmaps

    def test_convert_bitmaps(self):
        src, _ = self.dirty_image()
        ours, theirs = self.path("o.qcow2"), self.path("t.qcow2")
        qil("convert", "--bitmaps", "-O", "qcow2", src, ours)
        qemu_img("convert", "--bitmaps", "-O", "qcow2", src, theirs)
        self.assertSame(ours, theirs)
        self.assertEqual(read_bitmaps(ours), read_bitmaps(src))

    def mark_in_use(self, path, name):
        with open(path, "r+b") as f:
            data = f.read(1 << 16)
            off = struct.unpack(">I", data[100:104])[0]
            while True:
                typ, length = struct.unpack(">II", data[off:off + 8])
                if typ == BITMAPS_EXT:
                    nb, _, _, pos = struct.unpack(">IIQQ",
                                                  data[off + 8:off + 32])
                    break
                off += 8 + (length + 7) // 8 * 8
            f.seek(pos)
            d = f.read(1 << 16)
            p = 0
            for _ in range(nb):
                nlen, extra = struct.unpack(">HI", d[p + 18:p + 24])
                if d[p + 24 + extra:p + 24 + extra + nlen] == name.encode():
                    f.seek(pos + p + 12)
                    f.write(struct.pack(">I", 3))
                p += (24 + extra + nlen + 7) // 8 * 8

    def test_inconsistent_bitmaps(self):
        src, copy = self.dirty_image()
        for img in (src, copy):
            self.mark_in_use(img, "fine")
        for args in (["--clear"], ["--enable"], ["--merge", "b0"]):
            ours = qil("bitmap", *args, src, "fine", check=False)
            theirs = qemu_img("bitmap", *args, copy, "fine", check=False)
            self.assertEqual(ours.returncode, 1)
            self.assertEqual(*ours_and_qemu_error(ours, theirs))
        ours = qil("convert", "--bitmaps", "-O", "qcow2", src,
                   self.path("o.qcow2"), check=False)
        theirs = qemu_img("convert", "--bitmaps", "-O", "qcow2", copy,
                          self.path("t.qcow2"), check=False)
        self.assertEqual(*ours_and_qemu_error(ours, theirs))
        self.assertFalse(os.path.exists(self.path("o.qcow2")))
        ours = qil("convert", "--bitmaps", "--skip-broken-bitmaps", "-O",
                   "qcow2", src, self.path("o.qcow2"))
        theirs = qemu_img("convert", "--bitmaps", "--skip-broken-bitmaps",
                          "-O", "qcow2", copy, self.path("t.qcow2"))
        self.assertEqual(*ours_and_qemu_error(ours, theirs))
        self.assertSame(self.path("o.qcow2"), self.path("t.qcow2"))
        # Writes leave an inconsistent bitmap alone; --remove takes it.
        self.io(src, "write 0 1M")
        self.io(copy, "write 0 1M")
        self.both(src, copy, "--remove", "fine")
        self.assertSame(src, copy)

    # ---- Bad input, qemu-img's messages

    def test_errors_as_qemu_img(self):
        a, b = self.twins()
        v2a, v2b = self.twins("v2", "-o", "compat=0.10")
        self.both(a, b, "--add", "b0")
        cases = [
            (["--add"], "b0"), (["--remove"], "nope"), (["--clear"], "nope"),
            (["--enable"], "nope"), (["--merge", "nope"], "b0"),
            (["--merge", "b0"], "nope"),
            (["--add", "-g", "1000"], "c"), (["--add", "-g", "256"], "c"),
            (["--add", "-g", "4G"], "c"), (["--add", "-g", "x"], "c"),
            (["--add"], ""), (["--add"], "x" * 1024),
            (["-g", "1M", "--clear"], "b0"), ([], "b0"), (["--add"], None),
            (["-F", "qcow2", "--add"], "c"), (["-b", a, "--add"], "c"),
            (["--add", "--add"], "c"), (["--bogus"], "c"),
        ]
        for args, name in cases:
            tail = [] if name is None else [name]
            ours = qil("bitmap", *args, a, *tail, check=False)
            theirs = qemu_img("bitmap", *args, b, *tail, check=False)
            self.assertEqual(ours.returncode, theirs.returncode, args)
            o, t = ours_and_qemu_error(ours, theirs)
            self.assertEqual(o.splitlines()[0], t.splitlines()[0], args)
        ours = qil("bitmap", "--add", v2a, "b", check=False)
        theirs = qemu_img("bitmap", "--add", v2b, "b", check=False)
        self.assertEqual(*ours_and_qemu_error(ours, theirs))
        raw = self.path("r.raw")
        qemu_img("create", "-q", "-f", "raw", raw, "1M")
        self.assertFails(["bitmap", "--add", "-f", "raw", raw, "b"],
                         "Operation add on bitmap b failed: Can't store "
                         "persistent bitmaps to")
        self.assertFails(["convert", "--bitmaps", "-O", "raw", a,
                          self.path("o.raw")],
                         "Format driver 'raw' does not support bitmaps")
        self.assertSame(a, b)

    def test_empty_image(self):
        """A bitmap of a 0-byte image: QEMU stores none (its table would
        have no entry; qemu-img fails with 'No memory'): refused, the
        image untouched; nor does resize make an image empty."""
        img = self.mk("empty.qcow2", size=0)
        before = file_bytes(img)
        self.assertFails(["bitmap", "--add", img, "b"],
                         "The image is empty (0 bytes)")
        self.assertEqual(file_bytes(img), before)
        full = self.mk("full.qcow2")
        qil("bitmap", "--add", full, "b")
        for args in (["--shrink", full, "0"], ["--shrink", full, f"-{SIZE}"]):
            self.assertFails(["resize", *args],
                             "New image size must be positive")
        self.assertClean(full)

    def test_resize_as_qemu_img(self):
        a, b = self.twins()
        for img in (a, b):
            qemu_img("bitmap", "--add", "-g", "4k", img, "b0")
            qemu_img("bitmap", "--add", "-g", "512", img, "b1")
            self.io(img, "write 2M 1M", "write -z 7M 1M")
        for size in ("20M", "--shrink 7700k", "30M"):
            qil("resize", "-q", a, *size.split())
            qemu_img("resize", "-q", b, *size.split())
        self.assertSame(a, b)
        self.assertEqual(os.path.getsize(a), os.path.getsize(b))
        # An inconsistent bitmap cannot follow: refused as by qemu-img.
        for img in (a, b):
            self.mark_in_use(img, "b1")
        ours = qil("resize", a, "40M", check=False)
        theirs = qemu_img("resize", b, "40M", check=False)
        self.assertEqual(ours.returncode, 1)
        self.assertEqual(*ours_and_qemu_error(ours, theirs))

    # ---- LUKS-encrypted qcow2, measure

    def test_luks_qcow2(self):
        a, b = self.twins("enc", "--object", SECRET, "-o",
                          "encrypt.format=luks,encrypt.key-secret=sec0,"
                          "encrypt.iter-time=10")
        # qemu-img wants the key, we do not (bitmaps are not encrypted).
        qil("bitmap", "--add", "-g", "16k", a, "b0")
        qemu_img("bitmap", "--object", SECRET, "--add", "-g", "16k",
                 "--image-opts",
                 f"driver=qcow2,file.filename={b},encrypt.key-secret=sec0",
                 "b0")
        raw = self.path("src.raw")
        random_file(raw, 1 << 20)
        for img, tool in ((a, qil), (b, qemu_img)):
            tool("convert", "-n", "--object", SECRET, "-f", "raw",
                 "--target-image-opts", raw,
                 f"driver=qcow2,file.filename={img},"
                 "encrypt.key-secret=sec0")
        self.assertEqual(read_bitmaps(a), read_bitmaps(b))
        self.assertEqual(len(read_bitmaps(a)["b0"][2]), 64)
        qemu_img("check", "--object", SECRET, "--image-opts",
                 f"driver=qcow2,file.filename={a},encrypt.key-secret=sec0")
        o, t = self.path("o.qcow2"), self.path("t.qcow2")
        opts = ["--object", SECRET, "--bitmaps", "-O", "qcow2", "-o",
                "encrypt.format=luks,encrypt.key-secret=sec0,"
                "encrypt.iter-time=10", "--image-opts",
                f"driver=qcow2,file.filename={a},encrypt.key-secret=sec0"]
        qil("convert", *opts, o)
        qemu_img("convert", *opts, t)
        self.assertEqual(read_bitmaps(o), read_bitmaps(t))

    def test_measure_counts_bitmaps(self):
        src, _ = self.dirty_image()
        ours = json.loads(qil("measure", "--output=json", "-O", "qcow2",
                              src).stdout)
        theirs = json.loads(qemu_img("measure", "--output=json", "-O",
                                     "qcow2", src).stdout)
        self.assertEqual(ours, theirs)
        self.assertIn("bitmaps", ours)


if __name__ == "__main__":
    main()
