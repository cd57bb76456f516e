# SPDX-License-Identifier: GPL-2.0-or-later
"""info on qcow2 images: everything qemu-img 7.2 prints, human and JSON,
for images qemu-img made with every creation option (and images we made,
once qemu-img-lite creates qcow2). Only the disk size (host-dependent)
is left out of the comparison; interop_qcow2.py compares it too."""
import json
import os
import subprocess

from qiltest import ITER_TIME, SECRET, TestCase, main, qemu_img, qil

QEMU_IO = "qemu-io"


def without_disk_size(text):
    return "\n".join(line for line in text.splitlines()
                     if not line.startswith("disk size: "))


def without_actual_size(obj):
    """JSON info (or a --backing-chain list of them) minus actual-size."""
    if isinstance(obj, list):
        return [without_actual_size(o) for o in obj]
    return {k: v for k, v in obj.items() if k != "actual-size"}


class InfoQcow2(TestCase):
    def setUp(self):
        super().setUp()
        self.need_qemu_img()

    def make(self, name, opts="", size="16M", extra=()):
        path = self.path(name)
        args = ["create", "-q", "-f", "qcow2", *extra]
        if opts:
            args += ["-o", opts]
        qemu_img(*args, path, *([size] if size else []))
        return path

    def assertSameInfo(self, *args):
        for output in ("human", "json"):
            full = ["info", f"--output={output}", *args]
            with self.subTest(args=full):
                ours = qil(*full).stdout
                theirs = qemu_img(*full).stdout
                if output == "json":
                    self.assertEqual(
                        without_actual_size(json.loads(ours)),
                        without_actual_size(json.loads(theirs)))
                else:
                    self.assertEqual(without_disk_size(ours),
                                     without_disk_size(theirs))

    def test_option_matrix(self):
        cases = [
            "compat=0.10",
            "compat=0.10,cluster_size=512",
            "compat=1.1",
            "lazy_refcounts=on",
            "refcount_bits=1",
            "refcount_bits=64,cluster_size=2M",
            "extended_l2=on",
            "extended_l2=on,cluster_size=2M,lazy_refcounts=on",
            "compression_type=zstd",
            "compression_type=zstd,refcount_bits=8,extended_l2=on",
            "preallocation=metadata,cluster_size=4k",
        ]
        for i, opts in enumerate(cases):
            with self.subTest(opts=opts):
                self.assertSameInfo(self.make(f"m{i}.qcow2", opts))

    def test_backing_files(self):
        base = self.path("base.raw")
        qemu_img("create", "-q", "-f", "raw", base, "8M")
        mid = self.make("mid.qcow2", "compat=0.10", size="",
                        extra=["-b", base, "-F", "raw"])
        top = self.make("top.qcow2", "extended_l2=on", size="",
                        extra=["-b", "mid.qcow2", "-F", "qcow2"])
        # A backing file without a recorded format (older qemu-img): the
        # backing format extension becomes one nobody knows.
        nofmt = self.make("nofmt.qcow2", size="",
                          extra=["-b", base, "-F", "raw"])
        with open(nofmt, "r+b") as f:
            header = f.read(4096)
            at = header.index(bytes.fromhex("e2792aca"))
            f.seek(at)
            f.write(bytes.fromhex("0badf00d"))
        self.assertNotIn("backing file format",
                         qemu_img("info", nofmt).stdout)
        for path in (mid, top, nofmt):
            self.assertSameInfo(path)
        self.assertSameInfo("--backing-chain", top)

    def test_data_file(self):
        for i, raw in enumerate(("off", "on")):
            data = self.path(f"d{i}.data")
            img = self.make(f"d{i}.qcow2",
                            f"data_file={data},data_file_raw={raw}")
            self.assertSameInfo(img)

    def test_luks(self):
        self.need_luks()
        for i, opts in enumerate([
                "",
                ",encrypt.cipher-alg=aes-128,encrypt.cipher-mode=cbc,"
                "encrypt.ivgen-alg=essiv,encrypt.ivgen-hash-alg=sha256,"
                "encrypt.hash-alg=sha512,cluster_size=4k",
                ",encrypt.cipher-alg=serpent-256,compat=0.10",
                ",encrypt.cipher-alg=twofish-128,encrypt.hash-alg=sha1,"
                "extended_l2=on"]):
            img = self.make(f"e{i}.qcow2", "encrypt.format=luks,"
                            f"encrypt.key-secret=sec0,encrypt.iter-time="
                            f"{ITER_TIME}{opts}", extra=["--object", SECRET])
            with self.subTest(opts=opts):
                # The header only: no passphrase needed, as qemu-img.
                self.assertSameInfo(img)
        # Key slots added later show as qemu-img shows them.
        qemu_img("amend", "--object", SECRET, "--object",
                 "secret,id=sec1,data=other", "-o",
                 "encrypt.state=active,encrypt.new-secret=sec1,"
                 f"encrypt.iter-time={ITER_TIME},encrypt.keyslot=5",
                 "--image-opts",
                 f"driver=qcow2,encrypt.key-secret=sec0,file.filename={img}")
        self.assertSameInfo(img)

    def set_header_bits(self, path, byte, mask):
        with open(path, "r+b") as f:
            f.seek(byte)
            bits = f.read(1)[0]
            f.seek(byte)
            f.write(bytes([bits | mask]))

    def test_corrupt_and_dirty(self):
        corrupt = self.make("corrupt.qcow2")
        self.set_header_bits(corrupt, 79, 2)       # incompatible bit 1
        dirty = self.make("dirty.qcow2", "lazy_refcounts=on")
        self.set_header_bits(dirty, 79, 1)         # incompatible bit 0
        for path in (corrupt, dirty):
            self.assertSameInfo(path)
        info = json.loads(qil("info", "--output=json", dirty).stdout)
        self.assertIs(info["dirty-flag"], True)

    def test_unknown_features_named(self):
        """Unknown incompatible features are refused with the names the
        image's feature table gives them, in its order, the rest as one
        mask (qemu-iotests 036)."""
        import struct
        path = self.make("feat.qcow2")
        with open(path, "r+b") as f:
            f.seek(72)
            f.write(struct.pack(">Q", (1 << 61) | (1 << 62) | (1 << 63)))
        variants = [
            b"",                                      # no names
            b"\x00\x3fTest feature",                  # short entry
            b"\x00\x3etest2".ljust(48, b"\0") +       # table order
            b"\x00\x3dtest1".ljust(48, b"\0"),
        ]
        with open(path, "rb") as f:
            header = f.read(4096)
        for table in variants:
            with self.subTest(table=table):
                with open(path, "r+b") as f:
                    f.write(header)
                    if table:
                        # Replace the feature table extension with ours.
                        at = header.index(bytes.fromhex("6803f857"))
                        ext = struct.pack(">II", 0x6803f857, len(table)) + \
                            table + bytes(-len(table) % 8) + bytes(8)
                        f.seek(at)
                        f.write(ext)
                ours = qil("info", path, check=False)
                theirs = qemu_img("info", path, check=False)
                self.assertEqual(ours.returncode, 1)
                self.assertIn("Unsupported qcow2 feature(s): ", ours.stderr)
                self.assertEqual(ours.stderr.split("feature(s): ")[1],
                                 theirs.stderr.split("feature(s): ")[1])

    def test_unknown_autoclear_cleared(self):
        """An autoclear bit nobody knows is cleared by a writer, as the
        spec says and QEMU does at every writable open (check -r all
        included: qemu-iotests 036); readers leave it."""
        import struct
        for cmd in (["check", "-r", "all"], ["resize", "32M"]):
            with self.subTest(cmd=cmd):
                path = self.make("ac.qcow2")
                with open(path, "r+b") as f:
                    f.seek(88)
                    f.write(struct.pack(">Q", 1 << 63))
                qil("info", path)
                qil("check", path)
                with open(path, "rb") as f:
                    f.seek(88)
                    self.assertEqual(f.read(8), struct.pack(">Q", 1 << 63))
                qil(cmd[0], path, *cmd[1:])
                with open(path, "rb") as f:
                    f.seek(88)
                    self.assertEqual(f.read(8), bytes(8))
                qemu_img("check", path)

    def test_bitmaps(self):
        img = self.make("bm.qcow2", size="100M")
        qemu_img("bitmap", "--add", img, "first")
        qemu_img("bitmap", "--add", "-g", "512", "--disable", img,
                 "a-much-longer-bitmap-name")
        qemu_img("bitmap", "--add", "-g", "2M", img, "third")
        self.assertSameInfo(img)
        # A bitmap left in use (QEMU was killed while tracking writes).
        inuse = self.make("inuse.qcow2")
        qemu_img("bitmap", "--add", inuse, "b0")
        subprocess.run([QEMU_IO, "-c", "write 0 64k", "-c", "sigraise 9",
                        inuse], capture_output=True)
        self.assertIn("in-use", qemu_img("info", inuse).stdout)
        self.assertSameInfo(inuse)
        top = self.make("top.qcow2", size="", extra=["-b", img, "-F",
                                                     "qcow2"])
        self.assertSameInfo("--backing-chain", top)

    def test_bitmaps_measured(self):
        img = self.make("bm.qcow2", size="100M")
        qemu_img("bitmap", "--add", img, "first")
        qemu_img("bitmap", "--add", "-g", "512", img, "second-bitmap")
        for opts in ("cluster_size=64k", "cluster_size=512",
                     "cluster_size=2M", "compat=0.10"):
            args = ["measure", "-O", "qcow2", "-o", opts, img]
            self.assertEqual(qil(*args).stdout, qemu_img(*args).stdout)

    def test_our_own_images(self):
        """qemu-img's info of an image we made, and ours, agree."""
        probe = qil("create", "-q", "-f", "qcow2", self.path("probe.qcow2"),
                    "1M", check=False)
        if probe.returncode != 0:
            self.skipTest("this build does not create qcow2 images")
        opts_list = ["compat=0.10", "lazy_refcounts=on,refcount_bits=1",
                     "extended_l2=on,compression_type=zstd",
                     "cluster_size=512"]
        if self.have_luks_qcow2():
            opts_list.append(f"encrypt.format=luks,encrypt.key-secret=sec0,"
                             f"encrypt.iter-time={ITER_TIME}")
        for i, opts in enumerate(opts_list):
            path = self.path(f"own{i}.qcow2")
            qil("create", "-q", "--object", SECRET, "-f", "qcow2", "-o", opts,
                path, "16M")
            with self.subTest(opts=opts):
                self.assertSameInfo(path)

    def have_luks_qcow2(self):
        path = self.path("probe-luks.qcow2")
        proc = qil("create", "-q", "--object", SECRET, "-f", "qcow2", "-o",
                   f"encrypt.format=luks,encrypt.key-secret=sec0,"
                   f"encrypt.iter-time={ITER_TIME}", path, "1M", check=False)
        if os.path.exists(path):
            os.unlink(path)
        return proc.returncode == 0


if __name__ == "__main__":
    main()
