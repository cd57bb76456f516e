# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite amend: add and remove LUKS key slots as qemu-img does."""
import shutil

from qiltest import ITER_TIME, SECRET, TestCase, file_bytes, luks_opts, \
    main, qemu_img, qil, run

QEMU_IO = shutil.which("qemu-io")

NEW = "secret,id=sec1,data=new passphrase"


class Amend(TestCase):
    def setUp(self):
        super().setUp()
        self.need_luks()
        self.luks, self.raw = self.make_luks("a.luks", "1M")

    def active(self):
        data = self.info_json(self.luks)["format-specific"]["data"]
        return [s["active"] for s in data["slots"]]

    def opens_with(self, secret_def):
        out = self.path("out.raw")
        proc = qil("convert", "--object", secret_def, "--image-opts",
                   luks_opts(self.luks), "-O", "raw", out, check=False)
        if proc.returncode == 0:
            ok = file_bytes(out) == file_bytes(self.raw)
            import os
            os.unlink(out)
            return ok
        return False

    def test_add_and_remove(self):
        qil("amend", "--object", SECRET, "--object", NEW, "--image-opts",
            luks_opts(self.luks), "-o",
            f"state=active,new-secret=sec1,iter-time={ITER_TIME}")
        self.assertEqual(self.active(), [True, True] + [False] * 6)
        self.assertTrue(self.opens_with("secret,id=sec0,data=new passphrase"))
        # remove the old one by its passphrase (old-secret)
        qil("amend", "--object", SECRET, "--image-opts",
            f"driver=luks,file.filename={self.luks}", "-o",
            "state=inactive,old-secret=sec0")
        self.assertEqual(self.active(), [False, True] + [False] * 6)
        self.assertFalse(self.opens_with(SECRET))
        self.assertTrue(self.opens_with("secret,id=sec0,data=new passphrase"))

    def test_keyslot(self):
        qil("amend", "--object", SECRET, "--object", NEW, "--image-opts",
            luks_opts(self.luks), "-o",
            f"state=active,new-secret=sec1,keyslot=5,iter-time={ITER_TIME}")
        self.assertTrue(self.active()[5])
        qil("amend", "--image-opts", f"driver=luks,file.filename={self.luks}",
            "-o", "state=inactive,keyslot=5")
        self.assertEqual(self.active(), [True] + [False] * 7)

    def test_last_slot_needs_force(self):
        self.assertFails(["amend", "--image-opts",
                          f"driver=luks,file.filename={self.luks}", "-o",
                          "state=inactive,keyslot=0"])
        self.assertEqual(self.active(), [True] + [False] * 7)
        qil("amend", "--force", "--image-opts",
            f"driver=luks,file.filename={self.luks}", "-o",
            "state=inactive,keyslot=0")
        self.assertEqual(self.active(), [False] * 8)

    def test_force_replaces_active_slot(self):
        """keyslot=N over an active slot: refused, in qemu-img's words and
        without an image name before them; with --force the slot gets the
        new passphrase (the old one no longer opens it), as qemu-img does.
        Erasing an inactive slot with --force is nothing to do."""
        args = ["amend", "--object", SECRET, "--object", NEW, "--image-opts",
                luks_opts(self.luks), "-o",
                f"state=active,new-secret=sec1,keyslot=0,iter-time={ITER_TIME}"]
        proc = self.assertFails(args, "Refusing to overwrite active keyslot "
                                "0 - please erase it first")
        self.assertEqual(proc.stderr, "qemu-img-lite: Refusing to overwrite "
                         "active keyslot 0 - please erase it first\n")
        self.assertTrue(self.opens_with(SECRET))
        qil(*args, "--force")
        self.assertEqual(self.active(), [True] + [False] * 7)
        self.assertFalse(self.opens_with(SECRET))
        self.assertTrue(self.opens_with("secret,id=sec0,data=new passphrase"))
        qil("amend", "--force", "--image-opts",
            f"driver=luks,file.filename={self.luks}", "-o",
            "state=inactive,keyslot=3")
        self.assertEqual(self.active(), [True] + [False] * 7)

    def test_wrong_passphrase(self):
        self.assertFails(["amend", "--object", "secret,id=sec0,data=bad",
                          "--object", NEW, "--image-opts",
                          luks_opts(self.luks), "-o",
                          "state=active,new-secret=sec1"],
                         "Invalid password, cannot unlock any keyslot")

    def test_bad_options(self):
        self.assertFails(["amend", "--image-opts", luks_opts(self.luks)],
                         "Must specify options")
        self.assertFails(["amend", "--object", SECRET, "--image-opts",
                          luks_opts(self.luks), "-o", "state=maybe"],
                         "state")
        self.assertFails(["amend", "--object", SECRET, "--image-opts",
                          luks_opts(self.luks), "-o",
                          "state=active,new-secret=sec1,frobnicate=1"],
                         "No secret with id 'sec1'")
        raw = self.path("r.raw")
        qil("create", "-q", raw, "1M")
        self.assertFails(["amend", "-f", "raw", "-o", "state=active", raw],
                         "does not support option amendment")


class AmendRefcountBits(TestCase):
    """amend -o refcount_bits=N on qcow2 (qemu-iotests 112): the refcount
    structures rewritten with another width, as qemu-img does."""

    def setUp(self):
        super().setUp()
        self.need_qemu_img()
        if not QEMU_IO:
            self.skipTest("qemu-io is not installed")

    def image(self, opts="", size="64M", writes=()):
        path = self.path("a.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", *(["-o", opts] if opts
                                                   else []), path, size)
        for w in writes:
            self.assertEqual(run([QEMU_IO, "-f", "qcow2", "-c", w, path])
                             .returncode, 0)
        return path

    def bits(self, path):
        return self.info_json(path)["format-specific"]["data"][
            "refcount-bits"]

    def assertClean(self, path):
        proc = qemu_img("check", path, check=False)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)

    def test_widths(self):
        """Every width to others, with data and a snapshot sharing it: the
        image stays clean for qemu-img, the data and the snapshot's too."""
        path = self.image(writes=("write -P 0x11 0 1M", "write -P 0x22 32M 64k"))
        qil("snapshot", "-c", "s", path)
        self.assertEqual(run([QEMU_IO, "-f", "qcow2", "-c",
                              "write -P 0x33 0 64k", path]).returncode, 0)
        for bits in (2, 64, 8, 32, 4, 16):
            with self.subTest(bits=bits):
                qil("amend", "-o", f"refcount_bits={bits}", path)
                self.assertEqual(self.bits(path), bits)
                self.assertClean(path)
                for cmd in ("read -P 0x33 0 64k", "read -P 0x11 64k 960k",
                            "read -P 0x22 32M 64k"):
                    proc = run([QEMU_IO, "-f", "qcow2", "-c", cmd, path])
                    self.assertNotIn("fail", proc.stdout.lower(), cmd)
        snap = self.path("snap.raw")
        qemu_img("convert", "-l", "s", "-O", "raw", path, snap)
        with open(snap, "rb") as f:
            self.assertEqual(f.read(1 << 20), b"\x11" * (1 << 20))

    def test_refused_as_qemu_img(self):
        """A refcount the new width cannot hold, the version 2 rules and
        bad widths: refused in qemu-img's words, the image left clean."""
        path = self.image(writes=("write 0 64k",))
        qil("snapshot", "-c", "s", path)
        for opts in ("refcount_bits=1", "refcount_bits=32,compat=0.10",
                     "refcount_bits=3", "refcount_bits=-1",
                     "refcount_bits=abc", "refcount_bits=128"):
            with self.subTest(opts=opts):
                ref = self.path("ref.qcow2")
                shutil.copy(path, ref)
                ours = qil("amend", "-o", opts, path, check=False)
                theirs = qemu_img("amend", "-o", opts, ref, check=False)
                self.assertEqual(ours.returncode, 1)
                self.assertEqual(theirs.returncode, 1)
                self.assertEqual(ours.stderr.split(": ", 1)[1],
                                 theirs.stderr.split(": ", 1)[1])
                self.assertEqual(self.bits(path), 16)
                self.assertClean(path)
        qil("amend", "-o", "refcount_bits=64", path)
        self.assertFails(["amend", "-o", "compat=0.10", path],
                         "compat=0.10 requires refcount_bits=16")
        qil("amend", "-o", "compat=0.10,refcount_bits=16", path)
        self.assertEqual(self.bits(path), 16)
        self.assertEqual(
            self.info_json(path)["format-specific"]["data"]["compat"], "0.10")
        self.assertClean(path)

    def test_progress_as_qemu_img(self):
        """-p: one step per old refcount table entry per walk over it,
        and back when one more walk is needed, as qemu-img's."""
        path = self.image("refcount_bits=1,cluster_size=512", "64k",
                          (f"write 0 {58 * 512}",))
        ref = self.path("ref.qcow2")
        shutil.copy(path, ref)
        ours = qil("amend", "-o", "refcount_bits=64", "-p", path).stdout
        theirs = qemu_img("amend", "-o", "refcount_bits=64", "-p",
                          ref).stdout
        # (Read as text: each "\r" a line end.)
        self.assertIn("    (66.67/100%)\n    (50.00/100%)\n", ours)
        self.assertEqual(ours, theirs)
        self.assertEqual(self.bits(path), 64)
        self.assertClean(path)


if __name__ == "__main__":
    main()
