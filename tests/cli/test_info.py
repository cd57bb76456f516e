# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite info: the fields and JSON keys of qemu-img info, read
without the passphrase; checked against qemu-img on the same images."""
import json

from qiltest import (ITER_TIME, SECRET, TestCase, luks_opts, main, qemu_img,
                     qil)

LUKS_DATA_KEYS = {"ivgen-alg", "hash-alg", "cipher-alg", "uuid",
                  "cipher-mode", "slots", "payload-offset",
                  "master-key-iters"}


class InfoRaw(TestCase):
    def test_human(self):
        path = self.path("a.raw")
        qil("create", "-q", "-f", "raw", path, "16M")
        lines = qil("info", path).stdout.splitlines()
        self.assertEqual(lines[0], f"image: {path}")
        self.assertEqual(lines[1], "file format: raw")
        self.assertEqual(lines[2], "virtual size: 16 MiB (16777216 bytes)")
        self.assertTrue(lines[3].startswith("disk size: "))
        self.assertEqual(len(lines), 4)

    def test_json_keys(self):
        path = self.path("a.raw")
        qil("create", "-q", "-f", "raw", path, "1.5G")
        info = self.info_json(path)
        self.assertEqual(list(info), ["virtual-size", "filename", "format",
                                      "actual-size", "dirty-flag"])
        self.assertEqual(info["virtual-size"], 3 << 29)
        self.assertEqual(info["format"], "raw")
        self.assertIs(info["dirty-flag"], False)

    def test_same_as_qemu_img(self):
        self.need_qemu_img()
        path = self.path("a.raw")
        qil("create", "-q", "-f", "raw", path, "5M")
        with open(path, "r+b") as f:
            f.write(b"data" * 4096)
        for args in [["-f", "raw", path], ["--output=json", "-f", "raw",
                                           path]]:
            ours = qil("info", *args).stdout
            theirs = qemu_img("info", *args).stdout
            if "--output=json" in args:
                self.assertEqual(json.loads(ours), json.loads(theirs))
            else:
                self.assertEqual(ours, theirs)

    def test_output_option(self):
        path = self.path("a.raw")
        qil("create", "-q", path, "1M")
        self.assertFails(["info", "--output=xml", path], "--output")
        self.assertEqual(qil("info", "--output=human", path).stdout,
                         qil("info", path).stdout)

    def test_image_opts(self):
        path = self.path("a.raw")
        qil("create", "-q", path, "1M")
        info = self.info_json("--image-opts",
                              f"driver=raw,file.filename={path}")
        self.assertEqual(info["virtual-size"], 1 << 20)


class InfoLuks(TestCase):
    def setUp(self):
        super().setUp()
        self.need_luks()

    def test_json_keys_without_passphrase(self):
        luks, _ = self.make_luks("a.luks", "1M")
        info = self.info_json(luks)
        self.assertEqual(set(info), {"virtual-size", "filename", "format",
                                     "actual-size", "format-specific",
                                     "encrypted", "dirty-flag"})
        self.assertEqual(info["format-specific"]["type"], "luks")
        data = info["format-specific"]["data"]
        self.assertEqual(set(data), LUKS_DATA_KEYS)
        self.assertEqual(len(data["slots"]), 8)
        self.assertEqual(set(data["slots"][0]),
                         {"active", "iters", "key-offset", "stripes"})
        self.assertEqual(set(data["slots"][1]), {"active", "key-offset"})
        self.assertEqual(data["slots"][0]["stripes"], 4000)

    def test_essiv_has_ivgen_hash(self):
        luks, _ = self.make_luks("a.luks", "1M", "cipher-mode=cbc,"
                                 "ivgen-alg=essiv,ivgen-hash-alg=sha256")
        data = self.info_json(luks)["format-specific"]["data"]
        self.assertEqual(set(data), LUKS_DATA_KEYS | {"ivgen-hash-alg"})

    def test_same_as_qemu_img(self):
        self.need_qemu_img()
        for opts in ["", ",cipher-alg=aes-128,cipher-mode=cbc,"
                     "ivgen-alg=essiv,ivgen-hash-alg=sha256,hash-alg=sha1"]:
            path = self.path("q.luks")
            qemu_img("create", "-q", "-f", "luks", "--object", SECRET, "-o",
                     f"key-secret=sec0,iter-time={ITER_TIME}{opts}", path,
                     "3M")
            self.assertEqual(qil("info", path).stdout,
                             qemu_img("info", path).stdout)
            self.assertEqual(self.info_json(path),
                             json.loads(qemu_img("info", "--output=json",
                                                 path).stdout))
            self.assertEqual(
                self.info_json("--object", SECRET, "--image-opts",
                               luks_opts(path))["format-specific"],
                self.info_json(path)["format-specific"])
            import os
            os.unlink(path)


if __name__ == "__main__":
    main()
