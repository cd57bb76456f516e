# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite create: raw and LUKS images, sizes, options, refusals."""
import os
import subprocess
import time

from qiltest import (ITER_TIME, QEMU_IMG, SECRET, TOOL, TestCase, main,
                     qemu_img, qil)


class CreateRaw(TestCase):
    def test_sizes(self):
        for arg, size in [("4k", 4096), ("512M", 512 << 20),
                          ("1G", 1 << 30), ("1.5G", 3 << 29),
                          ("1000", 1024), ("65536", 65536)]:
            path = self.path(f"img-{arg}")
            proc = qil("create", "-f", "raw", path, arg)
            self.assertEqual(proc.stdout,
                             f"Formatting '{path}', fmt=raw size="
                             f"{size if arg != '1000' else 1000}\n")
            # qemu-img rounds raw images up to whole 512-byte sectors.
            self.assertEqual(os.path.getsize(path), size)
            self.assertEqual(self.info_json(path)["virtual-size"], size)

    def test_default_format_is_raw(self):
        path = self.path("a")
        qil("create", "-q", path, "1M")
        self.assertEqual(self.info_json(path)["format"], "raw")

    def test_preallocation(self):
        for mode in ["off", "falloc", "full"]:
            path = self.path(mode)
            qil("create", "-q", "-f", "raw", "-o", f"preallocation={mode}",
                path, "1M")
            allocated = os.stat(path).st_blocks * 512
            if mode == "off":
                self.assertLess(allocated, 1 << 20)
            else:
                self.assertGreaterEqual(allocated, 1 << 20)

    def test_existing_file_is_replaced_when_complete(self):
        """As qemu-img, create over an existing file replaces it; unlike
        qemu-img, only once the new image is complete: a create that fails
        leaves the old file as it was. The file keeps its mode."""
        path = self.path("keep")
        with open(path, "wb") as f:
            f.write(b"precious")
        os.chmod(path, 0o600)
        self.assertFails(["create", "-f", "raw", "-o",
                          "preallocation=bogus", path, "1M"],
                         "preallocation")
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"precious")
        qil("create", "-q", "-f", "raw", path, "1M")
        self.assertEqual(os.path.getsize(path), 1 << 20)
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
        self.assertEqual(os.listdir(self.dir), ["keep"])
        # Through a symlink: the file it names is replaced, the link stays.
        link = self.path("link")
        os.symlink("keep", link)
        qil("create", "-q", "-f", "qcow2", link, "1M")
        self.assertTrue(os.path.islink(link))
        self.assertEqual(self.info_json(path)["format"], "qcow2")
        # Not a regular file: refused.
        os.mkdir(self.path("d"))
        self.assertFails(["create", "-f", "raw", self.path("d"), "1M"])

    def test_existing_image_in_use_is_refused(self):
        """An image another process holds open (its locks) is not replaced,
        as qemu-img refuses: 'Failed to get "write" lock'."""
        path = self.path("busy.raw")
        qil("create", "-q", "-f", "raw", path, "1M")
        hold = self.path("hold")
        env = dict(os.environ, QIL_TEST_HOLD_OPEN=hold)
        holder = subprocess.Popen([TOOL, "info", path], env=env,
                                  stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            for _ in range(500):
                if os.path.exists(hold):
                    break
                time.sleep(0.01)
            # info holds a reader's locks: a writer that shares nothing
            # but resize is refused.
            self.assertFails(["create", "-f", "raw", path, "2M"],
                             'Failed to get "write" lock')
            self.assertEqual(os.path.getsize(path), 1 << 20)
        finally:
            if os.path.exists(hold):
                os.unlink(hold)
            holder.wait(30)

    def test_file_protocol_options(self):
        """QEMU's file protocol creation options are taken with any format
        (libvirt and qemu-iotests pass them): extent_size_hint, nocow."""
        for fmt in ("raw", "qcow2"):
            path = self.path(f"h.{fmt}")
            qil("create", "-q", "-f", fmt, "-o",
                "extent_size_hint=0,nocow=off", path, "1M")
            self.assertEqual(self.info_json(path)["format"], fmt)
        self.assertFails(["create", "-f", "raw", "-o",
                          "extent_size_hint=8G", self.path("big"), "1M"],
                         "Extent size hint is too large")

    def test_overlay_size_from_backing_file(self):
        """No size with -b: the backing file's size, shown in the
        Formatting line as qemu-img shows it."""
        base = self.path("base.raw")
        qil("create", "-q", "-f", "raw", base, "3M")
        ours = qil("create", "-f", "qcow2", "-b", "base.raw", "-F", "raw",
                   self.path("ours.qcow2")).stdout
        self.assertIn(" size=3145728 backing_file=base.raw", ours)
        if QEMU_IMG:
            theirs = qemu_img("create", "-f", "qcow2", "-b", "base.raw",
                              "-F", "raw", self.path("theirs.qcow2")).stdout
            self.assertEqual(ours.replace("ours", "theirs"), theirs)

    def test_bad_arguments(self):
        self.assertFails(["create", "-f", "raw", self.path("x"), "12Q"],
                         "Invalid image size")
        self.assertFails(["create", "-f", "raw", self.path("x")],
                         "needs a size")
        self.assertFails(["create", "-f", "qcow9", self.path("x"), "1M"],
                         "Unknown file format 'qcow9'")
        self.assertFails(["create", "-f", "raw", "-o", "bogus=1",
                          self.path("x"), "1M"], "Invalid parameter 'bogus'")
        self.assertFalse(os.path.exists(self.path("x")))

    def test_help(self):
        self.assertIn("Usage", qil("create", "--help").stdout)
        # The protocol's options (preallocation) with a file name only.
        self.assertIn("preallocation",
                      qil("create", "-f", "raw", "-o", "help",
                          self.path("x")).stdout)


class CreateLuks(TestCase):
    def setUp(self):
        super().setUp()
        self.need_luks()

    def create(self, name, opts="", size="4M"):
        path = self.path(name)
        o = f"key-secret=sec0,iter-time={ITER_TIME}"
        if opts:
            o += "," + opts
        proc = qil("create", "-f", "luks", "--object", SECRET, "-o", o, path,
                   size)
        return path, proc

    def test_formatting_line_as_qemu_img(self):
        path, proc = self.create("a")
        self.assertEqual(proc.stdout,
                         f"Formatting '{path}', fmt=luks size=4194304 "
                         f"key-secret=sec0 iter-time={ITER_TIME}\n")

    def test_defaults(self):
        path, _ = self.create("a")
        info = self.info_json(path)
        self.assertEqual(info["format"], "luks")
        self.assertTrue(info["encrypted"])
        self.assertEqual(info["virtual-size"], 4 << 20)
        data = info["format-specific"]["data"]
        self.assertEqual(data["cipher-alg"], "aes-256")
        self.assertEqual(data["cipher-mode"], "xts")
        self.assertEqual(data["ivgen-alg"], "plain64")
        self.assertEqual(data["hash-alg"], "sha256")
        self.assertEqual([s["active"] for s in data["slots"]],
                         [True] + [False] * 7)

    def test_options(self):
        path, _ = self.create("b", "cipher-alg=aes-128,cipher-mode=cbc,"
                              "ivgen-alg=essiv,ivgen-hash-alg=sha256,"
                              "hash-alg=sha1")
        data = self.info_json(path)["format-specific"]["data"]
        self.assertEqual((data["cipher-alg"], data["cipher-mode"],
                          data["ivgen-alg"], data["ivgen-hash-alg"],
                          data["hash-alg"]),
                         ("aes-128", "cbc", "essiv", "sha256", "sha1"))

    def test_align_payload(self):
        # aes-128-cbc: 8 slots of 16 x 4000 bytes fit below 1 MiB
        path, _ = self.create("c", "align-payload=2048,cipher-alg=aes-128,"
                              "cipher-mode=cbc")
        data = self.info_json(path)["format-specific"]["data"]
        self.assertEqual(data["payload-offset"], 1 << 20)
        self.assertEqual(os.path.getsize(path), (1 << 20) + (4 << 20))
        # aes-256-xts: 64-byte keys need 2 MiB, as cryptsetup lays it out
        path, _ = self.create("d", "align-payload=2048")
        data = self.info_json(path)["format-specific"]["data"]
        self.assertEqual(data["payload-offset"], 2 << 20)

    def test_preallocation(self):
        path, _ = self.create("e", "preallocation=falloc")
        self.assertGreaterEqual(os.stat(path).st_blocks * 512, 4 << 20)

    def test_qemu_layout_matches_qemu_img(self):
        self.need_qemu_img()
        ours, _ = self.create("ours")
        theirs = self.path("theirs")
        qemu_img("create", "-q", "-f", "luks", "--object", SECRET, "-o",
                 f"key-secret=sec0,iter-time={ITER_TIME}", theirs, "4M")
        self.assertEqual(os.path.getsize(ours), os.path.getsize(theirs))
        a = self.info_json(ours)["format-specific"]["data"]
        b = self.info_json(theirs)["format-specific"]["data"]
        self.assertEqual(a["payload-offset"], b["payload-offset"])
        self.assertEqual([s["key-offset"] for s in a["slots"]],
                         [s["key-offset"] for s in b["slots"]])

    def test_detached_header(self):
        hdr = self.path("hdr")
        qil("create", "-q", "-f", "luks", "--object", SECRET, "-o",
            f"key-secret=sec0,iter-time={ITER_TIME},detached-header=true",
            hdr)
        data = self.path("data")
        qil("create", "-q", "-f", "raw", data, "2M")
        opts = (f"driver=luks,key-secret=sec0,file.filename={data},"
                f"header.filename={hdr}")
        info = self.info_json("--object", SECRET, "--image-opts", opts)
        self.assertEqual(info["virtual-size"], 2 << 20)
        self.assertEqual(info["format-specific"]["data"]["payload-offset"],
                         0)

    def test_luks2(self):
        path, _ = self.create("l2", "luks-version=2,sector-size=512,"
                              "kdf=pbkdf2,label=mydisk,cipher-alg=aes-128")
        data = self.info_json(path)["format-specific"]["data"]
        self.assertEqual(data["version"], 2)
        self.assertEqual(data["sector-size"], 512)
        self.assertEqual(data["label"], "mydisk")
        self.assertEqual(data["cipher-alg"], "aes-128")
        self.assertEqual(data["slots"][0]["kdf"], "pbkdf2")
        self.assertEqual(data["segments"][0]["encryption"],
                         "aes-xts-plain64")
        self.assertEqual(self.info_json(path)["virtual-size"], 4 << 20)
        path, _ = self.create("l3", "luks-version=2,kdf=argon2id,"
                              "kdf-memory=32768,kdf-parallel=1")
        slot = self.info_json(path)["format-specific"]["data"]["slots"][0]
        self.assertEqual((slot["kdf"], slot["kdf-parallel"]),
                         ("argon2id", 1))
        self.assertLessEqual(slot["kdf-memory"], 32768)
        self.assertFails(["create", "-f", "luks", "--object", SECRET, "-o",
                          "key-secret=sec0,luks-version=3", self.path("x"),
                          "1M"], "luks-version")
        self.assertFails(["create", "-f", "luks", "--object", SECRET, "-o",
                          "key-secret=sec0,luks-version=2,kdf=scrypt",
                          self.path("x"), "1M"], "kdf")

    def test_refusals(self):
        self.assertFails(["create", "-f", "luks", "-o", "iter-time=10",
                          self.path("x"), "1M"],
                         "Parameter 'key-secret' is required")
        self.assertFails(["create", "-f", "luks", "-o", "key-secret=nope",
                          self.path("x"), "1M"], "No secret with id 'nope'")
        self.assertFails(["create", "-f", "luks", "--object", SECRET, "-o",
                          "key-secret=sec0,cipher-alg=rot13",
                          self.path("x"), "1M"], "rot13")
        self.assertFalse(os.path.exists(self.path("x")))


if __name__ == "__main__":
    main()
