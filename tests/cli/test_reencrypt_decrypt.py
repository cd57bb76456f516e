# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite reencrypt --decrypt (issue 13): in place, resumable, and
resumable by cryptsetup 2.6 (and cryptsetup's runs by us).

A LUKS2 image becomes the raw image again byte for byte, the file shrinking
to the data size. Meanwhile the header lives in FILE.luks2-header (a
cryptsetup detached header with the online-reencrypt-v3 requirement and
datashift-checksum resilience) and every other command refuses the image.

The kill tests SIGKILL our command (or cryptsetup's) at random moments,
then go on with our command or cryptsetup's, alternately, and check every
byte. The seed is printed with each failure.
"""
import os
import struct
import subprocess

from reenctest import (ReencTestCase, header_json, image_opts, reenc_slot,
                       rewrite_json, unknown_version, wrong_reenc_digest)
from qiltest import (CRYPTSETUP, ITER_TIME, SECRET, TOOL, file_bytes, main,
                     qemu_img, qil, random_file, run)

MiB = 1 << 20
# align-payload=2048 sectors: a 1 MiB data shift keeps the tests small.
SMALL = f"key-secret=sec0,iter-time={ITER_TIME},align-payload=2048"
SHIFT = MiB
KILL_ROUNDS = 10


class Decrypt(ReencTestCase):
    def setUp(self):
        super().setUp()

    def need_all(self):
        self.need_luks()
        self.need_cryptsetup()

    # ---- helpers ----

    def luks2(self, name, size, seed=3, opts=SMALL):
        """A LUKS2 image (our in-place encryption) and its raw original."""
        img = self.path(name)
        random_file(img, size, seed)
        orig = self.path(name + ".orig")
        random_file(orig, size, seed)
        qil("reencrypt", "--object", SECRET, "--encrypt", "-o", opts, img)
        return img, orig

    def decrypt(self, img, *extra, check=True):
        return qil("reencrypt", "--object", SECRET, "--decrypt", *extra,
                   "--image-opts", image_opts(img), check=check)

    def resume_ours(self, img, *extra, check=True):
        return qil("reencrypt", "--object", SECRET, "--resume-only", *extra,
                   "--image-opts", image_opts(img), check=check)

    def cryptsetup_args(self, img, *extra):
        return [CRYPTSETUP, "reencrypt", *extra, "--force-offline-reencrypt",
                "--batch-mode", "--key-file", self.keyfile, "--header",
                img + ".luks2-header", img]

    def resume_cryptsetup(self, img):
        proc = run(self.cryptsetup_args(img, "--resume-only"), check=False)
        if "Run repair first" in proc.stderr:
            run([CRYPTSETUP, "repair", "--batch-mode", "--key-file",
                 self.keyfile, "--header", img + ".luks2-header", img])
            if "requirements" not in header_json(img + ".luks2-header")[
                    "config"]:
                return
            proc = run(self.cryptsetup_args(img, "--resume-only"),
                       check=False)
        self.assertEqual(proc.returncode, 0, proc.stderr)

    def finish_after_cryptsetup(self, img, size):
        """cryptsetup finished: its header stays, the file is S longer.

        A run we started recorded the data size in the header file (our
        token, which cryptsetup keeps): our --resume-only cuts the file to
        it and removes the header file. Of a run cryptsetup started, the
        size is not known: that is left to the user, with a message."""
        hdr = img + ".luks2-header"
        md = header_json(hdr)
        self.assertNotIn("requirements", md["config"])
        self.assertEqual(md["segments"]["0"]["type"], "linear")
        self.assertEqual(os.path.getsize(img), size + SHIFT)
        ours = [t for t in md["tokens"].values()
                if t["type"] == "qemu-img-lite-data-size"]
        if ours:
            self.assertEqual(ours[0]["size"], str(size))
            self.resume_ours(img)
            self.assertEqual(os.path.getsize(img), size)
            return
        self.assertFails(["reencrypt", "--object", SECRET, "--resume-only",
                          "--image-opts", image_opts(img)],
                         "finished by cryptsetup")
        os.unlink(hdr)
        os.truncate(img, size)

    def export_size(self, img):
        """The length of a whole export of img's header: its key slots' end."""
        with open(img, "rb") as f:
            hdr_size = struct.unpack(">Q", f.read(16)[8:16])[0]
        return 2 * hdr_size + int(header_json(img)["config"]["keyslots_size"])

    def assert_raw(self, img, orig):
        self.assertFalse(os.path.exists(img + ".luks2-header"),
                         f"seed {self.seed}")
        self.assertEqual(file_bytes(img), file_bytes(orig),
                         f"seed {self.seed}")

    # ---- decryption ----

    def test_encrypt_then_decrypt_is_identical(self):
        """Default 16 MiB shift: encrypt, decrypt, the very same file."""
        self.need_all()
        img, orig = self.luks2("a.img", 20 * MiB + 4096,
                               opts=f"key-secret=sec0,iter-time={ITER_TIME}")
        self.assertEqual(os.path.getsize(img), 36 * MiB + 4096)
        self.decrypt(img, "-p")
        self.assert_raw(img, orig)
        run(["cmp", img, orig])

    def test_small_image_and_options(self):
        """Smaller than the shift; 512-byte sectors, aes-128, pbkdf2."""
        self.need_all()
        img, orig = self.luks2("b.img", 96 * 1024 + 512, opts=SMALL +
                               ",cipher-alg=aes-128,sector-size=512,"
                               "kdf=pbkdf2")
        self.decrypt(img, "--hotzone-size", "64k")
        self.assert_raw(img, orig)

    def test_init_only_metadata_as_cryptsetup(self):
        """--init-only: cryptsetup reads the state as its own, finishes it."""
        self.need_all()
        img, orig = self.luks2("c.img", 5 * MiB)
        self.decrypt(img, "--init-only")
        hdr = img + ".luks2-header"
        md = header_json(hdr)
        self.assertEqual(md["config"]["requirements"]["mandatory"],
                         ["online-reencrypt-v3"])
        ks = reenc_slot(md)
        self.assertEqual((ks["mode"], ks["direction"], ks["area"]["type"],
                          ks["area"]["shift_size"], ks["area"]["hash"]),
                         ("decrypt", "forward", "datashift-checksum",
                          str(SHIFT), "sha256"))
        segs = md["segments"]
        self.assertEqual([(s["type"], s["offset"], s.get("flags", []))
                          for s in segs.values()],
                         [("crypt", "0", []), ("crypt", str(2 * SHIFT), []),
                          ("crypt", "0", ["backup-moved-segment"]),
                          ("crypt", str(SHIFT), ["backup-previous"]),
                          ("linear", "0", ["backup-final"])])
        # cryptsetup's own view of it
        dump = run([CRYPTSETUP, "luksDump", hdr]).stdout
        self.assertIn("decrypt", dump)
        # Every other command refuses the image meanwhile: the luks and raw
        # formats (probed or named) know the header file, and so does
        # another reencrypt run.
        for args in (["info", img],
                     ["info", "-f", "raw", img],
                     ["info", "--object", SECRET, "--image-opts",
                      image_opts(img)],
                     ["convert", "-O", "raw", img, self.path("x.raw")],
                     ["reencrypt", "--object", SECRET, "--encrypt", "-o",
                      SMALL, img]):
            self.assertFails(args, "being decrypted in place")
        self.resume_cryptsetup(img)
        self.assertEqual(file_bytes(img)[:5 * MiB], file_bytes(orig))
        self.finish_after_cryptsetup(img, 5 * MiB)
        self.assert_raw(img, orig)

    def test_cryptsetup_init_resumed_by_us(self):
        """cryptsetup reencrypt --decrypt --init-only, finished by us."""
        self.need_all()
        img, orig = self.luks2("d.img", 6 * MiB)
        run(self.cryptsetup_args(img, "--decrypt", "--init-only"))
        self.resume_ours(img)
        self.assert_raw(img, orig)

    def test_our_decrypt_of_cryptsetup_init(self):
        """--decrypt (not only --resume-only) goes on with a started run."""
        self.need_all()
        img, orig = self.luks2("d2.img", 3 * MiB)
        run(self.cryptsetup_args(img, "--decrypt", "--init-only"))
        self.decrypt(img)
        self.assert_raw(img, orig)

    # ---- LUKS1: the header converted to LUKS2 into its own file ----

    def luks1(self, name, size, maker):
        """A LUKS1 image made by qemu-img-lite or qemu-img, its original."""
        orig = self.path(name + ".orig")
        random_file(orig, size, 7)
        img = self.path(name)
        args = ["convert", "--object", SECRET, "-O", "luks", "-o",
                f"key-secret=sec0,iter-time={ITER_TIME}"]
        if maker == "ours":
            qil(*args[:-1], args[-1] + ",luks-version=1", orig, img)
        else:
            qemu_img(*args, orig, img)
        with open(img, "rb") as f:
            self.assertEqual(f.read(8)[6:8], b"\0\1")   # LUKS1 indeed
        return img, orig

    def test_luks1_decrypted(self):
        """LUKS1 by us and by qemu-img (payload at 4040 sectors, which
        cryptsetup convert refuses): decrypted to the same bytes."""
        self.need_all()
        for maker in ("ours", "qemu-img"):
            with self.subTest(maker=maker):
                if maker == "qemu-img":
                    self.need_qemu_img()
                img, orig = self.luks1(f"l1-{maker}.img", 3 * MiB, maker)
                self.decrypt(img, "--hotzone-size", "512k")
                self.assert_raw(img, orig)

    def test_luks1_init_resumed_by_cryptsetup(self):
        """The converted header is cryptsetup's LUKS2: it finishes it."""
        self.need_all()
        img, orig = self.luks1("l1c.img", 4 * MiB, "ours")
        shift = os.path.getsize(img) - 4 * MiB
        self.decrypt(img, "--init-only")
        dump = run([CRYPTSETUP, "luksDump", img + ".luks2-header"]).stdout
        self.assertIn("decrypt", dump)
        self.resume_cryptsetup(img)
        hdr = img + ".luks2-header"
        self.assertNotIn("requirements", header_json(hdr)["config"])
        self.assertEqual(os.path.getsize(img), 4 * MiB + shift)
        os.unlink(hdr)
        os.truncate(img, 4 * MiB)
        self.assert_raw(img, orig)

    def test_luks1_wrong_passphrase_untouched(self):
        self.need_all()
        img, _ = self.luks1("l1w.img", 2 * MiB, "ours")
        before = file_bytes(img)
        self.assertFails(["reencrypt", "--object",
                          "secret,id=sec0,data=not it", "--decrypt",
                          "--image-opts", image_opts(img)])
        self.assertEqual(file_bytes(img), before)
        self.assertFalse(os.path.exists(img + ".luks2-header"))

    def test_header_option(self):
        """--header names the header file, as cryptsetup's."""
        self.need_all()
        img, orig = self.luks2("h.img", 3 * MiB)
        hdr = self.path("elsewhere.hdr")
        self.decrypt(img, "--header", hdr, "--init-only")
        self.assertTrue(os.path.exists(hdr))
        self.assertFalse(os.path.exists(img + ".luks2-header"))
        self.resume_ours(img, "--header", hdr)
        self.assertFalse(os.path.exists(hdr))
        self.assertEqual(file_bytes(img), file_bytes(orig))

    def test_header_on_tmpfs_refused(self):
        """A header on a RAM file system while the data is not on one: a
        reboot would lose the only key slots; refused, nothing written."""
        self.need_all()
        if self.fs_type(os.path.dirname(self.path("x"))) == "tmpfs" or \
                self.fs_type("/dev/shm") != "tmpfs":
            self.skipTest("needs a scratch directory off tmpfs and a tmpfs "
                          "/dev/shm")
        img, _ = self.luks2("t.img", 3 * MiB)
        before = file_bytes(img)
        hdr = os.path.join("/dev/shm", f"qil-hdr-{os.getpid()}")
        self.assertFails(["reencrypt", "--object", SECRET, "--decrypt",
                          "--header", hdr, "--image-opts", image_opts(img)],
                         "would be on a RAM file system")
        self.assertFalse(os.path.exists(hdr))
        self.assertEqual(file_bytes(img), before)

    @staticmethod
    def fs_type(path):
        return subprocess.run(["stat", "-f", "-c", "%T", path],
                              capture_output=True, text=True).stdout.strip()

    def test_sigint_stops_between_zones(self):
        self.need_all()
        img, orig = self.luks2("e.img", 24 * MiB)
        proc = subprocess.Popen(
            [TOOL, "reencrypt", "--object", SECRET, "--decrypt",
             "--hotzone-size", "64k", "-p", "--image-opts", image_opts(img)],
            bufsize=0, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        buf = b""
        while b"MiB/s" not in buf:
            c = proc.stdout.read(1)
            if not c:
                break
            buf += c
        proc.send_signal(subprocess.signal.SIGINT)
        out, err = proc.communicate()
        if proc.returncode == 0:
            self.skipTest("finished before the signal")
        self.assertEqual(proc.returncode, 1)
        self.assertIn(b"--resume-only", err)
        self.resume_ours(img)
        self.assert_raw(img, orig)

    # ---- refusals ----

    def test_refusals_leave_everything_untouched(self):
        self.need_all()
        img, _ = self.luks2("f.img", 3 * MiB)
        before = file_bytes(img)
        self.assertFails(["reencrypt", "--object",
                          "secret,id=sec0,data=wrong", "--decrypt",
                          "--image-opts", image_opts(img)],
                         "Invalid password")
        self.assertEqual(file_bytes(img), before)
        self.assertEqual(os.listdir(self.dir).count("f.img.luks2-header"), 0)
        self.assertFails(["reencrypt", "--object", SECRET, "--resume-only",
                          "--header", self.path("none"), "--image-opts",
                          image_opts(img)], "does not exist")
        with open(img + ".luks2-header", "wb") as f:
            f.write(b"not a header")
        self.assertFails(["reencrypt", "--object", SECRET, "--decrypt",
                          "--image-opts", image_opts(img)],
                         "holds no LUKS2 header")
        os.unlink(img + ".luks2-header")
        self.assertEqual(file_bytes(img), before)

        self.decrypt(img, "--init-only")
        hdr = img + ".luks2-header"
        started, started_hdr = file_bytes(img), file_bytes(hdr)

        def untouched(edit, message):
            bad, badhdr = self.path("bad.img"), self.path("bad.img.luks2-header")
            with open(bad, "wb") as f:
                f.write(started)
            with open(badhdr, "wb") as f:
                f.write(started_hdr)
            if edit:
                rewrite_json(badhdr, edit)
            b_img, b_hdr = file_bytes(bad), file_bytes(badhdr)
            self.assertFails(["reencrypt", "--object", SECRET,
                              "--resume-only", "--image-opts",
                              image_opts(bad)], message)
            self.assertEqual(file_bytes(bad), b_img)
            self.assertEqual(file_bytes(badhdr), b_hdr)

        def shift(md):
            reenc_slot(md)["area"]["shift_size"] = str(SHIFT // 2)

        def direction(md):
            reenc_slot(md)["direction"] = "backward"

        def moved(md):
            for s in md["segments"].values():
                if "backup-moved-segment" in s.get("flags", []):
                    s["size"] = str(SHIFT // 2)

        def segment(md):
            md["segments"]["1"]["offset"] = str(3 * SHIFT)

        untouched(shift, "inconsistent")
        untouched(direction, "not supported")
        untouched(unknown_version, "not supported")
        untouched(wrong_reenc_digest, "does not match its digest")
        untouched(moved, "inconsistent")
        untouched(segment, "segments do not describe")

    def test_export_cut_short(self):
        """A header file that cryptsetup's export left incomplete.

        cryptsetup writes the exported header in place (not under another
        name), so a kill during it leaves a short file beside an image
        still whole: refused with what happened and what to do, nothing
        touched, no claim that a decryption is under way; once it is
        removed the decryption runs."""
        self.need_all()
        img, orig = self.luks2("x.img", 3 * MiB)
        hdr = img + ".luks2-header"
        full = self.path("full.hdr")
        run([CRYPTSETUP, "luksHeaderBackup", "--header-backup-file", full,
             img])
        whole = file_bytes(full)
        before = file_bytes(img)
        for n in (0, 4096, 16384, len(whole) - 4096):
            with open(hdr, "wb") as f:
                f.write(whole[:n])
            proc = self.assertFails(["reencrypt", "--object", SECRET,
                                     "--decrypt", "--image-opts",
                                     image_opts(img)], "export cut short")
            self.assertIn(f"remove '{hdr}'", proc.stderr)
            self.assertNotIn("left being decrypted", proc.stderr)
            self.assertEqual(file_bytes(img), before)
            self.assertEqual(file_bytes(hdr), whole[:n])
            # nor does any other open take it for a decryption under way
            self.assertIn("file format: luks", qil("info", img).stdout)
        # the image's own header gone too: nothing to decrypt with
        with open(img, "r+b") as f:
            f.write(bytes(4096))
        proc = self.assertFails(["reencrypt", "--object", SECRET,
                                 "--decrypt", "--image-opts",
                                 image_opts(img)], "no LUKS header of its own")
        with open(img, "wb") as f:
            f.write(before)
        os.unlink(hdr)
        self.decrypt(img)
        self.assert_raw(img, orig)

    def test_wrong_hot_zone_checksum(self):
        """A hot-zone checksum that matches nothing: refused, untouched."""
        self.need_all()
        img, orig = self.luks2("g.img", 3 * MiB)
        hdr = img + ".luks2-header"
        # Stop in the last zone: kill our run with it marked, by hand.
        self.decrypt(img, "--init-only")
        env = dict(os.environ, QIL_TEST_REENCRYPT_STOP_IN_MOVED_ZONE="1")
        proc = subprocess.run([TOOL, "reencrypt", "--object", SECRET,
                               "--resume-only", "--image-opts",
                               image_opts(img)], env=env,
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        ks = reenc_slot(header_json(hdr))
        good = file_bytes(hdr)
        with open(hdr, "r+b") as f:
            f.seek(int(ks["area"]["offset"]) + 32 * 5)
            b = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([b[0] ^ 0x80]))
        b_img, b_hdr = file_bytes(img), file_bytes(hdr)
        self.assertFails(["reencrypt", "--object", SECRET, "--resume-only",
                          "--image-opts", image_opts(img)],
                         "hot zone checksum of block 5")
        self.assertEqual(file_bytes(img), b_img)
        self.assertEqual(file_bytes(hdr), b_hdr)
        with open(hdr, "wb") as f:
            f.write(good)
        self.resume_ours(img)
        self.assert_raw(img, orig)

    # ---- crash safety ----

    def go_on(self, img, orig, size, round_):
        """Finish whatever a kill left, alternating the tool."""
        hdr = img + ".luks2-header"
        if not os.path.exists(hdr):
            if os.path.getsize(img) == size:
                return          # killed after the very end (the unlink)
            # Killed before the header file was whole: nothing changed.
            self.assertEqual(os.path.getsize(img), size + SHIFT)
            self.decrypt(img)
            return
        md = header_json(hdr)
        if "requirements" not in md["config"] or round_ % 2:
            self.resume_ours(img)
            return
        self.resume_cryptsetup(img)
        self.finish_after_cryptsetup(img, size)

    def test_sigkill_ours_then_resume(self):
        """Kill our decryption (and our resume) anywhere; nothing is lost."""
        self.need_all()
        size = 6 * MiB
        for i in range(KILL_ROUNDS):
            img, orig = self.luks2(f"k{i}.img", size, seed=i)
            rc = self.kill_at_random(
                [TOOL, "reencrypt", "--object", SECRET, "--decrypt",
                 "--hotzone-size", "256k", "--image-opts", image_opts(img)],
                0.25)
            if rc != 0:
                if i % 4 == 1 and os.path.exists(img + ".luks2-header"):
                    self.kill_at_random(
                        [TOOL, "reencrypt", "--object", SECRET,
                         "--resume-only", "--hotzone-size", "128k",
                         "--image-opts", image_opts(img)], 0.15)
                self.go_on(img, orig, size, i)
            self.assert_raw(img, orig)
            os.unlink(img)

    def test_sigkill_cryptsetup_then_resume_ours(self):
        """cryptsetup's decryption killed anywhere, finished by us."""
        self.need_all()
        size = 6 * MiB
        for i in range(KILL_ROUNDS // 2):
            img, orig = self.luks2(f"c{i}.img", size, seed=100 + i)
            hdr = img + ".luks2-header"
            whole = self.export_size(img)
            rc = self.kill_at_random(self.cryptsetup_args(img, "--decrypt"),
                                     0.6)
            if rc == 0:
                self.finish_after_cryptsetup(img, size)
            elif os.path.exists(hdr) and \
                    os.path.getsize(hdr) < whole:
                # cut in its export (written in place): the image is whole
                self.assertFails(["reencrypt", "--object", SECRET,
                                  "--decrypt", "--image-opts",
                                  image_opts(img)], "export cut short")
                os.unlink(hdr)
                self.decrypt(img)
            elif os.path.exists(hdr) and \
                    "requirements" in header_json(hdr)["config"]:
                self.resume_ours(img)
            elif os.path.exists(hdr):
                # cut before its metadata: a plain header, data intact
                md = header_json(hdr)
                if md["segments"]["0"]["type"] == "crypt":
                    self.decrypt(img)
                else:
                    self.finish_after_cryptsetup(img, size)
            else:
                self.assertEqual(os.path.getsize(img), size + SHIFT)
                self.decrypt(img)
            self.assert_raw(img, orig)
            os.unlink(img)


if __name__ == "__main__":
    main()
