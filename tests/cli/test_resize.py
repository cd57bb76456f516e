# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite resize: absolute and relative sizes, --shrink, LUKS."""
import os

from qiltest import SECRET, TestCase, file_bytes, luks_opts, main, qil


class Resize(TestCase):
    def test_grow_and_shrink(self):
        path = self.path("a.raw")
        qil("create", "-q", path, "1M")
        self.assertEqual(qil("resize", path, "2M").stdout, "Image resized.\n")
        self.assertEqual(os.path.getsize(path), 2 << 20)
        qil("resize", "-f", "raw", path, "+1M")
        self.assertEqual(os.path.getsize(path), 3 << 20)
        self.assertFails(["resize", path, "1M"], "--shrink")
        self.assertFails(["resize", path, "-1M"], "--shrink")
        qil("resize", "--shrink", path, "-1M")
        self.assertEqual(os.path.getsize(path), 2 << 20)
        qil("resize", "--shrink", "-q", path, "1M")
        self.assertEqual(os.path.getsize(path), 1 << 20)

    def test_preallocation(self):
        path = self.path("a.raw")
        qil("create", "-q", path, "1M")
        qil("resize", "--preallocation=full", path, "3M")
        self.assertGreaterEqual(os.stat(path).st_blocks * 512, 2 << 20)

    def test_luks(self):
        self.need_luks()
        luks, raw = self.make_luks("a.luks", "1M")
        qil("resize", "--object", SECRET, "--image-opts", luks_opts(luks),
            "+1M")
        self.assertEqual(self.info_json(luks)["virtual-size"], 2 << 20)
        # The old data is intact; no key needed for the layout.
        qil("resize", luks, "3M")
        self.assertEqual(self.info_json(luks)["virtual-size"], 3 << 20)
        back = self.path("back.raw")
        qil("convert", "--object", SECRET, "--image-opts", luks_opts(luks),
            "-O", "raw", back)
        self.assertEqual(file_bytes(back)[:1 << 20], file_bytes(raw))


if __name__ == "__main__":
    main()
