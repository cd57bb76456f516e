# SPDX-License-Identifier: GPL-2.0-or-later
"""qcow2 images with an external data file (data_file, data_file_raw),
made and written by qemu-img-lite and by the real qemu-img 7.2 / qemu-io,
each tool taking the other's:

- create: the image file byte for byte what qemu-img makes (header
  extension, incompatible feature bit, raw autoclear bit, preallocated
  L2 tables mapping each guest cluster to its own offset), the data file
  as long and as allocated as qemu-img's, an existing one replaced;
- qemu-io writes into our images, reads them back, `qemu-img check`
  finds them clean; our writes (convert -n, convert -O, commit, resize)
  into qemu-img's images and ours put the data in the data file, at the
  guest's offsets, never in the image file;
- data_file_raw: the data file is the guest's disk after every write,
  zeroes included;
- info, map and check say what qemu-img says; amend data_file= and
  data_file_raw=off, rebase, and the refusals, in qemu-img's words.
"""
import json
import os
import shutil

from qiltest import (ITER_TIME, TOOL, TestCase, file_bytes, main, qemu_img,
                     qil, random_file, run)

QEMU_IO = shutil.which("qemu-io")
SECRET = "secret,id=sec0,data=data file pass"


def qemu_io(*args, cwd=None):
    return run([QEMU_IO, *args], cwd=cwd)


class Qcow2DataFileInterop(TestCase):
    def setUp(self):
        super().setUp()
        self.need_qemu_img()
        if not QEMU_IO:
            self.skipTest("qemu-io is not installed")

    def assert_check_clean(self, *image, cwd=None):
        """qemu-img check: no corruption, no leak (exit status 0)."""
        proc = run([shutil.which("qemu-img"), "check", "--output=json",
                    *image], cwd=cwd, check=False)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        return json.loads(proc.stdout)

    def qemu_raw(self, *image):
        out = self.path("qemu-out.raw")
        if os.path.exists(out):
            os.unlink(out)
        run([shutil.which("qemu-img"), "convert", *image, "-O", "raw", out])
        return file_bytes(out)

    def qil_in_dir(self, *args):
        return run([TOOL, *args], cwd=self.dir)

    def both_create(self, opts, size):
        """The same create by both tools, each in a directory of its own
        with the same relative data file name: (ours, qemu-img's) dirs."""
        dirs = []
        for tool in ("ours", "qemu"):
            d = self.path(tool)
            os.makedirs(d, exist_ok=True)
            args = ["create", "-q", "-f", "qcow2", "-o",
                    "data_file=t.data" + opts, "t.qcow2", size]
            if tool == "ours":
                run([TOOL, *args], cwd=d)
            else:
                run([shutil.which("qemu-img"), *args], cwd=d)
            dirs.append(d)
        return dirs

    # ---- create

    def test_create_as_qemu_img(self):
        # 243's sizes among them: 196616 bytes (the file ends at the L1
        # table's last entry) without preallocation, 327680 with.
        cases = [
            ("", "64M"),
            (",preallocation=metadata", "64M"),
            (",preallocation=falloc", "64M"),
            (",preallocation=full", "8M"),
            (",data_file_raw=on", "1000k"),
            (",data_file_raw=on,preallocation=full", "1000k"),
            (",data_file_raw=off,lazy_refcounts=on", "3M"),
            (",preallocation=metadata", "1000k"),
            (",refcount_bits=1,cluster_size=2M,preallocation=metadata",
             "5M"),
        ]
        for opts, size in cases:
            with self.subTest(opts=opts, size=size):
                ours, theirs = self.both_create(opts, size)
                for name in ("t.qcow2", "t.data"):
                    self.assertEqual(
                        os.path.getsize(os.path.join(ours, name)),
                        os.path.getsize(os.path.join(theirs, name)), name)
                self.assertEqual(file_bytes(os.path.join(ours, "t.qcow2")),
                                 file_bytes(os.path.join(theirs, "t.qcow2")))
                self.assert_check_clean("t.qcow2", cwd=ours)
                if opts == "" or opts == ",preallocation=metadata":
                    self.assertEqual(
                        os.path.getsize(os.path.join(ours, "t.qcow2")),
                        196616 if size == "64M" and not opts else
                        327680 if size == "64M" else
                        os.path.getsize(os.path.join(theirs, "t.qcow2")))
                # falloc and full allocate the data file, nothing else does.
                du = os.stat(os.path.join(ours, "t.data")).st_blocks * 512
                full = any(m in opts for m in ("=falloc", "=full"))
                self.assertEqual(du >= os.path.getsize(
                    os.path.join(ours, "t.data")), full, du)

    def test_create_header(self):
        img, data = self.path("h.qcow2"), self.path("h.data")
        qil("create", "-q", "-f", "qcow2", "-o",
            f"data_file={data},data_file_raw=on", img, "1M")
        head = file_bytes(img)[:4096]
        # Spec: incompatible bit 2, autoclear bit 1, extension 0x44415441
        # holding the name (padded to 8), before the feature name table.
        self.assertEqual(int.from_bytes(head[72:80], "big"), 1 << 2)
        self.assertEqual(int.from_bytes(head[88:96], "big"), 1 << 1)
        at = int.from_bytes(head[100:104], "big")
        self.assertEqual(head[at:at + 4], bytes.fromhex("44415441"))
        n = int.from_bytes(head[at + 4:at + 8], "big")
        self.assertEqual(head[at + 8:at + 8 + n], data.encode())
        nxt = at + 8 + (n + 7) // 8 * 8
        self.assertEqual(head[nxt:nxt + 4], bytes.fromhex("6803f857"))
        info = json.loads(qemu_img("info", "--output=json", img).stdout)
        spec = info["format-specific"]["data"]
        self.assertEqual((spec["data-file"], spec["data-file-raw"]),
                         (data, True))

    def test_existing_data_file_is_replaced(self):
        # qemu-img truncates it: the new image reads zeroes.
        img, data = self.path("e.qcow2"), self.path("e.data")
        random_file(data, 3 << 20)
        link = self.path("link.data")
        os.symlink(data, link)
        qil("create", "-q", "-f", "qcow2", "-o", f"data_file={link}", img,
            "2M")
        self.assertTrue(os.path.islink(link))
        self.assertEqual(file_bytes(data), bytes(2 << 20))
        self.assertEqual(self.qemu_raw("-f", "qcow2", img), bytes(2 << 20))

    def test_failed_create_leaves_nothing(self):
        img = self.path("f.qcow2")
        self.assertFails(["create", "-f", "qcow2", "-o",
                          f"data_file={self.path('no/such/dir')}", img,
                          "1M"], "Could not create")
        self.assertFalse(os.path.exists(img))

    # ---- qemu-io and qemu-img on our images

    def test_qemu_io_writes_our_images(self):
        writes = [("0x11", 0, 4096), ("0x22", 65536 + 512, 200000),
                  ("0x33", (3 << 20) - 1000, 3000)]
        for opts in ("", ",data_file_raw=on", ",extended_l2=on",
                     ",cluster_size=4k,preallocation=metadata"):
            with self.subTest(opts=opts):
                img, data = self.path("q.qcow2"), self.path("q.data")
                qil("create", "-q", "-f", "qcow2", "-o",
                    f"data_file={data}{opts}", img, "4M")
                expect = bytearray(4 << 20)
                cmds = []
                for pat, off, n in writes:
                    cmds += ["-c", f"write -P {pat} {off} {n}"]
                    expect[off:off + n] = bytes([int(pat, 16)]) * n
                cmds += ["-c", "write -z 300000 5000"]
                expect[300000:305000] = bytes(5000)
                qemu_io("-f", "qcow2", *cmds, img)
                for pat, off, n in writes:
                    qemu_io("-f", "qcow2", "-c",
                            f"read -P {pat} {off} {n}", img)
                self.assert_check_clean(img)
                self.assertEqual(self.qemu_raw("-f", "qcow2", img), expect)
                # Our reading agrees, and the data is in the data file, at
                # the guest's offsets.
                out = self.path("ours.raw")
                qil("convert", "-O", "raw", img, out)
                self.assertEqual(file_bytes(out), expect)
                raw = file_bytes(data)
                for pat, off, n in writes:
                    self.assertEqual(raw[off:off + n],
                                     bytes([int(pat, 16)]) * n)
                if "raw=on" in opts:
                    self.assertEqual(raw, expect)
                self.assertLess(os.path.getsize(img), 1 << 20)
                os.unlink(img)

    def test_info_map_check_as_qemu_img(self):
        img = self.path("m.qcow2")
        self.qil_in_dir("create", "-q", "-f", "qcow2", "-o",
                        "data_file=m.data", "m.qcow2", "64M")
        # 244's layout: data, discarded, zeroed over discarded, zeroed
        # over data, zeroed over nothing.
        qemu_io("-f", "qcow2", "-c", "write -P 0x11 1M 4M",
                "-c", "discard 2M 2M", "-c", "write -z 3M 3M", img,
                cwd=self.dir)
        for cmd in (["map", "--output=json"], ["map"],
                    ["check", "--output=json"], ["info", "--output=json"]):
            with self.subTest(cmd=cmd):
                ours = self.qil_in_dir(*cmd, "m.qcow2")
                theirs = run([shutil.which("qemu-img"), *cmd, "m.qcow2"],
                             cwd=self.dir, check=False)
                strip = ("actual-size",)
                a = [l for l in ours.stdout.splitlines()
                     if not any(s in l for s in strip)]
                b = [l for l in theirs.stdout.splitlines()
                     if not any(s in l for s in strip)]
                self.assertEqual(a, b)

    # ---- our writes into images with a data file

    def test_convert_n_into_qemu_image(self):
        src = self.path("src.raw")
        random_file(src, 3 << 20)
        with open(src, "r+b") as f:
            f.seek(1 << 20)
            f.write(bytes(300000))
        expect = file_bytes(src)
        for opts in ("", ",data_file_raw=on", ",extended_l2=on"):
            with self.subTest(opts=opts):
                img, data = self.path("n.qcow2"), self.path("n.data")
                qemu_img("create", "-q", "-f", "qcow2", "-o",
                         f"data_file={data}{opts}", img, "3M")
                qil("convert", "-n", "-f", "raw", "-O", "qcow2", src, img)
                self.assert_check_clean(img)
                self.assertEqual(self.qemu_raw("-f", "qcow2", img), expect)
                self.assertEqual(file_bytes(data)[:3 << 20], expect)
                self.assertLess(os.path.getsize(img), 1 << 20)

    def test_convert_to_data_file(self):
        src = self.path("src.raw")
        random_file(src, (2 << 20) + 4096)
        for opts in ("", ",data_file_raw=on", ",cluster_size=512"):
            with self.subTest(opts=opts):
                img, data = self.path("c.qcow2"), self.path("c.data")
                qil("convert", "-f", "raw", "-O", "qcow2", "-o",
                    f"data_file={data}{opts}", src, img)
                self.assert_check_clean(img)
                self.assertEqual(self.qemu_raw("-f", "qcow2", img),
                                 file_bytes(src))
                self.assertEqual(file_bytes(data)[:(2 << 20) + 4096],
                                 file_bytes(src))
                os.unlink(img)

    def test_luks_with_data_file(self):
        src, img = self.path("src.raw"), self.path("l.qcow2")
        data = self.path("l.data")
        random_file(src, 1 << 20)
        qil("convert", "--object", SECRET, "-f", "raw", "-O", "qcow2",
            "-o", f"data_file={data},encrypt.format=luks,"
            f"encrypt.key-secret=sec0,encrypt.iter-time={ITER_TIME}",
            src, img)
        opts = ["--object", SECRET, "--image-opts",
                f"driver=qcow2,encrypt.key-secret=sec0,file.filename={img}"]
        self.assert_check_clean(*opts)
        self.assertEqual(self.qemu_raw(*opts), file_bytes(src))
        # Encrypted in the data file (IVs from its offsets, as QEMU's).
        self.assertNotEqual(file_bytes(data)[:4096], file_bytes(src)[:4096])

    def test_commit_into_raw_data_file(self):
        # Zero writes too reach the data file: it stays the whole disk.
        src, base = self.path("src.raw"), self.path("b.qcow2")
        data, top = self.path("b.data"), self.path("t.qcow2")
        random_file(src, 2 << 20)
        qil("convert", "-f", "raw", "-O", "qcow2", "-o",
            f"data_file={data},data_file_raw=on", src, base)
        qemu_img("create", "-q", "-f", "qcow2", "-b", base, "-F", "qcow2",
                 top)
        qemu_io("-f", "qcow2", "-c", "write -z 0 256k",
                "-c", "write -P 0x45 1000k 200k", "-c", "write -z 1500k 64k",
                top)
        expect = self.qemu_raw("-f", "qcow2", top)
        qil("commit", top)
        self.assert_check_clean(base)
        self.assertEqual(file_bytes(data), expect)
        # Grown: the new clusters mapped to their place in the data file.
        qil("resize", base, "3M")
        self.assert_check_clean(base)
        self.assertEqual(os.path.getsize(data), 3 << 20)
        self.assertEqual(self.qemu_raw("-f", "qcow2", base),
                         expect + bytes(1 << 20))
        m = json.loads(qemu_img("map", "--output=json", base).stdout)
        self.assertEqual([(e["start"], e["length"], e["offset"])
                          for e in m], [(0, 3 << 20, 0)])

    def test_overlay_with_data_file(self):
        # Partial writes into an overlay: copy-on-write from the backing
        # file lands in the data file.
        base, img = self.path("base.raw"), self.path("o.qcow2")
        random_file(base, 2 << 20, seed=3)
        for opts in ("", ",extended_l2=on"):
            with self.subTest(opts=opts):
                qil("create", "-q", "-f", "qcow2", "-b", base, "-F", "raw",
                    "-o", f"data_file={self.path('o.data')}{opts}", img)
                top = self.path("top.qcow2")
                qemu_img("create", "-q", "-f", "qcow2", "-b", img, "-F",
                         "qcow2", top)
                qemu_io("-f", "qcow2", "-c", "write -P 0x44 100k 3k",
                        "-c", "write -P 0x46 0 1k", top)
                expect = self.qemu_raw("-f", "qcow2", top)
                qil("commit", top)
                self.assert_check_clean(img)
                self.assertEqual(self.qemu_raw("-f", "qcow2", img), expect)
                os.unlink(top)

    def test_amend_and_rebase(self):
        img, data = self.path("a.qcow2"), self.path("a.data")
        qil("create", "-q", "-f", "qcow2", "-o",
            f"data_file={data},data_file_raw=on", img, "1M")
        qemu_io("-f", "qcow2", "-c", "write -P 0x61 0 64k", img)
        qil("amend", "-o", "data_file_raw=off,lazy_refcounts=on", img)
        spec = json.loads(qemu_img("info", "--output=json", img).stdout)[
            "format-specific"]["data"]
        self.assertEqual((spec["data-file"], spec["data-file-raw"],
                          spec["lazy-refcounts"]), (data, False, True))
        # rebase keeps the data file's name (once not raw).
        base = self.path("base.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", base, "1M")
        qil("rebase", "-u", "-b", base, "-F", "qcow2", img)
        info = json.loads(qemu_img("info", "--output=json", img).stdout)
        self.assertEqual(info["format-specific"]["data"]["data-file"], data)
        self.assertEqual(info["backing-filename"], base)
        qemu_io("-f", "qcow2", "-c", "read -P 0x61 0 64k", img)
        # An empty name: the image then needs data-file= at each open.
        qil("amend", "-o", "data_file=", img)
        proc = run([QEMU_IO, "-f", "qcow2", "-c", "read 0 512", img],
                   check=False)
        self.assertIn("'data-file' is required for this image", proc.stderr)
        iopts = (f"driver=qcow2,file.filename={img},"
                 f"data-file.filename={data}")
        qil("amend", "-o", f"data_file={data}", "--image-opts", iopts)
        qemu_io("-f", "qcow2", "-c", "read -P 0x61 0 64k", img)
        self.assert_check_clean(img)

    def test_refusals(self):
        img = self.path("r.qcow2")
        cases = [
            ("data_file_raw=on", "data-file-raw requires data-file"),
            (f"data_file={self.path('d')},compat=0.10",
             "External data files are only supported with compatibility "
             "level 1.1 and above (use version=v3 or greater)"),
        ]
        for opts, msg in cases:
            with self.subTest(opts=opts):
                self.assertFails(["create", "-f", "qcow2", "-o", opts, img,
                                  "1M"], msg)
                self.assertFalse(os.path.exists(img))
        base = self.path("b.raw")
        open(base, "wb").close()
        self.assertFails(["create", "-f", "qcow2", "-b", base, "-F", "raw",
                          "-o", f"data_file={self.path('d')},"
                          "data_file_raw=on", img, "1M"],
                         "Backing file and data-file-raw cannot be used at "
                         "the same time")
        data = self.path("d.data")
        qil("create", "-q", "-f", "qcow2", "-o",
            f"data_file={data},data_file_raw=on", img, "1M")
        qemu_img("create", "-q", "-f", "qcow2", self.path("b.qcow2"), "1M")
        self.assertFails(["rebase", "-u", "-b", self.path("b.qcow2"), "-F",
                          "qcow2", img], "Invalid argument")
        self.assertFails(["snapshot", "-c", "s", img],
                         "-95 (Operation not supported)")
        self.assertFails(["amend", "-o", "compat=0.10,data_file_raw=off",
                          img],
                         "Cannot downgrade an image with a data file")
        qil("amend", "-o", "data_file_raw=off", img)
        self.assertFails(["amend", "-o", "data_file_raw=on", img],
                         "data-file-raw cannot be set on existing images")
        src = self.path("s.raw")
        random_file(src, 1 << 20)
        self.assertFails(["convert", "-c", "-f", "raw", "-O", "qcow2", "-o",
                          f"data_file={self.path('c.data')}", src,
                          self.path("c.qcow2")], "Operation not supported")
        # Names are files: an image never makes the tool connect anywhere.
        self.assertFails(["create", "-f", "qcow2", "-o",
                          "data_file=nbd://127.0.0.1:9/x", img + "2", "1M"],
                         "names another protocol")
        qil("amend", "-o", "data_file=nbd://127.0.0.1:9/x", img)
        self.assertFails(["convert", "-O", "raw", img, self.path("o.raw")],
                         "Cannot use protocol driver 'file'")
        plain = self.path("p.qcow2")
        qil("create", "-q", "-f", "qcow2", plain, "1M")
        self.assertFails(["amend", "-o", "data_file=x", plain],
                         "data-file can only be set for images that use an "
                         "external data file")

    def test_glued_option_argument(self):
        # getopt's -oVALUE (qemu-iotests 244: amend -odata_file=).
        img = self.path("g.qcow2")
        qil("create", "-q", "-f", "qcow2",
            f"-odata_file={self.path('g.data')}", img, "1M")
        info = json.loads(qemu_img("info", "--output=json", img).stdout)
        self.assertEqual(info["format-specific"]["data"]["data-file"],
                         self.path("g.data"))


if __name__ == "__main__":
    main()
