#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Image locking (issue 15, items 1 and 2): qemu-img-lite takes QEMU's lock
bytes, so that it excludes itself, qemu-img and qemu-io on the same image;
-U reads without locking; an image is never converted onto itself.

Other lock holders are emulated by a Python process that takes open file
description locks on the bytes QEMU uses (100 + permission for what it
holds, 200 + permission for what it does not share), and proven with the
real qemu-img and qemu-io where they are installed. qemu-img-lite is held
in the middle of a command with the test-only QIL_TEST_HOLD_OPEN hook.
"""
import fcntl
import os
import shutil
import struct
import subprocess
import sys
import time

from qiltest import ITER_TIME, SECRET, TOOL, TestCase, file_bytes, \
    luks_opts, main, qemu_img, qil, random_file

QEMU_IO = shutil.which("qemu-io")

# QEMU's permission bits and lock bytes (block/file-posix.c).
CONSISTENT_READ, WRITE, WRITE_UNCHANGED, RESIZE = 0, 1, 2, 3
PERM_BASE, SHARED_BASE = 100, 200

LOCK_WRITE = 'Failed to get "write" lock'
LOCK_SHARED_WRITE = 'Failed to get shared "write" lock'
ANOTHER = "Is another process using the image"

# struct flock on Linux: short, short, off_t, off_t, pid_t (+ padding).
FLOCK = "hhqqi4x"

HOLDER = f"""
import fcntl, struct, sys
fd = open(sys.argv[1], "rb")
for off in map(int, sys.argv[2:]):
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK,
                struct.pack("{FLOCK}", fcntl.F_RDLCK, 0, off, 1, 0))
print("locked", flush=True)
sys.stdin.read()
"""


def byte_is_locked(path, offset):
    """Whether another open file holds a lock on byte offset of path."""
    with open(path, "rb") as f:
        fl = struct.pack(FLOCK, fcntl.F_WRLCK, 0, offset, 1, 0)
        out = fcntl.fcntl(f, fcntl.F_OFD_GETLK, fl)
        return struct.unpack(FLOCK, out)[0] != fcntl.F_UNLCK


class Holder:
    """A process holding read locks on some of QEMU's bytes of path."""

    def __init__(self, path, perm=(), unshared=()):
        offs = [PERM_BASE + p for p in perm] + \
            [SHARED_BASE + p for p in unshared]
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, path, *map(str, offs)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline() == "locked\n"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.proc.stdin.close()
        self.proc.wait()
        self.proc.stdout.close()


class HeldQil:
    """qemu-img-lite ARGS, stopped right after opening each image (by
    name or option string), until the test lets it go on."""

    def __init__(self, test, *args):
        self.marker = test.path("held")
        env = dict(os.environ, QIL_TEST_HOLD_OPEN=self.marker)
        self.proc = subprocess.Popen([TOOL, *args], env=env, text=True,
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.args = args
        self.wait_held()

    def wait_held(self):
        for _ in range(3000):
            if os.path.exists(self.marker) or self.proc.poll() is not None:
                break
            time.sleep(0.01)
        if not os.path.exists(self.marker):
            out, err = self.proc.communicate()
            raise AssertionError(f"{self.args} did not get to hold: {out} "
                                 f"{err}")

    def next_image(self):
        """Let it go on to hold the next image it opens."""
        os.unlink(self.marker)
        self.wait_held()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        while self.proc.poll() is None:
            if os.path.exists(self.marker):
                os.unlink(self.marker)
            time.sleep(0.01)
        self.stdout, self.stderr = self.proc.communicate()
        self.returncode = self.proc.returncode


class LockTestCase(TestCase):
    def assertLockError(self, proc, message, path):
        """proc failed with QEMU's lock error about path."""
        self.assertNotEqual(proc.returncode, 0, proc.stdout)
        self.assertIn(message, proc.stderr)
        self.assertIn(f"{ANOTHER} [{path}]?", proc.stderr)


class Locking(LockTestCase):
    def setUp(self):
        super().setUp()
        self.img = self.path("a.raw")
        random_file(self.img, 1 << 20)

    def test_writer_refused_while_another_writes(self):
        # What qemu-io -f raw (read-write) holds: consistent read, write.
        with Holder(self.img, perm=(CONSISTENT_READ, WRITE)):
            for args in (["resize", "-f", "raw", self.img, "2M"],
                         ["convert", "-n", "-O", "raw", "-f", "raw",
                          self.path("b"), self.img]):
                with self.subTest(cmd=args[0]):
                    if args[0] == "convert":
                        random_file(self.path("b"), 1 << 20, seed=2)
                    before = file_bytes(self.img)
                    self.assertLockError(qil(*args, check=False),
                                         LOCK_SHARED_WRITE, self.img)
                    self.assertEqual(file_bytes(self.img), before)
        qil("resize", "-f", "raw", self.img, "2M")
        self.assertEqual(os.path.getsize(self.img), 2 << 20)

    def test_reader_refused_while_another_writes_unless_U(self):
        with Holder(self.img, perm=(CONSISTENT_READ, WRITE)):
            self.assertLockError(qil("info", self.img, check=False),
                                 LOCK_SHARED_WRITE, self.img)
            self.assertLockError(qil("compare", self.img, self.img,
                                     check=False), LOCK_SHARED_WRITE,
                                 self.img)
            self.assertIn("file format: raw", qil("info", "-U",
                                                  self.img).stdout)
            qil("compare", "-U", self.img, self.img)
            qil("measure", "-U", "-O", "raw", self.img)
            qil("convert", "-U", "-O", "raw", self.img, self.path("copy"))
            self.assertEqual(file_bytes(self.path("copy")),
                             file_bytes(self.img))
            # QEMU's force-share=on and file.locking=off do the same for
            # --image-opts.
            qil("info", "--image-opts",
                f"driver=raw,file.filename={self.img},force-share=on")
            qil("info", "--image-opts",
                f"driver=raw,file.filename={self.img},file.locking=off")

    def test_writer_refused_while_another_reads(self):
        # What qemu-img convert holds on its source: consistent read, and
        # it shares neither write nor resize.
        with Holder(self.img, perm=(CONSISTENT_READ,),
                    unshared=(WRITE, RESIZE)):
            self.assertLockError(qil("resize", "-f", "raw", self.img, "2M",
                                     check=False), LOCK_WRITE, self.img)
            # Readers share with readers.
            qil("info", self.img)
            qil("compare", self.img, self.img)
        self.assertEqual(os.path.getsize(self.img), 1 << 20)

    def test_bytes_taken(self):
        # A writer holds consistent read, write, resize and shares only
        # consistent read and write unchanged; a reader holds consistent
        # read and does not share write and resize; info holds no read.
        cases = {
            ("resize", "-f", "raw", self.img, "1M"):
                {100, 101, 103, 201, 203},
            ("compare", self.img, self.path("b")): {100, 201, 203},
            ("info", self.img): {201, 203},
            ("info", "-U", self.img): set(),
        }
        random_file(self.path("b"), 1 << 20)
        for args, expected in cases.items():
            with self.subTest(args=args):
                with HeldQil(self, *args) as held:
                    locked = {b for b in range(100, 106)} | \
                        {b for b in range(200, 206)}
                    locked = {b for b in locked
                              if byte_is_locked(self.img, b)}
                    self.assertEqual(locked, expected)
                self.assertEqual(held.returncode, 0, held.stderr)

    def test_amend_and_resize_refused_while_convert_writes(self):
        # The case: amend and resize of an image convert -n writes.
        self.need_luks()
        luks, raw = self.make_luks("t.luks", "1M")
        src = self.path("src.raw")
        random_file(src, 1 << 20, seed=5)
        with HeldQil(self, "convert", "-n", "--object", SECRET, "-f", "raw",
                     "--target-image-opts", src, luks_opts(luks)) as held:
            held.next_image()           # past the source: the target
            before = file_bytes(luks)
            self.assertLockError(qil("resize", "-f", "raw", luks, "2M",
                                     check=False), LOCK_WRITE, luks)
            self.assertLockError(qil("amend", "--object", SECRET,
                                     "--object", "secret,id=n,data=x",
                                     "--image-opts", luks_opts(luks), "-o",
                                     "state=active,new-secret=n,"
                                     f"iter-time={ITER_TIME}", check=False),
                                 LOCK_WRITE, luks)
            self.assertLockError(qil("info", luks, check=False),
                                 LOCK_SHARED_WRITE, luks)
            self.assertEqual(file_bytes(luks), before)
            qil("info", "-U", luks)
        self.assertEqual(held.returncode, 0, held.stderr)
        qil("compare", "--object", SECRET, "--image-opts",
            f"driver=raw,file.filename={src}", luks_opts(luks))

    def test_detached_header_locked(self):
        self.need_luks()
        hdr, data = self.path("hdr"), self.path("data")
        qil("create", "-q", "-f", "luks", "--object", SECRET, "-o",
            f"key-secret=sec0,iter-time={ITER_TIME},detached-header=true",
            hdr)
        qil("create", "-q", "-f", "raw", data, "1M")
        opts = (f"driver=luks,key-secret=sec0,file.filename={data},"
                f"header.filename={hdr}")
        with HeldQil(self, "convert", "-n", "--object", SECRET, "-f", "raw",
                     "--target-image-opts", self.img, opts) as held:
            held.next_image()           # the target: data and header
            for path in (hdr, data):
                with self.subTest(path=path):
                    self.assertTrue(byte_is_locked(path, PERM_BASE + WRITE))
                    self.assertTrue(byte_is_locked(path,
                                                   SHARED_BASE + WRITE))
            proc = qil("info", "--object", SECRET, "--image-opts", opts,
                       check=False)
            self.assertLockError(proc, LOCK_SHARED_WRITE, data)
        self.assertEqual(held.returncode, 0, held.stderr)

    def test_force_share_refused_on_write_commands(self):
        before = file_bytes(self.img)
        for args in (["resize", "-U", "-f", "raw", self.img, "2M"],
                     ["amend", "-U", "-f", "raw", "-o", "size=2M",
                      self.img],
                     ["create", "-U", "-f", "raw", self.path("new"), "1M"]):
            with self.subTest(cmd=args[0]):
                proc = self.assertFails(args)
                self.assertIn("-U", proc.stderr)
        self.assertFails(["resize", "--image-opts",
                          f"driver=raw,file.filename={self.img},"
                          "force-share=on", "2M"],
                         "force-share=on can only be used with read-only "
                         "images")
        self.assertEqual(file_bytes(self.img), before)
        self.assertFalse(os.path.exists(self.path("new")))

    def test_locking_option(self):
        self.assertFails(["info", "--image-opts",
                          f"driver=raw,file.filename={self.img},"
                          "file.locking=maybe"],
                         "Parameter 'locking' does not accept value 'maybe'")


class SelfConvert(LockTestCase):
    """convert -n onto its own source is refused before anything is
    written, whatever name the target is given."""

    def setUp(self):
        super().setUp()
        self.src = self.path("self.raw")
        random_file(self.src, 1 << 20)
        self.before = file_bytes(self.src)
        os.symlink("self.raw", self.path("link.raw"))
        os.link(self.src, self.path("hard.raw"))

    def check_refused(self, args, target):
        proc = self.assertFails(args, f"Cannot write '{target}': it is "
                                "the same file as")
        self.assertIn("converted onto itself", proc.stderr)
        self.assertEqual(file_bytes(self.src), self.before)

    def test_same_file_under_any_name(self):
        for name in ("self.raw", "link.raw", "hard.raw", "./self.raw"):
            target = (self.path(name) if name != "./self.raw"
                      else self.dir + "/./self.raw")
            for extra in ([], ["-U"]):
                with self.subTest(target=name, extra=extra):
                    self.check_refused(["convert", "-n", *extra, "-f", "raw",
                                        "-O", "raw", self.src, target],
                                       target)

    def test_target_image_opts(self):
        target = self.path("link.raw")
        self.check_refused(["convert", "-n", "-f", "raw",
                            "--target-image-opts", self.src,
                            f"driver=raw,file.filename={target}"], target)

    def test_luks_onto_itself(self):
        self.need_luks()
        luks, raw = self.make_luks("s.luks", "1M")
        before = file_bytes(luks)
        proc = self.assertFails(["convert", "-n", "--object", SECRET,
                                 "--image-opts", luks_opts(luks),
                                 "--target-image-opts", luks_opts(luks)],
                                "converted onto itself")
        self.assertIn(f"'{luks}'", proc.stderr)
        self.assertEqual(file_bytes(luks), before)

    def test_compare_with_itself_is_fine(self):
        qil("compare", self.src, self.path("link.raw"))


class ConcurrentAmend(LockTestCase):
    """Two amends adding a passphrase to one image at once: never both
    succeed with a slot lost. Either one fails with the lock error, or
    both passphrases open the image afterwards."""

    ROUNDS = 30

    def race(self, version):
        luks, raw = self.make_luks(f"r{version}.luks", "1M",
                                   f"luks-version={version}"
                                   + (",kdf=pbkdf2" if version == 2 else ""))
        pristine = file_bytes(luks)
        locked_out = 0
        for rnd in range(self.ROUNDS):
            with open(luks, "r+b") as f:
                f.write(pristine)
            procs = []
            for who in ("x", "y"):
                procs.append(subprocess.Popen(
                    [TOOL, "amend", "--object", SECRET, "--object",
                     f"secret,id=new,data=pass-{who}-{rnd}",
                     "--image-opts", luks_opts(luks), "-o",
                     f"state=active,new-secret=new,iter-time={ITER_TIME}"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True))
            # Both ended before any check: on a busy machine the second
            # may start only after the first is done, and succeed too;
            # a check made while it runs would meet its lock.
            results = [p.communicate() for p in procs]
            for who, p, (out, err) in zip(("x", "y"), procs, results):
                with self.subTest(version=version, round=rnd, who=who):
                    if p.returncode:
                        self.assertIn("lock", err)
                        self.assertIn(ANOTHER, err)
                        locked_out += 1
                        continue
                    # Its passphrase must open the image, with the data.
                    proc = qil("compare", "--object",
                               f"secret,id=sec0,data=pass-{who}-{rnd}",
                               "--image-opts", luks_opts(luks),
                               f"driver=raw,file.filename={raw}",
                               check=False)
                    self.assertEqual(proc.returncode, 0, proc.stderr)
        return locked_out

    def test_luks1(self):
        self.need_luks()
        # Each amend runs for tenths of a second (PBKDF2 calibration): in
        # 30 rounds the two overlap, and the lock turns one away, many times.
        self.assertGreater(self.race(1), 0)

    def test_luks2(self):
        self.need_luks()
        self.assertGreater(self.race(2), 0)


class QemuCompat(LockTestCase):
    """The real qemu-img and qemu-io and qemu-img-lite exclude each
    other."""

    def setUp(self):
        super().setUp()
        self.need_qemu_img()
        self.img = self.path("a.raw")
        random_file(self.img, 1 << 20)

    def test_qemu_io_writer_blocks_us(self):
        if not QEMU_IO:
            self.skipTest("qemu-io is not installed")
        self.need_luks()
        luks, _ = self.make_luks("q.luks", "1M")
        for path, fmt in ((self.img, "raw"), (luks, "raw")):
            io = subprocess.Popen([QEMU_IO, "-f", fmt, "-c", "sleep 20000",
                                   path], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
            try:
                for _ in range(1000):
                    if byte_is_locked(path, PERM_BASE + WRITE):
                        break
                    time.sleep(0.01)
                self.assertTrue(byte_is_locked(path, PERM_BASE + WRITE))
                before = file_bytes(path)
                self.assertLockError(qil("resize", "-f", "raw", path, "2M",
                                         check=False), LOCK_SHARED_WRITE,
                                     path)
                if path == luks:
                    proc = qil("amend", "--object", SECRET, "--object",
                               "secret,id=n,data=other", "--image-opts",
                               luks_opts(luks), "-o",
                               f"state=active,new-secret=n,"
                               f"iter-time={ITER_TIME}", check=False)
                    self.assertLockError(proc, LOCK_SHARED_WRITE, luks)
                self.assertEqual(file_bytes(path), before)
                qil("info", "-U", path)
            finally:
                io.kill()
                io.wait()
        qil("resize", "-f", "raw", self.img, "2M")

    def test_our_writer_blocks_qemu_img(self):
        with HeldQil(self, "resize", "-f", "raw", self.img, "1M") as held:
            self.assertLockError(qemu_img("resize", "-f", "raw", self.img,
                                          "2M", check=False),
                                 LOCK_WRITE, self.img)
            self.assertLockError(qemu_img("convert", "-f", "raw", "-O",
                                          "raw", self.img, self.path("c"),
                                          check=False),
                                 LOCK_SHARED_WRITE, self.img)
            if QEMU_IO:
                # qemu-io shares everything, but needs write: refused.
                self.assertLockError(
                    run_qemu_io(["-f", "raw", "-c", "write 0 512",
                                 self.img]), LOCK_WRITE, self.img)
                # A reader that shares writes (qemu-io -r) is allowed.
                self.assertEqual(run_qemu_io(["-r", "-f", "raw", "-c",
                                              "read 0 512", self.img])
                                 .returncode, 0)
            qemu_img("info", "-U", self.img)
        self.assertEqual(held.returncode, 0, held.stderr)
        qemu_img("resize", "-f", "raw", self.img, "2M")

    def test_our_writer_fails_qemu_img_info_on_qcow2(self):
        # qemu-img info locks only qcow2 images (not raw or luks ones):
        # hold a qcow2 file open for writing, as raw, without changing it.
        q = self.path("q.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", q, "1M")
        size = os.path.getsize(q)
        with HeldQil(self, "resize", "--shrink", "-f", "raw", q,
                     str(size)) as held:
            self.assertLockError(qemu_img("info", q, check=False),
                                 LOCK_SHARED_WRITE, q)
            self.assertIn("file format: qcow2",
                          qemu_img("info", "-U", q).stdout)
        self.assertEqual(held.returncode, 0, held.stderr)
        qemu_img("info", q)

    def test_our_reader_blocks_qemu_img_writer(self):
        with HeldQil(self, "compare", self.img, self.img) as held:
            self.assertLockError(qemu_img("resize", "-f", "raw", self.img,
                                          "2M", check=False),
                                 LOCK_WRITE, self.img)
            qemu_img("info", self.img)
        self.assertEqual(held.returncode, 0, held.stderr)

    def test_backing_file_read_locked(self):
        base = self.path("base.raw")
        random_file(base, 1 << 20, seed=3)
        top = self.path("top.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", "-b", base, "-F", "raw", top)
        with HeldQil(self, "convert", "-O", "raw", top,
                     self.path("out.raw")) as held:
            self.assertLockError(qemu_img("resize", "-f", "raw", base, "2M",
                                          check=False), LOCK_WRITE, base)
        self.assertEqual(held.returncode, 0, held.stderr)
        self.assertEqual(file_bytes(self.path("out.raw")), file_bytes(base))

    def test_qemu_img_reader_blocks_our_writer(self):
        # qemu-img convert, slowed down by its rate limit (-r), holds its
        # source's locks while it copies.
        src = self.path("big.raw")
        random_file(src, 4 << 20)
        conv = subprocess.Popen(
            [shutil.which("qemu-img"), "convert", "-r", "256k", "-f", "raw",
             "-O", "raw", src, self.path("o.raw")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(1000):
                if byte_is_locked(src, SHARED_BASE + WRITE):
                    break
                time.sleep(0.005)
            self.assertIsNone(conv.poll())
            before = file_bytes(src)
            self.assertLockError(qil("resize", "-f", "raw", src, "8M",
                                     check=False), LOCK_WRITE, src)
            self.assertEqual(file_bytes(src), before)
            # Readers share with readers.
            qil("compare", "-f", "raw", "-F", "raw", src, src)
        finally:
            conv.kill()
            conv.wait()


def run_qemu_io(args):
    return subprocess.run([QEMU_IO, *args], capture_output=True, text=True)


if __name__ == "__main__":
    main()
