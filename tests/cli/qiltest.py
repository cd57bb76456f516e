# SPDX-License-Identifier: GPL-2.0-or-later
"""Shared helpers of the command-line tests (tests/cli/*.py).

Each test script is a unittest module run by meson; the tool comes from the
environment (QIL_TOOL, set by tests/cli/meson.build), the shared cryptsetup
images from QIL_TESTDATA. A script whose every test skipped exits 77, which
meson reports as SKIP.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

TOOL = os.environ.get("QIL_TOOL", "qemu-img-lite")
TESTDATA = os.environ.get("QIL_TESTDATA", "")
QEMU_IMG = shutil.which("qemu-img")
CRYPTSETUP = shutil.which("cryptsetup") or (
    "/usr/sbin/cryptsetup" if os.path.exists("/usr/sbin/cryptsetup") else None)

# Small PBKDF2 times keep the suite fast; the security of test images
# does not matter.
ITER_TIME = "10"
PASSPHRASE = "s3cret pass"
SECRET = f"secret,id=sec0,data={PASSPHRASE}"


# Seconds any one command run() starts may take (None: no limit). A
# module whose commands can hang on a server (interop_rbd: an OSD that is
# gone) sets it, so a hang fails that test with the command named instead
# of meson's timeout killing the whole module with nothing said.
COMMAND_TIMEOUT = None


def run(args, check=True, input=None, cwd=None):
    """Run a command (in cwd); on check, fail with its output unless it
    exits 0."""
    try:
        proc = subprocess.run([str(a) for a in args], capture_output=True,
                              text=True, input=input, cwd=cwd,
                              timeout=COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(
            f"{' '.join(map(str, args))} did not end within "
            f"{COMMAND_TIMEOUT} s\nstderr: {e.stderr}") from None
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, args))} exited {proc.returncode}\n"
            f"stdout: {proc.stdout}\nstderr: {proc.stderr}")
    return proc


def qil(*args, check=True):
    return run([TOOL, *args], check=check)


# How often qemu_img() retries a failed PBKDF2 calibration (0.73^60 ~ 1e-8).
QEMU_IMG_TRIES = 60


def qemu_img(*args, check=True):
    # qemu-img's PBKDF2 calibration gives up whenever its first 32768
    # iterations take less than one tick of thread CPU time, which on this
    # kind of VM is most of the time for sha256 (seen: 22 of 30 runs fail,
    # so 10 tries still failed 4% of calls): that is not what we test.
    for _ in range(QEMU_IMG_TRIES):
        proc = run([QEMU_IMG, *args], check=False)
        if "Unable to get accurate CPU usage" not in proc.stderr:
            break
        for a in args:
            if a.startswith("/") and os.path.isfile(a) and a.endswith(
                    (".luks", ".img")) and "create" in args[:1]:
                os.unlink(a)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"qemu-img {' '.join(map(str, args))} exited {proc.returncode}"
            f"\nstdout: {proc.stdout}\nstderr: {proc.stderr}")
    return proc


_luks_supported = None


def have_luks():
    """Whether this build has the luks driver (crypto/'s LUKS format)."""
    global _luks_supported
    if _luks_supported is None:
        proc = qil("measure", "-O", "luks", "--size", "1M", check=False)
        _luks_supported = proc.returncode == 0
    return _luks_supported


def luks_opts(path):
    """--image-opts string of a LUKS image unlocked with secret sec0."""
    return f"driver=luks,key-secret=sec0,file.filename={path}"


def random_file(path, size, seed=1):
    """A file of size pseudo-random bytes (deterministic)."""
    import random
    rnd = random.Random(seed)
    with open(path, "wb") as f:
        remaining = size
        while remaining:
            n = min(remaining, 1 << 20)
            f.write(rnd.randbytes(n))
            remaining -= n


def file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


class TestCase(unittest.TestCase):
    """A test with its own scratch directory (self.dir)."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="qil-test-")
        self.dir = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def need_luks(self):
        if not have_luks():
            self.skipTest("this build has no luks driver yet")

    def need_qemu_img(self):
        if not QEMU_IMG:
            self.skipTest("qemu-img is not installed")

    def need_cryptsetup(self):
        if not CRYPTSETUP:
            self.skipTest("cryptsetup is not installed")

    def assertFails(self, args, message=None, rc=1):
        """The tool fails with exit status rc and message on stderr."""
        proc = qil(*args, check=False)
        self.assertEqual(proc.returncode, rc,
                         f"expected exit {rc}: {proc.stdout} {proc.stderr}")
        self.assertTrue(proc.stderr.startswith("qemu-img-lite: "),
                        proc.stderr)
        if message:
            self.assertIn(message, proc.stderr)
        return proc

    def make_luks(self, name, size="4M", opts="", data=True, seed=1):
        """A LUKS image made by qemu-img-lite from random raw data."""
        raw = self.path(name + ".src.raw")
        random_file(raw, parse_size(size), seed)
        out = self.path(name)
        o = f"key-secret=sec0,iter-time={ITER_TIME}"
        if opts:
            o += "," + opts
        qil("convert", "--object", SECRET, "-f", "raw", "-O", "luks",
            "-o", o, raw, out)
        return out, raw

    def info_json(self, *args):
        return json.loads(qil("info", "--output=json", *args).stdout)


def thread_stacks(pid):
    """What every thread of a hung process is doing, for a failure
    message: gdb's backtraces, or the kernel's wait channels without it."""
    gdb = shutil.which("gdb")
    if gdb:
        try:
            return subprocess.run(
                [gdb, "-p", str(pid), "-batch", "-nx",
                 "-ex", "thread apply all bt"], capture_output=True,
                text=True, timeout=60).stdout[-20000:]
        except (OSError, subprocess.TimeoutExpired):
            pass
    out = []
    try:
        for tid in sorted(os.listdir(f"/proc/{pid}/task")):
            with open(f"/proc/{pid}/task/{tid}/wchan") as f:
                out.append(f"thread {tid}: {f.read()}")
    except OSError as e:
        out.append(str(e))
    return "\n".join(out)


def parse_size(s):
    units = {"k": 10, "m": 20, "g": 30}
    if s[-1].lower() in units:
        return int(float(s[:-1]) * (1 << units[s[-1].lower()]))
    return int(s)


def main():
    """unittest.main(), exiting 77 (meson's SKIP) if everything skipped."""
    prog = unittest.main(exit=False, verbosity=2)
    result = prog.result
    if not result.wasSuccessful():
        sys.exit(1)
    if result.testsRun and len(result.skipped) == result.testsRun:
        sys.exit(77)
    sys.exit(0)
