#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Storage faults at every write and every sync (issue 27): the N-th write
or sync the tool makes to the image's directory fails, for every N until
the command no longer reaches it, under create (new and over an existing
file), convert (new and -n), amend (add and remove a key: LUKS1, LUKS2,
qcow2 with LUKS), resize and check -r.

The fault comes from an LD_PRELOAD shim (fault-shim.c): a full disk
(ENOSPC, every later write too), one write that fails (EIO, once), and
one fsync that fails (EIO, once: the kernel has dropped the pages, and a
later fsync would succeed; issue 27 item 1). After each:
- the exit status is 1 and stderr names the cause;
- the image is in its old state or its new one, never neither: it opens
  with the old passphrase, every block holds old or new data, a failed
  resize left the size as it was, a failed create or convert left
  nothing behind (or the old file intact), qemu-img check finds no
  corruption in a qcow2 image (leaks at most);
- when the fault did not happen (N past the last call), the command
  succeeded.
Each sweep prints how many injection points it covered."""

import os
import shutil
import subprocess
import sys

from qiltest import ITER_TIME, QEMU_IMG, SECRET, TOOL, TestCase, \
    file_bytes, main, qemu_img, qil, random_file
from test_check import Qcow2File

SHIM = os.environ.get("QIL_FAULT_SHIM", "")
NEW = "secret,id=sec1,data=new passphrase"
# (kind, errno, once)
FAULTS = (("write", 28, False), ("write", 5, True), ("sync", 5, True))
ERRTEXT = {28: "No space left on device", 5: "Input/output error"}
SIZE = 1 << 20
BLOCK = 64 << 10


def create_args(fmt, path, size="1M"):
    """create for each format of the sweeps (LUKS key sec0)."""
    args = ["create", "--object", SECRET]
    if fmt == "raw":
        args += ["-f", "raw"]
    elif fmt == "qcow2":
        args += ["-f", "qcow2"]
    elif fmt.startswith("luks"):
        args += ["-f", "luks", "-o", f"key-secret=sec0,iter-time={ITER_TIME},"
                 f"luks-version={fmt[4]}"]
    elif fmt == "qcow2-luks":
        args += ["-f", "qcow2", "-o", "encrypt.format=luks,"
                 f"encrypt.key-secret=sec0,encrypt.iter-time={ITER_TIME}"]
    return args + [path, size]


def image_opts(fmt, path, secret="sec0"):
    if fmt == "raw":
        return f"driver=raw,file.filename={path}"
    if fmt == "qcow2":
        return f"driver=qcow2,file.filename={path}"
    if fmt.startswith("luks"):
        return f"driver=luks,key-secret={secret},file.filename={path}"
    return (f"driver=qcow2,encrypt.key-secret={secret},"
            f"file.filename={path}")


class Sweep(TestCase):
    def setUp(self):
        super().setUp()
        if not SHIM or not os.path.exists(SHIM):
            self.skipTest("the fault shim was not built (QIL_FAULT_SHIM)")
        # Only files under work/ are faulted; sources and read-outs live
        # beside it.
        self.work = self.path("work")
        os.mkdir(self.work)

    def faulted(self, args, kind, n, errno, once):
        report = self.path("fault-report")
        env = dict(os.environ, LD_PRELOAD=SHIM, QIL_FAULT_DIR=self.work,
                   QIL_FAULT_OP=kind, QIL_FAULT_N=str(n),
                   QIL_FAULT_ERRNO=str(errno),
                   QIL_FAULT_ONCE="1" if once else "0",
                   QIL_FAULT_REPORT=report)
        # Under ASan the shim comes first in the preload list: allowed.
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") +
                               ":verify_asan_link_order=0").lstrip(":")
        proc = subprocess.run([TOOL, *args], capture_output=True, text=True,
                              env=env)
        with open(report) as f:
            words = f.read().split()
        os.unlink(report)
        return proc, int(words[5])

    def sweep(self, name, prepare, args, check_failed, check_done=None,
              noted=None):
        """Every injection point of args, for each kind of fault; returns
        how many points failed the command. noted: a message with which
        a fault may leave the command successful (a leak it reports)."""
        points = 0
        for kind, errno, once in FAULTS:
            n = 0
            while True:
                n += 1
                self.assertLess(n, 1000, f"{name}: no end to the {kind}s")
                prepare()
                proc, fired = self.faulted(args, kind, n, errno, once)
                what = (f"{name}: {kind} {n} failing with errno {errno}"
                        f"{' once' if once else ''}")
                if fired and noted and proc.returncode == 0:
                    self.assertIn(noted, proc.stderr, what)
                    check_failed(what, proc)
                    continue
                if not fired:
                    self.assertEqual(proc.returncode, 0,
                                     f"{what}, not reached: {proc.stderr}")
                    if check_done:
                        check_done()
                    break
                self.assertEqual(proc.returncode, 1,
                                 f"{what}: exit {proc.returncode}\n"
                                 f"{proc.stdout}{proc.stderr}")
                self.assertIn(ERRTEXT[errno], proc.stderr, what)
                self.assertTrue(proc.stderr.count("qemu-img-lite: "), what)
                check_failed(what, proc)
                points += 1
        print(f"{name}: {points} injection points", file=sys.stderr)
        self.assertGreater(points, 2, name)
        return points

    # Reading images back, without the shim.

    def guest(self, fmt, path, secret=SECRET, key="sec0"):
        out = self.path("readout.raw")
        qil("convert", "--object", secret, "--image-opts",
            image_opts(fmt, path, key), "-O", "raw", out)
        data = file_bytes(out)
        os.unlink(out)
        return data

    def assertQcow2Sound(self, fmt, path, what):
        if not QEMU_IMG or not fmt.startswith("qcow2"):
            return
        proc = qemu_img("check", "--object", SECRET, "--image-opts",
                        image_opts(fmt, path), check=False)
        # 0: clean, 3: leaked clusters only.
        self.assertIn(proc.returncode, (0, 3),
                      f"{what}: qemu-img check\n{proc.stdout}{proc.stderr}")

    def assertBlocksOldOrNew(self, got, old, new, what):
        self.assertEqual(len(got), len(old), what)
        for off in range(0, len(got), BLOCK):
            block = got[off:off + BLOCK]
            self.assertTrue(block in (old[off:off + BLOCK],
                                      new[off:off + BLOCK]),
                            f"{what}: block at {off} is neither old nor new")

    def template(self, fmt, name, seed=2, size=SIZE):
        """An image of fmt holding seeded random data, outside work/;
        returns its path and its data."""
        raw = self.path(name + ".raw")
        random_file(raw, size, seed)
        path = self.path(name)
        qil(*create_args(fmt, path, str(size)))
        qil("convert", "-n", "--object", SECRET, "-f", "raw", raw,
            "--target-image-opts", image_opts(fmt, path))
        return path, file_bytes(raw)

    @staticmethod
    def named(proc):
        """Whether the command failed after the new image had its name:
        only the sync of the directory is left then, and a failure there
        leaves the new image, complete (its name may not survive a
        crash)."""
        return "Could not flush the directory of" in proc.stderr

    def assertComplete(self, fmt, path, what):
        info = self.info_json("--object", SECRET, "--image-opts",
                              image_opts(fmt, path))
        self.assertEqual(info["virtual-size"], SIZE, what)

    def assertWorkEmpty(self, what, keep=()):
        left = sorted(set(os.listdir(self.work)) - set(keep))
        self.assertEqual(left, [], f"{what}: left behind")

    # The sweeps.

    FORMATS = ("raw", "qcow2", "luks1", "luks2", "qcow2-luks")

    def test_create_new(self):
        for fmt in self.FORMATS:
            target = os.path.join(self.work, "new.img")

            def prepare():
                if os.path.exists(target):
                    os.unlink(target)

            def failed(what, proc):
                if self.named(proc):
                    self.assertComplete(fmt, target, what)
                else:
                    self.assertWorkEmpty(what)

            self.sweep(f"create {fmt}", prepare, create_args(fmt, target),
                       failed)

    def test_create_replace(self):
        """create over an existing image: the old one stays whole until
        the new one is complete."""
        for fmt in self.FORMATS:
            target = os.path.join(self.work, "old.img")
            old = self.path("old.img")
            random_file(old, SIZE, 3)
            old_bytes = file_bytes(old)

            def prepare():
                shutil.copyfile(old, target)

            def failed(what, proc):
                self.assertWorkEmpty(what, ["old.img"])
                if self.named(proc):
                    self.assertComplete(fmt, target, what)
                else:
                    self.assertEqual(file_bytes(target), old_bytes,
                                     f"{what}: the old file changed")

            self.sweep(f"create {fmt} over a file", prepare,
                       create_args(fmt, target), failed)

    def test_convert_new(self):
        src = self.path("src.raw")
        random_file(src, SIZE, 1)
        for fmt in self.FORMATS:
            target = os.path.join(self.work, "new.img")

            def prepare():
                if os.path.exists(target):
                    os.unlink(target)

            def failed(what, proc):
                if self.named(proc):
                    self.assertEqual(self.guest(fmt, target),
                                     file_bytes(src), what)
                else:
                    self.assertWorkEmpty(what)

            def done():
                self.assertEqual(self.guest(fmt, target), file_bytes(src))

            self.sweep(f"convert to a new {fmt}", prepare, ["convert"] +
                       ["--object", SECRET, "-f", "raw", "-O",
                        "luks" if fmt.startswith("luks") else
                        fmt.split("-")[0]] + args_options(fmt) +
                       [src, target], failed, done)

    def test_convert_n(self):
        src = self.path("src.raw")
        random_file(src, SIZE, 1)
        new = file_bytes(src)
        for fmt in self.FORMATS:
            pristine, old = self.template(fmt, f"tmpl-{fmt}")
            target = os.path.join(self.work, "img")

            def prepare():
                shutil.copyfile(pristine, target)

            def failed(what, proc):
                self.assertBlocksOldOrNew(self.guest(fmt, target), old, new,
                                          what)
                self.assertQcow2Sound(fmt, target, what)

            def done():
                self.assertEqual(self.guest(fmt, target), new)

            self.sweep(f"convert -n into {fmt}", prepare,
                       ["convert", "-n", "--object", SECRET, "-f", "raw",
                        src, "--target-image-opts",
                        image_opts(fmt, target)], failed, done)

    def test_convert_n_device(self):
        """convert -n onto a block device (a loop device): the same rule,
        the sync included (qemu-img's default never syncs it)."""
        losetup = shutil.which("losetup") or "/usr/sbin/losetup"
        if os.geteuid() != 0 or not os.path.exists(losetup):
            self.skipTest("loop devices need root and losetup")
        src = self.path("src.raw")
        random_file(src, SIZE, 1)
        new = file_bytes(src)
        for fmt in ("raw", "luks2"):
            pristine, old = self.template(fmt, f"tmpl-{fmt}")
            image = file_bytes(pristine)
            backing = self.path(f"loop-{fmt}.img")
            shutil.copyfile(pristine, backing)
            proc = subprocess.run([losetup, "-f", "--show", backing],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                self.skipTest(f"losetup does not work here: {proc.stderr}")
            dev = proc.stdout.strip()
            self.addCleanup(subprocess.run, [losetup, "-d", dev],
                            capture_output=True)
            self.work = dev

            def prepare():
                with open(dev, "r+b") as f:
                    f.write(image)
                    os.fsync(f.fileno())

            def failed(what, proc):
                self.assertBlocksOldOrNew(self.guest(fmt, dev), old, new,
                                          what)

            def done():
                self.assertEqual(self.guest(fmt, dev), new)

            self.sweep(f"convert -n onto a loop device, {fmt}", prepare,
                       ["convert", "-n", "--object", SECRET, "-f", "raw",
                        src, "--target-image-opts", image_opts(fmt, dev)],
                       failed, done)

    def amend_sweep(self, add):
        for fmt in ("luks1", "luks2", "qcow2-luks"):
            pristine, data = self.template(fmt, f"tmpl-{fmt}")
            prefix = "encrypt." if fmt == "qcow2-luks" else ""
            if not add:
                qil("amend", "--object", SECRET, "--object", NEW,
                    "--image-opts", image_opts(fmt, pristine), "-o",
                    f"{prefix}state=active,{prefix}new-secret=sec1,"
                    f"{prefix}iter-time={ITER_TIME},{prefix}keyslot=1")
            target = os.path.join(self.work, "img")
            opts = (f"{prefix}state=active,{prefix}new-secret=sec1,"
                    f"{prefix}iter-time={ITER_TIME}" if add else
                    f"{prefix}state=inactive,{prefix}keyslot=1")

            def prepare():
                shutil.copyfile(pristine, target)

            def failed(what, proc):
                # The old passphrase opens it, the data unchanged.
                self.assertEqual(self.guest(fmt, target), data, what)
                self.assertQcow2Sound(fmt, target, what)

            def done():
                proc = qil("convert", "--object", NEW, "--image-opts",
                           image_opts(fmt, target, "sec1"), "-O", "raw",
                           self.path("by-new.raw"), check=False)
                os.path.exists(self.path("by-new.raw")) and \
                    os.unlink(self.path("by-new.raw"))
                self.assertEqual(proc.returncode, 0 if add else 1,
                                 proc.stderr)

            self.sweep(f"amend {'add' if add else 'remove'} a key, {fmt}",
                       prepare, ["amend", "--object", SECRET, "--object",
                                 NEW, "--image-opts",
                                 image_opts(fmt, target), "-o", opts],
                       failed, done)

    def test_amend_add(self):
        self.amend_sweep(add=True)

    def test_amend_remove(self):
        self.amend_sweep(add=False)

    def test_resize(self):
        for fmt in ("raw", "qcow2", "luks2", "qcow2-luks"):
            pristine, data = self.template(fmt, f"tmpl-{fmt}")
            target = os.path.join(self.work, "img")

            def prepare():
                shutil.copyfile(pristine, target)

            def failed(what, proc):
                self.assertNotIn("Image resized", proc.stdout, what)
                self.assertEqual(self.guest(fmt, target), data,
                                 f"{what}: size or data changed")
                self.assertQcow2Sound(fmt, target, what)

            def done():
                got = self.guest(fmt, target)
                self.assertEqual(len(got), 2 * SIZE)
                self.assertEqual(got[:SIZE], data)
                # LUKS, as QEMU's: the new part is not written, so it
                # reads as decrypted zeroes (noise).
                if "luks" not in fmt:
                    self.assertEqual(got[SIZE:], bytes(SIZE))

            self.sweep(f"resize {fmt}", prepare,
                       ["resize", "--object", SECRET, "--image-opts",
                        image_opts(fmt, target), "2M"], failed, done)

    def test_amend_refcount_bits(self):
        """amend -o refcount_bits: new refcount structures written and
        synced before the header switches to them; a failure anywhere
        leaves the old width or the new one, the data, and at most leaks
        (qemu-img check)."""
        pristine, data = self.template("qcow2", "tmpl-refbits")
        qil("snapshot", "-c", "s", pristine)
        target = os.path.join(self.work, "img")

        def bits():
            info = self.info_json(target)
            return info["format-specific"]["data"]["refcount-bits"]

        def prepare():
            shutil.copyfile(pristine, target)

        def failed(what, proc):
            self.assertIn(bits(), (16, 64), what)
            self.assertEqual(self.guest("qcow2", target), data, what)
            self.assertQcow2Sound("qcow2", target, what)

        def done():
            self.assertEqual(bits(), 64)
            self.assertEqual(qemu_img("check", target).returncode, 0)

        self.sweep("amend refcount_bits", prepare,
                   ["amend", "-o", "refcount_bits=64", target], failed, done)

    def test_snapshot_create(self):
        """snapshot -c into the holes a deleted snapshot left (free
        clusters first): a failure leaves the image sound and its data."""
        pristine, data = self.template("qcow2", "tmpl-snap")
        qil("snapshot", "-c", "a", pristine)
        qil("snapshot", "-c", "b", pristine)
        qil("snapshot", "-d", "a", pristine)
        target = os.path.join(self.work, "img")

        def prepare():
            shutil.copyfile(pristine, target)

        def failed(what, proc):
            self.assertEqual(self.guest("qcow2", target), data, what)
            self.assertQcow2Sound("qcow2", target, what)

        def done():
            self.assertEqual(qemu_img("check", target).returncode, 0)

        # The old table's clusters not freed: a leak, said, as qemu-img.
        self.sweep("snapshot -c", prepare, ["snapshot", "-c", "c", target],
                   failed, done, noted="qcow2_free_clusters failed")

    def test_check_repair(self):
        """check -r all of a qcow2 image with a leaked cluster."""
        pristine, data = self.template("qcow2", "tmpl-leaky")
        f = Qcow2File(pristine)
        size = os.path.getsize(pristine)
        with open(pristine, "ab") as out:
            out.write(bytes(f.cluster_size))
        f.set_refcount(size >> f.cluster_bits, 1)
        target = os.path.join(self.work, "img")

        def prepare():
            shutil.copyfile(pristine, target)

        def failed(what, proc):
            self.assertNotIn("No errors were found", proc.stdout, what)
            self.assertEqual(self.guest("qcow2", target), data, what)
            self.assertQcow2Sound("qcow2", target, what)

        def done():
            self.assertEqual(qil("check", target).returncode, 0)

        self.sweep("check -r all", prepare,
                   ["check", "-r", "all", target], failed, done)


def args_options(fmt):
    """-o options of convert for each format of the sweeps."""
    if fmt.startswith("luks"):
        return ["-o", f"key-secret=sec0,iter-time={ITER_TIME},"
                f"luks-version={fmt[4]}"]
    if fmt == "qcow2-luks":
        return ["-o", "encrypt.format=luks,encrypt.key-secret=sec0,"
                f"encrypt.iter-time={ITER_TIME}"]
    return []


if __name__ == "__main__":
    main()
