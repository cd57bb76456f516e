# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite reencrypt --encrypt (issue 13): in place, resumable, and
resumable by cryptsetup.

A raw image becomes LUKS2 with the same data: the file grows by the data
shift (the payload offset), the data moves by it and is encrypted from the
end backwards, with cryptsetup 2.6's re-encryption metadata in between.
Every result is checked twice: read back by us (convert to raw) and, when
python's cryptography module is there, decrypted independently with the
volume key cryptsetup dumps (AES-XTS, plain64 IVs in 512-byte units).

The kill tests SIGKILL our command (or cryptsetup's) at random moments,
then finish with our --resume-only or cryptsetup's, alternately, and check
every byte. The seed is printed with each failure.
"""
import json
import os
import re
import shutil
import signal
import subprocess

from reenctest import (ReencTestCase, image_opts, reenc_slot, rewrite_json,
                       unknown_version, wrong_reenc_digest)
from qiltest import (CRYPTSETUP, ITER_TIME, QEMU_IMG, SECRET, TOOL,
                     file_bytes, main, qil, random_file, run)

try:
    from cryptography.hazmat.primitives.ciphers import (Cipher, algorithms,
                                                        modes)
except ImportError:                     # pragma: no cover
    Cipher = None

MiB = 1 << 20
# align-payload=2048 sectors: a 1 MiB data shift keeps the tests small.
SMALL = f"key-secret=sec0,iter-time={ITER_TIME},align-payload=2048"
SHIFT = MiB
KILL_ROUNDS = 12


def has_luks_header(path):
    """A primary LUKS header, or a LUKS2 secondary one (16 KiB..4 MiB)."""
    with open(path, "rb") as f:
        if f.read(6) == b"LUKS\xba\xbe":
            return True
        off = 16 << 10
        while off <= 4 << 20:
            f.seek(off)
            if f.read(6) == b"SKUL\xba\xbe":
                return True
            off *= 2
    return False


class Reencrypt(ReencTestCase):
    def setUp(self):
        super().setUp()

    # ---- helpers ----

    def raw(self, name, size, seed=3):
        img = self.path(name)
        random_file(img, size, seed)
        orig = self.path(name + ".orig")
        random_file(orig, size, seed)
        return img, orig

    def encrypt(self, img, opts=SMALL, *extra, check=True):
        return qil("reencrypt", "--object", SECRET, "--encrypt", "-o", opts,
                   *extra, img, check=check)

    def resume_ours(self, img, *extra, check=True):
        return qil("reencrypt", "--object", SECRET, "--resume-only",
                   *extra, "--image-opts", image_opts(img), check=check)

    def resume_cryptsetup(self, img, no_key_ok=False):
        """cryptsetup resumes; with no_key_ok, its refusal to open the key
        slot (exit 2) returns False instead of failing the test."""
        args = [CRYPTSETUP, "reencrypt", "--resume-only",
                "--force-offline-reencrypt", "--batch-mode", "--key-file",
                self.keyfile, img]
        proc = run(args, check=False)
        if no_key_ok and proc.returncode == 2:
            return False
        if "Run repair first" in proc.stderr:
            # cryptsetup's way after a crash inside a hot zone: its repair
            # redoes the zone (datashift: the source is intact).
            run([CRYPTSETUP, "repair", "--batch-mode", "--key-file",
                 self.keyfile, img])
            if "requirements" not in self.dump(img)["config"]:
                return          # the repair finished the last zone and all
            proc = run(args, check=False)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return True

    def dump(self, img):
        return json.loads(run([CRYPTSETUP, "luksDump",
                               "--dump-json-metadata", img]).stdout)

    def all_done(self, img):
        """The last state before the final one: one crypt segment left.

        cryptsetup 2.6.1 cannot resume it, not even when it wrote it
        itself ("Failed to set device segments for next reencryption
        hotzone"); we can.
        """
        segs = [s for s in self.dump(img)["segments"].values()
                if not any(f.startswith("backup-")
                           for f in s.get("flags", []))]
        return len(segs) == 1 and segs[0]["type"] == "crypt" and \
            "in-reencryption" not in segs[0].get("flags", [])

    def check_data(self, img, orig, exact=True):
        """Our read-back and an independent decryption both give orig:
        byte for byte, size included (exact), or as a prefix (a run
        cryptsetup started and finished keeps its --reduce-device-size
        room)."""
        want = file_bytes(orig)
        out = self.path("readback.raw")
        qil("convert", "--object", SECRET, "--image-opts", image_opts(img),
            "-O", "raw", out)
        got = file_bytes(out)
        self.assertEqual(got if exact else got[:len(want)], want,
                         f"read back differs (seed {self.seed})")
        os.unlink(out)
        if not CRYPTSETUP:
            return
        md = self.dump(img)
        self.assertNotIn("requirements", md["config"])
        self.assertEqual(list(md["segments"]), ["0"])
        run([CRYPTSETUP, "open", "--test-passphrase", "--key-file",
             self.keyfile, img])
        if Cipher is None:
            return
        seg = md["segments"]["0"]
        dumped = run([CRYPTSETUP, "luksDump", "--dump-volume-key",
                      "--batch-mode", "--key-file", self.keyfile, img]).stdout
        key = bytes.fromhex("".join(re.search(
            r"MK dump:\s*((?:[0-9a-f ]+\n\s*)+)", dumped).group(1).split()))
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

    def need_all(self):
        self.need_luks()
        self.need_cryptsetup()

    # ---- encryption ----

    def test_encrypt_default_shift(self):
        """16 MiB shift: the file grows by it, the data stays."""
        self.need_all()
        img, orig = self.raw("a.img", 20 * MiB + 4096)
        self.encrypt(img, f"key-secret=sec0,iter-time={ITER_TIME}")
        self.assertEqual(os.path.getsize(img), 36 * MiB + 4096)
        self.check_data(img, orig)
        info = json.loads(qil("info", "--output=json", "--object", SECRET,
                              "--image-opts", image_opts(img)).stdout)
        self.assertEqual(info["virtual-size"], 20 * MiB + 4096)

    def test_encrypt_small_image_and_options(self):
        """An image smaller than the shift; cipher, sector size, KDF."""
        self.need_all()
        img, orig = self.raw("b.img", 96 * 1024)
        self.encrypt(img, SMALL + ",cipher-alg=aes-128,sector-size=512,"
                     "kdf=pbkdf2")
        self.assertEqual(os.path.getsize(img), SHIFT + 96 * 1024)
        self.check_data(img, orig)
        md = self.dump(img)
        self.assertEqual(md["segments"]["0"]["sector_size"], 512)
        self.assertEqual(md["keyslots"]["0"]["key_size"], 32)
        self.assertEqual(md["keyslots"]["0"]["kdf"]["type"], "pbkdf2")

    def test_init_only_metadata_as_cryptsetup(self):
        """--init-only: cryptsetup reads the state as its own."""
        self.need_all()
        img, orig = self.raw("c.img", 5 * MiB)
        self.encrypt(img, SMALL, "--init-only")
        self.assertEqual(os.path.getsize(img), 5 * MiB + 2 * SHIFT)
        md = self.dump(img)
        self.assertEqual(md["config"]["requirements"]["mandatory"],
                         ["online-reencrypt-v2"])
        ks = [k for k in md["keyslots"].values() if k["type"] == "reencrypt"]
        self.assertEqual(len(ks), 1)
        self.assertEqual((ks[0]["mode"], ks[0]["direction"],
                          ks[0]["area"]["type"],
                          ks[0]["area"]["shift_size"]),
                         ("encrypt", "backward", "datashift", str(SHIFT)))
        segs = md["segments"]
        self.assertEqual([s["type"] for s in segs.values()],
                         ["linear", "linear", "linear", "crypt", "linear"])
        self.assertEqual(segs["0"]["offset"], str(5 * MiB + SHIFT))
        # The image is refused by the other commands meanwhile.
        self.assertFails(["info", "--object", SECRET, "--image-opts",
                          image_opts(img)], "unfinished re-encryption")
        tokens = [t for t in md["tokens"].values()
                  if t["type"] == "qemu-img-lite-data-size"]
        self.assertEqual([t["size"] for t in tokens], [str(5 * MiB)])
        self.resume_cryptsetup(img)
        # cryptsetup leaves the file S longer (the copy overwritten) and
        # its segment "dynamic"; it keeps our token, which gives the
        # virtual size: 5 MiB, the original's, byte for byte.
        self.assertEqual(os.path.getsize(img), 5 * MiB + 2 * SHIFT)
        with open(img, "rb") as f:
            f.seek(5 * MiB + SHIFT)
            self.assertNotEqual(f.read(SHIFT), file_bytes(orig)[:SHIFT])
        self.assertIn("qemu-img-lite-data-size",
                      [t["type"] for t in self.dump(img)["tokens"].values()])
        self.check_data(img, orig)
        # Fixed by the header: a resize is refused; our --resume-only cuts
        # the file to S + V and drops the token, as our own finish does.
        self.assertFails(["resize", "--object", SECRET, "--image-opts",
                          image_opts(img), "6M"], "fixes the data size")
        self.resume_ours(img)
        self.assertEqual(os.path.getsize(img), 5 * MiB + SHIFT)
        self.assertEqual(self.dump(img)["tokens"], {})
        self.check_data(img, orig)

    def test_cryptsetup_init_resumed_by_us(self):
        """cryptsetup reencrypt --encrypt --init-only, finished by us."""
        self.need_all()
        img, _ = self.raw("d.img", 8 * MiB)
        orig = self.path("d.want")
        with open(orig, "wb") as f:
            f.write(file_bytes(img)[:6 * MiB])
        run([CRYPTSETUP, "reencrypt", "--encrypt", "--type", "luks2",
             "--init-only", "--reduce-device-size", "2M", "--batch-mode",
             "--key-file", self.keyfile, "--pbkdf", "pbkdf2",
             "--pbkdf-force-iterations", "1000", img])
        self.resume_ours(img)
        # cryptsetup loses --reduce-device-size at the end; we give back
        # the shift's worth of room that only held the moved copy.
        self.assertEqual(os.path.getsize(img), 7 * MiB)
        self.check_data(img, orig)

    def test_sigint_stops_between_zones(self):
        self.need_all()
        img, orig = self.raw("e.img", 24 * MiB)
        proc = subprocess.Popen(
            [TOOL, "reencrypt", "--object", SECRET, "--encrypt", "-o", SMALL,
             "--hotzone-size", "64k", "-p", img], bufsize=0,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # Wait for the first progress line past 0 %.
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
        self.assertIn(b"left", buf + out)
        self.resume_ours(img)
        self.check_data(img, orig)

    def test_last_state_before_final(self):
        """Stopped right before the final header: we finish it."""
        self.need_all()
        img, orig = self.raw("g.img", 3 * MiB)
        env = dict(os.environ, QIL_TEST_REENCRYPT_STOP_BEFORE_FINISH="1")
        proc = subprocess.run([TOOL, "reencrypt", "--object", SECRET,
                               "--encrypt", "-o", SMALL, img], env=env,
                              capture_output=True, text=True)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertTrue(self.all_done(img))
        seg = self.dump(img)["segments"]["0"]
        self.assertEqual(seg["size"], "dynamic")    # as cryptsetup writes it
        self.resume_ours(img)
        self.assertEqual(os.path.getsize(img), 3 * MiB + SHIFT)
        self.check_data(img, orig)

    # ---- refusals ----

    def test_refusals_leave_the_image_untouched(self):
        self.need_all()
        img, _ = self.raw("f.img", 3 * MiB)
        self.encrypt(img, SMALL, "--init-only")
        self.assertFails(["reencrypt", "--object", SECRET, "--encrypt",
                          "-o", SMALL, img], "already LUKS")

        def untouched(edit, message):
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

        def shift(md):
            reenc_slot(md)["area"]["shift_size"] = str(SHIFT // 2)

        def mode(md):
            reenc_slot(md)["mode"] = "decrypt"

        def moved(md):
            for s in md["segments"].values():
                if "backup-moved-segment" in s.get("flags", []):
                    s["offset"] = str(int(s["offset"]) + 4096)

        untouched(shift, "inconsistent")
        untouched(mode, "decryption keeps the header in its own file")
        untouched(unknown_version, "not supported")
        untouched(wrong_reenc_digest, "does not match its digest")
        untouched(moved, "segments")
        self.assertFails(["reencrypt", "--object",
                          "secret,id=sec0,data=wrong", "--resume-only",
                          "--image-opts", image_opts(img)],
                         "Invalid password")
        before = file_bytes(img)
        self.assertFails(["reencrypt", "--object", SECRET, "--decrypt",
                          "--image-opts", image_opts(img)],
                         "unfinished re-encryption")
        self.assertEqual(file_bytes(img), before)
        self.assertFalse(os.path.exists(img + ".luks2-header"))

    def test_encrypt_refuses_what_is_not_a_whole_raw_image(self):
        """--encrypt probes the image as every command does (a qcow2 or
        vmdk file would end up a container inside LUKS2) and refuses the
        --image-opts it cannot honour (offset=, size= of a raw node,
        another driver, unknown keys): nothing is written."""
        self.need_luks()
        if not QEMU_IMG:
            self.skipTest("qemu-img is not installed (scripts/install-deps.sh)")
        for fmt, want in (("qcow2", "is a qcow2 image"),
                          ("vmdk", "is a vmdk image")):
            img = self.path(f"x.{fmt}")
            run([QEMU_IMG, "create", "-q", "-f", fmt, img, "8M"])
            before = file_bytes(img)
            self.assertFails(["reencrypt", "--object", SECRET, "--encrypt",
                              "-o", SMALL, img], want)
            self.assertEqual(file_bytes(img), before)
        img, _ = self.raw("p.img", 3 * MiB)
        before = file_bytes(img)
        for opts, want in (
                (f"driver=raw,file.filename={img},offset=1M,size=1M",
                 "'offset' is not supported"),
                (f"driver=raw,file.filename={img},size=1M",
                 "'size' is not supported"),
                (f"driver=qcow2,file.filename={img}",
                 "works on a raw image, not driver=qcow2"),
                (f"driver=raw,file.filename={img},bogus=1",
                 "Invalid parameter 'bogus'")):
            self.assertFails(["reencrypt", "--object", SECRET, "--encrypt",
                              "-o", SMALL, "--image-opts", opts], want)
        self.assertFails(["reencrypt", "--object", SECRET, "--decrypt",
                          "--image-opts", f"driver=raw,file.filename={img}"],
                         "works on a LUKS image, not driver=raw")
        self.assertEqual(file_bytes(img), before)
        qil("reencrypt", "--object", SECRET, "--encrypt", "-o", SMALL,
            "--image-opts", f"driver=raw,file.filename={img}")

    def loop_device(self, backing):
        """A loop device over backing (detached at the end), or a skip."""
        if os.geteuid() != 0 or not shutil.which("losetup"):
            self.skipTest("needs root and losetup")
        proc = subprocess.run(["losetup", "-f", "--show", backing],
                              capture_output=True, text=True)
        if proc.returncode:
            self.skipTest(f"losetup: {proc.stderr.strip()}")
        dev = proc.stdout.strip()
        self.addCleanup(subprocess.run, ["losetup", "-d", dev],
                        capture_output=True)
        return dev

    def test_in_use_and_block_devices(self):
        """A file a loop device uses is refused unless forced (as
        cryptsetup); on a block device, which cannot be cut, cryptsetup's
        --reduce-device-size encryption resumes and a decryption
        (--header required) ends with exit 0, the device keeping its
        size."""
        self.need_all()
        img, orig = self.raw("u.img", 3 * MiB)
        dev = self.loop_device(img)
        before = file_bytes(img)
        self.assertFails(["reencrypt", "--object", SECRET, "--encrypt",
                          "-o", SMALL, img], f"in use by the loop device {dev}")
        self.assertEqual(file_bytes(img), before)
        self.encrypt(img, SMALL, "--force-offline-reencrypt")
        subprocess.run(["losetup", "-d", dev])
        self.check_data(img, orig)

        back, _ = self.raw("dev.img", 8 * MiB, seed=9)
        want = self.path("dev.want")
        with open(want, "wb") as f:
            f.write(file_bytes(back)[:6 * MiB])
        dev = self.loop_device(back)
        run([CRYPTSETUP, "reencrypt", "--encrypt", "--type", "luks2",
             "--init-only", "--reduce-device-size", "2M", "--batch-mode",
             "--key-file", self.keyfile, "--pbkdf", "pbkdf2",
             "--pbkdf-force-iterations", "1000", dev])
        self.resume_ours(dev)
        self.assertEqual(os.path.getsize(back), 8 * MiB)
        self.check_data(dev, want, exact=False)
        self.assertFails(["reencrypt", "--object", SECRET, "--decrypt",
                          "--image-opts", image_opts(dev)],
                         "needs --header FILE")
        self.assertFalse(os.path.exists(dev + ".luks2-header"))
        hdr = self.path("dev.hdr")
        qil("reencrypt", "--object", SECRET, "--decrypt", "--header", hdr,
            "--image-opts", image_opts(dev))
        self.assertFalse(os.path.exists(hdr))
        self.assertEqual(file_bytes(back)[:6 * MiB], file_bytes(want))

    def test_reduce_device_size(self):
        """--reduce-device-size R, as cryptsetup's: the data are all but
        the last R bytes, the data offset R/2, nothing grows. On a block
        device, killed in the middle and resumed by cryptsetup; on a
        file, to the end, the file then S + V long. Refused: without R on
        a device, R with --resume-only or with align-payload, R not
        smaller than the image."""
        self.need_all()
        opts = f"key-secret=sec0,iter-time={ITER_TIME}"
        back, _ = self.raw("rd.img", 10 * MiB, seed=13)
        want = self.path("rd.want")
        with open(want, "wb") as f:
            f.write(file_bytes(back)[:8 * MiB])
        dev = self.loop_device(back)
        before = file_bytes(back)
        self.assertFails(["reencrypt", "--object", SECRET, "--encrypt",
                          "-o", opts, dev], "--reduce-device-size 32M")
        self.assertFails(["reencrypt", "--object", SECRET, "--encrypt",
                          "--reduce-device-size", "2M", "-o", SMALL, dev],
                         "not both")
        self.assertFails(["reencrypt", "--object", SECRET, "--resume-only",
                          "--reduce-device-size", "2M", dev],
                         "is for --encrypt")
        self.assertFails(["reencrypt", "--object", SECRET, "--encrypt",
                          "--reduce-device-size", "10M", "-o", opts, dev],
                         "is not smaller than the image")
        self.assertEqual(file_bytes(back), before)
        # 64 KiB zones over 8 MiB: the kill lands in the middle
        rc = self.kill_at_random(
            [TOOL, "reencrypt", "--object", SECRET, "--encrypt",
             "--reduce-device-size", "2M", "--hotzone-size", "64k", "-o",
             opts, dev], 0.4)
        if rc != 0 and has_luks_header(dev):
            # as finish() below: done already, or the state only we
            # resume, or the window before the key-slot area is whole
            if "requirements" not in self.dump(dev)["config"]:
                pass
            elif self.all_done(dev) or \
                    not self.resume_cryptsetup(dev, no_key_ok=True):
                self.resume_ours(dev)
        elif rc != 0:
            # killed before the header: the data untouched, start again
            self.assertEqual(file_bytes(back)[:8 * MiB], file_bytes(want))
            qil("reencrypt", "--object", SECRET, "--encrypt",
                "--reduce-device-size", "2M", "-o", opts, dev)
        self.assertEqual(os.path.getsize(back), 10 * MiB)
        self.assertEqual(self.dump(dev)["segments"]["0"]["offset"],
                         str(SHIFT))
        self.check_data(dev, want)

        img, _ = self.raw("rf.img", 6 * MiB, seed=14)
        want = self.path("rf.want")
        with open(want, "wb") as f:
            f.write(file_bytes(img)[:4 * MiB])
        qil("reencrypt", "--object", SECRET, "--encrypt",
            "--reduce-device-size", "2M", "-o", opts, img)
        self.assertEqual(os.path.getsize(img), 5 * MiB)
        self.check_data(img, want)

    # ---- crash safety ----

    def finish(self, img, orig, size, round_):
        """Resume whatever a kill left, alternating the resuming tool."""
        if not has_luks_header(img):
            # Killed before its header: still the raw image, maybe grown.
            data, want = file_bytes(img), file_bytes(orig)
            if data[:size] != want:
                # The one window docs/reencrypt.md names: key-slot area
                # written, no header yet; the start is in the copy.
                self.assertEqual(data[size + SHIFT:size + 2 * SHIFT],
                                 want[:SHIFT], f"seed {self.seed}")
                with open(img, "r+b") as f:
                    f.write(want[:SHIFT])
            self.assertEqual(file_bytes(img)[:size], want)
            os.truncate(img, size)
            self.encrypt(img)
            return
        if "requirements" not in self.dump(img)["config"]:
            # Finished (the final header written before the kill): the
            # file already cut to S + V.
            self.assertEqual(os.path.getsize(img), size + SHIFT)
        elif round_ % 2 or self.all_done(img):
            self.resume_ours(img)
        elif not self.resume_cryptsetup(img, no_key_ok=True):
            # Killed after the headers, before the key-slot area was
            # whole (docs/reencrypt.md, "Write and flush errors"): the key
            # slot does not open for cryptsetup yet; ours takes the area
            # from its staged copy, then finishes.
            self.resume_ours(img)

    def test_sigkill_ours_then_resume(self):
        """Kill our encryption (and our resume) anywhere; nothing is lost."""
        self.need_all()
        size = 6 * MiB
        for i in range(KILL_ROUNDS):
            img, orig = self.raw(f"k{i}.img", size, seed=i)
            args = [TOOL, "reencrypt", "--object", SECRET, "--encrypt",
                    "-o", SMALL, "--hotzone-size", "256k", img]
            rc = self.kill_at_random(args, 0.6)
            if rc == 0:
                self.check_data(img, orig)
                continue
            # Half the rounds: kill our resume too, at another moment.
            if i % 4 == 1 and has_luks_header(img):
                self.kill_at_random(
                    [TOOL, "reencrypt", "--object", SECRET, "--resume-only",
                     "--hotzone-size", "128k", "--image-opts",
                     image_opts(img)], 0.3)
            self.finish(img, orig, size, i)
            self.check_data(img, orig)
            os.unlink(img)

    def test_sigkill_cryptsetup_then_resume_ours(self):
        """cryptsetup's in-place encryption killed anywhere, finished by us."""
        self.need_all()
        size = 6 * MiB
        for i in range(KILL_ROUNDS // 2):
            img, _ = self.raw(f"c{i}.img", size, seed=100 + i)
            orig = self.path(f"c{i}.want")
            with open(orig, "wb") as f:
                f.write(file_bytes(img)[:size - 2 * MiB])
            args = [CRYPTSETUP, "reencrypt", "--encrypt", "--type", "luks2",
                    "--reduce-device-size", "2M", "--batch-mode",
                    "--key-file", self.keyfile, "--pbkdf", "pbkdf2",
                    "--pbkdf-force-iterations", "1000",
                    "--hotzone-size", "128k", img]
            rc = self.kill_at_random(args, 0.5)
            if rc != 0:
                if not has_luks_header(img):
                    continue
                if "requirements" in self.dump(img)["config"]:
                    self.resume_ours(img)
            self.check_data(img, orig, exact=False)
            os.unlink(img)


if __name__ == "__main__":
    main()
