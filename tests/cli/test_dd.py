# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite dd against the real qemu-img 7.2 dd: the same output
image, byte for byte, the same messages (but the program name) and exit
status, for bs=, count=, skip= (including qemu-img's count-with-skip quirk
and skips past the end), raw, LUKS (--image-opts with --object) and qcow2
inputs, -O raw, -O qcow2 and -O luks (refused: dd has no creation
options), usage
errors; and what we do differently: an existing output is not overwritten.
"""
import os
import shutil
import subprocess

import qiltest
from qiltest import TOOL, TestCase, file_bytes, main, qemu_img, qil, \
    random_file

QEMU_IO = shutil.which("qemu-io")


def run(args, cwd=None):
    return subprocess.run([str(a) for a in args], capture_output=True,
                          text=True, cwd=cwd)


class DdTest(TestCase):
    def setUp(self):
        super().setUp()
        self.need_qemu_img()
        self.n = 0

    def assert_same_dd(self, *args, same_file=True):
        """dd makes what qemu-img dd makes; returns our output's path."""
        self.n += 1
        ours, theirs = self.path(f"ours{self.n}"), self.path(f"theirs{self.n}")
        p_ours = run([TOOL, "dd", *args, f"of={ours}"])
        p_theirs = run([shutil.which("qemu-img"), "dd", *args,
                        f"of={theirs}"])
        self.assertEqual(p_ours.returncode, p_theirs.returncode,
                         p_ours.stderr + p_theirs.stderr)
        self.assertEqual(
            p_ours.stderr.replace("qemu-img-lite: ", "qemu-img: ")
            .replace(ours, "OUT"),
            p_theirs.stderr.replace(theirs, "OUT"))
        self.assertEqual(os.path.exists(ours), os.path.exists(theirs))
        if same_file and os.path.exists(theirs):
            self.assertEqual(file_bytes(ours), file_bytes(theirs))
        return ours

    def test_operands(self):
        src = self.path("src.raw")
        random_file(src, 10000)
        for ops in ([], ["bs=1k"], ["bs=3000"], ["count=3"], ["count=0"],
                    ["bs=1k", "count=4", "skip=2"],    # copies 2 blocks
                    ["bs=1k", "skip=9"], ["bs=1k", "skip=10"],
                    ["bs=1k", "skip=20"],               # past the end
                    ["bs=7", "count=5", "skip=1"], ["bs=1M"],
                    ["count=1k", "bs=1"], ["bs=1k", "bs=2k", "count=2"]):
            with self.subTest(ops=ops):
                self.assert_same_dd(f"if={src}", *ops)

    def test_formats(self):
        src = self.path("src.raw")
        random_file(src, 1 << 20)
        self.assert_same_dd("-f", "raw", f"if={src}", "bs=64k", "skip=3")
        self.assert_same_dd("-O", "raw", "-U", f"if={src}")
        qcow = self.path("src.qcow2")
        qemu_img("convert", "-q", "-f", "raw", "-O", "qcow2", src, qcow)
        self.assert_same_dd(f"if={qcow}", "bs=4k", "count=100", "skip=7")
        # A qcow2 output: the same guest data (the layouts differ).
        ours = self.assert_same_dd("-O", "qcow2", f"if={src}", "bs=64k",
                                   "skip=3", same_file=False)
        theirs = self.path(f"theirs{self.n}")
        self.assertIn("identical", qemu_img("compare", "-f", "qcow2", "-F",
                                            "qcow2", ours, theirs).stdout)
        # qemu-img dd gives no creation options: a LUKS output is refused.
        self.assert_same_dd("-O", "luks", f"if={src}")

    def test_luks_input(self):
        self.need_luks()
        luks, raw = self.make_luks("img.luks", "1M")
        opts = f"driver=luks,key-secret=sec0,file.filename={luks}"
        out = self.assert_same_dd("--object", qiltest.SECRET,
                                  "--image-opts", f"if={opts}", "bs=4k",
                                  "skip=16")
        self.assertEqual(file_bytes(out), file_bytes(raw)[64 << 10:])
        # Without the key it fails (our message differs from qemu-img's).
        proc = qil("dd", f"if={luks}", f"of={self.path('x')}", check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("key-secret", proc.stderr)
        self.assertFalse(os.path.exists(self.path("x")))

    def test_usage_errors(self):
        src = self.path("src.raw")
        random_file(src, 4096)
        for ops in (["bs=0"], ["bs=3G"], ["count=x"], ["skip=-1"],
                    ["foo=3"], ["foo"], ["bs=1Q"]):
            with self.subTest(ops=ops):
                self.assert_same_dd(f"if={src}", *ops)
        for ops in ([f"if={src}"], [f"of={self.path('o')}"], []):
            with self.subTest(ops=ops):
                ours = qil("dd", *ops, check=False)
                theirs = run([shutil.which("qemu-img"), "dd", *ops])
                self.assertEqual(ours.returncode, theirs.returncode)
                self.assertEqual(
                    ours.stderr.replace("qemu-img-lite", "qemu-img"),
                    theirs.stderr)
        # Open errors have the tool's usual form ("NAME: message").
        self.assertFails(["dd", f"if={self.path('missing')}",
                          f"of={self.path('o')}"], "No such file")
        self.assertFalse(os.path.exists(self.path("o")))

    def test_existing_output_replaced(self):
        # As qemu-img (which truncates it), an existing output is replaced;
        # unlike it, only by the complete new file.
        src = self.path("src.raw")
        random_file(src, 4096)
        out = self.path("out.raw")
        with open(out, "wb") as f:
            f.write(b"keep me")
        self.assertFails(["dd", f"if={self.path('missing')}", f"of={out}"],
                         "No such file")
        self.assertEqual(file_bytes(out), b"keep me")
        qil("dd", f"if={src}", f"of={out}")
        self.assertEqual(file_bytes(out), file_bytes(src))

if __name__ == "__main__":
    main()
