# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite check against the real qemu-img 7.2 check.

Images are made by qemu-img and written by qemu-io, then damaged with
small edits of their metadata: a refcount raised (a leak), zeroed (a
referenced cluster marked free), an L2 entry pointing at another entry's
cluster (two references, refcount 1), L1 entries pointing past the end of
the file or unaligned. For each, on two identical copies, our check and
qemu-img's must print the same stdout and stderr (our "qemu-img-lite:"
prefix read as "qemu-img:"), the same --output=json and exit with the same
status; after our -r leaks / -r all, qemu-img's own check must agree with
what is left (clean when we say so).
"""
import os
import shutil
import struct
import subprocess

from qiltest import (ITER_TIME, QEMU_IMG, TOOL, TestCase, main, qemu_img,
                     qil)

QEMU_IO = shutil.which("qemu-io")
SECRET = "secret,id=sec0,data=check pass"
COPIED = 1 << 63
OFFSET_MASK = 0x00fffffffffffe00


class Qcow2File:
    """Just enough of the qcow2 header to damage an image (spec, Header)."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            h = f.read(104)
        self.version = struct.unpack(">I", h[4:8])[0]
        self.cluster_bits = struct.unpack(">I", h[20:24])[0]
        self.cluster_size = 1 << self.cluster_bits
        self.l1_offset = struct.unpack(">Q", h[40:48])[0]
        self.reftable_offset = struct.unpack(">Q", h[48:56])[0]
        self.order = struct.unpack(">I", h[96:100])[0] \
            if self.version == 3 else 4

    def read(self, offset, n):
        with open(self.path, "rb") as f:
            f.seek(offset)
            return f.read(n)

    def write(self, offset, data):
        with open(self.path, "r+b") as f:
            f.seek(offset)
            f.write(data)

    def u64(self, offset):
        return struct.unpack(">Q", self.read(offset, 8))[0]

    def set_u64(self, offset, v):
        self.write(offset, struct.pack(">Q", v))

    def l1(self, i):
        return self.u64(self.l1_offset + 8 * i)

    def set_l1(self, i, v):
        self.set_u64(self.l1_offset + 8 * i, v)

    def l2(self, i, j):
        return self.u64((self.l1(i) & OFFSET_MASK) + 8 * j)

    def set_l2(self, i, j, v):
        self.set_u64((self.l1(i) & OFFSET_MASK) + 8 * j, v)

    def set_refcount(self, cluster, value):
        """16-bit refcounts (the default), first refcount block only."""
        assert self.order == 4
        block = self.u64(self.reftable_offset)
        self.write(block + 2 * cluster, struct.pack(">H", value))

    def refcount(self, cluster):
        block = self.u64(self.reftable_offset)
        return struct.unpack(">H", self.read(block + 2 * cluster, 2))[0]


def run_in(cwd, args):
    return subprocess.run([str(a) for a in args], capture_output=True,
                          text=True, cwd=cwd)


class CheckTest(TestCase):
    def setUp(self):
        super().setUp()
        self.need_qemu_img()
        if not QEMU_IO:
            self.skipTest("qemu-io is not installed")
        self.ours_dir = self.path("ours")
        self.theirs_dir = self.path("theirs")
        os.mkdir(self.ours_dir)
        os.mkdir(self.theirs_dir)

    def make(self, opts=None, size="64M",
             writes=("write -P 1 0 128k", "write -P 2 10M 64k"),
             name="img.qcow2"):
        path = self.path(name)
        args = ["create", "-q", "-f", "qcow2"]
        if opts:
            args += ["-o", opts]
        qemu_img(*args, path, size)
        cmds = []
        for w in writes:
            cmds += ["-c", w]
        if cmds:
            proc = run_in(self.dir, [QEMU_IO, "-f", "qcow2", path, *cmds])
            self.assertEqual(proc.returncode, 0, proc.stderr)
        return path

    def both(self, src, *args, image="img.qcow2", name_last=True):
        """Run our check and qemu-img's on two copies of src; compare."""
        for d in (self.ours_dir, self.theirs_dir):
            shutil.copyfile(src, os.path.join(d, image))
        if name_last:
            args = (*args, image)
        ours = run_in(self.ours_dir, [TOOL, "check", *args])
        theirs = run_in(self.theirs_dir, [QEMU_IMG, "check", *args])
        self.assertEqual(ours.stdout, theirs.stdout, f"check {args}")
        self.assertEqual(ours.stderr.replace("qemu-img-lite", "qemu-img"),
                         theirs.stderr, f"check {args}")
        self.assertEqual(ours.returncode, theirs.returncode,
                         f"check {args}: {ours.stderr}")
        return ours

    def both_modes(self, src, rc, *args):
        """Human and JSON output as qemu-img's, exit status rc."""
        human = self.both(src, *args)
        self.assertEqual(human.returncode, rc, human.stdout + human.stderr)
        self.both(src, "--output=json", *args)
        return human

    def repair(self, src, mode, rc, after_rc=None):
        """Our -r mode as qemu-img's, then qemu-img's verdict on ours."""
        proc = self.both(src, "-r", mode)
        self.assertEqual(proc.returncode, rc, proc.stdout + proc.stderr)
        self.both(src, "-r", mode, "--output=json")
        fixed = os.path.join(self.ours_dir, "img.qcow2")
        shutil.copyfile(src, fixed)
        qil("check", "-r", mode, fixed, check=False)
        verdict = run_in(self.dir, [QEMU_IMG, "check", fixed])
        self.assertEqual(verdict.returncode,
                         rc if after_rc is None else after_rc,
                         verdict.stdout + verdict.stderr)
        return fixed

    # ---- clean images

    def test_clean_image(self):
        src = self.make()
        proc = self.both_modes(src, 0)
        self.assertIn("No errors were found on the image.", proc.stdout)
        self.assertIn("Image end offset:", proc.stdout)

    def test_clean_layouts(self):
        """Cluster sizes, versions, refcount widths, subclusters."""
        writes = ("write -P 1 0 200k", "write -P 2 3M 4k", "write -z 1M 64k",
                  "discard 0 64k", "write -P 3 7M 1M")
        for opts in ("cluster_size=512", "cluster_size=2M", "compat=0.10",
                     "refcount_bits=1", "refcount_bits=64",
                     "extended_l2=on,cluster_size=128k",
                     "preallocation=metadata", "lazy_refcounts=on"):
            with self.subTest(opts=opts):
                src = self.make(opts, size="8M", writes=writes)
                self.both_modes(src, 0)
                os.unlink(src)

    def test_compressed(self):
        raw = self.path("data.raw")
        with open(raw, "wb") as f:
            f.write(b"compress me " * 200000)
        for ctype in ("zlib", "zstd"):
            with self.subTest(ctype=ctype):
                src = self.path(f"c-{ctype}.qcow2")
                qemu_img("convert", "-q", "-c", "-O", "qcow2", "-o",
                         f"compression_type={ctype}", raw, src)
                proc = self.both_modes(src, 0)
                self.assertIn("100.00% compressed clusters", proc.stdout)

    def test_snapshots(self):
        src = self.make()
        qemu_img("snapshot", "-c", "snap1", src)
        run_in(self.dir, [QEMU_IO, "-f", "qcow2", src, "-c",
                          "write -P 9 0 64k"])
        qemu_img("snapshot", "-c", "snap2", src)
        run_in(self.dir, [QEMU_IO, "-f", "qcow2", src, "-c",
                          "write -P 7 20M 1M"])
        self.both_modes(src, 0)
        # A snapshot's clusters are shared: a refcount of 1 is too low.
        f = Qcow2File(src)
        shared = f.l2(0, 10 * 16) & OFFSET_MASK         # guest 10M
        self.assertEqual(f.refcount(shared >> f.cluster_bits), 3)
        f.set_refcount(shared >> f.cluster_bits, 1)
        proc = self.both_modes(src, 2)
        self.assertIn("ERROR cluster 7 refcount=1 reference=3", proc.stderr)
        self.repair(src, "all", 0)

    def test_bitmaps(self):
        """(Not repaired here: qemu-img's read-write open of an image with
        bitmaps rewrites them first.)"""
        src = self.make()
        qemu_img("snapshot", "-c", "snap1", src)
        qemu_img("bitmap", "--add", src, "bm0")
        qemu_img("bitmap", "--add", "-g", "512k", src, "bm1")
        run_in(self.dir, [QEMU_IO, "-f", "qcow2", src, "-c",
                          "write -P 7 20M 1M"])
        self.both_modes(src, 0)
        f = Qcow2File(src)
        f.set_refcount(os.path.getsize(src) // f.cluster_size - 1, 2)
        self.both_modes(src, 3)

    def test_quiet(self):
        src = self.make()
        proc = self.both(src, "-q")
        self.assertEqual(proc.stdout, "")
        Qcow2File(src).set_refcount(5, 0)
        proc = self.both(src, "-q")
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(proc.stdout, "")

    # ---- damage

    def leaked(self):
        """An extra cluster at the end of the file with refcount 1."""
        src = self.make()
        f = Qcow2File(src)
        size = os.path.getsize(src)
        with open(src, "ab") as out:
            out.write(bytes(f.cluster_size))
        f.set_refcount(size >> f.cluster_bits, 1)
        return src

    def test_leak(self):
        src = self.leaked()
        proc = self.both_modes(src, 3)
        self.assertIn("Leaked cluster 8 refcount=1 reference=0", proc.stderr)
        self.assertIn("1 leaked clusters were found on the image.\n"
                      "This means waste of disk space, but no harm to data.",
                      proc.stdout)
        self.repair(src, "leaks", 0)
        self.repair(src, "all", 0)
        # The same repair with O_DIRECT (8-byte refcount writes).
        self.assertEqual(self.both(src, "-T", "none", "-r", "all").returncode,
                         0)

    def test_refcount_too_high(self):
        """A leak on a cluster in use: its COPIED flag is then wrong too."""
        src = self.make()
        Qcow2File(src).set_refcount(5, 2)
        self.both_modes(src, 2)
        self.repair(src, "leaks", 0)
        self.repair(src, "all", 0)

    def test_zero_refcount(self):
        src = self.make()
        Qcow2File(src).set_refcount(5, 0)
        proc = self.both_modes(src, 2)
        self.assertIn("ERROR cluster 5 refcount=0 reference=1", proc.stderr)
        # Repair needs new refcount structures: qemu-img -r leaks refuses.
        proc = self.both(src, "-r", "leaks")
        self.assertEqual(proc.returncode, 1)
        self.assertIn("ERROR need to rebuild refcount structures",
                      proc.stderr)
        # -r all rebuilds them at the end of the file, as qemu-img.
        fixed = self.repair(src, "all", 0)
        proc = qil("check", fixed)
        self.assertIn("Image end offset: 655360", proc.stdout)

    def test_overlapping_l2_entry(self):
        src = self.make()
        f = Qcow2File(src)
        f.set_l2(0, 3, f.l2(0, 0))
        proc = self.both_modes(src, 2)
        self.assertIn("ERROR cluster 5 refcount=1 reference=2", proc.stderr)
        self.both(src, "-r", "leaks")
        fixed = self.repair(src, "all", 0)
        self.assertEqual(Qcow2File(fixed).refcount(5), 2)
        self.assertFalse(Qcow2File(fixed).l2(0, 0) & COPIED)

    def test_bad_l1_entries(self):
        src = self.make()
        f = Qcow2File(src)
        good = f.l1(0)
        for name, entry in (("past the end", COPIED | 0x40000000),
                            ("unaligned", good + 0x200),
                            ("reserved bits", good | (1 << 60))):
            with self.subTest(name):
                f.set_l1(0, entry)
                self.both_modes(src, 2)
                self.both(src, "-r", "all")
        f.set_l1(0, good)
        self.both_modes(src, 0)

    def test_bad_l2_entries(self):
        src = self.make()
        f = Qcow2File(src)
        good = f.l2(0, 0)
        for name, entry in (("past the end", COPIED | 0x7000000),
                            ("unaligned", good + 0x200),
                            ("reserved bits", good | 0x10),
                            ("compressed with COPIED", good | (3 << 62))):
            with self.subTest(name):
                f.set_l2(0, 0, entry)
                self.both_modes(src, 2)

    def test_unaligned_preallocated_zero_cluster(self):
        """-r all turns it into a plain zero cluster, as qemu-img."""
        src = self.make(writes=("write -P 1 0 256k", "write -z 64k 64k"))
        f = Qcow2File(src)
        self.assertEqual(f.l2(0, 1) & 1, 1)
        f.set_l2(0, 1, f.l2(0, 1) + 0x200)
        proc = self.both_modes(src, 2)
        self.assertIn("Preallocated cluster is not properly aligned",
                      proc.stderr)
        self.both(src, "-r", "leaks")
        fixed = self.repair(src, "all", 0)
        self.assertEqual(Qcow2File(fixed).l2(0, 1), 1)

    def test_copied_flag(self):
        src = self.make()
        f = Qcow2File(src)
        f.set_l2(0, 1, f.l2(0, 1) & ~COPIED)
        f.set_l1(0, f.l1(0) & ~COPIED)
        self.both_modes(src, 2)
        # -r leaks may fix flags when nothing else is wrong, as qemu-img.
        self.repair(src, "leaks", 0)
        self.repair(src, "all", 0)

    def test_refcount_block_outside_image(self):
        src = self.make()
        f = Qcow2File(src)
        f.set_u64(f.reftable_offset + 8, 0x1000000)
        self.both_modes(src, 2)
        proc = self.both(src, "-r", "leaks")
        self.assertEqual(proc.returncode, 2)
        proc = self.both(src, "-r", "all")
        self.assertIn("Rebuilding refcount structure", proc.stderr)
        self.repair(src, "all", 0)

    def test_dirty_image_made_clean(self):
        src = self.make("lazy_refcounts=on")
        f = Qcow2File(src)
        f.set_u64(72, f.u64(72) | 1)        # the dirty bit
        f.set_refcount(5, 2)
        self.both_modes(src, 2)
        fixed = self.repair(src, "all", 0)
        self.assertEqual(Qcow2File(fixed).u64(72) & 1, 0)

    # ---- formats and options

    def test_raw_not_supported(self):
        raw = self.path("img.raw")
        with open(raw, "wb") as f:
            f.truncate(1 << 20)
        for args in ((), ("--output=json",), ("-r", "all")):
            proc = self.both(raw, "-f", "raw", *args, image="img.raw")
            self.assertEqual(proc.returncode, 63)
            self.assertIn("This image format does not support checks",
                          proc.stderr)

    def test_encrypted_qcow2(self):
        src = self.path("enc.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", "--object", SECRET, "-o",
                 f"encrypt.format=luks,encrypt.key-secret=sec0,"
                 f"encrypt.iter-time={ITER_TIME}", src, "16M")
        # qemu-img 7.2 asks for the key even to check.
        proc = self.both(src)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("Parameter 'encrypt.key-secret' is required",
                      proc.stderr)
        opts = "driver=qcow2,encrypt.key-secret=sec0,file.filename=img.qcow2"
        for d in (self.ours_dir, self.theirs_dir):
            shutil.copyfile(src, os.path.join(d, "img.qcow2"))
        ours = run_in(self.ours_dir, [TOOL, "check", "--object", SECRET,
                                      "--image-opts", opts])
        theirs = run_in(self.theirs_dir, [QEMU_IMG, "check", "--object",
                                          SECRET, "--image-opts", opts])
        self.assertEqual(ours.stdout, theirs.stdout)
        self.assertEqual(ours.returncode, 0, ours.stderr)

    def test_usage_errors(self):
        src = self.make()
        proc = self.both(src, "-r", "some")
        self.assertEqual(proc.returncode, 1)
        self.assertIn("Unknown option value for -r (expecting 'leaks' or "
                      "'all'): some", proc.stderr)
        self.assertEqual(self.both(src, "-U", "-r", "all").returncode, 1)
        self.assertEqual(self.both(src, "--output=xml").returncode, 1)
        self.assertEqual(self.both(src, "-U").returncode, 0)
        self.assertEqual(self.both(src, "-T", "none").returncode, 0)
        self.assertEqual(self.both(src, "-T", "fast").returncode, 1)
        proc = self.both(src, "--image-opts",
                         "driver=qcow2,file.filename=img.qcow2",
                         "--output=json", name_last=False)
        self.assertIn('"filename": "driver=qcow2,file.filename=img.qcow2"',
                      proc.stdout)

    # ---- the snapshot table (qemu-iotests 261)

    def snapshot_table(self, path):
        """[(fixed part, extra data, id and name)] of the table."""
        with open(path, "rb") as f:
            h = f.read(72)
            nb, off = struct.unpack(">IQ", h[60:72])
            entries = []
            for _ in range(nb):
                off = (off + 7) & ~7
                f.seek(off)
                fixed = f.read(40)
                id_len, name_len = struct.unpack(">HH", fixed[12:16])
                extra = struct.unpack(">I", fixed[36:40])[0]
                entries.append((fixed, f.read(extra),
                                f.read(id_len + name_len)))
                off += 40 + extra + id_len + name_len
        return entries

    def rewrite_snapshot_table(self, path, entries):
        """Write entries over the table where it is (it must fit)."""
        with open(path, "rb") as f:
            off = struct.unpack(">Q", f.read(72)[64:72])[0]
        data = b""
        for fixed, extra, names in entries:
            data += b"\0" * (-len(data) % 8)
            data += fixed[:36] + struct.pack(">I", len(extra)) + extra + names
        Qcow2File(path).write(off, data)

    def test_snapshot_table_incomplete_entries(self):
        """Version 3 entries with less than 16 bytes of extra data: -r
        all writes the table again (24 bytes each, unknown extra data
        kept), as qemu-img; its check is then clean."""
        src = self.make("compat=0.10")
        for name in ("sn0", "sn1", "sn2"):
            qemu_img("snapshot", "-c", name, src)
        e = self.snapshot_table(src)
        self.rewrite_snapshot_table(src, [
            (e[0][0], b"", e[0][2]),
            (e[1][0], e[1][1] + b"very important data", e[1][2]),
            (e[2][0], e[2][1][:8], e[2][2])])
        # As version 3 (261's "botched v3"): version, header length,
        # refcount order.
        f = Qcow2File(src)
        f.write(4, struct.pack(">I", 3))
        f.write(96, struct.pack(">II", 4, 104))
        proc = self.both_modes(src, 2)
        self.assertIn("ERROR snapshot table entry 0 is incomplete",
                      proc.stderr)
        fixed = self.repair(src, "all", 0)
        extra = [len(x[1]) for x in self.snapshot_table(fixed)]
        self.assertEqual(extra, [24, 24 + 19, 24])
        self.assertTrue(self.snapshot_table(fixed)[1][1].endswith(
            b"very important data"))
        # -r leaks leaves them.
        self.both(src, "-r", "leaks")

    def test_snapshot_table_too_much_extra_data(self):
        """64 KiB of extra data in an entry (over QEMU's 1 KiB, and
        spilling into the next cluster): the check fails, -r all cuts it
        to 1 KiB and rebuilds the refcounts, as qemu-img."""
        src = self.make()
        for name in ("sn0", "sn1"):
            qemu_img("snapshot", "-c", name, src)
        with open(src, "rb") as f:
            off = struct.unpack(">Q", f.read(72)[64:72])[0]
        e = self.snapshot_table(src)
        first = (40 + len(e[0][1]) + len(e[0][2]) + 7) & ~7
        Qcow2File(src).write(off + first + 36, struct.pack(">I", 65536))
        proc = self.both(src)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("Too much extra metadata in snapshot table entry 1",
                      proc.stderr)
        self.assertIn("You can force-remove this extra metadata",
                      proc.stderr)
        fixed = self.repair(src, "all", 0)
        self.assertEqual(len(self.snapshot_table(fixed)[1][1]), 1024)
        # The image then opens, for both.
        self.assertEqual(len(self.info_json(fixed)["snapshots"]), 2)

    def test_snapshot_table_too_many_entries(self):
        """More than 65536 entries: the open refuses it ("Snapshot table
        too large", as qemu-img), the check fails, and -r all drops the
        overhanging ones (their clusters leaked, then freed)."""
        src = self.make("compat=0.10", writes=())
        f = Qcow2File(src)
        f.write(60, struct.pack(">IQ", 65536 + 16, 1 << 20))
        # All-zero version 2 entries; the table's clusters counted.
        with open(src, "r+b") as fh:
            fh.truncate((1 << 20) + 40 * (65536 + 16))
        for c in range(16, ((1 << 20) + 40 * (65536 + 16) + 65535) >> 16):
            f.set_refcount(c, 1)
        self.assertFails(["info", src], "Snapshot table too large")
        proc = self.both(src)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("You can force-remove all 16 overhanging snapshots",
                      proc.stderr)
        self.repair(src, "all", 0)

    def test_repair_leaves_clean_image_alone(self):
        src = self.make()
        before = open(src, "rb").read()
        proc = qil("check", "-r", "all", src)
        self.assertIn("No errors were found on the image.", proc.stdout)
        self.assertEqual(open(src, "rb").read(), before)


if __name__ == "__main__":
    main()
