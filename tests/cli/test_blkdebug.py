#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The blkdebug filter from the command line (--image-opts), as the fault
tests use it: an injected ENOSPC or EIO is a clear error and a non-zero
exit, never a crash; a failed flush is never success; and a sweep of
kills at the N-th write of a qcow2 convert leaves images that the real
qemu-img check finds consistent (leaks at most)."""

import os

from qiltest import QEMU_IMG, TestCase, main, qemu_img, qil, random_file


def target_opts(fmt, path, rules):
    return (f"driver={fmt},file.driver=blkdebug,{rules},"
            f"file.file.filename={path}")


class Blkdebug(TestCase):
    def test_enospc_on_write(self):
        src, dst = self.path("src.raw"), self.path("dst.raw")
        random_file(src, 4 << 20)
        qil("create", "-f", "raw", dst, "4M")
        proc = self.assertFails(
            ["convert", "-n", "-f", "raw", src, "--target-image-opts",
             target_opts("raw", dst, "file.fail-write=5,file.errno=ENOSPC")],
            "No space left on device")
        self.assertIn("blkdebug: write 5 injected", proc.stderr)

    def test_eio_on_read(self):
        src, dst = self.path("src.raw"), self.path("dst.raw")
        random_file(src, 1 << 20)
        self.assertFails(
            ["convert", "-O", "raw", "--image-opts",
             target_opts("raw", src, "file.fail-read=2"), dst],
            "Input/output error")
        # A failed convert leaves no target behind.
        self.assertFalse(os.path.exists(dst))

    def test_failed_flush_is_failure(self):
        src, dst = self.path("src.raw"), self.path("dst.raw")
        random_file(src, 1 << 20)
        qil("create", "-f", "raw", dst, "1M")
        self.assertFails(
            ["convert", "-n", "-t", "writeback", "-f", "raw", src,
             "--target-image-opts",
             target_opts("raw", dst, "file.fail-flush=1")],
            "blkdebug: flush 1 injected")

    def test_kill_sweep_qcow2(self):
        """convert -n into qcow2, killed before its N-th write for every N
        up to past the end: each image left is consistent."""
        self.need_qemu_img()
        src = self.path("src.raw")
        random_file(src, 2 << 20)
        # Half of it zeroes: the copy skips them, so metadata and data
        # writes interleave in several patterns.
        with open(src, "r+b") as f:
            f.seek(1 << 20)
            f.write(bytes(512 << 10))
        killed = 0
        for n in range(1, 60):
            dst = self.path(f"dst{n}.qcow2")
            qil("create", "-f", "qcow2", "-o", "cluster_size=65536", dst,
                "2M")
            proc = qil("convert", "-n", "-f", "raw", src,
                       "--target-image-opts",
                       target_opts("qcow2", dst, f"file.kill-write={n}"),
                       check=False)
            if proc.returncode == 0:
                break
            with self.subTest(n=n):
                self.assertEqual(proc.returncode, -9, proc.stderr)
                killed += 1
                check = qemu_img("check", dst, check=False)
                # 0: clean, 3: leaked clusters only (never corruption).
                self.assertIn(check.returncode, (0, 3), check.stdout)
            os.unlink(dst)
        self.assertGreater(killed, 5)
        self.assertLess(killed, 59, "the convert never finished")


if __name__ == "__main__":
    main()
