# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite measure: qemu-img's numbers and output forms."""
import json

from qiltest import (ITER_TIME, QEMU_IMG, SECRET, TestCase, main, qemu_img,
                     qil)



class Measure(TestCase):
    def test_raw(self):
        proc = qil("measure", "-O", "raw", "--size", "1G")
        self.assertEqual(proc.stdout, "required size: 1073741824\n"
                         "fully allocated size: 1073741824\n")
        out = json.loads(qil("measure", "-O", "raw", "--size", "1000",
                             "--output=json").stdout)
        self.assertEqual(out, {"required": 1024, "fully-allocated": 1024})

    def test_from_image(self):
        path = self.path("a.raw")
        qil("create", "-q", path, "3M")
        self.assertEqual(json.loads(qil("measure", "--output=json", "-O",
                                        "raw", path).stdout)["required"],
                         3 << 20)

    def test_arguments(self):
        self.assertFails(["measure", "-O", "raw"], "Either --size N or one "
                         "filename")
        path = self.path("a.raw")
        qil("create", "-q", path, "3M")
        self.assertFails(["measure", "-O", "raw", "--size", "1M", path],
                         "--size N cannot be used together with a filename.")

    def test_argument_errors_as_qemu_img(self):
        """qemu-img's messages, in its order (qemu-iotests 178)."""
        img = self.path("a.raw")
        qil("create", "-q", "-f", "raw", img, "1M")
        cases = [
            ([], "Either --size N or one filename must be specified."),
            (["--size", "2G", img],
             "--size N cannot be used together with a filename."),
            ([img, "a"], "At most one filename argument is allowed."),
            (["--image-opts"], "--image-opts, -f, and -l require a filename "
             "argument."),
            (["-f", "qcow2"], "--image-opts, -f, and -l require a filename "
             "argument."),
            (["-l", "snap1"], "--image-opts, -f, and -l require a filename "
             "argument."),
            (["-o", ","], "Invalid option list: ,"),
            (["-l", "snapshot.foo=bar"], "Invalid parameter 'snapshot.foo'\n"
             "qemu-img-lite: Failed in parsing snapshot param "
             "'snapshot.foo=bar'"),
        ]
        for args, msg in cases:
            with self.subTest(args=args):
                proc = self.assertFails(["measure", *args])
                self.assertEqual(proc.stderr, f"qemu-img-lite: {msg}\n")
                if QEMU_IMG:
                    theirs = qemu_img("measure", *args, check=False)
                    self.assertEqual(theirs.stderr, proc.stderr.replace(
                        "qemu-img-lite: ", "qemu-img: "))

    def test_luks_as_qemu_img(self):
        self.need_luks()
        self.need_qemu_img()
        # qemu-img measure makes a whole LUKS header in memory, PBKDF2
        # calibration and all (seconds each): a few cases only.
        for opts, size, output in [
                ("", "1G", "human"),
                (",cipher-alg=aes-128,cipher-mode=cbc,ivgen-alg=essiv", "1G",
                 "json"),
                (",cipher-alg=serpent-192", "1536", "human")]:
            args = ["measure", "--object", SECRET, "-O", "luks", "-o",
                    f"key-secret=sec0,iter-time={ITER_TIME}{opts}", "--size",
                    size, f"--output={output}"]
            with self.subTest(args=args):
                ours, theirs = qil(*args).stdout, qemu_img(*args).stdout
                if output == "json":
                    self.assertEqual(json.loads(ours), json.loads(theirs))
                else:
                    self.assertEqual(ours, theirs)

    def test_luks_needs_no_secret(self):
        self.need_luks()
        out = qil("measure", "-O", "luks", "--size", "1G").stdout
        self.assertIn("required size: 1075810304", out)

    def test_luks_align_payload(self):
        self.need_luks()
        out = qil("measure", "-O", "luks", "-o", "align-payload=2048",
                  "--size", "1G").stdout
        self.assertIn(f"required size: {(1 << 30) + (2 << 20)}", out)


if __name__ == "__main__":
    main()
