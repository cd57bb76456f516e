# SPDX-License-Identifier: GPL-2.0-or-later
"""Interop with cryptsetup 2.x (LUKS1): its images read and written by
qemu-img-lite, ours accepted by it, and key slots added on either side
accepted by the other. cryptsetup here has kernel ciphers for AES only."""
import os

from qiltest import (CRYPTSETUP, ITER_TIME, TestCase, file_bytes, main, qil,
                     random_file, run)

SPECS = [
    # (cryptsetup --cipher, --key-size, --hash)
    ("aes-xts-plain64", 512, "sha256"),
    ("aes-xts-plain64", 256, "sha1"),
    ("aes-cbc-essiv:sha256", 256, "sha256"),
    ("aes-cbc-plain", 128, "sha512"),
    ("aes-cbc-plain64", 192, "sha256"),
]


class CryptsetupInterop(TestCase):
    def setUp(self):
        super().setUp()
        self.need_luks()
        self.need_cryptsetup()
        self.keyfile = self.path("keyfile")
        random_file(self.keyfile, 64, seed=42)     # binary key file
        self.secret = f"secret,id=k,file={self.keyfile}"

    def opts(self, img, secret="k"):
        return f"driver=luks,key-secret={secret},file.filename={img}"

    def luks_format(self, img, spec, size=3 << 20):
        cipher, key_size, hash_ = spec
        with open(img, "wb") as f:
            f.truncate(size)
        # --pbkdf-force-iterations 1000: the minimum, to keep this fast
        run([CRYPTSETUP, "luksFormat", "-q", "--type", "luks1",
             "--pbkdf-force-iterations", "1000", "--cipher", cipher,
             "--key-size", str(key_size), "--hash", hash_, "--key-file",
             self.keyfile, img])

    def test_read_and_write_cryptsetup_images(self):
        for spec in SPECS:
            with self.subTest(spec=spec):
                img = self.path("cs.img")
                self.luks_format(img, spec)
                info = self.info_json(img)
                size = info["virtual-size"]
                data = info["format-specific"]["data"]
                dump = run([CRYPTSETUP, "luksDump", img]).stdout
                self.assertIn(f"Payload offset:\t"
                              f"{data['payload-offset'] // 512}\n", dump)
                self.assertEqual(data["payload-offset"] % (1 << 20), 0)
                src = self.path("src.raw")
                random_file(src, size, seed=3)
                qil("convert", "-n", "--object", self.secret, "-f", "raw",
                    "--target-image-opts", src, self.opts(img))
                back = self.path("back.raw")
                qil("convert", "--object", self.secret, "--image-opts",
                    self.opts(img), "-O", "raw", back)
                self.assertEqual(file_bytes(back), file_bytes(src))
                run([CRYPTSETUP, "open", "--test-passphrase", "--key-file",
                     self.keyfile, img])
                for p in (img, src, back):
                    os.unlink(p)

    def test_our_image_accepted(self):
        img = self.path("ours.luks")
        src = self.path("src.raw")
        random_file(src, 1 << 20)
        qil("convert", "--object", self.secret, "-O", "luks", "-o",
            f"key-secret=k,iter-time={ITER_TIME},align-payload=2048", src,
            img)
        run([CRYPTSETUP, "open", "--test-passphrase", "--key-file",
             self.keyfile, img])
        dump = run([CRYPTSETUP, "luksDump", img]).stdout
        # 8 slots of 64 x 4000 bytes, aligned to 1 MiB: 2 MiB
        self.assertIn("Payload offset:\t4096", dump)
        self.assertIn("Cipher mode:   \txts-plain64", dump)
        proc = run([CRYPTSETUP, "open", "--test-passphrase", "--key-file=-",
                    img], check=False, input="not the key")
        self.assertNotEqual(proc.returncode, 0)

    def test_slot_added_by_us_accepted_by_cryptsetup(self):
        img = self.path("cs.img")
        self.luks_format(img, SPECS[0])
        qil("amend", "--object", self.secret, "--object",
            "secret,id=n,data=added by qil", "--image-opts", self.opts(img),
            "-o", f"state=active,new-secret=n,iter-time={ITER_TIME}")
        run([CRYPTSETUP, "open", "--test-passphrase", "--key-file=-", img],
            input="added by qil")
        dump = run([CRYPTSETUP, "luksDump", img]).stdout
        self.assertIn("Key Slot 1: ENABLED", dump)

    def test_slot_added_by_cryptsetup_accepted_by_us(self):
        img = self.path("cs.img")
        self.luks_format(img, SPECS[2])
        newkey = self.path("newkey")
        with open(newkey, "w") as f:
            f.write("added by cryptsetup")
        run([CRYPTSETUP, "luksAddKey", "-q", "--pbkdf-force-iterations",
             "1000", "--key-file", self.keyfile, img, newkey])
        back = self.path("back.raw")
        qil("convert", "--object", "secret,id=n,data=added by cryptsetup",
            "--image-opts", self.opts(img, "n"), "-O", "raw", back)
        # and removing the original slot with us leaves cryptsetup happy
        qil("amend", "--object", self.secret, "--image-opts",
            f"driver=luks,file.filename={img}", "-o",
            "state=inactive,old-secret=k")
        proc = run([CRYPTSETUP, "open", "--test-passphrase", "--key-file",
                    self.keyfile, img], check=False)
        self.assertNotEqual(proc.returncode, 0)
        run([CRYPTSETUP, "open", "--test-passphrase", "--key-file", newkey,
             img])


class CryptsetupLuks2Interop(TestCase):
    """LUKS2 (cryptsetup's default format), which QEMU cannot read."""

    def setUp(self):
        super().setUp()
        self.need_luks()
        self.need_cryptsetup()
        self.keyfile = self.path("keyfile")
        random_file(self.keyfile, 64, seed=43)
        self.secret = f"secret,id=k,file={self.keyfile}"

    def opts(self, img):
        return f"driver=luks,key-secret=k,file.filename={img}"

    def test_cryptsetup_luks2_image(self):
        for sector in (512, 4096):
            with self.subTest(sector=sector):
                img = self.path("cs2.img")
                with open(img, "wb") as f:
                    f.truncate(20 << 20)
                # pbkdf2 with few iterations: argon2 would cost seconds
                run([CRYPTSETUP, "luksFormat", "-q", "--type", "luks2",
                     "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
                     "--sector-size", str(sector), "--key-file",
                     self.keyfile, img])
                info = self.info_json(img)
                data = info["format-specific"]["data"]
                self.assertEqual(data["version"], 2)
                self.assertEqual(data["sector-size"], sector)
                src = self.path("src.raw")
                random_file(src, info["virtual-size"], seed=5)
                qil("convert", "-n", "--object", self.secret, "-f", "raw",
                    "--target-image-opts", src, self.opts(img))
                back = self.path("back.raw")
                qil("convert", "--object", self.secret, "--image-opts",
                    self.opts(img), "-O", "raw", back)
                self.assertEqual(file_bytes(back), file_bytes(src))
                for p in (img, src, back):
                    os.unlink(p)

    def test_our_luks2_image_accepted(self):
        img = self.path("ours2.luks")
        src = self.path("src.raw")
        random_file(src, 1 << 20)
        qil("convert", "--object", self.secret, "-O", "luks", "-o",
            f"key-secret=k,luks-version=2,kdf=pbkdf2,iter-time={ITER_TIME},"
            "label=qil", src, img)
        run([CRYPTSETUP, "open", "--test-passphrase", "--key-file",
             self.keyfile, img])
        dump = run([CRYPTSETUP, "luksDump", img]).stdout
        self.assertIn("Version:       \t2", dump)
        self.assertIn("Label:         \tqil", dump)
        # a slot added by cryptsetup opens with us
        newkey = self.path("newkey")
        with open(newkey, "w") as f:
            f.write("second")
        run([CRYPTSETUP, "luksAddKey", "-q", "--pbkdf", "pbkdf2",
             "--pbkdf-force-iterations", "1000", "--key-file", self.keyfile,
             img, newkey])
        back = self.path("back.raw")
        qil("convert", "--object", "secret,id=k,data=second", "--image-opts",
            self.opts(img), "-O", "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(src))

    def test_damaged_primary_header_warns(self):
        img = self.path("ours2.luks")
        src = self.path("src.raw")
        random_file(src, 1 << 20)
        qil("convert", "--object", self.secret, "-O", "luks", "-o",
            f"key-secret=k,luks-version=2,kdf=pbkdf2,iter-time={ITER_TIME}",
            src, img)
        with open(img, "r+b") as f:
            f.seek(4096 + 10)      # inside the primary JSON area
            f.write(b"\xff\xff")
        proc = qil("info", img)
        self.assertIn("warning:", proc.stderr)
        self.assertIn("secondary", proc.stderr)


if __name__ == "__main__":
    main()
