# SPDX-License-Identifier: GPL-2.0-or-later
"""Errors: "qemu-img-lite: <file>: <message>" on stderr, exit 1, and no
half-written image left behind (a full disk, simulated with a small tmpfs)."""
import os
import subprocess
import tempfile

from qiltest import (ITER_TIME, SECRET, TOOL, TestCase, file_bytes,
                     luks_opts, main, qil, random_file)


class Errors(TestCase):
    def test_missing_file(self):
        missing = self.path("missing.img")
        for cmd in (["info"], ["convert", "-O", "raw"], ["resize"],
                    ["measure", "-O", "raw"]):
            args = cmd + [missing]
            if cmd[0] == "convert":
                args.append(self.path("out"))
            if cmd[0] == "resize":
                args.append("1M")
            proc = self.assertFails(args)
            self.assertEqual(proc.stderr,
                             f"qemu-img-lite: Could not open '{missing}': "
                             f"Could not open '{missing}': No such file or "
                             "directory\n")
        self.assertFalse(os.path.exists(self.path("out")))

    def test_usage_errors(self):
        proc = run_tool([])
        self.assertEqual(proc.returncode, 1)
        self.assertIn("Not enough arguments", proc.stderr)
        self.assertFails(["frobnicate"], "Command not found: frobnicate")
        self.assertFails(["info", "--bogus", "x"],
                         "unrecognized option '--bogus'")
        for cmd in ["create", "convert", "info", "amend", "compare",
                    "measure", "resize"]:
            proc = qil(cmd, "--help")
            self.assertIn(f"qemu-img-lite {cmd}", proc.stdout)

    def test_wrong_passphrase(self):
        self.need_luks()
        luks, _ = self.make_luks("a.luks", "1M")
        opts = luks_opts(luks)
        proc = self.assertFails(["compare", "--object",
                                 "secret,id=sec0,data=nope", "--image-opts",
                                 opts, opts], rc=2)
        self.assertEqual(proc.stderr, f"qemu-img-lite: Could not open "
                         f"'{opts}': Invalid password, cannot unlock any "
                         "keyslot\n")

    def test_not_luks(self):
        self.need_luks()
        raw = self.path("a.raw")
        random_file(raw, 1 << 20)
        self.assertFails(["info", "-f", "luks", raw])

    def full_disk(self):
        """A 1 MiB tmpfs (needs root); skips the test otherwise."""
        mnt = tempfile.mkdtemp(prefix="qil-full-")
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M",
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

    def test_full_disk_raw(self):
        mnt = self.full_disk()
        src = self.path("src.raw")
        random_file(src, 4 << 20)
        before = file_bytes(src)
        dst = os.path.join(mnt, "dst.raw")
        self.assertFails(["convert", "-O", "raw", src, dst],
                         "No space left on device")
        self.assertFalse(os.path.exists(dst))
        self.assertEqual(file_bytes(src), before)
        self.assertFails(["create", "-f", "raw", "-o", "preallocation=full",
                          os.path.join(mnt, "big.raw"), "4M"],
                         "No space left on device")
        self.assertEqual(os.listdir(mnt), [])

    def test_full_disk_luks(self):
        self.need_luks()
        mnt = self.full_disk()
        src = self.path("src.raw")
        random_file(src, 4 << 20)
        dst = os.path.join(mnt, "dst.luks")
        self.assertFails(["convert", "--object", SECRET, "-O", "luks", "-o",
                          f"key-secret=sec0,iter-time={ITER_TIME}", src, dst],
                         "No space left on device")
        self.assertEqual(os.listdir(mnt), [])


def run_tool(args):
    return subprocess.run([TOOL, *args], capture_output=True, text=True)


if __name__ == "__main__":
    main()
