# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite amend: add and remove LUKS key slots as qemu-img does."""
from qiltest import ITER_TIME, SECRET, TestCase, file_bytes, luks_opts, \
    main, qil

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


if __name__ == "__main__":
    main()
