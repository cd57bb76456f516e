# SPDX-License-Identifier: GPL-2.0-or-later
"""convert beside the real qemu-img 7.2, on the same inputs:

- the progress lines of -p (qemu-img counts the bytes it will write in a
  first pass of block status, and advances by steps of its walk: runs of
  data of at most 2 MiB, clusters with -c, runs of zeroes with -S 0);
- the map of what -S 0 writes (every cluster of a qcow2 target allocated,
  a raw target written whole) and the layout of a qcow2 target (writes in
  the order of the guest offsets, L2 tables before their data);
- several sources concatenated into one target, with -c, -S, -n;
- --salvage's warnings for block-status and read errors injected by
  blkdebug (each block-status error twice: the first pass, then the copy).
"""
import json
import os
import shutil
import subprocess

from qiltest import QEMU_IMG, TOOL, TestCase, main, qemu_img, qil, run

QEMU_IO = shutil.which("qemu-io")
MIB = 1 << 20


def raw_image(path, size, extents):
    """A sparse raw file of size bytes holding data at extents: (offset,
    length) pairs, each filled with a byte of its own."""
    with open(path, "wb") as f:
        f.truncate(size)
        for i, (off, n) in enumerate(extents):
            f.seek(off)
            f.write(bytes([0x11 * (i % 15 + 1)]) * n)


def both(args, progress=False):
    """Run convert ARGS (DST last, a name to suffix) with qemu-img, then
    with qemu-img-lite: each tool's (stdout as bytes, stderr) and its
    target."""
    out = []
    for tool, suffix in ((QEMU_IMG, ".q"), (TOOL, ".l")):
        dst = args[-1] + suffix
        proc = subprocess.run([tool, "convert", *args[:-1], dst],
                              capture_output=True)
        out.append((proc.returncode, proc.stdout,
                    proc.stderr.decode().replace(os.path.basename(tool) +
                                                 ":", "PROG:"), dst))
    return out


def qemu_map(path, *args):
    """The real qemu-img's map of an image (JSON), our images included."""
    return json.loads(qemu_img("map", "--output=json", *args, path).stdout)


class ConvertQemuParity(TestCase):
    def setUp(self):
        super().setUp()
        self.need_qemu_img()

    def need_qemu_io(self):
        if not QEMU_IO:
            self.skipTest("qemu-io is not installed")

    def qcow2_with(self, name, size, writes, opts=None):
        """A qcow2 image made by qemu-img, written by qemu-io: writes are
        qemu-io commands ("write -P 0x11 0 1M")."""
        self.need_qemu_io()
        path = self.path(name)
        qemu_img("create", "-f", "qcow2", *(["-o", opts] if opts else []),
                 path, str(size))
        for w in writes:
            run([QEMU_IO, "-f", "qcow2", "-c", w, path])
        return path

    def assert_same_progress(self, *args):
        (qrc, qout, qerr, _), (lrc, lout, lerr, _) = both(list(args))
        self.assertEqual(qrc, 0, qerr)
        self.assertEqual(lrc, 0, lerr)
        self.assertEqual(lout, qout)
        return qout

    def test_progress_raw(self):
        """qemu-iotests 086 on raw: four 1 MiB runs, 25% steps; then runs
        longer than qemu-img's 2 MiB steps and shorter than 1%."""
        src = self.path("src.raw")
        raw_image(src, 128 * MIB, [(0, MIB), (2 * MIB, MIB), (4 * MIB, MIB),
                                   (32 * MIB, MIB)])
        out = self.assert_same_progress("-p", "-f", "raw", "-O", "raw", src,
                                        self.path("dst"))
        self.assertEqual(out, b"    (0.00/100%)\r    (25.00/100%)\r"
                         b"    (50.00/100%)\r    (75.00/100%)\r"
                         b"    (100.00/100%)\r    (100.00/100%)\r\n")
        raw_image(src, 64 * MIB, [(0, 5 * MIB + 4096), (7 * MIB, 64 << 10),
                                  (9 * MIB, 12 * MIB), (40 * MIB, 512)])
        self.assert_same_progress("-p", "-f", "raw", "-O", "qcow2", src,
                                  self.path("dst2"))

    def test_progress_qcow2(self):
        """086 on qcow2, then -c (one step per cluster) and -S 0 (the runs
        of zeroes counted too)."""
        src = self.qcow2_with("src.qcow2", 128 * MIB, [
            "write 0 1M", "write 2M 1M", "write 4M 1M", "write 32M 1M"])
        out = self.assert_same_progress("-p", "-f", "qcow2", "-O", "qcow2",
                                        src, self.path("dst"))
        self.assertIn(b"(50.00/100%)", out)
        self.assert_same_progress("-p", "-c", "-f", "qcow2", "-O", "qcow2",
                                  src, self.path("dstc"))
        self.assert_same_progress("-p", "-S", "0", "-f", "qcow2", "-O", "raw",
                                  src, self.path("dst0"))

    def test_s0_allocates_qcow2_like_qemu_img(self):
        """-S 0 into qcow2: every cluster allocated, at the same host
        offsets as qemu-img's (qemu-iotests 150 and 122)."""
        src = self.qcow2_with("src.qcow2", 64 * MIB, [
            "write -P 0x22 0 3M", "write -z 3M 3M", "write -P 0x33 40M 64k"])
        for fmt in ("qcow2", "raw"):
            res = both(["-S", "0", "-f", "qcow2", "-O", fmt, src,
                        self.path("dst." + fmt)])
            (qrc, _, qerr, qdst), (lrc, _, lerr, ldst) = res
            self.assertEqual((qrc, lrc), (0, 0), qerr + lerr)
            self.assertEqual(qemu_map(ldst), qemu_map(qdst), fmt)
            qemu_img("compare", "-f", "qcow2", "-F", fmt, src, ldst)
        self.assertEqual(len(qemu_map(self.path("dst.qcow2.l"))), 1)
        # -c -S 0: every cluster compressed, zeroes too
        (qrc, _, _, qdst), (lrc, _, lerr, ldst) = both(
            ["-c", "-S", "0", "-f", "qcow2", "-O", "qcow2", src,
             self.path("dstc")])
        self.assertEqual(lrc, 0, lerr)
        self.assertEqual(qemu_map(ldst), qemu_map(qdst))

    def test_layout_in_order(self):
        """Without -W, a qcow2 target's clusters come in the order of the
        guest offsets, after their L2 table, as in qemu-img's."""
        src = self.path("src.raw")
        raw_image(src, 80 * MIB, [(0, 3 * MIB), (5 * MIB, 7 * MIB),
                                  (70 * MIB, MIB)])
        (qrc, _, _, qdst), (lrc, _, lerr, ldst) = both(
            ["-f", "raw", "-O", "qcow2", src, self.path("dst")])
        self.assertEqual(lrc, 0, lerr)
        self.assertEqual(qemu_map(ldst), qemu_map(qdst))

    def test_concatenate(self):
        """Several sources one after another: sizes counted in whole
        sectors (qemu-img's), then data compared by qemu-img compare, maps
        of qcow2 targets compared, -c and -S 4k too."""
        a, b, c = (self.path(n) for n in ("a.raw", "b.raw", "c.raw"))
        raw_image(a, 3 * MIB + 1000, [(0, 64 << 10), (3 * MIB, 1000)])
        raw_image(b, 1 * MIB, [(512 << 10, 4096)])
        raw_image(c, 2 * MIB, [(0, 2 * MIB)])
        for opts in ([], ["-c"], ["-S", "4k"], ["-S", "0"]):
            for fmt in ("raw", "qcow2"):
                if opts == ["-c"] and fmt == "raw":
                    continue
                (qrc, _, qerr, qdst), (lrc, _, lerr, ldst) = both(
                    [*opts, "-f", "raw", "-O", fmt, a, b, c,
                     self.path("dst." + fmt)])
                self.assertEqual((qrc, lrc), (0, 0), qerr + lerr)
                qemu_img("compare", "-f", fmt, "-F", fmt, qdst, ldst)
                self.assertEqual(qemu_map(ldst), qemu_map(qdst),
                                 (opts, fmt))
        # and into an existing image (-n), qcow2 sources this time
        self.need_qemu_io()
        srcs = [self.qcow2_with(f"s{i}.qcow2", "1M",
                                [f"write -P {i + 1} {i * 64}k 64k"])
                for i in range(3)]
        dst = self.path("n.qcow2")
        qemu_img("create", "-f", "qcow2", dst, "3M")
        qil("convert", "-n", "-f", "qcow2", "-O", "qcow2", *srcs, dst)
        whole = self.path("whole.raw")
        qemu_img("convert", "-f", "qcow2", "-O", "raw", *srcs, whole)
        qemu_img("compare", "-f", "raw", "-F", "qcow2", whole, dst)

    def test_concatenate_errors(self):
        a = self.path("a.raw")
        raw_image(a, MIB, [])
        for args in (["-B", a, "-F", "raw", "-O", "qcow2"],
                     ["-c", "-B", a, "-O", "qcow2"],
                     ["--bitmaps", "-O", "qcow2"]):
            (qrc, _, qerr, _), (lrc, _, lerr, _) = both(
                [*args, a, a, self.path("dst")])
            self.assertEqual((lrc, lerr), (qrc, qerr), args)

    def test_n_zero_clusters_like_qemu_img(self):
        """-n into a qcow2 image that does not read as zeroes for us: the
        source's zeroes become zero clusters (v3), or nothing (v2 without
        a backing file), or data (v2 over one), as qemu-img makes them
        (qemu-iotests 122)."""
        src = self.path("zero.raw")
        raw_image(src, 4 * MIB, [])
        base = self.path("base.qcow2")
        qemu_img("create", "-f", "qcow2", base, "4M")
        for compat, backing in (("1.1", False), ("0.10", False),
                                ("1.1", True), ("0.10", True)):
            maps = []
            for tool in (QEMU_IMG, TOOL):
                dst = self.path("dst.qcow2")
                opts = ["-o", f"compat={compat}"]
                if backing:
                    opts += ["-b", base, "-F", "qcow2"]
                qemu_img("create", "-f", "qcow2", *opts, dst, "4M")
                run([tool, "convert", "-n", "-f", "raw", "-O", "qcow2", src,
                     dst])
                maps.append(qemu_map(dst))
            self.assertEqual(maps[1], maps[0], (compat, backing))

    def test_salvage_block_status_warnings(self):
        """qemu-iotests 251 in small: blkdebug fails block status at two
        sectors and reads at three; each block-status warning comes twice
        (the first pass and the copy), the copy's in order with the
        reads'."""
        self.need_qemu_io()
        orig = self.path("orig.qcow2")
        qemu_img("create", "-f", "qcow2", orig, "16M")
        run([QEMU_IO, "-f", "qcow2", "-c", "write -P 42 0 16M", orig])
        status = [4 * MIB + 8192, 9 * MIB + 512]
        reads = [8 * MIB - 65536, 9 * MIB + 512, 10 * MIB, 10 * MIB + 512]
        rules = [f"{{'event': 'none', 'iotype': 'block-status', "
                 f"'errno': 5, 'sector': {o // 512}}}" for o in status]
        rules += [f"{{'event': 'none', 'iotype': 'read', 'errno': 5, "
                  f"'sector': {o // 512}}}" for o in reads]
        source = ("json:{'driver': 'blkdebug', 'image': {'driver': 'qcow2', "
                  f"'file': {{'driver': 'file', 'filename': '{orig}'}}}}, "
                  f"'inject-error': [{', '.join(rules)}]}}")
        res = both(["--salvage", "-O", "raw", source, self.path("dst")])
        (qrc, _, qerr, qdst), (lrc, _, lerr, ldst) = res
        self.assertEqual((lrc, qrc), (0, 0), qerr + lerr)
        qlines, llines = qerr.splitlines(), lerr.splitlines()
        # The first pass's warnings first, then the copy's: the same
        # lines, ours in the order of the offsets (qemu-img's order there
        # follows its coroutines: qemu-iotests 251's layout gives the
        # offsets' order, this one does not).
        self.assertEqual(llines[:2], qlines[:2])
        self.assertEqual(sorted(llines), sorted(qlines))
        self.assertEqual(len([ln for ln in llines if "block status" in ln]),
                         4, lerr)
        offsets = [int(ln.split("offset ")[1].split(":")[0])
                   for ln in llines[2:]]
        self.assertEqual(offsets, sorted(offsets), lerr)
        qemu_img("compare", "-f", "raw", "-F", "raw", qdst, ldst)


if __name__ == "__main__":
    main()
