# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite compare: exit 0 same / 1 differ / 2 error, and qemu-img's
messages."""
from qiltest import SECRET, TestCase, luks_opts, main, qemu_img, qil, \
    random_file


class Compare(TestCase):
    def pair(self, size=1 << 20):
        a, b = self.path("a.raw"), self.path("b.raw")
        random_file(a, size)
        random_file(b, size)
        return a, b

    def test_identical(self):
        a, b = self.pair()
        proc = qil("compare", "-f", "raw", "-F", "raw", a, b)
        self.assertEqual(proc.stdout, "Images are identical.\n")

    def test_mismatch_offset_is_sector(self):
        a, b = self.pair()
        with open(b, "r+b") as f:
            f.seek(5000)
            byte = f.read(1)
            f.seek(5000)
            f.write(bytes([byte[0] ^ 1]))
        proc = qil("compare", a, b, check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(proc.stdout, "Content mismatch at offset 4608!\n")

    def test_size_mismatch(self):
        a, b = self.pair()
        with open(b, "ab") as f:
            f.write(bytes(8192))
        proc = qil("compare", a, b)
        self.assertEqual(proc.stdout,
                         "Warning: Image size mismatch!\n"
                         "Images are identical.\n")
        proc = qil("compare", "-s", a, b, check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(proc.stdout, "Strict mode: Image size mismatch!\n")
        with open(b, "ab") as f:
            f.write(b"\1")
        proc = qil("compare", a, b, check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(proc.stdout.splitlines()[-1],
                         f"Content mismatch at offset {(1 << 20) + 8192}!")

    def test_error_exit_2(self):
        a, _ = self.pair()
        self.assertFails(["compare", a, self.path("nope")],
                         "No such file or directory", rc=2)

    def test_quiet(self):
        a, b = self.pair()
        self.assertEqual(qil("compare", "-q", a, b).stdout, "")

    def test_same_messages_as_qemu_img(self):
        self.need_qemu_img()
        a, b = self.pair()
        with open(b, "r+b") as f:
            f.seek(70000)
            f.write(b"\xff\xfe")
        ours = qil("compare", "-f", "raw", "-F", "raw", a, b, check=False)
        theirs = qemu_img("compare", "-f", "raw", "-F", "raw", a, b,
                          check=False)
        self.assertEqual((ours.returncode, ours.stdout),
                         (theirs.returncode, theirs.stdout))

    def test_luks_against_raw(self):
        self.need_luks()
        luks, raw = self.make_luks("a.luks", "1M")
        qil("compare", "--object", SECRET, "--image-opts",
            f"driver=raw,file.filename={raw}", luks_opts(luks))
        other = self.path("other.raw")
        random_file(other, 1 << 20, seed=99)
        proc = qil("compare", "--object", SECRET, "--image-opts",
                   f"driver=raw,file.filename={other}", luks_opts(luks),
                   check=False)
        self.assertEqual(proc.returncode, 1)


if __name__ == "__main__":
    main()
