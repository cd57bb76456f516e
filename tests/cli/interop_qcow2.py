# SPDX-License-Identifier: GPL-2.0-or-later
"""qcow2 images made by the real qemu-img 7.2 and qemu-io, read by
qemu-img-lite: every feature of the read-only qcow2 driver (block/qcow2*.c)
against qemu-img's own reading of the same image.

For each image our `convert -O raw` must be byte-identical to qemu-img's,
and `info` (human and JSON) must print what qemu-img prints. The features:
versions 2 and 3, cluster sizes 512 B, 64 KiB and 2 MiB, refcount widths 1
and 64, extended L2 entries (subclusters), zlib and zstd compressed
clusters, backing chains three deep opened from another directory, a raw
backing file, backing loops, LUKS inside qcow2 written piecemeal (host and
guest offsets differ, and LUKS IVs follow the host offset), legacy AES,
external data files, dirty images, and a wrong passphrase (an error and no
output file).
"""
import json
import os
import shutil
import subprocess

from qiltest import (ITER_TIME, TOOL, TestCase, file_bytes, main, qemu_img,
                     qil, random_file, run)

QEMU_IO = shutil.which("qemu-io")
PASS = "qcow2 pass"
SECRET = f"secret,id=sec0,data={PASS}"
WRONG_SECRET = "secret,id=sec0,data=not the passphrase"

# Scattered writes (qemu-io commands) for an 8 MiB image: data in an order
# that is not the guest order, partial clusters, zero writes, a discard.
WRITES = [
    "write -P 0x11 5M 64k",
    "write -P 0x22 0 4k",
    "write -P 0x33 2047k 130k",
    "write -z 5M 16k",
    "write -P 0x44 7M 1M",
    "write -P 0x55 1M 512",
    "discard 7M 64k",
    "write -z 3M 1M",
]


def qemu_io(*args, cwd=None):
    return run([QEMU_IO, *args], cwd=cwd)


def io_writes(image_args, writes=WRITES, cwd=None):
    args = []
    for w in writes:
        args += ["-c", w]
    qemu_io(*image_args, *args, cwd=cwd)


def forget_backing_format(path):
    """Turn the backing format extension into an unknown one."""
    with open(path, "r+b") as f:
        head = f.read(4096)
        pos = head.index(b"\xe2\x79\x2a\xca", 104)
        f.seek(pos)
        f.write(b"\x12\x34\x56\x78")


def qcow2_opts(path):
    """--image-opts string of an encrypted qcow2 image, secret sec0."""
    return f"driver=qcow2,encrypt.key-secret=sec0,file.filename={path}"


def ordered(obj):
    """JSON as nested lists of (key, value): key order matters too."""
    if isinstance(obj, dict):
        return [(k, ordered(v)) for k, v in obj.items()]
    if isinstance(obj, list):
        return [ordered(v) for v in obj]
    return obj


class Qcow2Interop(TestCase):
    def setUp(self):
        super().setUp()
        self.need_qemu_img()
        if not QEMU_IO:
            self.skipTest("qemu-io is not installed")

    def make(self, name, opts=None, size="8M", writes=WRITES):
        """A qcow2 image made by qemu-img and written by qemu-io."""
        path = self.path(name)
        args = ["create", "-q", "-f", "qcow2"]
        if opts:
            args += ["-o", opts]
        qemu_img(*args, path, size)
        if writes:
            io_writes(["-f", "qcow2", path], writes)
        return path

    def assert_same_raw(self, *src, cwd=None, objects=()):
        """Our convert -O raw of src equals qemu-img's, byte for byte."""
        ours, theirs = self.path("ours.raw"), self.path("theirs.raw")
        for p in (ours, theirs):
            if os.path.exists(p):
                os.unlink(p)
        obj = []
        for o in objects:
            obj += ["--object", o]
        run([shutil.which("qemu-img"), "convert", *obj, *src, "-O", "raw",
             theirs], cwd=cwd)
        run([TOOL, "convert", *obj, *src, "-O", "raw", ours], cwd=cwd)
        self.assertEqual(file_bytes(ours), file_bytes(theirs),
                         f"convert -O raw of {src} differs from qemu-img's")
        return ours

    def assert_same_info(self, *args, cwd=None):
        """info, human and JSON, as qemu-img prints it."""
        for fmt in ("human", "json"):
            ours = run([TOOL, "info", f"--output={fmt}", *args], cwd=cwd)
            theirs = run([shutil.which("qemu-img"), "info", f"--output={fmt}",
                          *args], cwd=cwd)
            if fmt == "json":
                self.assertEqual(ordered(json.loads(ours.stdout)),
                                 ordered(json.loads(theirs.stdout)))
            else:
                self.assertEqual(ours.stdout, theirs.stdout)

    def check(self, path):
        self.assert_same_raw(path)
        self.assert_same_info(path)

    # ---- layouts

    def test_versions_and_cluster_sizes(self):
        for compat in ("0.10", "1.1"):
            for cs in ("512", "64k", "2M"):
                with self.subTest(compat=compat, cluster_size=cs):
                    self.check(self.make(f"v{compat}-{cs}.qcow2",
                                         f"compat={compat},cluster_size={cs}"))

    def test_refcount_widths(self):
        for bits in (1, 64):
            with self.subTest(refcount_bits=bits):
                img = self.make(f"r{bits}.qcow2", f"refcount_bits={bits}")
                self.check(img)
                info = self.info_json(img)
                self.assertEqual(
                    info["format-specific"]["data"]["refcount-bits"], bits)

    def test_extended_l2(self):
        # 2 KiB subclusters: the 512-byte and 4 KiB writes fill parts.
        for cs in ("64k", "2M"):
            with self.subTest(cluster_size=cs):
                img = self.make(f"x{cs}.qcow2",
                                f"extended_l2=on,cluster_size={cs}")
                self.check(img)
        # Over a backing file: unallocated subclusters read from it.
        base = self.make("xbase.qcow2", writes=["write -P 0x77 0 8M"])
        top = self.path("xtop.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", "-b", base, "-F", "qcow2",
                 "-o", "extended_l2=on", top)
        io_writes(["-f", "qcow2", top])
        self.check(top)

    def test_preallocation_metadata(self):
        img = self.make("pre.qcow2", "preallocation=metadata")
        self.check(img)

    def test_compressed(self):
        raw = self.path("src.raw")
        # Random (incompressible) and patterned (compressible) parts, and
        # a hole.
        random_file(raw, 3 << 20)
        with open(raw, "r+b") as f:
            f.seek(1 << 20)
            f.write(bytes(range(256)) * 4096)
            f.truncate(6 << 20)
        for ctype in ("zlib", "zstd"):
            for cs in ("512", "64k", "2M"):
                with self.subTest(compression=ctype, cluster_size=cs):
                    img = self.path(f"c-{ctype}-{cs}.qcow2")
                    qemu_img("convert", "-c", "-f", "raw", "-O", "qcow2",
                             "-o", f"compression_type={ctype},"
                             f"cluster_size={cs}", raw, img)
                    self.check(img)
                    self.assertEqual(file_bytes(self.assert_same_raw(img)),
                                     file_bytes(raw))

    # ---- backing files

    def test_backing_chain_from_another_directory(self):
        os.mkdir(self.path("d"))
        base = self.path("d/base.raw")
        random_file(base, 8 << 20)
        qemu_img("create", "-q", "-f", "qcow2", "-b", "base.raw", "-F", "raw",
                 self.path("d/l1.qcow2"))
        io_writes(["-f", "qcow2", self.path("d/l1.qcow2")], WRITES[:3])
        qemu_img("create", "-q", "-f", "qcow2", "-b", "l1.qcow2", "-F",
                 "qcow2", self.path("d/l2.qcow2"))
        io_writes(["-f", "qcow2", self.path("d/l2.qcow2")], WRITES[3:6])
        # No backing format recorded: probed, as qemu-img does. (qemu-img
        # 7.2 no longer writes such images: hide the extension's type.)
        qemu_img("create", "-q", "-f", "qcow2", "-b", "l2.qcow2", "-F",
                 "qcow2", self.path("d/l3.qcow2"), "8M")
        forget_backing_format(self.path("d/l3.qcow2"))
        io_writes(["-f", "qcow2", self.path("d/l3.qcow2")], WRITES[6:])
        for cwd in (self.dir, "/"):
            with self.subTest(cwd=cwd):
                top = (os.path.relpath(self.path("d/l3.qcow2"), cwd)
                       if cwd == self.dir else self.path("d/l3.qcow2"))
                self.assert_same_raw(top, cwd=cwd)
                # -U (force-share): a chain in use by a VM, as qemu-img.
                self.assert_same_raw("-U", top, cwd=cwd)
                self.assert_same_info("--backing-chain", top, cwd=cwd)
                self.assert_same_info(top, cwd=cwd)

    def test_backing_shorter_than_image(self):
        base = self.path("short.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", base, "3M")
        io_writes(["-f", "qcow2", base], ["write -P 0x66 0 3M"])
        top = self.path("long.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", "-b", base, "-F", "qcow2",
                 top, "8M")
        io_writes(["-f", "qcow2", top], ["write -P 0x12 2M 64k"])
        self.check(top)

    def test_backing_loop_refused(self):
        a, b = self.path("a.qcow2"), self.path("b.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", a, "1M")
        qemu_img("create", "-q", "-f", "qcow2", "-b", a, "-F", "qcow2", b)
        qemu_img("rebase", "-u", "-b", b, "-F", "qcow2", a)
        out = self.path("out.raw")
        self.assertFails(["convert", "-O", "raw", b, out], "backing file loop")
        self.assertFalse(os.path.exists(out))
        # info --backing-chain in qemu-img's words, which it prints too
        msg = f"Backing file '{b}' creates an infinite loop."
        self.assertFails(["info", "--backing-chain", b], msg)
        self.assertIn(msg, qemu_img("info", "--backing-chain", b,
                                    check=False).stderr)
        # Without the chain, info reads the top image's header only.
        self.assertEqual(self.info_json(b)["backing-filename"], a)

    def test_absurd_chain_depth_refused(self):
        # Every level is an open file and an L1 table: 64 images at most.
        prev = self.path("c0.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", prev, "1M")
        for i in range(1, 70):
            img = self.path(f"c{i}.qcow2")
            qemu_img("create", "-q", "-f", "qcow2", "-b", prev, "-F", "qcow2",
                     img)
            prev = img
        out = self.path("out.raw")
        self.assertFails(["convert", "-O", "raw", prev, out],
                         "chain is too deep")
        self.assertFalse(os.path.exists(out))
        self.assert_same_raw(self.path("c60.qcow2"))

    def test_missing_backing_refused(self):
        top = self.path("orphan.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", "-u", "-b", "gone.qcow2",
                 "-F", "qcow2", top, "1M")
        out = self.path("out.raw")
        self.assertFails(["convert", "-O", "raw", top, out],
                         "Could not open backing file")
        self.assertFalse(os.path.exists(out))
        self.assert_same_info(top)

    # ---- encryption

    def luks_image(self, name, opts=""):
        path = self.path(name)
        o = (f"encrypt.format=luks,encrypt.key-secret=sec0,"
             f"encrypt.iter-time={ITER_TIME}")
        if opts:
            o += "," + opts
        qemu_img("create", "-q", "--object", SECRET, "-f", "qcow2", "-o", o,
                 path, "8M")
        io_writes(["--object", SECRET, "--image-opts", qcow2_opts(path)])
        return path

    def test_luks_piecemeal(self):
        for opts in ("", "encrypt.cipher-mode=cbc,encrypt.ivgen-alg=essiv,"
                     "encrypt.ivgen-hash-alg=sha256,"
                     "encrypt.cipher-alg=aes-128"):
            with self.subTest(opts=opts):
                img = self.luks_image("luks.qcow2", opts)
                iopts = qcow2_opts(img)
                raw = self.assert_same_raw("--image-opts", iopts,
                                           objects=[SECRET])
                self.assert_same_info(img)
                # The main job: into LUKS and LUKS2, read back the same.
                for version in (1, 2):
                    out = self.path(f"out{version}.luks")
                    o = (f"key-secret=sec0,iter-time={ITER_TIME},"
                         f"luks-version={version}")
                    if version == 2:
                        o += ",kdf=pbkdf2"
                    qil("convert", "--object", SECRET, "--image-opts", iopts,
                        "-O", "luks", "-o", o, out)
                    back = self.path("back.raw")
                    qil("convert", "--object", SECRET, "--image-opts",
                        f"driver=luks,key-secret=sec0,file.filename={out}",
                        "-O", "raw", back)
                    self.assertEqual(file_bytes(back), file_bytes(raw))
                    os.unlink(out)
                    os.unlink(back)
                os.unlink(img)

    def test_luks_ivs_follow_host_offsets(self):
        # The same plaintext at two guest offsets lands in two host
        # clusters; with host-offset IVs the ciphertexts differ, and a
        # reader using guest offsets would get the second one wrong.
        img = self.path("iv.qcow2")
        qemu_img("create", "-q", "--object", SECRET, "-f", "qcow2", "-o",
                 f"encrypt.format=luks,encrypt.key-secret=sec0,"
                 f"encrypt.iter-time={ITER_TIME}", img, "4M")
        io_writes(["--object", SECRET, "--image-opts", qcow2_opts(img)],
                  ["write -P 0x5a 3M 64k", "write -P 0x5a 0 64k"])
        raw = self.assert_same_raw("--image-opts", qcow2_opts(img),
                                   objects=[SECRET])
        data = file_bytes(raw)
        self.assertEqual(data[:65536], b"\x5a" * 65536)
        self.assertEqual(data[3 << 20:(3 << 20) + 65536], b"\x5a" * 65536)

    def test_luks_wrong_passphrase(self):
        img = self.luks_image("luks.qcow2")
        out = self.path("out.raw")
        self.assertFails(["convert", "--object", WRONG_SECRET, "--image-opts",
                          qcow2_opts(img), "-O", "raw", out],
                         "Invalid password")
        self.assertFalse(os.path.exists(out))
        self.assertFails(["convert", "-O", "raw", img, out],
                         "encrypt.key-secret")
        self.assertFalse(os.path.exists(out))

    def test_legacy_aes(self):
        img = self.path("aes.qcow2")
        qemu_img("create", "-q", "--object", SECRET, "-f", "qcow2", "-o",
                 "encrypt.format=aes,encrypt.key-secret=sec0", img, "8M")
        iopts = qcow2_opts(img)
        io_writes(["--object", SECRET, "--image-opts", iopts])
        self.assert_same_raw("--image-opts", iopts, objects=[SECRET])
        self.assert_same_info(img)
        proc = qil("convert", "--object", SECRET, "--image-opts", iopts, "-O",
                   "raw", self.path("w.raw"))
        self.assertIn("weak", proc.stderr)
        # A version 2 image too (AES images mostly are).
        img2 = self.path("aes2.qcow2")
        qemu_img("create", "-q", "--object", SECRET, "-f", "qcow2", "-o",
                 "compat=0.10,encryption=on,encrypt.key-secret=sec0", img2,
                 "8M")
        iopts2 = qcow2_opts(img2)
        io_writes(["--object", SECRET, "--image-opts", iopts2])
        self.assert_same_raw("--image-opts", iopts2, objects=[SECRET])
        self.assert_same_info(img2)

    # ---- other header states

    def test_external_data_file(self):
        # qemu-img 7.2 opens the data file name as given, from the cwd.
        run([shutil.which("qemu-img"), "create", "-q", "-f", "qcow2", "-o",
             "data_file=ext.data", "ext.qcow2", "8M"], cwd=self.dir)
        io_writes(["-f", "qcow2", "ext.qcow2"], cwd=self.dir)
        self.assert_same_raw("ext.qcow2", cwd=self.dir)
        self.assert_same_info("ext.qcow2", cwd=self.dir)
        # data-file.filename= names it explicitly, from anywhere.
        self.assert_same_raw(
            "--image-opts",
            f"driver=qcow2,file.filename={self.path('ext.qcow2')},"
            f"data-file.filename={self.path('ext.data')}", cwd="/")

    def test_encrypted_external_data_file(self):
        # LUKS IVs then count in the data file; AES ones in the guest.
        for fmt, extra in (("luks", f",encrypt.iter-time={ITER_TIME}"),
                           ("aes", "")):
            with self.subTest(encrypt=fmt):
                img = self.path(f"{fmt}-ext.qcow2")
                data = self.path(f"{fmt}-ext.data")
                qemu_img("create", "-q", "--object", SECRET, "-f", "qcow2",
                         "-o", f"data_file={data},encrypt.format={fmt},"
                         f"encrypt.key-secret=sec0{extra}", img, "8M")
                io_writes(["--object", SECRET, "--image-opts",
                           qcow2_opts(img)])
                self.assert_same_raw("--image-opts", qcow2_opts(img),
                                     objects=[SECRET])
                self.assert_same_info(img)

    def test_dirty_image(self):
        img = self.make("dirty.qcow2", "lazy_refcounts=on", writes=None)
        # A crash with lazy refcounts leaves the dirty bit set.
        subprocess.run([QEMU_IO, "-f", "qcow2", "-c", "write -P 0x21 0 64k",
                        "-c", "sigraise 9", img], capture_output=True)
        info = self.info_json(img)
        self.assertTrue(info["dirty-flag"])
        self.check(img)

    def test_corrupt_bit(self):
        # An image QEMU marked corrupt is still read (read-only), as
        # qemu-img reads it, and info says so.
        img = self.make("corrupt.qcow2")
        with open(img, "r+b") as f:
            f.seek(79)
            bits = f.read(1)[0]
            f.seek(79)
            f.write(bytes([bits | 2]))
        self.assertTrue(
            self.info_json(img)["format-specific"]["data"]["corrupt"])
        self.check(img)

    def test_compare_and_measure(self):
        img = self.make("cmp.qcow2")
        raw = self.assert_same_raw(img)
        self.assertEqual(qil("compare", img, raw).returncode, 0)
        with open(raw, "r+b") as f:
            f.seek(7 << 20)
            f.write(b"\x01")
        ours = qil("compare", img, raw, check=False)
        theirs = qemu_img("compare", img, raw, check=False)
        self.assertEqual(ours.returncode, 1)
        self.assertEqual(ours.stdout, theirs.stdout)
        for fmt in ("raw",):
            self.assertEqual(qil("measure", "-O", fmt, img).stdout,
                             qemu_img("measure", "-O", fmt, img).stdout)

    def test_sparse_convert(self):
        # 64 GiB with 64 KiB of data: holes are stepped over, not read.
        img = self.make("sparse.qcow2", size="64G",
                        writes=["write -P 0x99 40G 64k"])
        out = self.path("sparse.raw")
        qil("convert", "-O", "raw", img, out)
        self.assertEqual(os.path.getsize(out), 64 << 30)
        self.assertLess(os.stat(out).st_blocks * 512, 16 << 20)
        with open(out, "rb") as f:
            f.seek(40 << 30)
            self.assertEqual(f.read(65536), b"\x99" * 65536)


if __name__ == "__main__":
    main()
