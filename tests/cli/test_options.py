# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img's option forms (docs/qemu-img-lite.md, "Option forms"; issue 15
items 11 and 13): sizes in hex, convert's -S, -m, -r, -C,
--target-is-zero and --salvage, "-o help", and the messages and exit
codes of usage errors.

Where qemu-img is installed, each form runs in both tools: same exit code,
and for usage errors the same message (after the program name).
"""
import json
import os
import shutil
import subprocess

from qiltest import (ITER_TIME, QEMU_IMG, SECRET, TOOL, TestCase, file_bytes,
                     main, qemu_img, qil, random_file, run)


def same_message(proc):
    """stderr with qemu-img-lite's name replaced by qemu-img's."""
    return proc.stderr.replace("qemu-img-lite: ", "qemu-img: ").replace(
        "'qemu-img-lite --help'", "'qemu-img --help'")


class ParityCase(TestCase):
    def both(self, *args):
        """Run args in qemu-img (if installed) and in qemu-img-lite."""
        mine = qil(*args, check=False)
        theirs = run([QEMU_IMG, *args], check=False) if QEMU_IMG else None
        return mine, theirs

    def assertSameFailure(self, *args, rc=1, message=None):
        """Both tools fail with exit status rc and the same message."""
        mine, theirs = self.both(*args)
        self.assertEqual(mine.returncode, rc, mine.stderr)
        if message:
            self.assertIn(message, mine.stderr)
        if theirs:
            self.assertEqual(theirs.returncode, rc, theirs.stderr)
            self.assertEqual(same_message(mine), theirs.stderr)
        return mine


class TestHexSizes(ParityCase):
    def created_size(self, tool, size):
        path = self.path(f"{tool}-{size}.img")
        if tool == "qemu-img":
            proc = qemu_img("create", "-f", "raw", path, size)
        else:
            proc = qil("create", "-f", "raw", path, size)
        return os.path.getsize(path), proc

    def test_hex_sizes(self):
        # "0x10B" and "0x1E": B and E are hex digits, not suffixes.
        for size, want in [("0x100000", 1 << 20), ("0X200", 512),
                           ("0x10B", 267), ("0x1E", 30)]:
            with self.subTest(size=size):
                got, proc = self.created_size("lite", size)
                self.assertIn(f"size={want}", proc.stdout)
                self.assertGreaterEqual(got, want)
                if QEMU_IMG:
                    self.assertIn(f"size={want}",
                                  self.created_size("qemu-img",
                                                    size)[1].stdout)

    def test_hex_with_suffix_warns(self):
        got, proc = self.created_size("lite", "0x100k")
        self.assertEqual(got, 0x100 << 10)
        self.assertIn("warning: Using a multiplier suffix on hex numbers is "
                      "deprecated: 0x100k", proc.stderr)
        if QEMU_IMG:
            theirs = self.created_size("qemu-img", "0x100k")[1]
            self.assertEqual(same_message(proc), theirs.stderr)

    def test_invalid_hex(self):
        for size in ["0x", "0x1.5M", "0xg"]:
            with self.subTest(size=size):
                self.assertSameFailure("create", "-f", "raw",
                                       self.path("x.img"), size,
                                       message="Invalid image size")

    def test_hex_in_options(self):
        out = self.path("o.img")
        qil("create", "-f", "raw", "-o", "size=0x100000", out)
        self.assertEqual(os.path.getsize(out), 1 << 20)
        out = self.path("k.img")
        proc = qil("create", "-f", "raw", "-o", "size=0x100k", out)
        self.assertEqual(os.path.getsize(out), 0x100 << 10)
        self.assertIn("size=262144\n", proc.stdout)
        self.assertEqual(proc.stderr, "qemu-img-lite: warning: Using a "
                         "multiplier suffix on hex numbers is deprecated: "
                         "0x100k\n")

    def test_number_options_in_hex_and_octal(self):
        # qemu-img's number options take base 0: 0x10 is 16, 010 is 8; the
        # Formatting line shows them in decimal.
        self.need_luks()
        for value, want in [("0x10", 16), ("010", 8)]:
            with self.subTest(value=value):
                out = self.path(f"n{value}.luks")
                proc = qil("create", "--object", SECRET, "-f", "luks", "-o",
                           f"key-secret=sec0,iter-time={value}", out, "1M")
                self.assertIn(f" iter-time={want}\n", proc.stdout)
        for value in ["08", "0x", "1k", "-1"]:
            with self.subTest(value=value):
                proc = qil("measure", "-O", "luks", "-o",
                           f"iter-time={value}", "--size", "1M", check=False)
                self.assertEqual(proc.returncode, 1)
                self.assertIn("Parameter 'iter-time' expects", proc.stderr)

    def test_hex_measure(self):
        proc = qil("measure", "--size", "0x200000")
        self.assertIn("required size: 2097152", proc.stdout)


class TestGenericNodeOptions(ParityCase):
    """QEMU's generic node options, as libvirt's -blockdev JSON carries
    them on every node, are taken (issue 26); read-only=on, cache.direct
    and cache.no-flush mean what they mean in QEMU."""

    def test_libvirt_json(self):
        self.need_luks()
        img, raw = self.make_luks("a.luks", "1M")
        name = ('json:{"driver":"luks","node-name":"libvirt-1-format",'
                '"read-only":false,"discard":"unmap","detect-zeroes":"off",'
                '"cache":{"direct":false,"no-flush":false},'
                '"key-secret":"sec0","file":{"driver":"file","filename":"'
                + img + '","node-name":"libvirt-1-storage","aio":"native",'
                '"locking":"auto","auto-read-only":true}}')
        out = self.path("out.raw")
        qil("convert", "--object", SECRET, name, "-O", "raw", out)
        self.assertEqual(file_bytes(out), file_bytes(raw))
        # read-only=on: a write through it is refused, the image unchanged.
        before = file_bytes(img)
        self.assertFails(["convert", "-n", "--object", SECRET, "-f", "raw",
                          raw, "--target-image-opts",
                          f"driver=luks,key-secret=sec0,read-only=on,"
                          f"file.filename={img}"], "read-only")
        self.assertEqual(file_bytes(img), before)
        self.assertFails(["info", "--image-opts",
                          f"driver=raw,detect-zeroes=sometimes,"
                          f"file.filename={img}"],
                         "Parameter 'detect-zeroes' does not accept value "
                         "'sometimes'")
        self.assertFails(["info", "--image-opts",
                          f"driver=raw,file.aio=fast,file.filename={img}"],
                         "Parameter 'aio' does not accept value 'fast'")


class TestConvertOptions(ParityCase):
    def setUp(self):
        super().setUp()
        self.src = self.path("src.raw")
        random_file(self.src, 1 << 20)

    def convert_both(self, *opts, rc=1, message=None):
        """A convert usage error, with the same text in both tools."""
        return self.assertSameFailure("convert", *opts, "-f", "raw",
                                      self.src, self.path("dst.raw"),
                                      rc=rc, message=message)

    def convert(self, *opts, dst="dst.raw"):
        out = self.path(dst)
        proc = qil("convert", *opts, "-f", "raw", "-O", "raw", self.src, out)
        return out, proc

    def test_sparse_size_limits(self):
        for size in ["16M", "16777216", "0x1000", "0"]:
            with self.subTest(size=size):
                out, _ = self.convert("-S", size, dst=f"d{size}")
                self.assertEqual(file_bytes(out), file_bytes(self.src))
        for size in ["17M", "16777217", "511", "1000"]:
            with self.subTest(size=size):
                self.convert_both("-S", size, message="Valid sizes are "
                                  "multiples of 512 up to 16777216.")
        self.convert_both("-S", "abc", message="Invalid buffer size for "
                          "sparse output specified. You may use k, M, G")

    def test_sparse_size_16m_leaves_holes(self):
        zero = self.path("zero.raw")
        with open(zero, "wb") as f:
            f.truncate(32 << 20)
            f.seek(20 << 20)
            f.write(b"x" * 4096)
        out = self.path("z.out")
        qil("convert", "-S", "16M", "-f", "raw", "-O", "raw", zero, out)
        self.assertEqual(file_bytes(out), file_bytes(zero))
        self.assertLess(os.stat(out).st_blocks * 512, 1 << 20)

    def test_parallel_limits(self):
        for n in ["1", "16", "0x4"]:
            with self.subTest(n=n):
                out, _ = self.convert("-m", n, dst=f"m{n}")
                self.assertEqual(file_bytes(out), file_bytes(self.src))
        for n in ["0", "17", "x", "-1", "4x"]:
            with self.subTest(n=n):
                self.convert_both("-m", n, message="Invalid number of "
                                  "coroutines. Allowed number of coroutines "
                                  "is between 1 and 16")

    def test_rate_limit(self):
        out, _ = self.convert("-r", "4M", dst="r4")
        self.assertEqual(file_bytes(out), file_bytes(self.src))
        out, _ = self.convert("-r", "0", dst="r0")
        self.assertEqual(file_bytes(out), file_bytes(self.src))
        self.convert_both("-r", "x", message="Invalid rate limit specified.")
        self.convert_both("-r", "1.5x", message="Invalid rate limit")

    def test_target_is_zero_needs_n(self):
        self.convert_both("--target-is-zero",
                          message="--target-is-zero requires use of -n flag")

    def test_target_is_zero_skips_zeroes(self):
        # A source with a zero run: with --target-is-zero the run is not
        # written, so what the target held there stays (the user vouched
        # that it reads as zeroes; here it does not, to show it).
        src = self.path("z.raw")
        with open(src, "wb") as f:
            f.write(b"a" * 65536 + bytes(65536) + b"b" * 65536)
        dst = self.path("z.dst")
        with open(dst, "wb") as f:
            f.write(b"\xff" * 3 * 65536)
        qil("convert", "-n", "--target-is-zero", "-f", "raw", "-O", "raw",
            src, dst)
        data = file_bytes(dst)
        self.assertEqual(data[:65536], b"a" * 65536)
        self.assertEqual(data[65536:131072], b"\xff" * 65536)
        self.assertEqual(data[131072:], b"b" * 65536)
        # Without it, the zeroes are written.
        qil("convert", "-n", "-f", "raw", "-O", "raw", src, dst)
        self.assertEqual(file_bytes(dst), file_bytes(src))

    def test_copy_offloading(self):
        out, _ = self.convert("-C", dst="c.raw")
        self.assertEqual(file_bytes(out), file_bytes(self.src))
        # Where it cannot (an encrypted target) the copy is made as usual,
        # as qemu-img does.
        luks = self.path("c.luks")
        qil("convert", "-C", "--object", SECRET, "-f", "raw", "-O", "luks",
            "-o", f"key-secret=sec0,iter-time={ITER_TIME}", self.src, luks)
        back = self.path("c.back")
        qil("convert", "-C", "--object", SECRET, "--image-opts",
            f"driver=luks,key-secret=sec0,file.filename={luks}", back)
        self.assertEqual(file_bytes(back), file_bytes(self.src))

    def test_copy_offloading_uses_copy_file_range(self):
        strace = shutil.which("strace")
        if not strace:
            self.skipTest("strace is not installed")
        # LeakSanitizer cannot run under ptrace (sanitizer builds).
        env = dict(os.environ, ASAN_OPTIONS=os.environ.get(
            "ASAN_OPTIONS", "") + ":detect_leaks=0")

        def traced(*args):
            proc = subprocess.run([strace, "-f", "-e",
                                   "trace=copy_file_range", TOOL, *args],
                                  capture_output=True, text=True, env=env)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            return proc.stderr

        out = self.path("st.raw")
        self.assertIn("copy_file_range(", traced(
            "convert", "-C", "-f", "raw", "-O", "raw", self.src, out))
        self.assertEqual(file_bytes(out), file_bytes(self.src))
        # Without -C, no offloading.
        out2 = self.path("st2.raw")
        self.assertNotIn("copy_file_range(", traced(
            "convert", "-f", "raw", "-O", "raw", self.src, out2))

    def test_copy_offloading_conflicts(self):
        self.convert_both("-C", "-S", "4k", message="Cannot enable copy "
                          "offloading when -S is used")
        self.convert_both("-C", "-S", "0", message="Cannot enable copy "
                          "offloading when -S is used")
        self.convert_both("-C", "--salvage", message="Cannot use copy "
                          "offloading in salvaging mode")


class TestSalvage(ParityCase):
    """A qcow2 image whose compressed cluster is damaged cannot be read
    there: convert fails, and with --salvage copies zeroes instead."""

    def damaged_qcow2(self):
        self.need_qemu_img()
        raw = self.path("s.raw")
        random_file(raw, 65536)
        with open(raw, "ab") as f:
            f.write(b"a" * 65536)
        img = self.path("s.qcow2")
        qemu_img("convert", "-c", "-f", "raw", "-O", "qcow2", raw, img)
        out = run([QEMU_IMG, "map", "--output=json", img]).stdout
        m = json.loads(out)
        self.assertNotIn("offset", m[-1])       # compressed: no offset
        # The compressed cluster is the last thing in the file: damage it.
        size = os.path.getsize(img)
        with open(img, "r+b") as f:
            # The second cluster's L2 entry says where it is; overwriting
            # the end of the file hits it (it is a few hundred bytes).
            f.seek(size - 512)
            tail = f.read()
            self.assertNotEqual(tail, bytes(len(tail)))
            f.seek(size - 512)
            f.write(b"\xff" * 512)
        return img, raw

    def test_salvage(self):
        img, raw = self.damaged_qcow2()
        failed = qil("convert", "-O", "raw", img, self.path("f.raw"),
                     check=False)
        self.assertEqual(failed.returncode, 1)
        self.assertFalse(os.path.exists(self.path("f.raw")))
        out = self.path("s.out")
        proc = qil("convert", "--salvage", "-O", "raw", img, out)
        self.assertIn("warning: error while reading offset 65536:",
                      proc.stderr)
        data = file_bytes(out)
        self.assertEqual(data[:65536], file_bytes(raw)[:65536])
        self.assertEqual(data[65536:], bytes(65536))
        # One warning per 512-byte sector, as qemu-img.
        warnings = proc.stderr.count("warning: error while reading offset")
        self.assertEqual(warnings, 128)
        theirs_out = self.path("q.out")
        theirs = qemu_img("convert", "--salvage", "-O", "raw", img,
                          theirs_out)
        self.assertEqual(theirs.stderr.count("warning: error while reading "
                                             "offset"), warnings)
        self.assertEqual(file_bytes(theirs_out), data)


class TestOptionsHelp(ParityCase):
    """-o help and -o ? list every option, in qemu-img's layout."""

    LUKS2 = ["luks-version", "sector-size", "label", "kdf", "kdf-memory",
             "kdf-parallel", "detached-header", "align-payload"]

    def lines(self, *args):
        proc = qil(*args)
        self.assertEqual(proc.stderr, "")
        return proc.stdout.splitlines()

    def theirs(self, *args):
        return qemu_img(*args).stdout.splitlines() if QEMU_IMG else None

    def test_raw_same_as_qemu_img(self):
        for args in [["create", "-f", "raw", "-o", "help"],
                     ["create", "-f", "raw", "-o", "?"],
                     ["convert", "-O", "raw", "-o", "help"]]:
            with self.subTest(args=args):
                mine = self.lines(*args)
                self.assertEqual(mine[:2], ["Supported raw options:",
                                            "  size=<size>            - "
                                            "Virtual disk size"])
                self.assertIn("Specify the target filename to include those "
                              "options.", mine)
                if QEMU_IMG:
                    self.assertEqual(mine, self.theirs(*args))

    def test_raw_with_a_file_name(self):
        args = ["create", "-f", "raw", "-o", "help", self.path("x.raw")]
        mine = self.lines(*args)
        self.assertEqual(mine[0], "Supported options:")
        self.assertIn("  preallocation=<str>    - Preallocation mode "
                      "(allowed values: off, falloc, full)", mine)
        if QEMU_IMG:
            self.assertEqual(mine, self.theirs(*args))
        self.assertFalse(os.path.exists(self.path("x.raw")))

    def test_luks_lists_qemu_img_options_and_luks2(self):
        for cmd in [["create", "-f", "luks"], ["convert", "-O", "luks"],
                    ["measure", "-O", "luks"]]:
            for opt in ["help", "?"]:
                with self.subTest(cmd=cmd, opt=opt):
                    mine = self.lines(*cmd, "-o", opt)
                    self.assertEqual(mine[0], "Supported luks options:")
                    names = [line.split("=")[0].strip() for line in mine
                             if line.startswith("  ")]
                    self.assertEqual(names, sorted(names))
                    for name in self.LUKS2 + ["key-secret", "size"]:
                        self.assertIn(name, names)
                    if QEMU_IMG and cmd[0] != "measure":
                        for line in self.theirs(*cmd, "-o", opt):
                            self.assertIn(line, mine)

    def test_amend(self):
        mine = self.lines("amend", "-f", "luks", "-o", "help", "x")
        self.assertEqual(mine[0], "Amend options for 'luks':")
        for name in ["state", "keyslot", "old-secret", "new-secret",
                     "iter-time", "kdf"]:
            self.assertTrue(any(line.startswith(f"  {name}=")
                                for line in mine), name)
        if QEMU_IMG:
            for line in self.theirs("amend", "-f", "luks", "-o", "help",
                                    "x"):
                self.assertIn(line, mine)
        # The format of an image, found without its key.
        self.need_luks()
        luks, _ = self.make_luks("a.luks", "1M")
        self.assertEqual(self.lines("amend", "-o", "help", luks), mine)

    def test_help_errors(self):
        self.assertSameFailure("amend", "-f", "raw", "-o", "help", "x",
                               message="Format driver 'raw' does not support "
                               "option amendment")
        self.assertSameFailure("amend", "-o", "help",
                               message="Expecting one image file name")
        self.assertSameFailure("create", "-f", "foo", "-o", "help",
                               message="Unknown file format 'foo'")
        # A format recognised only to be refused says so, as create does.
        for args in [["create", "-f", "vmdk"], ["convert", "-O", "vdi"]]:
            with self.subTest(args=args):
                self.assertFails([*args, "-o", "help"], "Image format '"
                                 f"{args[-1]}' is not supported")


class TestMessageParity(ParityCase):
    """Issue 15 item 13: the messages and exit codes of qemu-img 7.2."""

    def test_resize_device_file(self):
        mine = self.assertSameFailure("resize", "-f", "raw", "/dev/null",
                                      "1M", message="Cannot resize device "
                                      "files")
        self.assertEqual(mine.stderr, "qemu-img-lite: Cannot resize device "
                         "files\n")

    def test_measure_size_and_filename(self):
        img = self.path("m.raw")
        random_file(img, 4096)
        self.assertSameFailure("measure", "--size", "1M", img,
                               message="--size N cannot be used together "
                               "with a filename.")
        self.assertSameFailure("measure", img, img, message="At most one "
                               "filename argument is allowed.")
        self.assertSameFailure("measure", message="Either --size N or one "
                               "filename must be specified.")

    def test_compare_usage_errors_exit_1(self):
        img = self.path("c.raw")
        random_file(img, 4096)
        for args in [[img], [img, img, img], []]:
            with self.subTest(args=args):
                self.assertSameFailure("compare", *args, message="Expecting "
                                       "two image file names")
        for opt in ["-x", "--output=json"]:
            with self.subTest(opt=opt):
                mine, theirs = self.both("compare", opt, img, img)
                self.assertEqual(mine.returncode, 1)
                self.assertIn(f"unrecognized option '{opt}'", mine.stderr)
                if theirs:
                    self.assertEqual(theirs.returncode, 1)
                    self.assertEqual(theirs.stderr.splitlines()[0],
                                     same_message(mine).splitlines()[0])
        # Errors past the usage are exit 2, in both.
        self.assertSameFailure("compare", "--image-opts", "-f", "raw", img,
                               img, rc=2, message="--image-opts and --format "
                               "are mutually exclusive")

    def test_keyid_without_iv(self):
        key = self.path("master.key")
        with open(key, "wb") as f:
            f.write(os.urandom(32))
        master = f"secret,id=m,file={key}"
        img = self.path("k.raw")
        for objs, msg in [
                ([master, "secret,id=s0,data=abc,keyid=m"],
                 "IV is required to decrypt secret"),
                (["secret,id=s0,data=abc,keyid=nokey"],
                 "No secret with id 'nokey'"),
                (["secret,id=m,data=short", "secret,id=s0,data=abc,keyid=m,"
                  "iv=AAAAAAAAAAAAAAAAAAAAAA=="],
                 "Key should be 32 bytes in length")]:
            with self.subTest(msg=msg):
                args = [a for o in objs for a in ("--object", o)]
                mine = self.assertSameFailure("create", *args, "-f", "raw",
                                              img, "1M", message=msg)
                self.assertEqual(mine.stdout, "")
                self.assertFalse(os.path.exists(img))

    def test_formatting_line_and_refusals(self):
        """qemu-img's order: what bdrv_img_create() checks (unknown options,
        the backing file) is refused before the "Formatting" line, what the
        format checks after it; either way no image is left."""
        img = self.path("f.luks")
        for opts, shown in [("key-secret=nope", True),
                            ("key-secret=sec0,cipher-alg=foo", True),
                            ("key-secret=sec0,bogus=1", False)]:
            with self.subTest(opts=opts):
                proc = qil("create", "--object", SECRET, "-f", "luks", "-o",
                           opts, img, "1M", check=False)
                self.assertEqual(proc.returncode, 1)
                self.assertEqual(proc.stdout.startswith("Formatting '"),
                                 shown, proc.stdout)
                self.assertFalse(os.path.exists(img))
                if QEMU_IMG:
                    theirs = run([QEMU_IMG, "create", "--object", SECRET,
                                  "-f", "luks", "-o", opts, img, "1M"],
                                 check=False)
                    self.assertEqual(theirs.returncode, 1)
                    self.assertEqual(theirs.stdout, proc.stdout)
                    self.assertFalse(os.path.exists(img))
        base = self.path("b.qcow2")
        qil("create", "-f", "qcow2", base, "1M")
        for args, msg in [(["-b", ""], "Expected backing file name, got "
                           "empty string"),
                          (["-b", base], "Backing file specified without "
                           "backing format\nDetected format of qcow2."),
                          (["-b", self.path("gone"), "-F", "qcow2"],
                           "Could not open backing image.")]:
            with self.subTest(args=args):
                proc = qil("create", "-f", "qcow2", *args,
                           self.path("o.qcow2"), "1M", check=False)
                self.assertEqual(proc.returncode, 1)
                self.assertEqual(proc.stdout, "")
                self.assertIn(msg, proc.stderr)
        proc = qil("create", "-f", "raw", self.path("x.raw"), "1M")
        self.assertEqual(proc.stdout, f"Formatting '{self.path('x.raw')}', "
                         "fmt=raw size=1048576\n")

    def test_double_dash_ends_options(self):
        """"--" ends the options, as with getopt: a negative size after it
        is a size (refused in qemu-img's words), not an option."""
        img = self.path("d.raw")
        proc = qil("create", "-f", "raw", img, "--", "1k")
        self.assertIn("size=1024", proc.stdout)
        self.assertFails(["create", "-f", "raw", img, "--", "-1024"],
                         "Invalid image size specified. You may use k, M, "
                         "G, T, P or E suffixes for")
        proc = self.assertFails(["create", "-f", "qcow2", "-o", "size=-1k",
                                 self.path("d.qcow2")],
                                "Parameter 'size' expects a non-negative "
                                "number below 2^64")
        self.assertEqual(proc.stdout, "")

    def test_size_option_printed_in_bytes(self):
        for size, want in [("2M", 2097152), ("1.5k", 1536), ("0x10", 16)]:
            with self.subTest(size=size):
                mine = qil("create", "-f", "raw", "-o", f"size={size}",
                           self.path(f"l{size}"))
                self.assertIn(f"size={want}\n", mine.stdout)
                if QEMU_IMG:
                    theirs = qemu_img("create", "-f", "raw", "-o",
                                      f"size={size}", self.path(f"q{size}"))
                    self.assertEqual(mine.stdout.replace("/l", "/q"),
                                     theirs.stdout)


if __name__ == "__main__":
    main()
