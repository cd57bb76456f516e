# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite reencrypt with a new volume key for a LUKS1 image, in
place (issue 24): images made by qemu-img (QEMU's layout) and by cryptsetup
(its own), the key slots kept with their numbers, a new cipher, refusals
that leave the image as it was, and SIGKILLs at random moments, each
finished by --resume-only.

After a run, every byte must read back the same through qemu-img (qemu-img
compare against the source) or through us, `cryptsetup open
--test-passphrase` must take the passphrase, `cryptsetup luksDump
--dump-volume-key` must show another key, and when python's cryptography
module is there, an independent AES-XTS decryption with the dumped key must
give the data back.
"""
import os
import re
import subprocess

from reenctest import ReencTestCase, image_opts
from qiltest import (CRYPTSETUP, QEMU_IMG, SECRET, TOOL, file_bytes, main,
                     qemu_img, qil, random_file, run)

try:
    from cryptography.hazmat.primitives.ciphers import (Cipher, algorithms,
                                                        modes)
except ImportError:                     # pragma: no cover
    Cipher = None

MiB = 1 << 20
KDF = "iter-time=10"
SECRET2 = "secret,id=sec1,data=other pass"
KILL_ROUNDS = 10
# What a run in progress puts at the start of sector 0 instead of LUKS1's
# magic; cryptsetup 2.6's own (interrupted) LUKS1 re-encryption leaves
# LUKS\xde\xad there.
RUN_MAGIC = b"LUKS\xde\x71"
CRYPTSETUP_MAGIC = b"LUKS\xde\xad"


class ReencryptLuks1(ReencTestCase):
    def setUp(self):
        super().setUp()
        self.need_luks()
        self.need_cryptsetup()

    # ---- helpers ----

    def qemu_luks1(self, name, size=4 * MiB, seed=3, cipher=None):
        """A LUKS1 image made by qemu-img convert from random data."""
        self.need_qemu_img()
        img, orig = self.path(name), self.path(name + ".orig")
        random_file(orig, size, seed)
        opts = "key-secret=sec0,iter-time=10"
        if cipher:
            opts += f",cipher-alg={cipher}"
        qemu_img("convert", "--object", SECRET, "-f", "raw", "-O", "luks",
                 "-o", opts, orig, img)
        return img, orig

    def cryptsetup_luks1(self, name, size=4 * MiB, seed=5):
        """A cryptsetup LUKS1 image (its layout) filled through us."""
        img, orig = self.path(name), self.path(name + ".orig")
        random_file(orig, size, seed)
        with open(img, "wb") as f:
            f.truncate(2 * MiB + size)
        run([CRYPTSETUP, "luksFormat", "--batch-mode", "--type", "luks1",
             "--align-payload", "4096", "--pbkdf-force-iterations", "1000",
             "--key-file", self.keyfile, img])
        qil("convert", "--object", SECRET, "-n", "-f", "raw", orig,
            "--target-image-opts", image_opts(img))
        return img, orig

    def rekey(self, img, *extra, opts=KDF, check=True):
        return qil("reencrypt", "--object", SECRET, "-o", opts, *extra,
                   "--image-opts", image_opts(img), check=check)

    def resume(self, img, *extra, check=True):
        return qil("reencrypt", "--object", SECRET, "--resume-only",
                   *extra, "--image-opts", image_opts(img), check=check)

    def magic(self, img):
        with open(img, "rb") as f:
            return f.read(6)

    def dump(self, img):
        return run([CRYPTSETUP, "luksDump", img]).stdout

    def active_slots(self, img):
        return [int(n) for n in
                re.findall(r"Key Slot (\d): ENABLED", self.dump(img))]

    def check_data(self, img, orig, old_key=None):
        """Finished, LUKS1 again, same data, new key, both tools agree."""
        self.assertEqual(self.magic(img), b"LUKS\xba\xbe")
        want = file_bytes(orig)
        if QEMU_IMG:
            proc = run([QEMU_IMG, "compare", "--object", SECRET,
                        "--image-opts",
                        f"driver=luks,key-secret=sec0,file.filename={img}",
                        f"driver=raw,file.filename={orig}"], check=False)
            self.assertEqual(proc.returncode, 0,
                             f"qemu-img compare: {proc.stdout} {proc.stderr}"
                             f" (seed {self.seed})")
        out = self.path("readback.raw")
        qil("convert", "--object", SECRET, "--image-opts", image_opts(img),
            "-O", "raw", out)
        self.assertEqual(file_bytes(out), want,
                         f"read back differs (seed {self.seed})")
        os.unlink(out)
        run([CRYPTSETUP, "open", "--test-passphrase", "--key-file",
             self.keyfile, img])
        key = self.volume_key(img)
        if old_key is not None:
            self.assertNotEqual(key, old_key)
        dump = self.dump(img)
        offset = int(re.search(r"Payload offset:\s*(\d+)", dump).group(1))
        mode = re.search(r"Cipher mode:\s*(\S+)", dump).group(1)
        if Cipher is None or mode != "xts-plain64":
            return
        with open(img, "rb") as f:
            f.seek(offset * 512)
            data = f.read(len(want))
        plain = bytearray()
        for i in range(0, len(want), 512):
            d = Cipher(algorithms.AES(key),
                       modes.XTS((i // 512).to_bytes(16, "little"))
                       ).decryptor()
            plain += d.update(data[i:i + 512]) + d.finalize()
        self.assertEqual(bytes(plain), want,
                         f"independent decryption differs (seed {self.seed})")

    # ---- a new volume key ----

    def test_qemu_img_image(self):
        """QEMU's layout: new key, same data, qemu-img reads it."""
        img, orig = self.qemu_luks1("q.img")
        old = self.volume_key(img)
        self.rekey(img)
        self.check_data(img, orig, old)
        self.assertEqual(self.active_slots(img), [0])
        # No trace of the run is left: the bytes it used are zero again.
        with open(img, "rb") as f:
            f.seek(640)
            self.assertEqual(f.read(64), bytes(64))

    def test_cryptsetup_image(self):
        """cryptsetup's layout, small zones: many of them, same data."""
        img, orig = self.cryptsetup_luks1("c.img")
        old = self.volume_key(img)
        self.rekey(img, "--hotzone-size", "64k")
        self.check_data(img, orig, old)

    def test_key_slots_kept_by_number(self):
        """Two passphrases: both are needed, both kept; keyslot=N one."""
        img, orig = self.cryptsetup_luks1("s.img")
        key2 = self.path("key2")
        with open(key2, "w") as f:
            f.write("other pass")
        run([CRYPTSETUP, "luksAddKey", "--batch-mode", "--key-file",
             self.keyfile, "--pbkdf-force-iterations", "1000", "--key-slot",
             "5", img, key2])
        before = file_bytes(img)
        self.assertFails(["reencrypt", "--object", SECRET, "-o", KDF,
                          "--image-opts", image_opts(img)],
                         "key slot 5 does not open")
        self.assertEqual(file_bytes(img), before)
        old = self.volume_key(img)
        qil("reencrypt", "--object", SECRET, "--object", SECRET2, "-o",
            KDF + ",slot-secrets=sec0:sec1", "--image-opts", image_opts(img))
        self.check_data(img, orig, old)
        self.assertEqual(self.active_slots(img), [0, 5])
        run([CRYPTSETUP, "open", "--test-passphrase", "--key-file", key2,
             "--key-slot", "5", img])
        # keyslot=N: only that passphrase is left, in its slot.
        old = self.volume_key(img)
        qil("reencrypt", "--object", SECRET2, "-o", KDF + ",keyslot=5",
            "--image-opts", f"driver=luks,key-secret=sec1,file.filename={img}")
        self.assertEqual(self.active_slots(img), [5])
        self.assertNotEqual(self.volume_key(img, key2), old)
        proc = run([CRYPTSETUP, "open", "--test-passphrase", "--key-file",
                    self.keyfile, img], check=False)
        self.assertNotEqual(proc.returncode, 0)

    def test_new_cipher(self):
        """aes-256 to aes-128: a 32-byte XTS key; longer is refused."""
        img, orig = self.qemu_luks1("c.img")
        old = self.volume_key(img)
        self.rekey(img, opts=KDF + ",cipher-alg=aes-128")
        self.check_data(img, orig, old)
        self.assertEqual(len(self.volume_key(img)), 32)
        before = file_bytes(img)
        self.assertFails(["reencrypt", "--object", SECRET, "-o",
                          KDF + ",cipher-alg=aes-256", "--image-opts",
                          image_opts(img)], "longer than the old one's")
        self.assertEqual(file_bytes(img), before)

    def test_refusals_leave_the_image(self):
        img, _ = self.qemu_luks1("r.img")
        before = file_bytes(img)
        for args, msg in (
                (["--resilience", "journal"], "checksums only"),
                (["-o", "sector-size=4096"], "LUKS1 sectors are 512 bytes"),
                (["-o", "kdf=argon2id"], "PBKDF2 only"),
                (["-o", "keyslot=8"], "not a LUKS1 key slot"),
                (["-o", "keyslot=3"], "key slot 3 is not active")):
            self.assertFails(["reencrypt", "--object", SECRET, "-o", KDF,
                              *args, "--image-opts", image_opts(img)], msg)
            self.assertEqual(file_bytes(img), before, msg)
        self.assertFails(["reencrypt", "--object",
                          "secret,id=sec0,data=wrong", "-o", KDF,
                          "--image-opts", image_opts(img)],
                         "does not open")
        self.assertEqual(file_bytes(img), before)

    # ---- a run in progress ----

    def test_init_only_then_resume(self):
        """Mid-run no tool opens the image as LUKS1; --resume-only ends it."""
        img, orig = self.qemu_luks1("i.img")
        old = self.volume_key(img)
        self.rekey(img, "--init-only")
        self.assertEqual(self.magic(img), RUN_MAGIC)
        self.assertFails(["info", "--object", SECRET, "--image-opts",
                          image_opts(img)], "--resume-only")
        proc = run([CRYPTSETUP, "isLuks", img], check=False)
        self.assertNotEqual(proc.returncode, 0)
        self.resume(img)
        self.check_data(img, orig, old)
        self.assertFails(["reencrypt", "--object", SECRET, "--resume-only",
                          "--image-opts", image_opts(img)],
                         "not being re-encrypted")

    def test_cryptsetup_run_refused(self):
        """cryptsetup's own interrupted LUKS1 run: said, not touched."""
        img, _ = self.qemu_luks1("d.img")
        with open(img, "r+b") as f:
            f.write(CRYPTSETUP_MAGIC)
        before = file_bytes(img)
        for args in (["--resume-only"], ["-o", KDF]):
            self.assertFails(["reencrypt", "--object", SECRET, *args,
                              "--image-opts", image_opts(img)],
                             "cryptsetup's LUKS1 re-encryption")
            self.assertEqual(file_bytes(img), before)
        self.assertFails(["info", "--object", SECRET, "--image-opts",
                          image_opts(img)], "cryptsetup")

    def test_zone_recovery(self):
        """Killed after a zone's data write, before its sync (blkdebug
        kill-flush: the init's 2 syncs, the zone's checksums' sync, then
        this one): the zone's sectors are new, found so by the resume
        (decrypted with the new key, encrypted with the old, they hash
        to their checksums) and kept; one sector overwritten is neither
        old nor new: refused, the image untouched."""
        img, orig = self.qemu_luks1("z.img")
        old = self.volume_key(img)
        proc = qil("reencrypt", "--object", SECRET, "-o", KDF,
                   "--hotzone-size", "1M", "--image-opts",
                   "driver=luks,key-secret=sec0,file.driver=blkdebug,"
                   f"file.kill-flush=4,file.file.filename={img}",
                   check=False)
        self.assertEqual(proc.returncode, -9, proc.stderr)
        self.assertEqual(self.magic(img), RUN_MAGIC)
        bad = self.path("bad.img")
        with open(img, "rb") as f, open(bad, "wb") as g:
            g.write(f.read())
        with open(bad, "r+b") as f:
            f.seek(104)
            payload = int.from_bytes(f.read(4), "big") * 512
            f.seek(payload + 5 * 512)
            f.write(os.urandom(512))
        before = file_bytes(bad)
        self.assertFails(["reencrypt", "--object", SECRET, "--resume-only",
                          "--image-opts", image_opts(bad)],
                         "payload offset 2560 holds neither its old nor "
                         "its new ciphertext")
        self.assertEqual(file_bytes(bad), before)
        self.resume(img)
        self.check_data(img, orig, old)

    def test_sigkill_then_resume(self):
        """Kill the run (and sometimes the resume) anywhere; nothing lost."""
        def ours(img):
            return [TOOL, "reencrypt", "--object", SECRET, "-o", KDF,
                    "--hotzone-size", "64k", "--image-opts",
                    image_opts(img)]

        img, _ = self.qemu_luks1("time.img", size=8 * MiB)
        start = os.times().elapsed
        subprocess.run(ours(img), check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        limit = os.times().elapsed - start
        os.unlink(img)
        for i in range(KILL_ROUNDS):
            img, orig = self.qemu_luks1(f"k{i}.img", size=8 * MiB, seed=i)
            old = self.volume_key(img)
            self.kill_at_random(ours(img), limit)
            if self.magic(img) == RUN_MAGIC:
                if i % 3 == 1:
                    self.kill_at_random(
                        [TOOL, "reencrypt", "--object", SECRET,
                         "--resume-only", "--hotzone-size", "128k",
                         "--image-opts", image_opts(img)], limit / 2)
                if self.magic(img) == RUN_MAGIC:
                    self.resume(img)
            else:
                # Killed before the mark or in the wipe after the commit:
                # a resume finishes the wipe or says there is nothing.
                self.resume(img, check=False)
            if self.volume_key(img) == old:
                self.rekey(img)     # killed before the run began
            self.check_data(img, orig, old)
            os.unlink(img)


if __name__ == "__main__":
    main()
