# SPDX-License-Identifier: GPL-2.0-or-later
"""Online re-encryption (issue 24): qemu-nbd-lite serves a LUKS2 or LUKS1
image opened with reencrypt=on, which gives it a new volume key while a
client writes random 4 KiB blocks through NBD the whole time (libnbd's
python bindings), and the server is killed (SIGKILL) at random moments
and started again, which resumes the run.

Each block the writer wrote and saw acknowledged is in a model; a write
whose connection died before its reply may or may not have landed (the
block may hold either). At the end every block of the image, read from
the file by qemu-img-lite (not through the server), must be what the
model says: 0 mismatched blocks. The run must have finished (no
re-encryption left, `cryptsetup open --test-passphrase` takes the
passphrase) with another volume key than before.
"""
import os
import random
import signal
import subprocess
import sys
import threading
import time

from reenctest import ReencTestCase, image_opts
from qiltest import (CRYPTSETUP, SECRET, file_bytes, main, qemu_img, qil,
                     random_file, run)

try:
    import nbd
except ImportError:
    # Debian's python3-libnbd lives in the system's dist-packages; a
    # python of the same version elsewhere (pyenv) can load it too.
    sys.path.append("/usr/lib/python3/dist-packages")
    try:
        import nbd
    except ImportError:
        nbd = None

SERVER = os.environ.get("QIL_NBD_SERVER", "")
MiB = 1 << 20
BLOCK = 4096
SIZE = 16 * MiB
ROUNDS = 10
KILLS_PER_ROUND = 2
OPTS = "reencrypt=on,reencrypt-iter-time=10,reencrypt-hotzone-size=32k"


class Writer(threading.Thread):
    """Random blocks through NBD, reconnecting when the server goes."""

    def __init__(self, uri, model, seed):
        super().__init__(daemon=True)
        self.uri = uri
        self.model = model              # block -> set of acceptable data
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.writes = 0
        self.lost = 0

    def run(self):
        h = None
        while not self.stop.is_set():
            if h is None:
                try:
                    h = nbd.NBD()
                    h.connect_uri(self.uri)
                except nbd.Error:
                    h = None
                    time.sleep(0.01)
                    continue
            i = self.rng.randrange(SIZE // BLOCK)
            data = self.rng.randbytes(BLOCK)
            try:
                h.pwrite(data, i * BLOCK)
            except nbd.Error:
                # No reply: the block holds the old data or this.
                self.model[i].add(data)
                self.lost += 1
                h = None
                continue
            self.model[i] = {data}
            self.writes += 1
        if h is not None:
            try:
                h.shutdown()
            except nbd.Error:
                pass


class Online(ReencTestCase):
    def setUp(self):
        super().setUp()
        self.need_luks()
        self.need_cryptsetup()
        if not SERVER or not os.path.exists(SERVER):
            self.skipTest("qemu-nbd-lite was not built (it needs nbdkit's "
                          "plugin API, which scripts/install-deps.sh "
                          "installs)")
        if nbd is None:
            self.skipTest("libnbd's python bindings are not installed "
                          "(python3-libnbd: scripts/install-deps.sh)")
        self.servers = []

    def tearDown(self):
        for proc in self.servers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        super().tearDown()

    # ---- helpers ----

    def serve(self, img, log, opts=OPTS, flags=()):
        sock = self.path("srv.sock")
        if os.path.exists(sock):
            os.unlink(sock)
        with open(log, "a") as f:
            proc = subprocess.Popen(
                [SERVER, "-t", "-k", sock, "--object", SECRET, *flags,
                 "--image-opts",
                 f"driver=luks,key-secret=sec0,{opts},file.filename={img}"],
                stdout=subprocess.DEVNULL, stderr=f)
        self.servers.append(proc)
        for _ in range(400):
            if os.path.exists(sock):
                return proc, f"nbd+unix:///?socket={sock}"
            if proc.poll() is not None:
                with open(log) as f:
                    self.fail(f"qemu-nbd-lite exited {proc.returncode}: "
                              f"{f.read()}")
            time.sleep(0.02)
        self.fail("qemu-nbd-lite did not start listening")

    def wait_done(self, log, proc, timeout=120):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with open(log) as f:
                text = f.read()
            if "re-encryption done" in text:
                return
            self.assertIsNone(proc.poll(), text)
            time.sleep(0.05)
        self.fail("the online re-encryption did not finish")

    def image(self, name, luks1=False, seed=1):
        raw, img = self.path(name + ".raw"), self.path(name)
        random_file(raw, SIZE, seed)
        if luks1:
            qemu_img("convert", "--object", SECRET, "-f", "raw", "-O",
                     "luks", "-o", "key-secret=sec0,iter-time=10", raw, img)
        else:
            qil("convert", "--object", SECRET, "-f", "raw", "-O", "luks",
                "-o", "key-secret=sec0,iter-time=10,luks-version=2,"
                "kdf=pbkdf2", raw, img)
        data = file_bytes(raw)
        model = [{data[i:i + BLOCK]} for i in range(0, SIZE, BLOCK)]
        return img, model

    def check(self, img, model, old_key, what):
        out = self.path("back.raw")
        qil("convert", "--object", SECRET, "--image-opts", image_opts(img),
            "-O", "raw", out)
        got = file_bytes(out)
        os.unlink(out)
        bad = [i for i in range(SIZE // BLOCK)
               if got[i * BLOCK:(i + 1) * BLOCK] not in model[i]]
        self.assertEqual(bad, [], f"{what}: {len(bad)} mismatched blocks "
                         f"(seed {self.seed})")
        run([CRYPTSETUP, "open", "--test-passphrase", "--key-file",
             self.keyfile, img])
        self.assertNotEqual(self.volume_key(img), old_key, what)

    def one_run(self, name, kills, luks1=False, seed=1):
        """A run with a writer throughout and kills at random moments."""
        img, model = self.image(name, luks1, seed)
        self.kills = getattr(self, "kills", 0)
        old = self.volume_key(img)
        log = self.path(name + ".log")
        proc, uri = self.serve(img, log)
        writer = Writer(uri, model, seed)
        writer.start()
        for _ in range(kills):
            time.sleep(self.rng.uniform(0, 0.5))
            with open(log) as f:
                if "re-encryption done" in f.read():
                    break       # (started again, it would start anew)
            proc.kill()
            proc.wait()
            self.kills += 1
            proc, uri = self.serve(img, log)
        self.wait_done(log, proc)
        time.sleep(0.2)                 # writes under the new key only
        writer.stop.set()
        writer.join(30)
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        self.check(img, model, old, f"{name}: {writer.writes} writes, "
                   f"{writer.lost} cut")
        self.assertGreater(writer.writes, 0)
        return writer

    # ---- tests ----

    def test_killed_and_resumed_with_a_writer(self):
        """ROUNDS runs (LUKS2, one in three LUKS1 made by qemu-img), each
        killed KILLS_PER_ROUND times: 0 mismatched blocks."""
        writes = lost = self.kills = 0
        for r in range(ROUNDS):
            w = self.one_run(f"r{r}.img", KILLS_PER_ROUND,
                             luks1=(r % 3 == 2), seed=r)
            writes += w.writes
            lost += w.lost
        print(f"online: {ROUNDS} runs, {self.kills} kills mid-run, "
              f"{writes} acknowledged writes, {lost} cut by a kill, "
              f"0 mismatched blocks", file=sys.stderr)
        # Most kills land inside the runs, not after them.
        self.assertGreaterEqual(self.kills, ROUNDS)

    def test_pause_and_progress(self):
        """SIGUSR1 pauses between zones (and again continues), SIGUSR2
        reports; the data stays served meanwhile."""
        img, model = self.image("p.img", seed=7)
        old = self.volume_key(img)
        log = self.path("p.log")
        proc, uri = self.serve(
            img, log, "reencrypt-iter-time=10,reencrypt-hotzone-size=64k",
            flags=["--reencrypt"])
        # The signal may come at once: the handler is there before the
        # socket. The line may take a while on a loaded machine.
        proc.send_signal(signal.SIGUSR1)
        end = time.monotonic() + 30
        while True:
            with open(log) as f:
                text = f.read()
            if "re-encryption paused" in text or time.monotonic() > end:
                break
            self.assertIsNone(proc.poll(), text)
            time.sleep(0.05)
        self.assertIn("re-encryption paused", text)
        self.assertNotIn("re-encryption done", text)
        h = nbd.NBD()
        h.connect_uri(uri)
        self.assertIn(bytes(h.pread(BLOCK, 0)), model[0])
        h.shutdown()
        proc.send_signal(signal.SIGUSR2)
        time.sleep(0.3)
        proc.send_signal(signal.SIGUSR1)
        self.wait_done(log, proc)
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        self.check(img, model, old, "pause")

    def test_refusals(self):
        """Read-only, or an image being encrypted in place: refused."""
        img, _ = self.image("x.img")
        before = file_bytes(img)
        sock = self.path("r.sock")
        proc = subprocess.run(
            [SERVER, "-r", "-k", sock, "--object", SECRET, "--image-opts",
             f"driver=luks,key-secret=sec0,{OPTS},file.filename={img}"],
            capture_output=True, text=True, timeout=60)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("reencrypt=on needs the image opened for writing",
                      proc.stderr)
        self.assertEqual(file_bytes(img), before)
        for args in (["-r", "--image-opts", image_opts(img)], [img]):
            proc = subprocess.run(
                [SERVER, "-k", sock, "--reencrypt", *args],
                capture_output=True, text=True, timeout=60)
            self.assertNotEqual(proc.returncode, 0)
            self.assertIn("--reencrypt needs --image-opts", proc.stderr)
        self.assertEqual(file_bytes(img), before)
        # A node in re-encryption takes no key-slot change (the open
        # started the run: it is resumable, and resumed here).
        proc = qil("amend", "--object", SECRET, "--object",
                   "secret,id=sec1,data=x", "--image-opts",
                   f"driver=luks,key-secret=sec0,{OPTS},file.filename={img}",
                   "-o", "state=active,new-secret=sec1,iter-time=10",
                   check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("its key slots cannot be changed meanwhile",
                      proc.stderr)
        qil("reencrypt", "--object", SECRET, "--resume-only",
            "--image-opts", image_opts(img))
        raw = self.path("e.raw")
        random_file(raw, 4 * MiB, 3)
        qil("reencrypt", "--object", SECRET, "--encrypt", "--init-only",
            "-o", "key-secret=sec0,iter-time=10,kdf=pbkdf2", raw)
        before = file_bytes(raw)
        proc = subprocess.run(
            [SERVER, "-k", sock, "--object", SECRET, "--image-opts",
             f"driver=luks,key-secret=sec0,{OPTS},file.filename={raw}"],
            capture_output=True, text=True, timeout=60)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("only a new volume key runs while it is served",
                      proc.stderr)
        self.assertEqual(file_bytes(raw), before)


if __name__ == "__main__":
    main()
