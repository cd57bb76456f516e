# SPDX-License-Identifier: GPL-2.0-or-later
"""File name forms (docs/qemu-img-lite.md, "File names"; issue 15 item 11):

- "json:{...}" file names, nested "file" objects, in every command that
  opens an image; -f wins over their "driver"; create refuses them as
  qemu-img does ("Unknown protocol 'json'");
- the "file:" protocol prefix; other prefixes are unknown protocols;
- the raw driver's offset and size options (a partition inside a disk
  image), with qemu-img's bounds and alignment errors.

Where qemu-img is installed, the same forms run in it: same exit status,
and the same message after qemu-img's "Could not open 'NAME': ".
"""
import json
import os

from qiltest import (ITER_TIME, PASSPHRASE, QEMU_IMG, SECRET, TestCase,
                     file_bytes, main, qemu_img, qil, random_file, run)


def js(obj):
    return "json:" + json.dumps(obj)


def raw_json(path, **extra):
    return js({"driver": "raw", **extra,
               "file": {"driver": "file", "filename": path}})


def luks_json(path):
    return js({"driver": "luks", "file": {"driver": "file",
                                          "filename": path},
               "key-secret": "sec0"})


class FilenameCase(TestCase):
    def setUp(self):
        super().setUp()
        self.raw = self.path("disk.raw")
        random_file(self.raw, 1 << 20)

    def assertSameOpenError(self, cmd, name, message, *extra):
        """Both tools refuse to open name with message (exit 1)."""
        mine = qil(cmd, *extra, name, check=False)
        self.assertEqual(mine.returncode, 1, mine.stderr)
        self.assertEqual(mine.stderr, f"qemu-img-lite: Could not open "
                         f"'{name}': {message}\n")
        if QEMU_IMG:
            theirs = run([QEMU_IMG, cmd, *extra, name], check=False)
            self.assertEqual(theirs.returncode, 1, theirs.stderr)
            self.assertIn(message, theirs.stderr)


class TestJsonFilenames(FilenameCase):
    def test_info(self):
        for name in [raw_json(self.raw),
                     js({"file": {"filename": self.raw}}),
                     js({"driver": "raw", "file": {"filename": self.raw}})]:
            with self.subTest(name=name):
                info = self.info_json(name)
                self.assertEqual(info["format"], "raw")
                self.assertEqual(info["virtual-size"], 1 << 20)

    def test_luks_every_command(self):
        self.need_luks()
        luks, raw = self.make_luks("a.luks", "1M")
        name = luks_json(luks)
        obj = ["--object", SECRET]
        info = self.info_json(*obj, name)
        self.assertEqual(info["format"], "luks")
        # convert: a json source, and a json target with -n
        out = self.path("out.raw")
        qil("convert", *obj, "-O", "raw", name, out)
        self.assertEqual(file_bytes(out), file_bytes(raw))
        target, _ = self.make_luks("t.luks", "1M", seed=7)
        qil("convert", *obj, "-n", "-f", "raw", raw, luks_json(target))
        self.assertEqual(qil("compare", *obj, name, luks_json(target),
                             check=False).returncode, 0)
        # compare against the raw source, json on both sides
        proc = qil("compare", *obj, name, raw_json(raw))
        self.assertIn("Images are identical.", proc.stdout)
        # measure from an image
        proc = qil("measure", *obj, "-O", "raw", name)
        self.assertIn("required size: 1048576", proc.stdout)
        # amend: key-secret in the json unlocks the image to add a slot
        qil("amend", *obj, "--object", "secret,id=sec1,data=other", "-o",
            f"state=active,new-secret=sec1,iter-time={ITER_TIME}", name)
        info = self.info_json(luks)
        slots = info["format-specific"]["data"]["slots"]
        self.assertEqual(sum(s["active"] for s in slots), 2)
        if QEMU_IMG:
            proc = qemu_img("compare", "--object", "secret,id=sec0,"
                            "data=other", name, raw_json(raw))
            self.assertIn("Images are identical.", proc.stdout)

    def test_resize(self):
        qil("resize", "-f", "raw", raw_json(self.raw), "2M")
        self.assertEqual(os.path.getsize(self.raw), 2 << 20)

    def test_format_wins_over_driver(self):
        self.need_luks()
        luks, _ = self.make_luks("b.luks", "1M")
        self.assertSameOpenError("info", luks_json(luks), "Block format "
                                 "'raw' does not support the option "
                                 "'key-secret'", "-f", "raw")

    def test_errors(self):
        for name, msg in [
                ('json:{"driver":"raw"', "Could not parse the JSON options"),
                ("json:[1]", "Invalid JSON object given"),
                (js({"file": self.raw}),
                 f"Cannot find device='{self.raw}' nor "
                 f"node-name='{self.raw}'"),
                (raw_json(self.raw, bogus=1), "Block format 'raw' does not "
                 "support the option 'bogus'"),
                (js({"driver": "raw", "file": {
                    "driver": "file", "filename": "file:" + self.raw}}),
                 f"Could not open 'file:{self.raw}': No such file or "
                 "directory")]:
            with self.subTest(name=name):
                proc = qil("info", name, check=False)
                self.assertEqual(proc.returncode, 1)
                self.assertIn(msg, proc.stderr)
                if QEMU_IMG:
                    theirs = run([QEMU_IMG, "info", name], check=False)
                    self.assertEqual(theirs.returncode, 1)
                    self.assertIn(msg, theirs.stderr)

    def test_create_refuses_json(self):
        name = js({"driver": "file", "filename": self.path("new.img")})
        proc = qil("create", "-f", "raw", name, "1M", check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertEqual(proc.stdout, "")
        self.assertEqual(proc.stderr, f"qemu-img-lite: {name}: Unknown "
                         "protocol 'json'\n")
        self.assertFalse(os.path.exists(self.path("new.img")))
        if QEMU_IMG:
            theirs = run([QEMU_IMG, "create", "-f", "raw", name, "1M"],
                         check=False)
            self.assertEqual(theirs.stderr, proc.stderr.replace(
                "qemu-img-lite", "qemu-img"))
        # convert makes a new target the same way: refused too.
        proc = qil("convert", "-f", "raw", "-O", "raw", self.raw, name,
                   check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("Unknown protocol 'json'", proc.stderr)
        self.assertFalse(os.path.exists(self.path("new.img")))

    def test_null_and_types(self):
        # null leaves an option out; integers are numbers.
        info = self.info_json(raw_json(self.raw, size=None))
        self.assertEqual(info["virtual-size"], 1 << 20)
        info = self.info_json(raw_json(self.raw, offset=512, size=1024))
        self.assertEqual(info["virtual-size"], 1024)


class TestFileProtocol(FilenameCase):
    def test_file_prefix(self):
        info = self.info_json("file:" + self.raw)
        self.assertEqual(info["virtual-size"], 1 << 20)
        new = self.path("p.raw")
        proc = qil("create", "-f", "raw", "file:" + new, "1M")
        self.assertEqual(proc.stdout, f"Formatting 'file:{new}', fmt=raw "
                         "size=1048576\n")
        self.assertEqual(os.path.getsize(new), 1 << 20)
        out = self.path("c.raw")
        qil("convert", "-f", "raw", "file:" + self.raw, "file:" + out)
        self.assertEqual(file_bytes(out), file_bytes(self.raw))
        proc = qil("compare", "file:" + self.raw, "file:" + out)
        self.assertIn("identical", proc.stdout)

    def test_unknown_protocol(self):
        odd = os.path.join(self.dir, "a:b.img")
        random_file(odd, 4096)
        cwd = os.getcwd()
        os.chdir(self.dir)
        try:
            self.assertSameOpenError("info", "a:b.img",
                                     "Unknown protocol 'a'")
            # A path with a slash before the colon is a plain file name.
            self.assertEqual(self.info_json("./a:b.img")["virtual-size"],
                             4096)
            self.assertEqual(self.info_json("file:a:b.img")["virtual-size"],
                             4096)
            proc = qil("create", "-f", "raw", "x:y.img", "1M", check=False)
            self.assertEqual(proc.stderr, "qemu-img-lite: x:y.img: Unknown "
                             "protocol 'x'\n")
            self.assertFalse(os.path.exists("x:y.img"))
            # "file:a:b" creates the file a:b (qemu-iotests 126), named
            # "./a:b" as QEMU names it: a backing file beside it has an
            # actual path of "./base".
            qil("create", "-f", "qcow2", "base.qcow2", "1M")
            qil("create", "-f", "qcow2", "file:image:base.qcow2", "1M")
            self.assertTrue(os.path.exists("image:base.qcow2"))
            qil("create", "-f", "qcow2", "-b", "base.qcow2", "-F", "qcow2",
                "file:image:top.qcow2")
            qil("convert", "-O", "raw", "file:image:top.qcow2", "file:x:y")
            self.assertEqual(os.path.getsize("x:y"), 1 << 20)
            info = qil("info", "file:image:top.qcow2").stdout
            self.assertIn("image: ./image:top.qcow2\n", info)
            self.assertIn("backing file: base.qcow2 (actual path: "
                          "./base.qcow2)\n", info)
            if QEMU_IMG:
                self.assertEqual(info, qemu_img(
                    "info", "file:image:top.qcow2").stdout)
        finally:
            os.chdir(cwd)


class TestRawOffsetSize(FilenameCase):
    """A partition inside a disk image: offset and size of the raw driver."""

    def part(self, offset=None, size=None, path=None):
        o = "driver=raw"
        if offset is not None:
            o += f",offset={offset}"
        if size is not None:
            o += f",size={size}"
        return o + f",file.filename={path or self.raw}"

    def test_read_window(self):
        data = file_bytes(self.raw)
        for offset, size in [(512, 1024), (65536, None), (100, 4096),
                             ("1k", "0x1000"), (0, 0)]:
            with self.subTest(offset=offset, size=size):
                out = self.path(f"w{offset}-{size}")
                qil("convert", "--image-opts", self.part(offset, size), out)
                off = {"1k": 1024}.get(offset, offset)
                n = {"0x1000": 4096, None: len(data) - off}.get(size, size)
                got = file_bytes(out)
                self.assertEqual(got[:n], data[off:off + n])
                if QEMU_IMG:
                    q = self.path(f"q{offset}-{size}")
                    qemu_img("convert", "--image-opts",
                             self.part(offset, size), q)
                    self.assertEqual(got, file_bytes(q))

    def test_write_into_partition(self):
        part = self.path("part.raw")
        random_file(part, 65536, seed=9)
        before = file_bytes(self.raw)
        qil("convert", "-n", "-f", "raw", part, "--target-image-opts",
            self.part(131072, 65536))
        after = file_bytes(self.raw)
        self.assertEqual(after[131072:196608], file_bytes(part))
        self.assertEqual(after[:131072], before[:131072])
        self.assertEqual(after[196608:], before[196608:])

    def test_luks_in_a_partition(self):
        self.need_luks()
        luks, raw = self.make_luks("p.luks", "1M")
        disk = self.path("disk.img")
        with open(disk, "wb") as f:
            f.write(os.urandom(1 << 20))
            f.write(file_bytes(luks))
            f.write(os.urandom(1 << 20))
        opts = (f"driver=luks,key-secret=sec0,file.driver=raw,"
                f"file.offset=1M,file.size={os.path.getsize(luks)},"
                f"file.file.filename={disk}")
        proc = qil("compare", "--object", SECRET, "--image-opts", opts,
                   f"driver=raw,file.filename={raw}")
        self.assertIn("Images are identical.", proc.stdout)
        if QEMU_IMG:
            proc = qemu_img("compare", "--object", SECRET, "--image-opts",
                            opts, f"driver=raw,file.filename={raw}")
            self.assertIn("Images are identical.", proc.stdout)

    def test_bounds_errors(self):
        for offset, size, msg in [
                (None, 1000, "Specified size is not multiple of 512"),
                ("2M", None, "Offset (2097152) cannot be greater than size "
                 "of the containing file (1048576)"),
                (512, "2M", "The sum of offset (512) and size (2097152) has "
                 "to be smaller or equal to the  actual size of the "
                 "containing file (1048576)")]:
            with self.subTest(msg=msg):
                name = self.part(offset, size)
                proc = qil("info", "--image-opts", name, check=False)
                self.assertEqual(proc.returncode, 1)
                self.assertEqual(proc.stderr, "qemu-img-lite: Could not "
                                 f"open '{name}': {msg}\n")
                if QEMU_IMG:
                    theirs = run([QEMU_IMG, "info", "--image-opts", name],
                                 check=False)
                    self.assertEqual(theirs.returncode, 1)
                    self.assertEqual(theirs.stderr, f"qemu-img: Could not "
                                     f"open '{name}': {msg}\n")

    def test_bad_values(self):
        for value in ["x", "-1", "1.5x"]:
            with self.subTest(value=value):
                proc = qil("info", "--image-opts", self.part(value),
                           check=False)
                self.assertEqual(proc.returncode, 1)
                self.assertIn("Parameter 'offset'", proc.stderr)

    def test_resize(self):
        qil("resize", "--image-opts", self.part(512), "2M")
        self.assertEqual(os.path.getsize(self.raw), (2 << 20) + 512)
        proc = qil("resize", "--image-opts", self.part(512, 1024), "2M",
                   check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("Cannot resize fixed-size raw disks", proc.stderr)
        if QEMU_IMG:
            theirs = run([QEMU_IMG, "resize", "--image-opts",
                          self.part(512, 1024), "2M"], check=False)
            self.assertEqual(theirs.returncode, 1)
            self.assertIn("Cannot resize fixed-size raw disks",
                          theirs.stderr)

    def test_writes_stay_inside(self):
        # A write past the window's end is refused, not spilled over.
        part = self.path("big.raw")
        random_file(part, 8192)
        proc = qil("convert", "-n", "-f", "raw", part,
                   "--target-image-opts", self.part(512, 4096), check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("smaller than the source", proc.stderr)


if __name__ == "__main__":
    main()
