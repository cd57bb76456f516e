# SPDX-License-Identifier: GPL-2.0-or-later
"""Crash consistency of the qcow2 writer: qemu-img-lite is killed with
SIGKILL at random points while it converts into a new qcow2 image and
while it writes into an existing one with -n. Afterwards the real
`qemu-img check` finds no corruption (leaked clusters are allowed, as
qemu-img allows them), and every 4 KiB block of the image reads either
what was there before or what was being written: never anything else
(an L2 entry is written only after the data it points at). A new image
only gets its name when complete: killed, there is no file, or a whole
image.
"""
import os
import random
import shutil
import signal
import subprocess
import time

from qiltest import ITER_TIME, TOOL, TestCase, file_bytes, main, qil

PASS = "crash pass"
SECRET = f"secret,id=sec0,data={PASS}"
ENC = (f"encrypt.format=luks,encrypt.key-secret=sec0,"
       f"encrypt.iter-time={ITER_TIME}")
SIZE = 48 << 20
BLOCK = 4096
ROUNDS = 12


def image_args(path, encrypted):
    if encrypted:
        return ["--object", SECRET, "--image-opts",
                f"driver=qcow2,encrypt.key-secret=sec0,file.filename={path}"]
    return ["-f", "qcow2", path]


def make_source(path, seed):
    """Random data with zero runs (left unallocated in a new image)."""
    rnd = random.Random(seed)
    with open(path, "wb") as f:
        pos = 0
        while pos < SIZE:
            n = min(rnd.choice([4096, 65536, 1 << 20]), SIZE - pos)
            f.write(rnd.randbytes(n) if rnd.random() < 0.8 else bytes(n))
            pos += n
    return file_bytes(path)


class Qcow2Crash(TestCase):
    def setUp(self):
        super().setUp()
        self.need_qemu_img()
        self.rnd = random.Random(int(os.environ.get("QIL_CRASH_SEED",
                                                    time.time())))

    def kill_during(self, args, duration):
        """Start the tool, SIGKILL it after a random delay within the
        duration of a whole run. True if it was killed before it
        finished."""
        proc = subprocess.Popen([TOOL, *args], stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        time.sleep(self.rnd.uniform(0, duration))
        killed = proc.poll() is None
        if killed:
            proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate()
        if not killed:
            self.assertEqual(proc.returncode, 0, err)
        return killed

    def timed(self, args):
        """How long a whole run takes (the window to kill in)."""
        start = time.monotonic()
        qil(*args)
        return time.monotonic() - start

    def qemu_raw_all(self, img, enc):
        out = self.path("all.raw")
        if os.path.exists(out):
            os.unlink(out)
        subprocess.run([shutil.which("qemu-img"), "convert",
                        *image_args(img, enc), "-O", "raw", out], check=True)
        return file_bytes(out)

    def assert_consistent(self, img, enc, old, new):
        check = subprocess.run([shutil.which("qemu-img"), "check",
                                *image_args(img, enc)],
                               capture_output=True, text=True)
        # 0: clean, 3: leaks only. 2 would be corruption.
        self.assertIn(check.returncode, (0, 3),
                      f"qemu-img check: {check.stdout}{check.stderr}")
        out = self.path("after.raw")
        if os.path.exists(out):
            os.unlink(out)
        subprocess.run([shutil.which("qemu-img"), "convert",
                        *image_args(img, enc), "-O", "raw", out], check=True)
        got = file_bytes(out)
        self.assertEqual(len(got), SIZE)
        for pos in range(0, SIZE, BLOCK):
            blk = got[pos:pos + BLOCK]
            if blk != new[pos:pos + BLOCK] and blk != old[pos:pos + BLOCK]:
                self.fail(f"block at {pos} is neither the old nor the new "
                          "data")

    def test_kill_convert_new(self):
        src = self.path("src.raw")
        new = make_source(src, 1)
        zero = bytes(SIZE)
        for opts in ["", "extended_l2=on,lazy_refcounts=on", ENC, "-c"]:
            args = ["convert", "--object", SECRET, "-O", "qcow2"]
            if opts == "-c":
                args.append("-c")
            elif opts:
                args += ["-o", opts]
            img = self.path("new.qcow2")
            if os.path.exists(img):
                os.unlink(img)
            duration = self.timed([*args, src, img])
            killed = 0
            for r in range(ROUNDS):
                with self.subTest(opts=opts, round=r):
                    if os.path.exists(img):
                        os.unlink(img)
                    killed += self.kill_during([*args, src, img], duration)
                    # A new image gets its name only when complete
                    # (block/file-create.h): killed, there is none.
                    if not os.path.exists(img):
                        continue
                    self.assert_consistent(img, "encrypt" in opts, zero, new)
                    self.assertEqual(self.qemu_raw_all(img, "encrypt" in opts),
                                     new, "a named image is a complete one")
            # Not a timing test: a machine so slow that no run was cut
            # short still checked complete images.
            print(f"{opts or 'default'}: {killed}/{ROUNDS} runs killed "
                  f"(a run takes {duration:.2f} s)")

    def test_kill_convert_into_existing(self):
        old_src = self.path("old.raw")
        old = make_source(old_src, 2)
        src = self.path("src.raw")
        new = make_source(src, 3)
        # "-c": the old data compressed, so -n overwrites compressed
        # clusters: their refcounts drop, after the L2 entries that moved.
        for opts in ["", "extended_l2=on", "cluster_size=4k,refcount_bits=1",
                     ENC, "-c"]:
            enc = "encrypt" in opts
            base = self.path("base.qcow2")
            if os.path.exists(base):
                os.unlink(base)
            args = ["convert", "--object", SECRET, "-O", "qcow2"]
            if opts == "-c":
                args.append("-c")
            elif opts:
                args += ["-o", opts]
            # Half of the old data: -n fills holes and overwrites data.
            half = self.path("half.raw")
            with open(half, "wb") as f:
                f.write(old[:SIZE // 2])
                f.truncate(SIZE)
            qil(*args, half, base)
            before = old[:SIZE // 2] + bytes(SIZE - SIZE // 2)
            img = self.path("img.qcow2")
            target = (["--target-image-opts",
                       f"driver=qcow2,encrypt.key-secret=sec0,"
                       f"file.filename={img}"] if enc else
                      ["-O", "qcow2", img])
            cmd = ["convert", "-n", "--object", SECRET, "-f", "raw", src,
                   *target]
            shutil.copy(base, img)
            duration = self.timed(cmd)
            self.assert_consistent(img, enc, new, new)
            killed = 0
            for r in range(ROUNDS):
                with self.subTest(opts=opts, round=r):
                    shutil.copy(base, img)
                    killed += self.kill_during(cmd, duration)
                    self.assert_consistent(img, enc, before, new)
            print(f"-n {opts or 'default'}: {killed}/{ROUNDS} runs killed "
                  f"(a run takes {duration:.2f} s)")


if __name__ == "__main__":
    main()
