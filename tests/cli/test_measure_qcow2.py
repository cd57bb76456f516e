# SPDX-License-Identifier: GPL-2.0-or-later
"""measure -O qcow2: exactly qemu-img 7.2's figures, for --size and for
raw, luks, luks2 and qcow2 sources (sparse ones counted by block status)."""
import json
import os
import subprocess

from qiltest import (ITER_TIME, SECRET, TestCase, luks_opts, main, qemu_img,
                     qil, random_file)

QEMU_IO = "qemu-io"

SIZES = ["0", "1", "511", "513", "65535", "65537", "1000000", "1G",
         "1234567891", "1T"]
CLUSTERS = ["512", "1k", "4k", "64k", "256k", "2M"]


def both(test, *args):
    """Ours and qemu-img's stdout/stderr/status for the same arguments."""
    ours = qil(*args, check=False)
    theirs = qemu_img(*args, check=False)
    test.assertEqual(ours.returncode, theirs.returncode,
                     f"{args}: {ours.stderr} / {theirs.stderr}")
    return ours, theirs


class MeasureQcow2(TestCase):
    def setUp(self):
        super().setUp()
        self.need_qemu_img()

    def assertSame(self, *args, outputs=("human", "json")):
        """Same output as qemu-img (human text, or JSON values)."""
        for output in outputs:
            full = ["measure", "-O", "qcow2", f"--output={output}", *args]
            with self.subTest(args=full):
                ours, theirs = both(self, *full)
                self.assertEqual(ours.returncode, 0, ours.stderr)
                if output == "json":
                    self.assertEqual(json.loads(ours.stdout),
                                     json.loads(theirs.stdout))
                else:
                    self.assertEqual(ours.stdout, theirs.stdout)

    def test_sizes_and_clusters(self):
        for size in SIZES:
            for cs in CLUSTERS:
                args = ["-o", f"cluster_size={cs}", "--size", size]
                if size == "1T" and cs in ("512", "1k"):
                    continue            # too large: test_too_large
                self.assertSame(*args, outputs=("human",))

    def test_refcount_bits(self):
        for bits in (1, 2, 4, 8, 16, 32, 64):
            for cs in ("512", "64k", "2M"):
                self.assertSame("-o", f"refcount_bits={bits},cluster_size="
                                f"{cs}", "--size", "100G",
                                outputs=("human",))

    def test_extended_l2(self):
        for cs in ("16k", "64k", "2M"):
            for size in ("1", "1G", "1T"):
                self.assertSame("-o", f"extended_l2=on,cluster_size={cs}",
                                "--size", size)
        self.assertSame("-o", "extended_l2=on,compat=0.10", "--size", "1G")

    def test_preallocation(self):
        for mode in ("off", "metadata", "falloc", "full"):
            self.assertSame("-o", f"preallocation={mode}", "--size",
                            "1000001")

    def test_ignored_options(self):
        # Accepted by qemu-img's qcow2 and without effect on the figures.
        self.assertSame("-o", "compat=0.10,lazy_refcounts=on,"
                        "compression_type=zstd,backing_fmt=raw,data_file=x,"
                        "data_file_raw=on,encrypt.format=aes,encryption=on,"
                        "size=5M,encrypt.cipher-alg=foo", "--size", "1G")

    def test_errors_as_qemu_img(self):
        for opts in ["cluster_size=1000", "cluster_size=256",
                     "cluster_size=4M", "refcount_bits=3",
                     "refcount_bits=128", "refcount_bits=0",
                     "compat=0.10,refcount_bits=32", "compat=v2",
                     "compat=2", "extended_l2=on,cluster_size=8k",
                     "preallocation=foo", "lazy_refcounts=foo",
                     "foo=bar", "encrypt.foo=1",
                     "encrypt.format=luks,encrypt.cipher-alg=foo",
                     "encrypt.format=luks,encrypt.key-secret=nope"]:
            args = ["measure", "-O", "qcow2", "-o", opts, "--size", "1G"]
            with self.subTest(opts=opts):
                ours, theirs = both(self, *args)
                self.assertEqual(ours.returncode, 1)
                first = theirs.stderr.splitlines()[0]
                self.assertEqual(ours.stderr.splitlines()[0],
                                 first.replace("qemu-img:", "qemu-img-lite:"))

    def test_too_large(self):
        for args in (["--size", "1E"], ["-o", "cluster_size=512", "--size",
                                        "1T"]):
            ours, theirs = both(self, "measure", "-O", "qcow2", *args)
            self.assertEqual(ours.returncode, 1)
            self.assertEqual(ours.stderr.replace("qemu-img-lite:", ""),
                             theirs.stderr.replace("qemu-img:", ""))

    def test_encryption(self):
        self.need_luks()
        # Each qemu-img call creates a LUKS header, PBKDF2 calibration
        # included (seconds on a loaded machine): one case per key size.
        for cipher, cs, size in (("aes-256", "64k", "1G"),
                                 ("aes-128", "512", "1M"),
                                 ("aes-192", "2M", "1"),
                                 ("twofish-128", "4k", "1000001")):
            opts = (f"encrypt.format=luks,encrypt.key-secret=sec0,"
                    f"encrypt.iter-time={ITER_TIME},encrypt.cipher-alg="
                    f"{cipher},cluster_size={cs}")
            args = ["measure", "--object", SECRET, "-O", "qcow2", "-o",
                    opts, "--size", size]
            with self.subTest(args=args):
                ours, theirs = both(self, *args)
                self.assertEqual(ours.stdout, theirs.stdout)
        opts = ("encrypt.format=luks,encrypt.key-secret=sec0,encrypt.iter-time"
                f"={ITER_TIME},encrypt.cipher-mode=cbc,encrypt.ivgen-alg=essiv,"
                "encrypt.cipher-alg=aes-128,encrypt.hash-alg=sha512")
        ours, theirs = both(self, "measure", "--object", SECRET, "-O",
                            "qcow2", "-o", opts, "--output=json", "--size",
                            "3G")
        self.assertEqual(json.loads(ours.stdout), json.loads(theirs.stdout))

    def test_encryption_needs_no_secret(self):
        # As measure -O luks: the layout does not depend on the passphrase
        # (qemu-img asks for one, and runs PBKDF2 for nothing).
        self.need_luks()
        out = qil("measure", "-O", "qcow2", "-o", "encrypt.format=luks",
                  "--size", "1G").stdout
        self.assertEqual(out, "required size: 2490368\n"
                         "fully allocated size: 1076232192\n")

    def qemu_io(self, path, *cmds):
        args = [QEMU_IO]
        for c in cmds:
            args += ["-c", c]
        subprocess.run(args + [path], check=True, capture_output=True)

    def check_source(self, *src):
        for opts in ("cluster_size=64k", "cluster_size=512",
                     "cluster_size=2M", "backing_file=x", "compat=0.10",
                     "extended_l2=on", "preallocation=full"):
            self.assertSame("-o", opts, *src)

    def test_raw_sources(self):
        sparse = self.path("sparse.raw")
        with open(sparse, "wb") as f:
            f.truncate(10 << 20)
        full = self.path("full.raw")
        random_file(full, 3000001)
        mixed = self.path("mixed.raw")
        with open(mixed, "wb") as f:
            f.truncate(20 << 20)
            for offset, n in ((17 * 4096, 4096), (1000 * 4096, 3 * 4096),
                              (5 << 20, 200 << 10)):
                f.seek(offset)
                f.write(os.urandom(n))
        empty = self.path("empty.raw")
        open(empty, "wb").close()
        for path in (sparse, full, mixed, empty):
            with self.subTest(path=path):
                self.check_source("-f", "raw", path)

    def test_qcow2_sources(self):
        q = self.path("q.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", q, "30M")
        self.qemu_io(q, "write -P 1 0 4k", "write -z 1M 1M",
                     "write -P 2 5M 100k", "write -c -P 3 10M 64k")
        x = self.path("x.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", "-o",
                 "extended_l2=on,cluster_size=128k", x, "30M")
        self.qemu_io(x, "write -P 1 4k 4k", "write -P 2 5M 100k",
                     "write -z 8M 64k")
        m = self.path("m.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", "-o",
                 "preallocation=metadata", m, "10M")
        f = self.path("f.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", "-o",
                 "preallocation=full,cluster_size=4k", f, "3M")
        v2 = self.path("v2.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", "-o", "compat=0.10", v2,
                 "10M")
        self.qemu_io(v2, "write -P 7 1M 1M")
        ov = self.path("ov.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", "-b", q, "-F", "qcow2", ov)
        self.qemu_io(ov, "write -P 9 20M 64k", "write -z 5M 64k")
        for path in (q, x, m, f, v2, ov):
            with self.subTest(path=path):
                self.check_source(path)

    def test_encrypted_qcow2_source(self):
        # Encrypted clusters are data wherever they are (a hole in the
        # file decrypts to noise), zero clusters are not.
        self.need_luks()
        img = self.path("e.qcow2")
        qemu_img("create", "-q", "--object", SECRET, "-f", "qcow2", "-o",
                 "encrypt.format=luks,encrypt.key-secret=sec0,"
                 f"encrypt.iter-time={ITER_TIME}", img, "8M")
        opts = f"driver=qcow2,encrypt.key-secret=sec0,file.filename={img}"
        subprocess.run([QEMU_IO, "--object", SECRET, "--image-opts", opts,
                        "-c", "write -P 3 1M 4k", "-c", "write -z 3M 64k"],
                       check=True, capture_output=True)
        for extra in ([], ["-o", "cluster_size=512"]):
            self.assertSame("--object", SECRET, *extra, "--image-opts", opts)

    def test_luks_sources(self):
        self.need_luks()
        luks, raw = self.make_luks("a.luks", size="5M")
        opts = luks_opts(luks)
        for extra in ([], ["-o", "cluster_size=512"]):
            self.assertSame("--object", SECRET, *extra, "--image-opts", opts)
        # qemu-img 7.2 has no LUKS2: it would count all of a LUKS2 image as
        # data, as it does for LUKS1. Its figures for a full raw file of
        # the same size are the reference.
        luks2, raw2 = self.make_luks("b.luks", size="3000001",
                                     opts="luks-version=2")
        for extra in ([], ["-o", "cluster_size=2M,refcount_bits=1"]):
            args = ["measure", "-O", "qcow2", "--output=json", *extra]
            ours = qil(*args, "--object", SECRET, "--image-opts",
                       luks_opts(luks2)).stdout
            theirs = qemu_img(*args, "-f", "raw", raw2).stdout
            self.assertEqual(json.loads(ours), json.loads(theirs))


if __name__ == "__main__":
    main()
