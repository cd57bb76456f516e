# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite convert: raw <-> luks, luks -> luks, -n, --image-opts,
progress, sparse targets, and never a half-written target."""
import os
import re
import shutil
import signal
import subprocess
import tempfile

from qiltest import (ITER_TIME, SECRET, TOOL, TestCase, file_bytes, luks_opts,
                     main, qil, random_file)


class ConvertRaw(TestCase):
    def test_raw_to_raw(self):
        src = self.path("src.raw")
        random_file(src, 3 << 20)
        qil("convert", "-f", "raw", "-O", "raw", src, self.path("dst.raw"))
        self.assertEqual(file_bytes(src), file_bytes(self.path("dst.raw")))

    def test_sparse_target(self):
        src = self.path("src.raw")
        with open(src, "wb") as f:
            f.truncate(16 << 20)
            f.seek(5 << 20)
            f.write(b"x" * 4096)
            f.seek(9 << 20)
            f.write(bytes(1 << 20))         # explicit zeroes: a hole too
        dst = self.path("dst.raw")
        qil("convert", "-O", "raw", src, dst)
        self.assertEqual(file_bytes(src), file_bytes(dst))
        self.assertEqual(os.path.getsize(dst), 16 << 20)
        self.assertLessEqual(os.stat(dst).st_blocks * 512, 64 << 10)
        # -S 0: everything written
        full = self.path("full.raw")
        qil("convert", "-S", "0", "-O", "raw", src, full)
        self.assertGreaterEqual(os.stat(full).st_blocks * 512, 16 << 20)

    def test_unaligned_size(self):
        src = self.path("odd.raw")
        random_file(src, 1000)
        dst = self.path("dst.raw")
        qil("convert", "-f", "raw", "-O", "raw", src, dst)
        # Sizes count whole sectors, as in qemu-img.
        self.assertEqual(file_bytes(dst), file_bytes(src) + bytes(24))

    def test_progress(self):
        src = self.path("src.raw")
        random_file(src, 4 << 20)
        # bytes: text mode would turn the \r into \n
        out = subprocess.run([TOOL, "convert", "-p", "-O", "raw", src,
                              self.path("dst.raw")], check=True,
                             capture_output=True).stdout
        self.assertTrue(out.startswith(b"    (0.00/100%)\r"), out)
        self.assertTrue(out.endswith(b"    (100.00/100%)\r\n"), out)

    def test_existing_target_replaced_or_written_with_n(self):
        """Without -n an existing target is replaced by the new image (as
        qemu-img), once complete: a failed convert leaves it as it was;
        with -n it is written in place."""
        src = self.path("src.raw")
        random_file(src, 1 << 20)
        dst = self.path("dst.raw")
        random_file(dst, 2 << 20, seed=2)
        before = file_bytes(dst)
        self.assertFails(["convert", "-O", "luks", src, dst], "key-secret")
        self.assertEqual(file_bytes(dst), before)
        qil("convert", "-O", "raw", src, dst)
        self.assertEqual(file_bytes(dst), file_bytes(src))
        with open(dst, "wb") as f:
            f.write(before)
        qil("convert", "-n", "-O", "raw", src, dst)
        after = file_bytes(dst)
        self.assertEqual(after[:1 << 20], file_bytes(src))
        self.assertEqual(after[1 << 20:], before[1 << 20:])

    def test_n_target_too_small(self):
        src = self.path("src.raw")
        random_file(src, 2 << 20)
        dst = self.path("dst.raw")
        random_file(dst, 1 << 20)
        self.assertFails(["convert", "-n", "-O", "raw", src, dst],
                         "smaller than the source")

    def test_target_image_opts_needs_n(self):
        src = self.path("src.raw")
        random_file(src, 1 << 20)
        self.assertFails(["convert", "--target-image-opts", src,
                          f"driver=raw,file.filename={self.path('d')}"],
                         "--target-image-opts requires use of -n flag")

    def test_source_opened_read_only(self):
        src = self.path("src.raw")
        random_file(src, 1 << 20)
        os.chmod(src, 0o444)
        qil("convert", "-O", "raw", src, self.path("dst.raw"))

    def test_missing_source_creates_nothing(self):
        self.assertFails(["convert", self.path("nope"), self.path("dst")],
                         "No such file or directory")
        self.assertFalse(os.path.exists(self.path("dst")))


class ConvertSeveral(TestCase):
    """Several sources are copied one after another (qemu-img's
    concatenation), each counted in whole sectors."""

    def test_concatenate_raw(self):
        parts = []
        for i, size in enumerate((3 << 20, 1000, 1 << 20)):
            p = self.path(f"p{i}.raw")
            random_file(p, size, seed=i + 1)
            parts.append(p)
        dst = self.path("dst.raw")
        qil("convert", "-p", "-f", "raw", "-O", "raw", *parts, dst)
        want = b"".join(file_bytes(p) + bytes(-len(file_bytes(p)) % 512)
                        for p in parts)
        self.assertEqual(file_bytes(dst), want)
        # into LUKS and back, compressed qcow2 and back
        for fmt, opts in (("luks", ["--object", SECRET, "-o",
                                    f"key-secret=sec0,iter-time={ITER_TIME}"]),
                          ("qcow2", ["-c"])):
            if fmt == "luks":
                self.need_luks()
            img = self.path("dst." + fmt)
            qil("convert", *opts, "-f", "raw", "-O", fmt, *parts, img)
            back = self.path(fmt + ".raw")
            src = ["--object", SECRET, "--image-opts", luks_opts(img)] \
                if fmt == "luks" else ["-f", fmt, img]
            qil("convert", *src, "-O", "raw", back)
            self.assertEqual(file_bytes(back), want, fmt)

    def test_concatenate_into_existing(self):
        a, b = self.path("a.raw"), self.path("b.raw")
        random_file(a, 1 << 20, seed=1)
        random_file(b, 1 << 20, seed=2)
        dst = self.path("dst.raw")
        random_file(dst, 3 << 20, seed=3)
        tail = file_bytes(dst)[2 << 20:]
        qil("convert", "-n", "-f", "raw", "-O", "raw", a, b, dst)
        self.assertEqual(file_bytes(dst),
                         file_bytes(a) + file_bytes(b) + tail)

    def test_refused_with_several(self):
        a = self.path("a.raw")
        random_file(a, 1 << 20)
        self.assertFails(["convert", "-O", "qcow2", "-B", a, "-F", "raw", a,
                          a, self.path("d")], "Having a backing file for "
                         "the target makes no sense when concatenating "
                         "multiple input images")
        self.assertFails(["convert", "--bitmaps", "-O", "qcow2", a, a,
                          self.path("d")],
                         "Copying bitmaps only possible with single source")
        self.assertFails(["convert", "-l", "snap", "-O", "qcow2", a, a,
                          self.path("d")],
                         "No support for concatenating multiple snapshot")
        self.assertFalse(os.path.exists(self.path("d")))

    def test_n_refuses_creation_options(self):
        a = self.path("a.raw")
        random_file(a, 1 << 20)
        dst = self.path("d.raw")
        random_file(dst, 1 << 20)
        self.assertFails(["convert", "-n", "-O", "raw", "-o",
                          "preallocation=full", a, dst],
                         "-o has no effect when skipping image creation")


class ConvertLuks(TestCase):
    def setUp(self):
        super().setUp()
        self.need_luks()

    def test_round_trip(self):
        luks, raw = self.make_luks("a.luks", "3M")
        self.assertEqual(self.info_json(luks)["format"], "luks")
        # The data is encrypted: no plaintext block in the file.
        self.assertNotIn(file_bytes(raw)[:4096], file_bytes(luks))
        back = self.path("back.raw")
        qil("convert", "--object", SECRET, "--image-opts", luks_opts(luks),
            "-O", "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(raw))

    def test_probed_luks_source_with_o_style_is_refused_without_key(self):
        luks, _ = self.make_luks("a.luks", "1M")
        self.assertFails(["convert", "-O", "raw", luks, self.path("x")],
                         "key-secret")
        self.assertFalse(os.path.exists(self.path("x")))

    def test_reencrypt_luks_to_luks(self):
        luks, raw = self.make_luks("a.luks", "2M")
        other = self.path("b.luks")
        qil("convert", "--object", SECRET, "--object",
            "secret,id=sec1,data=another", "--image-opts", luks_opts(luks),
            "-O", "luks", "-o",
            f"key-secret=sec1,cipher-alg=aes-128,cipher-mode=cbc,"
            f"ivgen-alg=essiv,iter-time={ITER_TIME}", other)
        data = self.info_json(other)["format-specific"]["data"]
        self.assertEqual((data["cipher-alg"], data["cipher-mode"]),
                         ("aes-128", "cbc"))
        back = self.path("back.raw")
        qil("convert", "--object", "secret,id=sec1,data=another",
            "--image-opts", f"driver=luks,key-secret=sec1,"
            f"file.filename={other}", "-O", "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(raw))

    def test_n_into_existing_luks(self):
        luks, _ = self.make_luks("a.luks", "2M")
        src = self.path("new.raw")
        random_file(src, 2 << 20, seed=7)
        qil("convert", "-n", "--object", SECRET, "-f", "raw",
            "--target-image-opts", src, luks_opts(luks))
        back = self.path("back.raw")
        qil("convert", "--object", SECRET, "--image-opts", luks_opts(luks),
            "-O", "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(src))
        # -O luks -o key-secret=... works as well as --target-image-opts.
        random_file(src, 2 << 20, seed=8)
        os.unlink(back)
        qil("convert", "-n", "--object", SECRET, "-f", "raw", "-O", "luks",
            "-o", "key-secret=sec0", src, luks)
        qil("convert", "--object", SECRET, "--image-opts", luks_opts(luks),
            "-O", "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(src))

    def test_detached_header_target(self):
        hdr, data = self.path("hdr"), self.path("data")
        qil("create", "-q", "-f", "luks", "--object", SECRET, "-o",
            f"key-secret=sec0,iter-time={ITER_TIME},detached-header=true",
            hdr)
        qil("create", "-q", "-f", "raw", data, "1M")
        src = self.path("src.raw")
        random_file(src, 1 << 20)
        opts = (f"driver=luks,key-secret=sec0,file.filename={data},"
                f"header.filename={hdr}")
        qil("convert", "-n", "--object", SECRET, "-f", "raw",
            "--target-image-opts", src, opts)
        back = self.path("back.raw")
        qil("convert", "--object", SECRET, "--image-opts", opts, "-O", "raw",
            back)
        self.assertEqual(file_bytes(back), file_bytes(src))

    def test_failed_create_leaves_nothing(self):
        src = self.path("src.raw")
        random_file(src, 1 << 20)
        before = file_bytes(src)
        self.assertFails(["convert", "--object", SECRET, "-O", "luks", "-o",
                          "key-secret=sec0,hash-alg=nohash", src,
                          self.path("dst")])
        self.assertFalse(os.path.exists(self.path("dst")))
        self.assertEqual(file_bytes(src), before)

    def test_wrong_passphrase(self):
        luks, _ = self.make_luks("a.luks", "1M")
        proc = self.assertFails(
            ["convert", "--object", "secret,id=sec0,data=wrong",
             "--image-opts", luks_opts(luks), "-O", "raw", self.path("x")],
            "Invalid password, cannot unlock any keyslot")
        self.assertTrue(proc.stderr.startswith(
            f"qemu-img-lite: Could not open '{luks_opts(luks)}': "),
            proc.stderr)
        self.assertFalse(os.path.exists(self.path("x")))

    def test_interrupted_convert_removes_target(self):
        src = self.path("big.raw")
        with open(src, "wb") as f:
            f.truncate(2 << 30)     # sparse: costs little on disk
            # -p counts the data only, as qemu-img's: 64 KiB every 16 MiB
            for mib in range(0, 2 << 10, 16):
                f.seek(mib << 20)
                f.write(b"x" * 65536)
        dst = self.path("dst.luks")
        # -r: 20 s for the whole copy, so that a busy machine delaying
        # this test's reads cannot let it end before the signal.
        proc = subprocess.Popen(
            [TOOL, "convert", "-p", "-m", "1", "-r", "100M", "--object",
             SECRET, "-O", "luks", "-o",
             f"key-secret=sec0,iter-time={ITER_TIME}", src, dst],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # The copy is under way once -p shows 1% or more (the target, which
        # has no name until the copy is complete, cannot tell). The first
        # line past 1% need not say 1.00: jobs finishing together move the
        # count by more than one job.
        line = ""
        while True:
            c = proc.stdout.read(1)
            self.assertTrue(c, "convert ended before 1%")
            if c not in "\r\n":      # text mode reads \r as \n
                line += c
                continue
            m = re.search(r"\(([0-9.]+)/100%\)", line)
            line = ""
            if m and float(m.group(1)) >= 1.0:
                self.assertLess(float(m.group(1)), 100.0,
                                "convert ended before SIGINT could be sent")
                break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 1, err)
        self.assertIn("Interrupted", err)
        self.assertFalse(os.path.exists(dst))
        self.assertEqual(os.listdir(os.path.dirname(dst)), ["big.raw"])


class ConvertDurable(TestCase):
    """convert -n onto an existing target, a block device included, syncs
    it (default cache mode) and fails, naming the target, when the
    write-back fails; -t unsafe is the opt-out (issue 27, item 7)."""

    def setUp(self):
        super().setUp()
        self.src = self.path("src.raw")
        random_file(self.src, 4 << 20)

    def test_flush_error_fails(self):
        dst = self.path("dst.raw")
        with open(dst, "wb") as f:
            f.truncate(4 << 20)
        opts = ("driver=raw,file.driver=blkdebug,file.fail-flush=1,"
                f"file.file.filename={dst}")
        for cache in ([], ["-t", "writeback"], ["-t", "none"]):
            self.assertFails(["convert", "-n", *cache, "-f", "raw", self.src,
                              "--target-image-opts", opts],
                             f"Could not flush '{dst}'")
        qil("convert", "-n", "-t", "unsafe", "-f", "raw", self.src,
            "--target-image-opts", opts)

    def test_block_device_write_back_error(self):
        """A loop device over a file on a full tmpfs: the writes land in
        the page cache, the write-back fails, fdatasync says EIO."""
        if os.geteuid() != 0 or not shutil.which("losetup"):
            self.skipTest("needs root and losetup")
        # Outside the scratch directory, which goes before the cleanups.
        mnt = tempfile.mkdtemp(prefix="qil-mnt-")
        self.addCleanup(os.rmdir, mnt)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs",
                           mnt], capture_output=True).returncode:
            self.skipTest("cannot mount a tmpfs here")
        self.addCleanup(subprocess.run, ["umount", mnt])
        backing = os.path.join(mnt, "sparse")
        with open(backing, "wb") as f:
            f.truncate(8 << 20)
        proc = subprocess.run(["losetup", "-f", "--show", backing],
                              capture_output=True, text=True)
        if proc.returncode:
            self.skipTest(f"losetup: {proc.stderr.strip()}")
        dev = proc.stdout.strip()
        self.addCleanup(subprocess.run, ["losetup", "-d", dev])
        self.assertFails(["convert", "-n", "-f", "raw", self.src, "-O", "raw",
                          dev], f"Could not flush '{dev}'")
        # The opt-out says nothing: the loss is the user's choice.
        qil("convert", "-n", "-t", "unsafe", "-f", "raw", self.src, "-O",
            "raw", dev)


if __name__ == "__main__":
    main()
