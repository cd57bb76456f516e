# SPDX-License-Identifier: GPL-2.0-or-later
"""info and info --backing-chain, byte for byte as qemu-img 7.2 prints
them (human and JSON, stdout, stderr but the program name, exit status):
a raw image and a LUKS image are chains of one; qcow2 chains three deep
(qcow2 over qcow2 over raw) opened from another directory, with -U; file
names that JSON must escape (quotes, backslashes, non-ASCII).
"""
import os
import shutil
import subprocess

import qiltest
from qiltest import TOOL, TestCase, main, qemu_img, qil, random_file


def run(args, cwd=None):
    return subprocess.run([str(a) for a in args], capture_output=True,
                          cwd=cwd)


class InfoChainTest(TestCase):
    def setUp(self):
        super().setUp()
        self.need_qemu_img()

    def assert_same_info(self, *args, cwd=None):
        for fmt in ("human", "json"):
            for chain in ([], ["--backing-chain"]):
                with self.subTest(output=fmt, chain=chain, args=args):
                    a = [f"--output={fmt}", *chain, *args]
                    ours = run([TOOL, "info", *a], cwd=cwd)
                    theirs = run([shutil.which("qemu-img"), "info", *a],
                                 cwd=cwd)
                    self.assertEqual(ours.stdout, theirs.stdout)
                    self.assertEqual(ours.returncode, theirs.returncode)

    def test_raw(self):
        path = self.path("a.raw")
        random_file(path, 123456)
        self.assert_same_info(path)
        self.assert_same_info("-f", "raw", "-U", path)

    def test_luks(self):
        self.need_luks()
        path, _ = self.make_luks("a.luks", "1M")
        self.assert_same_info(path)

    def test_qcow2_chain(self):
        os.mkdir(self.path("d"))
        base = self.path("d/base.raw")
        random_file(base, 1 << 20)
        qemu_img("create", "-q", "-f", "qcow2", "-b", "base.raw", "-F",
                 "raw", self.path("d/mid.qcow2"), "2M")
        qemu_img("create", "-q", "-f", "qcow2", "-o", "cluster_size=4k",
                 "-b", "mid.qcow2", "-F", "qcow2", self.path("d/top.qcow2"))
        for cwd in (self.dir, "/"):
            name = ("d/top.qcow2" if cwd == self.dir
                    else self.path("d/top.qcow2"))
            self.assert_same_info(name, cwd=cwd)
            self.assert_same_info("-U", name, cwd=cwd)
        # A chain whose bottom is a qcow2 image with no backing file.
        self.assert_same_info(self.path("d/mid.qcow2"))

    def test_json_escapes(self):
        name = self.path('q"uo\\te é ✓.raw')
        random_file(name, 4096)
        self.assert_same_info(name)
        top = self.path("tab\tname.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", "-b", name, "-F", "raw",
                 top)
        self.assert_same_info(top)

    def test_loop(self):
        """A chain that comes back to an image: qemu-img's message, exit 1,
        nothing printed (qemu-iotests 043)."""
        a, b = self.path("a.qcow2"), self.path("b.qcow2")
        qil("create", "-f", "qcow2", a, "1M")
        qil("create", "-f", "qcow2", "-b", a, "-F", "qcow2", b)
        # a -> a; then b -> a -> b
        for top, back in ((a, a), (b, b)):
            with self.subTest(loop=back):
                qil("rebase", "-u", "-b", back, "-F", "qcow2", a)
                proc = qil("info", "--backing-chain", top, check=False)
                self.assertEqual(proc.returncode, 1, proc.stderr)
                self.assertEqual(proc.stdout, "")
                self.assertIn(f"Backing file '{back}' creates an infinite "
                              "loop.", proc.stderr)
                # Without --backing-chain the image alone is shown.
                qil("info", top)


if __name__ == "__main__":
    main()
