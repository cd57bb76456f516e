# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite resize: absolute and relative sizes, --shrink, LUKS; a
resize that fails (out of space half way through preallocating) leaves the
size as it was."""
import json
import os
import resource
import signal
import subprocess
import tempfile

from qiltest import (QEMU_IMG, SECRET, TOOL, TestCase, file_bytes, luks_opts,
                     main, qil, run)


class Resize(TestCase):
    def test_grow_and_shrink(self):
        path = self.path("a.raw")
        qil("create", "-q", path, "1M")
        self.assertEqual(qil("resize", path, "2M").stdout, "Image resized.\n")
        self.assertEqual(os.path.getsize(path), 2 << 20)
        qil("resize", "-f", "raw", path, "+1M")
        self.assertEqual(os.path.getsize(path), 3 << 20)
        self.assertFails(["resize", path, "1M"], "--shrink")
        self.assertFails(["resize", path, "-1M"], "--shrink")
        qil("resize", "--shrink", path, "-1M")
        self.assertEqual(os.path.getsize(path), 2 << 20)
        qil("resize", "--shrink", "-q", path, "1M")
        self.assertEqual(os.path.getsize(path), 1 << 20)

    def test_preallocation(self):
        path = self.path("a.raw")
        qil("create", "-q", path, "1M")
        qil("resize", "--preallocation=full", path, "3M")
        self.assertGreaterEqual(os.stat(path).st_blocks * 512, 2 << 20)

    def qcow2_resize_both(self, create, size, resize, name):
        """The same qcow2 create and resize by qemu-img and by us: the
        map (--output=json, offsets left out) and the data must agree,
        and the real qemu-img check must find ours clean."""
        maps, datas = [], []
        for tool, run_tool in (("qemu", lambda *a: run([QEMU_IMG, *a])),
                               ("ours", qil)):
            img = self.path(f"{name}-{tool}.qcow2")
            run_tool("create", "-q", "-f", "qcow2", *create, img, size)
            run_tool("resize", *resize, img, "1M")
            # What each range reads as (data or zero, from which layer),
            # adjacent ranges of the same kind merged: where the host
            # clusters sit may differ (docs/qcow2.md).
            merged = []
            for e in json.loads(run_tool("map", "--output=json",
                                         img).stdout):
                kind = (e["data"], e["zero"], e["depth"])
                if merged and merged[-1][2] == kind:
                    merged[-1][1] += e["length"]
                else:
                    merged.append([e["start"], e["length"], kind])
            maps.append(merged)
            raw = self.path(f"{name}-{tool}.raw")
            run([QEMU_IMG, "convert", "-O", "raw", img, raw])
            datas.append(file_bytes(raw))
            if tool == "ours":
                run([QEMU_IMG, "check", img])
        self.assertEqual(datas[0], datas[1], f"{create} {resize}")
        return maps[0] == maps[1]

    def test_qcow2_preallocation_as_qemu_img(self):
        """resize --preallocation of qcow2 (qemu-iotests 271), with and
        without extended L2 entries and a backing file longer than the
        image (its bytes past the old end must not show)."""
        self.need_qemu_img()
        base = self.path("base.raw")
        with open(base, "wb") as f:
            f.write(b"\x11" * (1 << 20))
        differ = []
        for mode in ("metadata", "falloc", "full"):
            for ext in ("off", "on"):
                if not self.qcow2_resize_both(
                        ["-o", f"extended_l2={ext}", "-F", "raw", "-b", base,
                         "-u"], "512k", [f"--preallocation={mode}"],
                        f"b-{mode}-{ext}"):
                    differ.append(f"backing {mode} extended_l2={ext}")
                if not self.qcow2_resize_both(
                        ["-o", f"extended_l2={ext}"], "512k",
                        [f"--preallocation={mode}"], f"n-{mode}-{ext}"):
                    differ.append(f"{mode} extended_l2={ext}")
        # A plain grow over the longer backing file hides it too.
        if not self.qcow2_resize_both(["-F", "raw", "-b", base, "-u"],
                                      "500k", [], "plain"):
            differ.append("plain grow over backing")
        # Where ours maps differently but reads the same (docs/qcow2.md):
        # the new area over a backing file with falloc/full and no extended
        # L2 entries is zero clusters in ours, zeroed data clusters in
        # QEMU's.
        self.assertEqual(differ, ["backing falloc extended_l2=off",
                                  "backing full extended_l2=off"])

    def test_luks(self):
        self.need_luks()
        luks, raw = self.make_luks("a.luks", "1M")
        qil("resize", "--object", SECRET, "--image-opts", luks_opts(luks),
            "+1M")
        self.assertEqual(self.info_json(luks)["virtual-size"], 2 << 20)
        # The old data is intact; no key needed for the layout.
        qil("resize", luks, "3M")
        self.assertEqual(self.info_json(luks)["virtual-size"], 3 << 20)
        back = self.path("back.raw")
        qil("convert", "--object", SECRET, "--image-opts", luks_opts(luks),
            "-O", "raw", back)
        self.assertEqual(file_bytes(back)[:1 << 20], file_bytes(raw))


class ResizeRollback(TestCase):
    """A failed resize --preallocation=full|falloc leaves the file at its
    old size (qemu-img rolls back too), so a LUKS image keeps its virtual
    size: the file system full (ENOSPC, a small tmpfs), or the file size
    limit reached (EFBIG, RLIMIT_FSIZE, which needs no root)."""

    MODES = ("full", "falloc")

    def small_tmpfs(self, size):
        mnt = tempfile.mkdtemp(prefix="qil-resize-")
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}",
                               "tmpfs", mnt], capture_output=True)
        if proc.returncode != 0:
            os.rmdir(mnt)
            self.skipTest("cannot mount a small tmpfs to fill (not root?): "
                          + proc.stderr.decode().strip())

        def cleanup():
            subprocess.run(["umount", mnt])
            os.rmdir(mnt)
        self.addCleanup(cleanup)
        return mnt

    def resize_fails(self, args, message, fsize=None):
        def limit():
            # Past the limit, writes fail with EFBIG instead of a signal.
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        proc = subprocess.run([TOOL, "resize", *args], capture_output=True,
                              text=True, preexec_fn=limit if fsize else None)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn(message, proc.stderr)
        self.assertNotIn("Image resized", proc.stdout)

    def check_raw(self, path, fsize=None, message="No space left on device"):
        data = file_bytes(path)
        for mode in self.MODES:
            with self.subTest(mode=mode, fsize=fsize):
                self.resize_fails([f"--preallocation={mode}", "-f", "raw",
                                   path, "+8M"], message, fsize)
                self.assertEqual(file_bytes(path), data)

    def check_luks(self, path, raw, fsize=None,
                   message="No space left on device"):
        size = os.path.getsize(path)
        virtual = self.info_json(path)["virtual-size"]
        for mode in self.MODES:
            with self.subTest(mode=mode, fsize=fsize):
                self.resize_fails([f"--preallocation={mode}", path, "+8M"],
                                  message, fsize)
                self.assertEqual(os.path.getsize(path), size)
                self.assertEqual(self.info_json(path)["virtual-size"],
                                 virtual)
        back = self.path("back.raw")
        qil("convert", "--object", SECRET, "--image-opts", luks_opts(path),
            "-O", "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(raw))
        os.unlink(back)

    def test_enospc(self):
        mnt = self.small_tmpfs("6M")
        raw = os.path.join(mnt, "a.raw")
        with open(raw, "wb") as f:
            f.write(os.urandom(1 << 20))
        self.check_raw(raw)
        self.need_luks()
        luks, src = self.make_luks("a.luks", "1M")
        moved = os.path.join(mnt, "a.luks")
        with open(luks, "rb") as f, open(moved, "wb") as g:
            g.write(f.read())
        self.check_luks(moved, src)

    def test_file_size_limit(self):
        raw = self.path("a.raw")
        with open(raw, "wb") as f:
            f.write(os.urandom(1 << 20))
        self.check_raw(raw, 4 << 20, "File too large")
        self.need_luks()
        luks, src = self.make_luks("a.luks", "1M")
        self.check_luks(luks, src, os.path.getsize(luks) + (2 << 20),
                        "File too large")


if __name__ == "__main__":
    main()
