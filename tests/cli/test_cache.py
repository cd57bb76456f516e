# SPDX-License-Identifier: GPL-2.0-or-later
"""convert -t / -T: qemu-img's cache modes. none and directsync open the
file with O_DIRECT (its pages stay out of the page cache, which this test
sees with mincore(2)); every mode copies the same bytes, whatever the
alignment of the image's size; a bad mode is refused as qemu-img does."""
import ctypes
import mmap
import os
import re
import subprocess

from qiltest import (ITER_TIME, SECRET, TOOL, TestCase, file_bytes,
                     luks_opts, main, qil, random_file)

MODES = ("none", "directsync", "writeback", "writethrough", "unsafe")


def resident_bytes(path):
    """How much of path is in the page cache now: mincore(2) over a
    mapping of it (mapping a file reads nothing in by itself)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                          ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                             ctypes.c_void_p]
    size = os.path.getsize(path)
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    vec = (ctypes.c_ubyte * pages)()
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap")
        try:
            if libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
    return sum(v & 1 for v in vec) * mmap.PAGESIZE


class CacheModes(TestCase):
    SIZE = (3 << 20) + 1000     # not a multiple of any block size

    def setUp(self):
        super().setUp()
        self.src = self.path("src.raw")
        random_file(self.src, self.SIZE)

    def test_every_mode_copies_the_same_bytes(self):
        for t in MODES:
            for src_mode in MODES:
                with self.subTest(t=t, T=src_mode):
                    enc = self.path(f"{t}-{src_mode}.luks")
                    back = self.path(f"{t}-{src_mode}.raw")
                    qil("convert", "-t", t, "-T", src_mode, "--object",
                        SECRET, "-O", "luks", "-o",
                        f"key-secret=sec0,iter-time={ITER_TIME}",
                        self.src, enc)
                    qil("convert", "-t", t, "-T", src_mode, "--object",
                        SECRET, "--image-opts", luks_opts(enc), "-O", "raw",
                        back)
                    self.assertEqual(file_bytes(back),
                                     file_bytes(self.src) + bytes(24))
                    os.unlink(enc)
                    os.unlink(back)

    def test_none_bypasses_the_page_cache(self):
        cached, direct = self.path("cached.raw"), self.path("direct.raw")
        qil("convert", "-O", "raw", self.src, cached)
        qil("convert", "-t", "none", "-O", "raw", self.src, direct)
        # Before anything reads it back through the page cache:
        self.assertGreater(resident_bytes(cached), self.SIZE // 2)
        self.assertLess(resident_bytes(direct), 64 << 10)
        # Sizes count whole sectors, as in qemu-img: 24 zeroes pad it.
        self.assertEqual(file_bytes(direct), file_bytes(self.src) + bytes(24))
        self.assertEqual(file_bytes(cached), file_bytes(direct))

    def traced_convert(self, *args):
        """convert args under strace: the sync and truncate calls made."""
        log = self.path("strace.log")
        # LeakSanitizer stops the world with ptrace at exit, which fails
        # under strace (a sanitizer build): leaks are checked elsewhere.
        env = dict(os.environ)
        env["ASAN_OPTIONS"] = ":".join(
            filter(None, [env.get("ASAN_OPTIONS", ""), "detect_leaks=0"]))
        subprocess.run(["strace", "-f", "-qq", "-o", log, "-e",
                        "trace=fdatasync,fsync,sync_file_range,ftruncate",
                        TOOL, "convert", *args], check=True,
                       capture_output=True, env=env)
        with open(log) as f:
            calls = f.read()
        os.unlink(log)
        return calls

    def test_new_target_synced_unless_unsafe_asked_for(self):
        """A new target is synced before it is named in the default mode
        (qemu-img's unsafe); only -t unsafe given on purpose skips it. No
        truncate to size 0 either (ext4 then writes back in close())."""
        for t in ((), ("-t", "unsafe")):
            with self.subTest(t=t):
                dst = self.path("dst.luks")
                calls = self.traced_convert(
                    *t, "--object", SECRET, "-O", "luks", "-o",
                    f"key-secret=sec0,iter-time={ITER_TIME}", self.src, dst)
                synced = re.search(r"\bf(data)?sync\(", calls) is not None
                self.assertEqual(synced, not t, calls)
                if t:
                    self.assertNotIn("sync_file_range", calls)
                self.assertIsNone(re.search(r"ftruncate\(\d+, 0\)", calls),
                                  calls)
                back = self.path("back.raw")
                qil("convert", "--object", SECRET, "--image-opts",
                    luks_opts(dst), "-O", "raw", back)
                self.assertEqual(file_bytes(back),
                                 file_bytes(self.src) + bytes(24))
                os.unlink(dst)
                os.unlink(back)

    def test_bad_modes(self):
        dst = self.path("dst.raw")
        proc = qil("convert", "-t", "bogus", "-O", "raw", self.src, dst,
                   check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("Invalid cache option: bogus", proc.stderr)
        proc = qil("convert", "-T", "bogus", "-O", "raw", self.src, dst,
                   check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("Invalid source cache option: bogus", proc.stderr)
        self.assertFalse(os.path.exists(dst))


if __name__ == "__main__":
    main()
