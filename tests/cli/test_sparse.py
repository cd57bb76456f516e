# SPDX-License-Identifier: GPL-2.0-or-later
"""Sparse images and block status.

convert and compare walk a raw image one extent at a time, so a 2 TiB
sparse file with a few MiB of data costs what its data costs (qemu-img
takes 0.1 s; walking it in 256 KiB chunks took minutes). A fully written
file on tmpfs, where each SEEK_DATA/SEEK_HOLE walks the page cache,
converts to the same bytes. A hole in a LUKS file is zero ciphertext, which
is not zero plaintext: it must be decrypted like any other sector.
"""
import os
import subprocess

from qiltest import ITER_TIME, QEMU_IMG, SECRET, TOOL, TestCase, \
    file_bytes, luks_opts, main, qemu_img, qil, random_file

MIB = 1 << 20
TIB = 1 << 40
HUGE = 2 * TIB
# Where the huge image holds data: (offset, bytes). One starts and ends
# inside file system blocks, one straddles convert's 256 KiB jobs, one is
# the last bytes of the image.
HUGE_EXTENTS = [
    (0, MIB),
    (3 * (1 << 30) + 100 * 1024, 600 * 1024),
    (5 * (1 << 30) + 1000, 3000),
    (TIB + 7 * MIB, 2 * MIB),
    (HUGE - 4096, 4096),
]
# A command on the huge image must finish well within this (it takes
# well under a second; before block status per extent, minutes).
HUGE_TIMEOUT = 30


def qil_timed(*args, check=True, timeout=HUGE_TIMEOUT):
    """qil(), failing if the command runs longer than timeout seconds."""
    try:
        proc = subprocess.run([TOOL, *map(str, args)], capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"qemu-img-lite {' '.join(map(str, args))} "
                             f"took more than {timeout} s")
    if check and proc.returncode != 0:
        raise AssertionError(f"qemu-img-lite {' '.join(map(str, args))} "
                             f"exited {proc.returncode}\n{proc.stderr}")
    return proc


def pattern(offset, length):
    """The bytes the huge image holds at one of its extents."""
    seed = offset.to_bytes(8, "little")
    return (seed * (length // 8 + 1))[:length]


def read_at(path, offset, length):
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(length)


def write_at(path, offset, data):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def tmpfs_dir():
    """A writable tmpfs mount point (/dev/shm, /tmp), or None."""
    with open("/proc/self/mounts") as f:
        mounts = {line.split()[1]: line.split()[2] for line in f}
    for d in ("/dev/shm", "/tmp"):
        if mounts.get(d) == "tmpfs" and os.access(d, os.W_OK):
            return d
    return None


class HugeSparse(TestCase):
    def setUp(self):
        super().setUp()
        self.src = self.path("huge.raw")
        with open(self.src, "wb") as f:
            f.truncate(HUGE)
        for off, n in HUGE_EXTENTS:
            write_at(self.src, off, pattern(off, n))

    def assert_huge_content(self, path):
        """path holds HUGE_EXTENTS' data, and zeroes around it."""
        self.assertEqual(os.path.getsize(path), HUGE)
        for off, n in HUGE_EXTENTS:
            self.assertEqual(read_at(path, off, n), pattern(off, n),
                             f"data at {off}")
            before = max(off - 8192, 0)
            self.assertEqual(read_at(path, before, off - before),
                             bytes(off - before), f"zeroes before {off}")
            after = read_at(path, off + n, 8192)
            self.assertEqual(after, bytes(len(after)), f"zeroes after {off}")

    def test_convert_huge_sparse(self):
        dst = self.path("out.raw")
        qil_timed("convert", "-f", "raw", "-O", "raw", self.src, dst)
        self.assert_huge_content(dst)
        # the holes stay holes: a few MiB allocated, not 2 TiB
        self.assertLess(os.stat(dst).st_blocks * 512, 64 * MIB)

    def test_convert_huge_sparse_progress(self):
        dst = self.path("out.raw")
        proc = qil_timed("convert", "-p", "-f", "raw", "-O", "raw",
                         self.src, dst)
        self.assertIn("(100.00/100%)", proc.stdout)
        self.assert_huge_content(dst)

    def test_compare_huge_sparse(self):
        dst = self.path("out.raw")
        qil_timed("convert", "-f", "raw", "-O", "raw", self.src, dst)
        for a, b in ((self.src, self.src), (self.src, dst)):
            proc = qil_timed("compare", "-f", "raw", "-F", "raw", a, b)
            self.assertEqual(proc.stdout, "Images are identical.\n")

        # a byte in a hole of one image: found, at its sector
        where = TIB + TIB // 2 + 777
        write_at(dst, where, b"\1")
        proc = qil_timed("compare", self.src, dst, check=False)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertEqual(proc.stdout,
                         f"Content mismatch at offset {where // 512 * 512}!\n")
        proc = qil_timed("compare", dst, self.src, check=False)
        self.assertEqual(proc.stdout,
                         f"Content mismatch at offset {where // 512 * 512}!\n")
        write_at(dst, where, b"\0")

        # a byte changed inside data in both images
        off, n = HUGE_EXTENTS[3]
        where = off + n - 5
        write_at(dst, where, bytes([pattern(off, n)[-5] ^ 0x80]))
        proc = qil_timed("compare", self.src, dst, check=False)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertEqual(proc.stdout,
                         f"Content mismatch at offset {where // 512 * 512}!\n")

    def test_compare_huge_sparse_size_mismatch(self):
        # a shorter copy: the longer image's tail must read as zeroes, and
        # its holes are not read (the data at its very end differs)
        short = self.path("short.raw")
        short_size = TIB + 16 * MIB
        with open(short, "wb") as f:
            f.truncate(short_size)
        for off, n in HUGE_EXTENTS:
            if off + n <= short_size:
                write_at(short, off, pattern(off, n))
        proc = qil_timed("compare", self.src, short, check=False)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertEqual(proc.stdout,
                         "Warning: Image size mismatch!\n"
                         f"Content mismatch at offset {HUGE - 4096}!\n")
        # without that last data, the tail is all holes: identical
        with open(self.src, "r+b") as f:
            f.truncate(HUGE - 4096)
        proc = qil_timed("compare", self.src, short)
        self.assertEqual(proc.stdout,
                         "Warning: Image size mismatch!\n"
                         "Images are identical.\n")

    def test_same_answer_as_qemu_img(self):
        self.need_qemu_img()
        dst = self.path("out.raw")
        qil_timed("convert", "-f", "raw", "-O", "raw", self.src, dst)
        write_at(dst, 3 * TIB // 2 + 5000, b"\7")
        ours = qil_timed("compare", "-f", "raw", "-F", "raw", self.src, dst,
                         check=False)
        theirs = qemu_img("compare", "-f", "raw", "-F", "raw", self.src, dst,
                          check=False)
        self.assertEqual((ours.returncode, ours.stdout),
                         (theirs.returncode, theirs.stdout))


class DenseOnTmpfs(TestCase):
    """A fully written file where block status is dearest (tmpfs if any)."""

    def setUp(self):
        super().setUp()
        base = tmpfs_dir()
        if base:
            self.dir = os.path.join(base, os.path.basename(self.dir))
            os.mkdir(self.dir)
            self.addCleanup(self.remove_dir)
        # not a whole number of sectors: the last extent ends inside one
        self.size = 24 * MIB + 1000
        self.src = self.path("src.raw")
        random_file(self.src, self.size, seed=7)

    def remove_dir(self):
        for name in os.listdir(self.dir):
            os.unlink(os.path.join(self.dir, name))
        os.rmdir(self.dir)

    def assert_same_bytes(self, path):
        data = file_bytes(path)
        self.assertEqual(len(data), (self.size + 511) // 512 * 512)
        self.assertTrue(data[:self.size] == file_bytes(self.src),
                        "the copy differs from the source")
        self.assertEqual(data[self.size:], bytes(len(data) - self.size))

    def test_raw_to_raw(self):
        dst = self.path("dst.raw")
        qil("convert", "-f", "raw", "-O", "raw", self.src, dst)
        self.assert_same_bytes(dst)

    def test_raw_to_luks_and_back(self):
        self.need_luks()
        luks, back = self.path("dst.luks"), self.path("back.raw")
        qil("convert", "--object", SECRET, "-f", "raw", "-O", "luks", "-o",
            f"key-secret=sec0,iter-time={ITER_TIME}", self.src, luks)
        qil("convert", "--object", SECRET, "--image-opts", luks_opts(luks),
            "-O", "raw", back)
        self.assert_same_bytes(back)
        qil("compare", "--object", SECRET, "--image-opts",
            f"driver=raw,file.filename={self.src}", luks_opts(luks))

    def test_sparse_source(self):
        # data between holes, on the same file system
        punched = self.path("punched.raw")
        with open(punched, "wb") as f:
            f.truncate(self.size)
        for off in (MIB, 8 * MIB + 4096, 22 * MIB):
            write_at(punched, off, read_at(self.src, off, MIB))
        dst = self.path("dst.raw")
        qil("convert", "-f", "raw", "-O", "raw", punched, dst)
        self.assertTrue(file_bytes(dst)[:self.size] == file_bytes(punched))
        qil("compare", "-f", "raw", "-F", "raw", punched, dst)


class LuksHoles(TestCase):
    def test_hole_in_luks_file_is_not_zero(self):
        """A new LUKS image's payload is a hole in its file: it must read
        as the decryption of zero ciphertext (as in qemu-img), not as
        zeroes."""
        self.need_luks()
        img = self.path("new.luks")
        qil("create", "--object", SECRET, "-f", "luks", "-o",
            f"key-secret=sec0,iter-time={ITER_TIME}", img, "4M")
        st = os.stat(img)
        if st.st_blocks * 512 >= st.st_size:
            self.skipTest("the file system did not leave the payload a hole")
        out = self.path("out.raw")
        qil("convert", "--object", SECRET, "--image-opts", luks_opts(img),
            "-O", "raw", out)
        data = file_bytes(out)
        self.assertEqual(len(data), 4 * MIB)
        self.assertGreater(len(set(data[:4096])), 100,
                           "a hole in the LUKS file was read as zeroes")
        zero = self.path("zero.raw")
        with open(zero, "wb") as f:
            f.truncate(4 * MIB)
        proc = qil("compare", "--object", SECRET, "--image-opts",
                   luks_opts(img), f"driver=raw,file.filename={zero}",
                   check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(proc.stdout, "Content mismatch at offset 0!\n")
        if QEMU_IMG:
            theirs = self.path("theirs.raw")
            qemu_img("convert", "--object", SECRET, "--image-opts",
                     luks_opts(img), "-O", "raw", theirs)
            self.assertTrue(file_bytes(theirs) == data,
                            "qemu-img decrypts the hole differently")


if __name__ == "__main__":
    main()
