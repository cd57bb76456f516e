# SPDX-License-Identifier: GPL-2.0-or-later
"""LUKS sizes and option rules (docs/luks.md, "Size rounding", "Options that
do not apply", "PBKDF2 iteration limit"; issue 15 items 5-8):

- one rounding rule: the LUKS2 sector size is 4096 only when the size is
  whole 4096-byte sectors (else 512, as cryptsetup 2.6), a requested
  sector-size pads with a warning and zeroes, and create, convert, measure
  and resize agree;
- options that do not apply (LUKS2-only ones on LUKS1, argon2 costs with
  pbkdf2, kdf-memory above the maximum, the size given twice) are errors
  naming the option;
- a key slot above the PBKDF2 limit neither hides the header nor stops the
  other slots; max-pbkdf2-iterations raises (or lowers) the limit;
- ECB images open in qemu-img ("ecb-plain64"), and both forms open in ours.

cryptsetup and qemu-img check what we make where installed.
"""
import os
import struct

from qiltest import (CRYPTSETUP, ITER_TIME, PASSPHRASE, QEMU_IMG, SECRET,
                     TestCase, file_bytes, luks_opts, main, qemu_img, qil,
                     random_file, run)

LUKS2 = f"key-secret=sec0,iter-time={ITER_TIME},luks-version=2,kdf=pbkdf2"
ARGON2 = "key-secret=sec0,luks-version=2,kdf=argon2id"
LUKS1 = f"key-secret=sec0,iter-time={ITER_TIME}"
# A size of whole 512-byte sectors that is not whole 4096-byte sectors.
ODD = 1000448
ODD_PADDED = 1003520            # ODD rounded up to 4096


def luks_dump(path):
    return run([CRYPTSETUP, "luksDump", path]).stdout


def cryptsetup_accepts(path, passphrase=PASSPHRASE):
    """cryptsetup reads the header and the passphrase opens a slot."""
    run([CRYPTSETUP, "open", "--test-passphrase", "--key-file=-", path],
        input=passphrase)
    return luks_dump(path)


class SectorSize(TestCase):
    def setUp(self):
        super().setUp()
        self.need_luks()

    def convert(self, size, opts, name="t.luks"):
        raw, luks = self.path(f"s{size}.raw"), self.path(name)
        random_file(raw, size)
        proc = qil("convert", "--object", SECRET, "-f", "raw", "-O", "luks",
                   "-o", opts, raw, luks)
        return raw, luks, proc

    def compare(self, luks, raw, *flags, check=True):
        return qil("compare", *flags, "--object", SECRET, "--image-opts",
                   luks_opts(luks), f"driver=raw,file.filename={raw}",
                   check=check)

    def test_luks2_4096_when_the_size_allows(self):
        path = self.path("a.luks")
        qil("create", "-q", "-f", "luks", "--object", SECRET, "-o", LUKS2,
            path, "1M")
        info = self.info_json(path)
        self.assertEqual(info["format-specific"]["data"]["sector-size"], 4096)
        self.assertEqual(info["virtual-size"], 1 << 20)
        if CRYPTSETUP:
            self.assertIn("sector: 4096 [bytes]", cryptsetup_accepts(path))

    def test_luks2_512_when_not_whole_4096_sectors(self):
        raw, luks, proc = self.convert(ODD, LUKS2)
        self.assertEqual(proc.stderr, "")
        info = self.info_json(luks)
        self.assertEqual(info["format-specific"]["data"]["sector-size"], 512)
        self.assertEqual(info["virtual-size"], ODD)
        # The same size as the source: even strict compare passes.
        self.assertIn("Images are identical.",
                      self.compare(luks, raw, "-s").stdout)
        if CRYPTSETUP:
            self.assertIn("sector: 512 [bytes]", cryptsetup_accepts(luks))

    def test_requested_sector_size_pads_with_zeroes(self):
        raw, luks, proc = self.convert(ODD, LUKS2 + ",sector-size=4096")
        self.assertIn("warning: sector-size pads the image from "
                      f"{ODD} to {ODD_PADDED} bytes", proc.stderr)
        self.assertEqual(self.info_json(luks)["virtual-size"], ODD_PADDED)
        # The padding reads as zeroes: compare passes, as qemu-img's does
        # for a larger image whose extra bytes are zero ...
        out = self.compare(luks, raw).stdout
        self.assertIn("Image size mismatch", out)
        self.assertIn("Images are identical.", out)
        # ... and strict mode still sees the sizes differ.
        self.assertEqual(self.compare(luks, raw, "-s", check=False)
                         .returncode, 1)
        back = self.path("back.raw")
        qil("convert", "--object", SECRET, "--image-opts", luks_opts(luks),
            "-O", "raw", back)
        data = file_bytes(back)
        self.assertEqual(data[:ODD], file_bytes(raw))
        self.assertEqual(data[ODD:], bytes(ODD_PADDED - ODD))
        if CRYPTSETUP:
            self.assertIn("sector: 4096 [bytes]", cryptsetup_accepts(luks))

    def test_no_warning_without_padding(self):
        _, _, proc = self.convert(1 << 20, LUKS2 + ",sector-size=4096")
        self.assertEqual(proc.stderr, "")
        path = self.path("c.luks")
        proc = qil("create", "-f", "luks", "--object", SECRET, "-o",
                   LUKS1, path, "1000001")
        self.assertEqual(proc.stderr, "")

    def test_create_warns_when_padded(self):
        path = self.path("c.luks")
        proc = qil("create", "-f", "luks", "--object", SECRET, "-o",
                   LUKS2 + ",sector-size=4096", path, "1000001")
        self.assertIn("warning: sector-size pads the image from 1000001 to "
                      f"{ODD_PADDED} bytes", proc.stderr)
        self.assertEqual(self.info_json(path)["virtual-size"], ODD_PADDED)

    def test_measure_matches_create(self):
        cases = [(LUKS1, 1000001), (LUKS1, 1 << 20), (LUKS2, ODD),
                 (LUKS2, 1 << 20), (LUKS2 + ",sector-size=4096", ODD),
                 (LUKS2 + ",sector-size=2048", 1000001)]
        for i, (opts, size) in enumerate(cases):
            with self.subTest(opts=opts, size=size):
                path = self.path(f"m{i}.luks")
                out = qil("measure", "--object", SECRET, "-O", "luks", "-o",
                          opts, "--size", str(size), "--output=json").stdout
                qil("create", "-q", "-f", "luks", "--object", SECRET, "-o",
                    opts, path, str(size))
                required = int(out.split('"required": ')[1].split(",")[0])
                self.assertEqual(required, os.path.getsize(path))
                info = self.info_json(path)
                payload = info["format-specific"]["data"]["payload-offset"]
                sector = info["format-specific"]["data"].get("sector-size",
                                                             512)
                self.assertEqual((required - payload) % sector, 0)

    def test_measure_counts_whole_sectors_unlike_qemu_img(self):
        """qemu-img measure says header + 1000 bytes, but its own create
        then reports 1024: we count whole sectors, one number for both."""
        self.need_qemu_img()
        args = ["measure", "--object", SECRET, "-O", "luks", "-o", LUKS1,
                "--size", "1000"]
        ours = qil(*args).stdout.splitlines()[0].split()[-1]
        theirs = qemu_img(*args).stdout.splitlines()[0].split()[-1]
        self.assertEqual(int(ours), int(theirs) + 24)

    def test_resize_keeps_whole_sectors(self):
        raw, luks, _ = self.convert(1 << 20, LUKS2)
        proc = qil("resize", "--shrink", luks, "1000001")
        self.assertIn(f"rounded up to {ODD_PADDED} bytes", proc.stderr)
        info = self.info_json(luks)
        payload = info["format-specific"]["data"]["payload-offset"]
        self.assertEqual(info["virtual-size"], ODD_PADDED)
        self.assertEqual(os.path.getsize(luks) - payload, ODD_PADDED)
        qil("resize", luks, "2000001")
        self.assertEqual(os.path.getsize(luks) - payload, 2002944)
        if CRYPTSETUP:
            cryptsetup_accepts(luks)

    def test_resize_luks1_as_qemu_img_reports(self):
        path = self.path("l1.luks")
        qil("create", "-q", "-f", "luks", "--object", SECRET, "-o", LUKS1,
            path, "1M")
        payload = self.info_json(path)["format-specific"]["data"][
            "payload-offset"]
        proc = qil("resize", path, "2000001")
        # 512-byte rounding is what qemu-img reports too: no warning.
        self.assertEqual(proc.stderr, "")
        self.assertEqual(os.path.getsize(path) - payload, 2000384)
        self.assertEqual(self.info_json(path)["virtual-size"], 2000384)
        if QEMU_IMG:
            out = qemu_img("info", "--output=json", path).stdout
            self.assertIn('"virtual-size": 2000384', out)

    def test_luks1_convert_opens_in_qemu_img(self):
        self.need_qemu_img()
        raw, luks, _ = self.convert(ODD, LUKS1)
        proc = qemu_img("compare", "--object", SECRET, "--image-opts",
                        luks_opts(luks), f"driver=raw,file.filename={raw}",
                        check=False)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)


class OptionErrors(TestCase):
    def setUp(self):
        super().setUp()
        self.need_luks()

    LUKS2_ONLY = [("kdf=argon2id", "'kdf=argon2id' needs luks-version=2"),
                  ("kdf=argon2i", "'kdf=argon2i' needs luks-version=2"),
                  ("sector-size=4096", "'sector-size' needs luks-version=2"),
                  ("label=x", "'label' needs luks-version=2"),
                  ("kdf-memory=65536", "'kdf-memory' needs luks-version=2"),
                  ("kdf-parallel=2", "'kdf-parallel' needs luks-version=2")]

    def test_luks2_only_options_on_luks1(self):
        for opt, message in self.LUKS2_ONLY:
            for version in ("", ",luks-version=1"):
                with self.subTest(opt=opt, version=version):
                    path = self.path("x.luks")
                    self.assertFails(["create", "-f", "luks", "--object",
                                      SECRET, "-o",
                                      f"{LUKS1}{version},{opt}", path, "1M"],
                                     message)
                    self.assertFalse(os.path.exists(path))
                    self.assertFails(["measure", "-O", "luks", "-o",
                                      f"{opt}{version}", "--size", "1M"],
                                     message)

    def test_pbkdf2_on_luks1_is_fine(self):
        path = self.path("x.luks")
        qil("create", "-q", "-f", "luks", "--object", SECRET, "-o",
            LUKS1 + ",kdf=pbkdf2", path, "1M")
        self.assertEqual(file_bytes(path)[6:8], b"\0\1")   # LUKS version 1

    def test_amend_luks1_argon2(self):
        luks, _ = self.make_luks("a.luks", "1M")
        self.assertFails(["amend", "--object", SECRET, "--object",
                          "secret,id=sec1,data=other", "--image-opts",
                          luks_opts(luks), "-o",
                          "state=active,new-secret=sec1,kdf=argon2id"],
                         "'kdf=argon2id' needs luks-version=2")

    def test_amend_erase_with_new_slot_options(self):
        """Erasing takes no cost options: qemu-img 7.2's message."""
        luks, _ = self.make_luks("a.luks", "1M")
        for opt, name in [(f"iter-time={ITER_TIME}", "iter-time"),
                          ("kdf=pbkdf2", "kdf")]:
            with self.subTest(opt=opt):
                self.assertFails(["amend", "--object", SECRET,
                                  "--image-opts", luks_opts(luks), "-o",
                                  f"state=inactive,keyslot=0,{opt}"],
                                 f"'{name}' must not be given when erasing "
                                 "keyslots")
        if QEMU_IMG:
            opts = f"state=inactive,keyslot=0,iter-time={ITER_TIME}"
            theirs = qemu_img("amend", "--object", SECRET, "--image-opts",
                              luks_opts(luks), "-o", opts, check=False)
            self.assertIn("'iter-time' must not be given when erasing "
                          "keyslots", theirs.stderr)

    def test_kdf_costs(self):
        for opt, message in [
                ("kdf-memory=99999999", "Option 'kdf-memory' 99999999 is too "
                 "high (maximum is 4194304 KiB)"),
                ("kdf-memory=16", "minimum is 32 KiB"),
                ("kdf-parallel=17", "Option 'kdf-parallel' 17 is too high"),
                ("kdf-memory=65536", "'kdf-memory' is an argon2 cost: it "
                 "cannot be used with kdf=pbkdf2"),
                ("kdf-parallel=2", "'kdf-parallel' is an argon2 cost: it "
                 "cannot be used with kdf=pbkdf2"),
                ("sector-size=8192", "Option 'sector-size' 8192 is not 512, "
                 "1024, 2048 or 4096"),
                ("label=" + "x" * 48, "Option 'label'")]:
            with self.subTest(opt=opt):
                # argon2 costs are checked before any calibration: fast
                base = LUKS2 if "pbkdf2" in message else ARGON2
                path = self.path("x.luks")
                self.assertFails(["create", "-f", "luks", "--object", SECRET,
                                  "-o", f"{base},{opt}", path, "1M"],
                                 message)
                self.assertFalse(os.path.exists(path))

    def test_size_given_twice(self):
        path = self.path("x.img")
        proc = self.assertFails(["create", "-o", "size=2M", path, "3M"],
                                f"{path}: The image size must be specified "
                                "only once")
        self.assertEqual(proc.stdout, "")       # no "Formatting ..." line
        self.assertFalse(os.path.exists(path))
        if QEMU_IMG:
            theirs = qemu_img("create", "-o", "size=2M", path, "3M",
                              check=False)
            self.assertEqual(theirs.returncode, 1)
            self.assertEqual(proc.stderr.replace("qemu-img-lite:", "",
                                                 1).strip(),
                             theirs.stderr.replace("qemu-img:", "",
                                                   1).strip())


def cryptsetup_image(test, luks_type, iterations):
    """A 4 MiB cryptsetup image, key slot i opened by f"pass{i}" and made
    with iterations[i] PBKDF2 iterations (forced: no calibration)."""
    path = test.path(f"{luks_type}.img")
    with open(path, "wb") as f:
        f.truncate(20 << 20)
    key0 = test.path("k0")
    with open(key0, "w") as f:
        f.write("pass0")
    run([CRYPTSETUP, "luksFormat", "-q", "--type", luks_type, "--pbkdf",
         "pbkdf2", "--pbkdf-force-iterations", str(iterations[0]),
         "--key-file", key0, path])
    for i, n in enumerate(iterations[1:], 1):
        key = test.path(f"k{i}")
        with open(key, "w") as f:
            f.write(f"pass{i}")
        run([CRYPTSETUP, "luksAddKey", "-q", "--pbkdf", "pbkdf2",
             "--pbkdf-force-iterations", str(n), "--key-file", key0, path,
             key])
    return path


class PBKDF2Limit(TestCase):
    def setUp(self):
        super().setUp()
        self.need_luks()

    def unlock(self, path, passphrase, limit=None, check=False):
        opts = "driver=luks,key-secret=k"
        if limit is not None:
            opts += f",max-pbkdf2-iterations={limit}"
        out = self.path("out.raw")
        if os.path.exists(out):
            os.unlink(out)
        return qil("convert", "--object", f"secret,id=k,data={passphrase}",
                   "--image-opts", f"{opts},file.filename={path}", "-O",
                   "raw", out, check=check)

    def test_slot_above_the_limit(self):
        """cryptsetup's slot 1 at 5000 iterations, the limit lowered to
        2000 (the same rule as 2^27 by default, without minutes of CPU)."""
        self.need_cryptsetup()
        for luks_type in ("luks1", "luks2"):
            with self.subTest(luks_type=luks_type):
                path = cryptsetup_image(self, luks_type, [1000, 5000])
                # info always shows the header, both slots
                info = qil("info", "--output=json", "--image-opts",
                           f"driver=luks,max-pbkdf2-iterations=2000,"
                           f"file.filename={path}").stdout
                self.assertIn('"iters": 5000', info)
                # the slot within the limit opens
                self.assertEqual(self.unlock(path, "pass0", 2000).returncode,
                                 0)
                # the one above is not tried, and the error says how
                proc = self.unlock(path, "pass1", 2000)
                self.assertEqual(proc.returncode, 1)
                self.assertIn("key slot 1 (more than max-pbkdf2-iterations="
                              "2000) was not tried: raise that open option",
                              proc.stderr)
                # raised, it opens; the default limit lets both open
                self.assertEqual(self.unlock(path, "pass1", 5000).returncode,
                                 0)
                self.assertEqual(self.unlock(path, "pass1").returncode, 0)
                # a wrong passphrase within the limit: the usual message
                proc = self.unlock(path, "wrong", 10000)
                self.assertIn("Invalid password, cannot unlock any keyslot",
                              proc.stderr)
                self.assertNotIn("not tried", proc.stderr)

    def test_default_limit_against_a_hostile_slot(self):
        """Slot 0 patched to 2^27 + 1 iterations (LUKS1 slots carry no
        checksum): never computed, so this takes no time; slot 1 opens."""
        luks, raw = self.make_luks("a.luks", "1M")
        qil("amend", "--object", SECRET, "--object",
            "secret,id=sec1,data=second", "--image-opts", luks_opts(luks),
            "-o", f"state=active,new-secret=sec1,iter-time={ITER_TIME}")
        with open(luks, "r+b") as f:
            f.seek(208 + 4)             # key slot 0, iterations (BE32)
            f.write(struct.pack(">I", (1 << 27) + 1))
        info = self.info_json(luks)
        self.assertEqual(info["format-specific"]["data"]["slots"][0]["iters"],
                         (1 << 27) + 1)
        self.assertEqual(self.unlock(luks, "second").returncode, 0)
        proc = self.unlock(luks, PASSPHRASE)
        self.assertIn("key slot 0 (more than max-pbkdf2-iterations="
                      "134217728)", proc.stderr)


class ECB(TestCase):
    def setUp(self):
        super().setUp()
        self.need_luks()

    def test_both_forms_open(self):
        luks, raw = self.make_luks("e.luks", "1M", "cipher-mode=ecb")
        hdr = file_bytes(luks)
        self.assertEqual(hdr[40:52], b"ecb-plain64\0")
        # cryptsetup reads the header; opening such a slot needs dm-crypt
        # (its user-space ciphers refuse an IV name with ECB, the kernel
        # ignores it): not available in every test environment.
        if CRYPTSETUP:
            self.assertIn("Cipher mode:   \tecb-plain64", luks_dump(luks))
        # cryptsetup's own spelling, "ecb", opens too
        with open(luks, "r+b") as f:
            f.seek(40)
            f.write(b"ecb".ljust(32, b"\0"))
        proc = qil("compare", "-s", "--object", SECRET, "--image-opts",
                   luks_opts(luks), f"driver=raw,file.filename={raw}")
        self.assertIn("Images are identical.", proc.stdout)

    def test_ours_opens_in_qemu_img(self):
        self.need_qemu_img()
        luks, raw = self.make_luks("e.luks", "1M", "cipher-mode=ecb")
        proc = qemu_img("compare", "--object", SECRET, "--image-opts",
                        luks_opts(luks), f"driver=raw,file.filename={raw}",
                        check=False)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)

    def test_cryptsetup_ecb_opens(self):
        self.need_cryptsetup()
        path = self.path("c.img")
        with open(path, "wb") as f:
            f.truncate(4 << 20)
        run([CRYPTSETUP, "luksFormat", "-q", "--type", "luks1", "--cipher",
             "aes-ecb", "--key-size", "256", "--pbkdf-force-iterations",
             "1000", "--key-file=-", path], input=PASSPHRASE)
        self.assertIn("Cipher mode:   \tecb\n", luks_dump(path))
        info = qil("info", "--output=json", "--object", SECRET,
                   "--image-opts", luks_opts(path)).stdout
        self.assertIn('"cipher-mode": "ecb"', info)
        qil("convert", "--object", SECRET, "--image-opts", luks_opts(path),
            "-O", "raw", self.path("back.raw"))


if __name__ == "__main__":
    main()
