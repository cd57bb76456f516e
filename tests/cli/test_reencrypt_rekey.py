# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite reencrypt with neither --encrypt nor --decrypt (issue 13):
a new volume key for a LUKS2 image, in place, resumable, and resumable by
cryptsetup (and cryptsetup's runs by us).

Images are made by cryptsetup (1 MiB data offset, PBKDF2 at its minimum
cost) and filled with random data through our LUKS driver. After a new
volume key `cryptsetup luksDump --dump-volume-key` must show another key,
every byte must read back the same (through us and, when python's
cryptography module is there, by an independent AES-XTS decryption with the
dumped key), and `cryptsetup open --test-passphrase` must accept the
passphrase.

The kill tests SIGKILL our command (or cryptsetup's) at random moments,
then finish with our --resume-only or cryptsetup's, alternately, and check
every byte. The seed is printed with each failure.
"""
import json
import os
import signal
import subprocess
import time

from reenctest import (ReencTestCase, image_opts, reenc_slot, rewrite_json,
                       unknown_version, wrong_reenc_digest)
from qiltest import (CRYPTSETUP, ITER_TIME, SECRET, TOOL, file_bytes, main,
                     qil, random_file, run)

try:
    from cryptography.hazmat.primitives.ciphers import (Cipher, algorithms,
                                                        modes)
except ImportError:                     # pragma: no cover
    Cipher = None

MiB = 1 << 20
OFFSET = MiB                            # cryptsetup --offset 2048
KDF = f"iter-time={ITER_TIME},kdf=pbkdf2"
SECRET2 = "secret,id=sec1,data=other pass"
KILL_ROUNDS = 8


class ReencryptRekey(ReencTestCase):
    def setUp(self):
        super().setUp()
        self.need_luks()
        self.need_cryptsetup()

    # ---- helpers ----

    def luks2(self, name, size=4 * MiB, sector=512, seed=3, offset=OFFSET):
        """A cryptsetup LUKS2 image holding size random bytes; the data."""
        img, orig = self.path(name), self.path(name + ".orig")
        random_file(orig, size, seed)
        with open(img, "wb") as f:
            f.truncate(offset + size)
        run([CRYPTSETUP, "luksFormat", "--batch-mode", "--type", "luks2",
             "--offset", str(offset // 512), "--sector-size", str(sector),
             "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
             "--key-file", self.keyfile, img])
        qil("convert", "--object", SECRET, "-n", "-f", "raw", orig,
            "--target-image-opts", image_opts(img))
        return img, orig

    def rekey(self, img, *extra, opts=KDF, check=True):
        return qil("reencrypt", "--object", SECRET, "-o", opts, *extra,
                   "--image-opts", image_opts(img), check=check)

    def resume_ours(self, img, *extra, check=True):
        return qil("reencrypt", "--object", SECRET, "--resume-only",
                   *extra, "--image-opts", image_opts(img), check=check)

    def resume_cryptsetup(self, img):
        args = [CRYPTSETUP, "reencrypt", "--resume-only",
                "--force-offline-reencrypt", "--batch-mode", "--key-file",
                self.keyfile, img]
        proc = run(args, check=False)
        if "Run repair first" in proc.stderr:
            # cryptsetup's way after a crash inside a hot zone: its repair
            # finishes the zone from the resilience data.
            run([CRYPTSETUP, "repair", "--batch-mode", "--key-file",
                 self.keyfile, img])
            if "requirements" not in self.dump(img)["config"]:
                return
            proc = run(args, check=False)
        self.assertEqual(proc.returncode, 0,
                         f"{proc.stderr} (seed {self.seed})")

    def dump(self, img):
        return json.loads(run([CRYPTSETUP, "luksDump",
                               "--dump-json-metadata", img]).stdout)

    def in_progress(self, img):
        return "requirements" in self.dump(img)["config"]

    def all_done(self, img):
        """The last state before the final one: one new segment left.

        cryptsetup 2.6.1 cannot resume it, not even when it wrote it
        itself; we can.
        """
        md = self.dump(img)
        segs = [k for k, s in md["segments"].items()
                if not any(f.startswith("backup-")
                           for f in s.get("flags", []))]
        if len(segs) != 1:
            return False
        final = [k for k, s in md["segments"].items()
                 if "backup-final" in s.get("flags", [])][0]
        return any(segs[0] in d["segments"] and final in d["segments"]
                   for d in md["digests"].values())

    def check_data(self, img, orig, old_key=None):
        """Finished, readable by both tools, same data, new key."""
        want = file_bytes(orig)
        out = self.path("readback.raw")
        qil("convert", "--object", SECRET, "--image-opts", image_opts(img),
            "-O", "raw", out)
        self.assertEqual(file_bytes(out), want,
                         f"read back differs (seed {self.seed})")
        os.unlink(out)
        md = self.dump(img)
        self.assertNotIn("requirements", md["config"])
        self.assertEqual(list(md["segments"]), ["0"])
        self.assertFalse([k for k in md["keyslots"].values()
                          if k["type"] == "reencrypt"])
        self.assertEqual(len(md["digests"]), 1)
        run([CRYPTSETUP, "open", "--test-passphrase", "--key-file",
             self.keyfile, img])
        key = self.volume_key(img)
        if old_key is not None:
            self.assertNotEqual(key, old_key)
        seg = md["segments"]["0"]
        if Cipher is None or seg["encryption"] != "aes-xts-plain64":
            return
        with open(img, "rb") as f:
            f.seek(int(seg["offset"]))
            data = f.read(len(want))
        ss = seg["sector_size"]
        plain = bytearray()
        for i in range(0, len(want), ss):
            d = Cipher(algorithms.AES(key),
                       modes.XTS((i // 512).to_bytes(16, "little"))
                       ).decryptor()
            plain += d.update(data[i:i + ss]) + d.finalize()
        self.assertEqual(bytes(plain), want,
                         f"independent decryption differs (seed {self.seed})")

    # ---- a new volume key ----

    def test_each_resilience(self):
        """checksum (default), journal, none: new key, same data."""
        for res in ("checksum", "journal", "none"):
            img, orig = self.luks2(f"r-{res}.img", sector=4096)
            old = self.volume_key(img)
            args = [] if res == "checksum" else ["--resilience", res]
            self.rekey(img, *args, "--hotzone-size", "256k")
            self.check_data(img, orig, old)
            # The key slot is re-wrapped: one slot, the same passphrase.
            self.assertEqual(len(self.dump(img)["keyslots"]), 1)

    def test_new_cipher_and_sector_size(self):
        img, orig = self.luks2("c.img")
        old = self.volume_key(img)
        self.rekey(img, opts=KDF + ",cipher-alg=aes-128,sector-size=4096")
        self.check_data(img, orig, old)
        md = self.dump(img)
        self.assertEqual(md["segments"]["0"]["sector_size"], 4096)
        self.assertEqual(len(self.volume_key(img)), 32)

    def test_every_key_slot_rewrapped(self):
        """Two passphrases: slot-secrets gives each; keyslot=N keeps one."""
        # room for four key slots at a time
        img, orig = self.luks2("s.img", offset=2 * MiB)
        key2 = self.path("key2")
        with open(key2, "w") as f:
            f.write("other pass")
        run([CRYPTSETUP, "luksAddKey", "--batch-mode", "--key-file",
             self.keyfile, "--pbkdf", "pbkdf2", "--pbkdf-force-iterations",
             "1000", img, key2])
        before = file_bytes(img)
        self.assertFails(["reencrypt", "--object", SECRET, "-o", KDF,
                          "--image-opts", image_opts(img)],
                         "key slot 1 does not open")
        self.assertEqual(file_bytes(img), before)
        old = self.volume_key(img)
        qil("reencrypt", "--object", SECRET, "--object", SECRET2, "-o",
            KDF + ",slot-secrets=sec0:sec1", "--image-opts", image_opts(img))
        self.check_data(img, orig, old)
        self.assertEqual(len(self.dump(img)["keyslots"]), 2)
        run([CRYPTSETUP, "open", "--test-passphrase", "--key-file", key2,
             img])
        # keyslot=N: only that passphrase is left.
        qil("reencrypt", "--object", SECRET2, "-o", KDF + ",keyslot=3",
            "--image-opts",
            f"driver=luks,key-secret=sec1,file.filename={img}")
        self.assertEqual(len(self.dump(img)["keyslots"]), 1)
        run([CRYPTSETUP, "open", "--test-passphrase", "--key-file", key2,
             img])
        proc = run([CRYPTSETUP, "open", "--test-passphrase", "--key-file",
                    self.keyfile, img], check=False)
        self.assertNotEqual(proc.returncode, 0)

    # ---- the other tool resumes ----

    def test_init_only_resumed_by_cryptsetup(self):
        for res in ("checksum", "journal"):
            img, orig = self.luks2(f"i-{res}.img")
            old = self.volume_key(img)
            self.rekey(img, "--init-only", "--resilience", res)
            ks = reenc_slot(self.dump(img))
            self.assertEqual((ks["mode"], ks["direction"],
                              ks["area"]["type"]),
                             ("reencrypt", "forward", res))
            self.assertFails(["info", "--object", SECRET, "--image-opts",
                              image_opts(img)], "unfinished re-encryption")
            self.resume_cryptsetup(img)
            self.check_data(img, orig, old)

    def test_cryptsetup_init_resumed_by_us(self):
        for res in ("checksum", "journal"):
            img, orig = self.luks2(f"j-{res}.img", sector=4096)
            old = self.volume_key(img)
            run([CRYPTSETUP, "reencrypt", "--init-only", "--batch-mode",
                 "--force-offline-reencrypt", "--resilience", res,
                 "--key-file", self.keyfile, "--pbkdf", "pbkdf2",
                 "--pbkdf-force-iterations", "1000", img])
            self.resume_ours(img, "--hotzone-size", "128k")
            self.check_data(img, orig, old)

    def test_last_state_before_final(self):
        """Stopped right before the final header: we finish it."""
        img, orig = self.luks2("l.img")
        old = self.volume_key(img)
        env = dict(os.environ, QIL_TEST_REENCRYPT_STOP_BEFORE_FINISH="1")
        proc = subprocess.run([TOOL, "reencrypt", "--object", SECRET,
                               "-o", KDF, "--image-opts", image_opts(img)],
                              env=env, capture_output=True, text=True)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertTrue(self.all_done(img))
        self.resume_ours(img)
        self.check_data(img, orig, old)

    def test_finish_killed_after_old_key_slots(self):
        """cryptsetup killed in its finish, the old key's slots gone.

        cryptsetup 2.6 destroys the old key's key slots one by one (the
        area wiped, then the metadata written) before the write that drops
        the requirement: a kill in between leaves all data under the new
        key and no slot that opens the old one, which cryptsetup cannot
        finish. We finish it without the old key; a wrong passphrase is
        still refused, the image untouched.
        """
        def old_slots(md):
            prev = [k for k, s in md["segments"].items()
                    if "backup-previous" in s.get("flags", [])][0]
            return [d for d in md["digests"].values()
                    if prev in d["segments"]][0]["keyslots"]

        def drop_old_slots(md):
            gone = old_slots(md)
            for o in (*md["digests"].values(), *md["tokens"].values()):
                o["keyslots"] = [k for k in o["keyslots"] if k not in gone]
            for k in gone:
                del md["keyslots"][k]

        for wiped_only in (False, True):
            img, orig = self.luks2(f"f{int(wiped_only)}.img")
            old = self.volume_key(img)
            env = dict(os.environ, QIL_TEST_REENCRYPT_STOP_BEFORE_FINISH="1")
            proc = subprocess.run([TOOL, "reencrypt", "--object", SECRET,
                                   "-o", KDF, "--image-opts",
                                   image_opts(img)],
                                  env=env, capture_output=True, text=True)
            self.assertEqual(proc.returncode, 1, proc.stderr)
            self.assertTrue(self.all_done(img))
            md = self.dump(img)
            slots = old_slots(md)
            self.assertTrue(slots)
            # the areas wiped first, as crypt_keyslot_destroy() does
            with open(img, "r+b") as f:
                for k in slots:
                    area = md["keyslots"][k]["area"]
                    f.seek(int(area["offset"]))
                    f.write(bytes(int(area["size"])))
            if not wiped_only:
                rewrite_json(img, drop_old_slots)
            before = file_bytes(img)
            proc = qil("reencrypt", "--object", SECRET2, "--resume-only",
                       "--image-opts",
                       image_opts(img).replace("sec0", "sec1"), check=False)
            self.assertNotEqual(proc.returncode, 0)
            self.assertIn("Invalid password", proc.stderr)
            self.assertEqual(file_bytes(img), before)
            self.resume_ours(img)
            self.check_data(img, orig, old)
            os.unlink(img)

    def test_sigint_stops_between_zones(self):
        img, orig = self.luks2("e.img", size=8 * MiB)
        old = self.volume_key(img)
        proc = subprocess.Popen(
            [TOOL, "reencrypt", "--object", SECRET, "-o", KDF,
             "--hotzone-size", "64k", "-p", "--image-opts", image_opts(img)],
            bufsize=0, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        buf = b""
        while b"MiB/s" not in buf:
            c = proc.stdout.read(1)
            if not c:
                break
            buf += c
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate()
        if proc.returncode == 0:
            self.skipTest("finished before the signal")
        self.assertEqual(proc.returncode, 1)
        self.assertIn(b"--resume-only", err)
        self.resume_cryptsetup(img)
        self.check_data(img, orig, old)

    # ---- refusals ----

    def test_refusals_leave_the_image_untouched(self):
        img, _ = self.luks2("f.img")
        self.rekey(img, "--init-only")
        self.assertFails(["reencrypt", "--object", SECRET, "-o", KDF,
                          "--image-opts", image_opts(img)],
                         "unfinished re-encryption")

        def untouched(edit, message, area=None):
            bad = self.path("bad.img")
            with open(bad, "wb") as f:
                f.write(file_bytes(img))
            if edit:
                rewrite_json(bad, edit)
            before = file_bytes(bad)
            self.assertFails(["reencrypt", "--object", SECRET,
                              "--resume-only", "--image-opts",
                              image_opts(bad)], message)
            self.assertEqual(file_bytes(bad), before)

        def area_offset(md):
            a = reenc_slot(md)["area"]
            a["offset"] = str(int(a["offset"]) + 4096)

        def checksum_hash(md):
            reenc_slot(md)["area"]["hash"] = "sha512"

        def block(md):
            reenc_slot(md)["area"]["sector_size"] = 512

        def not_ours(md):
            # segments that say a zone of the old key is in re-encryption
            segs = md["segments"]
            segs["0"]["flags"] = ["in-reencryption"]

        untouched(area_offset, "not a free part of the key-slot area")
        untouched(checksum_hash, "does not match its digest")
        untouched(block, "does not match its digest")
        untouched(unknown_version, "not supported")
        untouched(wrong_reenc_digest, "does not match its digest")
        untouched(not_ours, "segments do not describe")
        self.assertFails(["reencrypt", "--object",
                          "secret,id=sec0,data=wrong", "--resume-only",
                          "--image-opts", image_opts(img)],
                         "Invalid password")

    def test_hot_zone_beyond_its_journal(self):
        """A crashed zone larger than the journal that should hold it."""
        img, _ = self.luks2("h.img")
        self.rekey(img, "--init-only", "--resilience", "journal")

        def huge_zone(md):
            # The segments are not under the digest; the area size is.
            segs = md["segments"]
            zone = dict(segs["2"], size=str(2 * MiB),
                        flags=["in-reencryption"])
            rest = dict(segs["0"], offset=str(OFFSET + 2 * MiB),
                        iv_tweak=str(2 * MiB // 512))
            md["segments"] = {"0": zone, "1": rest, "2": segs["1"],
                              "3": segs["2"]}
            for d in md["digests"].values():
                if "1" in d["segments"]:        # the old key's
                    d["segments"] = ["0", "1", "2"]
                elif "2" in d["segments"]:      # the new key's
                    d["segments"] = ["0", "3"]
        rewrite_json(img, huge_zone)
        before = file_bytes(img)
        self.assertFails(["reencrypt", "--object", SECRET, "--resume-only",
                          "--image-opts", image_opts(img)],
                         "larger than its resilience data")
        self.assertEqual(file_bytes(img), before)

    def test_luks1_image_of_ours(self):
        """Our LUKS1 layout takes a new key too (test_reencrypt_luks1.py
        has QEMU's and cryptsetup's); journal is LUKS2's only."""
        img, orig = self.make_luks("v1.img", opts="luks-version=1")
        before = file_bytes(img)
        self.assertFails(["reencrypt", "--object", SECRET, "-o", KDF,
                          "--resilience", "journal",
                          "--image-opts", image_opts(img)], "for LUKS2")
        self.assertEqual(file_bytes(img), before)
        old = self.volume_key(img)
        self.rekey(img)
        self.assertNotEqual(self.volume_key(img), old)
        out = self.path("v1.raw")
        qil("convert", "--object", SECRET, "--image-opts", image_opts(img),
            "-O", "raw", out)
        self.assertEqual(file_bytes(out), file_bytes(orig))

    # ---- crash safety ----

    def duration(self, make_args):
        """How long a whole run takes here: kills land inside it."""
        img, _ = self.luks2("time.img")
        start = time.monotonic()
        subprocess.run(make_args(img), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.unlink(img)
        return time.monotonic() - start

    def finish(self, img, round_):
        """Resume whatever a kill left, alternating the resuming tool."""
        if not self.in_progress(img):
            return
        if round_ % 2 or self.all_done(img):
            self.resume_ours(img)
        else:
            self.resume_cryptsetup(img)

    def test_sigkill_ours_then_resume(self):
        """Kill our run (and our resume) anywhere; nothing is lost."""
        def ours(img, res="checksum"):
            return [TOOL, "reencrypt", "--object", SECRET, "-o", KDF,
                    "--resilience", res, "--hotzone-size", "16k",
                    "--image-opts", image_opts(img)]

        limit = self.duration(ours)
        for i in range(KILL_ROUNDS):
            res = ("checksum", "journal")[i // 2 % 2]
            img, orig = self.luks2(f"k{i}.img", seed=i)
            old = self.volume_key(img)
            self.kill_at_random(ours(img, res), limit)
            if i % 4 == 1 and self.in_progress(img):
                self.kill_at_random(
                    [TOOL, "reencrypt", "--object", SECRET, "--resume-only",
                     "--hotzone-size", "32k", "--image-opts",
                     image_opts(img)], limit / 2)
            self.finish(img, i)
            if self.volume_key(img) == old:
                # killed before the metadata: the image is as it was
                self.rekey(img)
            self.check_data(img, orig, old)
            os.unlink(img)

    def test_sigkill_cryptsetup_then_resume_ours(self):
        """cryptsetup's run killed anywhere, finished by us."""
        def theirs(img, res="checksum"):
            return [CRYPTSETUP, "reencrypt", "--batch-mode",
                    "--force-offline-reencrypt", "--resilience", res,
                    "--key-file", self.keyfile, "--pbkdf", "pbkdf2",
                    "--pbkdf-force-iterations", "1000",
                    "--hotzone-size", "16k", img]

        limit = self.duration(theirs)
        for i in range(KILL_ROUNDS // 2):
            res = ("checksum", "journal")[i % 2]
            img, orig = self.luks2(f"c{i}.img", seed=100 + i)
            old = self.volume_key(img)
            self.kill_at_random(theirs(img, res), limit)
            if self.in_progress(img):
                self.resume_ours(img)
            if self.volume_key(img) == old:
                continue                # killed before its metadata
            self.check_data(img, orig, old)
            os.unlink(img)


if __name__ == "__main__":
    main()
