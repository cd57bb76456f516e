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

    def test_one_spec_for_plain_and_encrypted_qcow2(self):
        """As qemu-img (qemu-iotests 188): encrypt.key-secret on a plain
        qcow2 is taken and unused; encrypt.format on one is an error."""
        self.need_luks()
        plain, enc = self.path("p.qcow2"), self.path("e.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", plain, "1M")
        qil("convert", "-O", "qcow2", "--object", SECRET, "-o",
            "encrypt.format=luks,encrypt.key-secret=sec0,encrypt.iter-time=10",
            plain, enc)
        spec = "driver=qcow2,encrypt.key-secret=sec0,file.filename="
        proc = qil("compare", "--object", SECRET, "--image-opts",
                   spec + plain, spec + enc)
        self.assertEqual(proc.stdout, "Images are identical.\n")
        self.assertFails(["info", "--image-opts",
                          f"driver=qcow2,encrypt.format=luks,"
                          f"file.filename={plain}"],
                         "No encryption in image header, but options "
                         "specified format 'luks'")


if __name__ == "__main__":
    main()
