# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite reencrypt under write and flush errors (issue 27).

blkdebug fails the N-th write (EIO, or ENOSPC as a full disk) or the N-th
flush of the image's file node, for every N until the run succeeds, in each
mode: --encrypt, --decrypt and a new volume key (checksum and journal
resilience). After each failure:

* the command exits non-zero and names the cause (blkdebug's "write N
  injected");
* either the original file is intact, size and bytes (and no header file
  of a decryption is left), or the image is recognised as half-done by
  every command (info never says raw; convert refuses it with the way to
  finish), and our --resume-only finishes it with every byte of the
  plaintext back.

A failed flush is sticky (block/io.c): every later flush of the run fails
too, as on a device whose write-back failed. The number of injection
points each sweep covered is printed on stderr.
"""
import os
import sys
import tempfile

from reenctest import ReencTestCase, image_opts
from qiltest import ITER_TIME, SECRET, file_bytes, main, qil, random_file

MiB = 1 << 20
SMALL = f"key-secret=sec0,iter-time={ITER_TIME},align-payload=2048"
HOTZONE = "256k"
SIZE = MiB + 512 * 1024         # 1 MiB shift: the moved zone and 2 more
LIMIT = 400                     # no run does this many writes
ENOSPC_WRITES = 6
TORN_WRITES = 16


def blkdebug_opts(driver, img, rule):
    return (f"driver={driver},key-secret=sec0,file.driver=blkdebug,"
            f"{rule},file.file.filename={img}")


class Faults(ReencTestCase):
    def setUp(self):
        super().setUp()
        self.need_luks()
        # Hundreds of runs: in memory, where a sync costs nothing (the
        # faults are blkdebug's, not the disk's).
        if os.path.isdir("/dev/shm"):
            self._tmp.cleanup()
            self._tmp = tempfile.TemporaryDirectory(prefix="qil-test-",
                                                    dir="/dev/shm")
            self.dir = self._tmp.name
            os.chdir(self.dir)
        self.plain = self.path("plain.raw")
        random_file(self.plain, SIZE, 7)

    def fresh(self, start):
        img = self.path("img")
        with open(img, "wb") as f:
            f.write(start)
        for extra in (img + ".luks2-header",):
            if os.path.exists(extra):
                os.unlink(extra)
        return img

    def readback(self, img):
        out = self.path("readback.raw")
        qil("convert", "--object", SECRET, "--image-opts", image_opts(img),
            "-O", "raw", out)
        data = file_bytes(out)
        os.unlink(out)
        return data

    def sweep(self, mode, start, run, final_raw):
        """Fail write N / flush N of run(img, rule) for every N.

        ENOSPC only over the first writes (the copies and headers before
        any data moves, where a full disk is met); EIO over all of them.
        """
        covered = {}
        for kind, errno, last in (("write", "EIO", LIMIT),
                                  ("write", "ENOSPC", ENOSPC_WRITES),
                                  ("flush", "EIO", LIMIT)):
            n = 1
            while n <= last:
                img = self.fresh(start)
                rule = f"file.fail-{kind}={n},file.errno={errno}"
                proc = run(img, rule)
                if proc.returncode == 0:
                    break
                what = f"{mode}: {kind} {n} ({errno}): {proc.stderr}"
                self.assertEqual(proc.returncode, 1, what)
                self.assertIn(f"blkdebug: {kind} {n} injected", proc.stderr,
                              what)
                if (file_bytes(img) != start or
                        os.path.exists(img + ".luks2-header")):
                    self.finish(img, what, final_raw)
                n += 1
            self.assertLess(n, LIMIT)
            covered[f"{kind} {errno}"] = n - 1
        print(f"{mode}: injection points " +
              ", ".join(f"{k}: {v}" for k, v in covered.items()),
              file=sys.stderr)

    def resume(self, img, what):
        proc = qil("reencrypt", "--object", SECRET, "--resume-only",
                   "--image-opts", image_opts(img), check=False)
        self.assertEqual(proc.returncode, 0, f"{what}: {proc.stderr}")

    def finish(self, img, what, final_raw):
        """Never raw while half-done; ours finishes it, every byte back."""
        plain = file_bytes(self.plain)
        info = qil("info", img, check=False)
        if "reencrypt --resume-only" in info.stderr:
            self.assertEqual(info.returncode, 1, what)
            self.assertFails(["convert", "-f", "raw", img, "-O", "raw",
                              self.path("copy.raw")], "--resume-only")
            self.resume(img, what)
        elif final_raw:
            # Either the header file is exported and the image is still
            # itself (the init failed before it changed it), or the
            # failure came after the last zone (the data file is the raw
            # image): a resume starts or ends it.
            self.assertTrue("file format: raw" in info.stdout or
                            "file format: luks" in info.stdout, what)
            if os.path.exists(img + ".luks2-header"):
                self.resume(img, what)
        else:
            # ... or after the final header: a finished LUKS2 image.
            self.assertIn("file format: luks", info.stdout, what)
        self.assertFalse(os.path.exists(img + ".luks2-header"), what)
        got = file_bytes(img) if final_raw else self.readback(img)
        self.assertEqual(len(got), len(plain), what)
        self.assertTrue(got == plain, what)


    def luks_image(self):
        """The plaintext encrypted in place by us: the image's bytes."""
        img = self.path("luks.img")
        with open(img, "wb") as f:
            f.write(file_bytes(self.plain))
        qil("reencrypt", "--object", SECRET, "--encrypt", "-o", SMALL, img)
        return file_bytes(img)


class Encrypt(Faults):
    def test_encrypt(self):
        def run(img, rule):
            return qil("reencrypt", "--object", SECRET, "--encrypt", "-o",
                       SMALL, "--hotzone-size", HOTZONE, "--image-opts",
                       blkdebug_opts("raw", img, rule), check=False)
        self.sweep("encrypt", file_bytes(self.plain), run, False)


class Decrypt(Faults):
    def test_decrypt(self):
        def run(img, rule):
            return qil("reencrypt", "--object", SECRET, "--decrypt",
                       "--hotzone-size", HOTZONE, "--image-opts",
                       blkdebug_opts("luks", img, rule), check=False)
        self.sweep("decrypt", self.luks_image(), run, True)


class NewKey(Faults):
    def sweep_resilience(self, res):
        def run(img, rule):
            return qil("reencrypt", "--object", SECRET, "-o",
                       f"iter-time={ITER_TIME}", "--resilience", res,
                       "--hotzone-size", "512k", "--image-opts",
                       blkdebug_opts("luks", img, rule), check=False)
        self.sweep(f"new key ({res})", self.luks_image(), run, False)

    def test_checksum(self):
        self.sweep_resilience("checksum")

    def test_journal(self):
        self.sweep_resilience("journal")

    def test_luks1(self):
        """A LUKS1 image (issue 24): its own metadata in a free key slot."""
        img = self.path("luks1.img")
        qil("convert", "--object", SECRET, "-f", "raw", "-O", "luks", "-o",
            f"key-secret=sec0,iter-time={ITER_TIME},luks-version=1",
            self.plain, img)

        def run(img, rule):
            return qil("reencrypt", "--object", SECRET, "-o",
                       f"iter-time={ITER_TIME}", "--hotzone-size", "512k",
                       "--image-opts", blkdebug_opts("luks", img, rule),
                       check=False)
        self.sweep("new key (LUKS1)", file_bytes(img), run, False)



class TornSector(Faults):
    def test_torn_sector(self):
        """Killed with half of its N-th write done (blkdebug torn-write:
        12 KiB hot zones tear inside their second 4 KiB checksum block),
        for the first TORN_WRITES writes: the resume finishes with every
        byte, or, with checksum resilience, refuses a block that is
        neither old nor new; never exit 0 with wrong data. The journal
        replays the zone."""
        start = self.luks_image()
        plain = file_bytes(self.plain)
        refused = {}
        for res in ("checksum", "journal"):
            refused[res] = 0
            for n in range(1, TORN_WRITES + 1):
                what = f"torn write {n} ({res})"
                img = self.fresh(start)
                proc = qil("reencrypt", "--object", SECRET, "-o",
                           f"iter-time={ITER_TIME}", "--resilience", res,
                           "--hotzone-size", "12k", "--image-opts",
                           blkdebug_opts("luks", img, f"file.torn-write={n}"),
                           check=False)
                self.assertEqual(proc.returncode, -9, what)
                if file_bytes(img) == start:
                    continue
                proc = qil("reencrypt", "--object", SECRET, "--resume-only",
                           "--image-opts", image_opts(img), check=False)
                if "not being re-encrypted" in proc.stderr:
                    # Torn before the init's header: only new key slots,
                    # unreferenced, were written; the old image opens.
                    self.assertTrue(self.readback(img) == plain, what)
                    continue
                if proc.returncode:
                    self.assertEqual(res, "checksum", proc.stderr)
                    self.assertIn("neither the old ciphertext nor the new",
                                  proc.stderr, what)
                    refused[res] += 1
                    continue
                self.assertTrue(self.readback(img) == plain, what)
        print(f"torn sector: {TORN_WRITES} points per resilience, refused "
              f"(checksum) {refused['checksum']}, journal all replayed",
              file=sys.stderr)
        # The second checksum block is torn at least once: refused.
        self.assertGreater(refused["checksum"], 0)

    def test_torn_luks1(self):
        """LUKS1 (issue 24): checksums per 512-byte sector, which a torn
        write (rounded to 512 bytes) never splits, and two record copies:
        every tear of the first TORN_WRITES * 2 writes is finished by the
        resume with every byte, none refused."""
        img = self.path("luks1.img")
        qil("convert", "--object", SECRET, "-f", "raw", "-O", "luks", "-o",
            f"key-secret=sec0,iter-time={ITER_TIME},luks-version=1",
            self.plain, img)
        start = file_bytes(img)
        plain = file_bytes(self.plain)
        resumed = 0
        for n in range(1, 2 * TORN_WRITES + 1):
            what = f"LUKS1 torn write {n}"
            img = self.fresh(start)
            proc = qil("reencrypt", "--object", SECRET, "-o",
                       f"iter-time={ITER_TIME}", "--hotzone-size", "12k",
                       "--image-opts",
                       blkdebug_opts("luks", img, f"file.torn-write={n}"),
                       check=False)
            self.assertEqual(proc.returncode, -9, what)
            proc = qil("reencrypt", "--object", SECRET, "--resume-only",
                       "--image-opts", image_opts(img), check=False)
            if proc.returncode == 0:
                resumed += 1
            else:
                # Torn before the mark: only unreferenced key material
                # was written, and the image is the one it was.
                self.assertIn("not being re-encrypted", proc.stderr, what)
            self.assertTrue(self.readback(img) == plain, what)
        print(f"LUKS1 torn sector: {2 * TORN_WRITES} points, {resumed} "
              f"resumed", file=sys.stderr)
        self.assertGreater(resumed, TORN_WRITES)


if __name__ == "__main__":
    main()
