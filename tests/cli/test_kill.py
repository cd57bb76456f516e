# SPDX-License-Identifier: GPL-2.0-or-later
"""A killed convert or create leaves nothing (issue 15, item 3), and over
an existing target, the old file or the whole new one (issue 26).

A new target has no name until it is complete and synced: whatever signal
ends the tool, and whenever, the target directory afterwards holds either
nothing at all (no target, no temporary file), or, only if the tool could
finish, the complete image, which qemu-img compare and cryptsetup accept.
SIGINT, SIGTERM and SIGHUP end the tool cleanly with exit status 1 (or 0
if the copy was already named); SIGKILL may land after the naming, so a
complete image may also follow it. SIGPIPE on the progress output is
ignored: the copy goes on. The source is never changed.

Kill points are random: half the runs wait a random time from the start
(set-up, key derivation, header writing, copy), half wait until -p shows
a random percentage of the copy. The seed is printed with each failure.
"""
import hashlib
import os
import random
import signal
import subprocess
import sys
import time

from qiltest import (CRYPTSETUP, ITER_TIME, PASSPHRASE, QEMU_IMG, SECRET,
                     TOOL, TestCase, have_luks, main, qil, qemu_img,
                     random_file)

SIGNALS = [signal.SIGKILL, signal.SIGHUP, signal.SIGTERM, signal.SIGINT]
ROUNDS = 6          # per signal and target format
SRC_SIZE = 48 << 20
LUKS_OPTS = f"key-secret=sec0,iter-time={ITER_TIME}"


def unblock_signals():
    # A test runner may start us with signals blocked (the mask survives
    # exec): the kills must reach the tool.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, set(SIGNALS[1:]))


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class Kill(TestCase):
    @classmethod
    def setUpClass(cls):
        cls.seed = int.from_bytes(os.urandom(4), "little")
        cls.rng = random.Random(cls.seed)

    def setUp(self):
        super().setUp()
        self.src = self.path("src.raw")
        random_file(self.src, SRC_SIZE, seed=7)
        self.src_hash = sha256(self.src)
        self.out = self.path("out")
        os.mkdir(self.out)

    def tearDown(self):
        self.assertEqual(sha256(self.src), self.src_hash,
                         "the source changed")
        super().tearDown()

    def msg(self, what):
        return f"{what} (seed {self.seed})"

    def start(self, args, env=None):
        return subprocess.Popen(
            [TOOL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            preexec_fn=unblock_signals, env=env)

    def kill_at_random(self, proc, sig, progress):
        """Send sig at a random moment: after a random delay, or once -p
        shows a random percentage (progress). Returns (status, stderr)."""
        if progress:
            goal = self.rng.randint(0, 99)
            shown = b""
            while True:
                c = proc.stdout.read(1)
                if not c:
                    break       # done before the goal: the signal is late
                shown += c
                if c == b"\r" and float(
                        shown.split(b"(")[-1].split(b"/")[0]) >= goal:
                    break
        else:
            time.sleep(self.rng.uniform(0, 0.6))
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        return proc.returncode, err.decode()

    def check_outcome(self, rc, err, sig, target, check_image):
        """Nothing in the target directory, or the complete image."""
        names = sorted(os.listdir(self.out))
        what = self.msg(f"{signal.Signals(sig).name}: exit {rc}, "
                        f"directory {names}, stderr {err!r}")
        if rc == 0:
            self.assertEqual(names, [os.path.basename(target)], what)
        elif names:
            # Only a SIGKILL after the naming leaves the (whole) image.
            self.assertEqual(sig, signal.SIGKILL, what)
            self.assertEqual(rc, -signal.SIGKILL, what)
            self.assertEqual(names, [os.path.basename(target)], what)
        else:
            # Killed by the signal itself (before the handlers were set,
            # or SIGKILL), or stopped cleanly by it.
            self.assertIn(rc, (1, -sig), what)
            if rc == 1:
                self.assertIn("Interrupted", err, what)
        if names:
            check_image(target)
            os.unlink(target)
        return bool(names)

    def check_raw(self, target):
        self.assertEqual(os.path.getsize(target), SRC_SIZE)
        self.assertEqual(sha256(target), self.src_hash,
                         self.msg("wrong data in the raw target"))

    def check_luks(self, target, qemu_img_opens=True):
        opts = f"driver=luks,key-secret=sec0,file.filename={target}"
        if QEMU_IMG and qemu_img_opens:
            proc = qemu_img("compare", "--object", SECRET, "--image-opts",
                            opts, f"driver=raw,file.filename={self.src}",
                            check=False)
        else:
            proc = qil("compare", "--object", SECRET, "--image-opts", opts,
                       f"driver=raw,file.filename={self.src}", check=False)
        self.assertEqual(proc.returncode, 0,
                         self.msg(f"compare: {proc.stdout} {proc.stderr}"))
        if CRYPTSETUP:
            proc = subprocess.run(
                [CRYPTSETUP, "open", "--test-passphrase", "--key-file=-",
                 target], input=PASSPHRASE.encode(), capture_output=True)
            self.assertEqual(proc.returncode, 0, self.msg(proc.stderr))

    def kill_converts(self, out_args, check_image, env=None):
        target = os.path.join(self.out, "dst")
        outcomes = {"nothing": 0, "image": 0}
        for sig in SIGNALS:
            for i in range(ROUNDS):
                progress = i % 2 == 1
                args = ["convert", *out_args, self.src, target]
                if progress:
                    args.insert(1, "-p")
                proc = self.start(args, env)
                rc, err = self.kill_at_random(proc, sig, progress)
                made = self.check_outcome(rc, err, sig, target, check_image)
                outcomes["image" if made else "nothing"] += 1
        # The kills landed both before the end and after it at least once
        # (random: both are likely with these delays and percentages).
        self.assertGreater(outcomes["nothing"], 0, self.msg(str(outcomes)))
        print(f"outcomes: {outcomes}", file=sys.stderr)

    def test_convert_raw(self):
        self.kill_converts([], self.check_raw)

    def test_convert_luks(self):
        if not have_luks():
            self.skipTest("no luks driver")
        self.kill_converts(["--object", SECRET, "-O", "luks", "-o",
                            LUKS_OPTS], self.check_luks)

    def test_convert_luks2(self):
        if not have_luks():
            self.skipTest("no luks driver")
        # qemu-img 7.2 has no LUKS2: our compare, and cryptsetup.
        self.kill_converts(["--object", SECRET, "-O", "luks", "-o",
                            LUKS_OPTS + ",luks-version=2,kdf=pbkdf2"],
                           lambda t: self.check_luks(t, False))

    def test_convert_raw_temp_name(self):
        """Where O_TMPFILE is not used, a hidden temporary name is: the
        signals that can be handled remove it too."""
        env = dict(os.environ, QIL_FILE_CREATE_NO_TMPFILE="1")
        target = os.path.join(self.out, "dst")
        for sig in SIGNALS[1:]:
            for i in range(ROUNDS):
                progress = i % 2 == 1
                args = ["convert", self.src, target]
                if progress:
                    args.insert(1, "-p")
                proc = self.start(args, env)
                rc, err = self.kill_at_random(proc, sig, progress)
                self.check_outcome(rc, err, sig, target, self.check_raw)
        # SIGKILL leaves at most the temporary name, never a partial
        # target (the whole one, if the copy won the race).
        proc = self.start(["convert", "-p", self.src, target], env)
        proc.stdout.read(1)
        proc.kill()
        proc.communicate(timeout=60)
        for name in os.listdir(self.out):
            if name == "dst":
                self.check_raw(target)
            else:
                self.assertTrue(name.startswith(".dst."), name)

    def test_convert_over_existing(self):
        """An existing target is replaced only by the complete image: after
        a kill at any moment it holds the old bytes or the new, whole (a
        SIGKILL may also leave a hidden temporary name, never a partial
        target)."""
        target = os.path.join(self.out, "dst")
        old = self.path("old.raw")
        random_file(old, SRC_SIZE // 2, seed=8)
        old_hash = sha256(old)
        outcomes = {"old": 0, "new": 0}
        for sig in SIGNALS:
            for i in range(ROUNDS):
                with open(old, "rb") as f, open(target, "wb") as t:
                    t.write(f.read())
                progress = i % 2 == 1
                args = ["convert", self.src, target]
                if progress:
                    args.insert(1, "-p")
                proc = self.start(args)
                rc, err = self.kill_at_random(proc, sig, progress)
                what = self.msg(f"{signal.Signals(sig).name}: exit {rc}, "
                                f"stderr {err!r}")
                got = sha256(target)
                self.assertIn(got, (old_hash, self.src_hash), what)
                if rc == 0:
                    self.assertEqual(got, self.src_hash, what)
                outcomes["new" if got == self.src_hash else "old"] += 1
                for name in os.listdir(self.out):
                    if name != "dst":
                        self.assertEqual(sig, signal.SIGKILL, what)
                        self.assertTrue(name.startswith(".dst."), what)
                        os.unlink(os.path.join(self.out, name))
        self.assertGreater(outcomes["old"], 0, self.msg(str(outcomes)))
        print(f"outcomes: {outcomes}", file=sys.stderr)

    def test_progress_to_a_closed_pipe(self):
        """convert -p ... | head -c1: the copy goes on to the end."""
        for fmt_args, check in ((["-O", "raw"], self.check_raw),
                                (["--object", SECRET, "-O", "luks", "-o",
                                  LUKS_OPTS], self.check_luks)):
            if "luks" in fmt_args and not have_luks():
                continue
            target = os.path.join(self.out, "dst")
            proc = self.start(["convert", "-p", *fmt_args, self.src,
                               target])
            self.assertEqual(len(proc.stdout.read(1)), 1)
            proc.stdout.close()     # the reader is gone: EPIPE from now on
            err = proc.stderr.read().decode()
            proc.stderr.close()
            proc.wait(timeout=120)
            self.assertEqual(proc.returncode, 0, err)
            check(target)
            os.unlink(target)

    def test_progress_to_head(self):
        """The same through a shell pipeline, as users type it."""
        target = os.path.join(self.out, "dst")
        proc = subprocess.run(
            ["bash", "-c", 'set -o pipefail; "$0" convert -p "$1" "$2" | '
             'head -c1 >/dev/null', TOOL, self.src, target],
            capture_output=True, text=True, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.check_raw(target)

    def test_create_preallocation_full(self):
        """create -o preallocation=full stops on a signal, leaving
        nothing; SIGKILL leaves nothing either."""
        target = os.path.join(self.out, "full.raw")
        for sig in SIGNALS:
            for _ in range(2):
                proc = self.start(["create", "-f", "raw", "-o",
                                   "preallocation=full", target, "1G"])
                time.sleep(self.rng.uniform(0.05, 0.3))
                proc.send_signal(sig)
                _, err = proc.communicate(timeout=120)
                self.check_outcome(proc.returncode, err.decode(), sig,
                                   target, lambda t: self.assertEqual(
                                       os.path.getsize(t), 1 << 30))


if __name__ == "__main__":
    main()
