#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The blkdebug filter from the command line (--image-opts), as the fault
tests use it: an injected ENOSPC or EIO is a clear error and a non-zero
exit, never a crash; a failed flush is never success, for every command
that promises durability (convert, -n included, amend, resize, check -r;
-t unsafe is the opt-out); and a sweep of kills at the N-th write of a
qcow2 convert leaves images that the real qemu-img check finds consistent
(leaks at most)."""

import os

from qiltest import ITER_TIME, QEMU_IMG, SECRET, TestCase, file_bytes, \
    main, qemu_img, qil, random_file
from test_check import Qcow2File


def target_opts(fmt, path, rules):
    return (f"driver={fmt},file.driver=blkdebug,{rules},"
            f"file.file.filename={path}")


class Blkdebug(TestCase):
    def test_enospc_on_write(self):
        src, dst = self.path("src.raw"), self.path("dst.raw")
        random_file(src, 4 << 20)
        qil("create", "-f", "raw", dst, "4M")
        proc = self.assertFails(
            ["convert", "-n", "-f", "raw", src, "--target-image-opts",
             target_opts("raw", dst, "file.fail-write=5,file.errno=ENOSPC")],
            "No space left on device")
        self.assertIn("blkdebug: write 5 injected", proc.stderr)

    def test_eio_on_read(self):
        src, dst = self.path("src.raw"), self.path("dst.raw")
        random_file(src, 1 << 20)
        self.assertFails(
            ["convert", "-O", "raw", "--image-opts",
             target_opts("raw", src, "file.fail-read=2"), dst],
            "Input/output error")
        # A failed convert leaves no target behind.
        self.assertFalse(os.path.exists(dst))

    def test_failed_flush_is_failure(self):
        src, dst = self.path("src.raw"), self.path("dst.raw")
        random_file(src, 1 << 20)
        qil("create", "-f", "raw", dst, "1M")
        self.assertFails(
            ["convert", "-n", "-t", "writeback", "-f", "raw", src,
             "--target-image-opts",
             target_opts("raw", dst, "file.fail-flush=1")],
            "blkdebug: flush 1 injected")

    def test_convert_n_synced_by_default(self):
        """-n with no -t: the target is synced (qemu-img's default is
        unsafe, and it exits 0 when the write-back fails); -t unsafe, asked
        for, is the opt-out."""
        src, dst = self.path("src.raw"), self.path("dst.raw")
        random_file(src, 1 << 20)
        qil("create", "-f", "raw", dst, "1M")
        opts = target_opts("raw", dst, "file.fail-flush=1")
        self.assertFails(["convert", "-n", "-f", "raw", src,
                          "--target-image-opts", opts],
                         "blkdebug: flush 1 injected")
        qil("convert", "-n", "-t", "unsafe", "-f", "raw", src,
            "--target-image-opts", opts)
        self.assertEqual(file_bytes(dst), file_bytes(src))

    def test_kill_sweep_qcow2(self):
        """convert -n into qcow2, killed before its N-th write for every N
        up to past the end: each image left is consistent."""
        self.need_qemu_img()
        src = self.path("src.raw")
        random_file(src, 2 << 20)
        # Half of it zeroes: the copy skips them, so metadata and data
        # writes interleave in several patterns.
        with open(src, "r+b") as f:
            f.seek(1 << 20)
            f.write(bytes(512 << 10))
        killed = 0
        for n in range(1, 60):
            dst = self.path(f"dst{n}.qcow2")
            qil("create", "-f", "qcow2", "-o", "cluster_size=65536", dst,
                "2M")
            proc = qil("convert", "-n", "-f", "raw", src,
                       "--target-image-opts",
                       target_opts("qcow2", dst, f"file.kill-write={n}"),
                       check=False)
            if proc.returncode == 0:
                break
            with self.subTest(n=n):
                self.assertEqual(proc.returncode, -9, proc.stderr)
                killed += 1
                check = qemu_img("check", dst, check=False)
                # 0: clean, 3: leaked clusters only (never corruption).
                self.assertIn(check.returncode, (0, 3), check.stdout)
            os.unlink(dst)
        self.assertGreater(killed, 5)
        self.assertLess(killed, 59, "the convert never finished")


class Salvage(TestCase):
    """convert --salvage over a bad area (blkdebug's bad-offset and
    bad-bytes: every read touching it fails): only the logical blocks that
    cannot be read come out as zeroes, one warning each; the rest of the
    chunk is copied."""

    def salvage(self, image_opts, out):
        proc = qil("convert", "--salvage", "--object", SECRET, "-O", "raw",
                   "--image-opts", image_opts, out)
        # (Chunks are copied by several threads: in any order.)
        return sorted(int(line.split("offset ")[1].split(":")[0])
                      for line in proc.stderr.splitlines()
                      if "warning: error while reading offset" in line)

    def test_raw(self):
        src = self.path("src.raw")
        random_file(src, 4 << 20)
        data = file_bytes(src)
        # 4 KiB across a chunk boundary (256 KiB), and one odd sector.
        for bad, length in ((1 << 20) - 2048, 4096), (3 * 512 + 65536, 512):
            with self.subTest(bad=bad):
                out = self.path(f"out{bad}.raw")
                warned = self.salvage(
                    target_opts("raw", src, f"file.bad-offset={bad},"
                                f"file.bad-bytes={length}"), out)
                self.assertEqual(warned, list(range(bad, bad + length, 512)))
                got = file_bytes(out)
                self.assertEqual(got[bad:bad + length], bytes(length))
                self.assertEqual(got[:bad], data[:bad])
                self.assertEqual(got[bad + length:], data[bad + length:])

    def test_luks(self):
        """LUKS1: 512-byte sectors; LUKS2 made with 4096-byte ones: a bad
        512 bytes lose the whole sector (it cannot be decrypted in part)."""
        self.need_luks()
        for version, sector in (1, 512), (2, 4096):
            with self.subTest(version=version):
                luks, raw = self.make_luks(f"v{version}.luks", "2M",
                                           f"luks-version={version}")
                data = file_bytes(raw)
                payload = self.info_json(luks)["format-specific"]["data"][
                    "payload-offset"]
                bad = 300 * 1024 + 512          # guest offset, file below
                opts = (f"driver=luks,key-secret=sec0,file.driver=blkdebug,"
                        f"file.bad-offset={payload + bad},file.bad-bytes=512,"
                        f"file.file.filename={luks}")
                out = self.path(f"out{version}.raw")
                start = bad - bad % sector
                self.assertEqual(self.salvage(opts, out), [start])
                got = file_bytes(out)
                self.assertEqual(got[start:start + sector], bytes(sector))
                self.assertEqual(got[:start], data[:start])
                self.assertEqual(got[start + sector:], data[start + sector:])


NEW = "secret,id=sec1,data=new passphrase"


class FailedSync(TestCase):
    """Every flush fails (fail-count=0): the commands that change an image
    in place exit 1 naming the file, and never print success."""

    RULE = "file.fail-flush=1,file.fail-count=0"

    def luks(self, version):
        self.need_luks()
        path = self.path(f"v{version}.luks")
        qil("create", "--object", SECRET, "-f", "luks", "-o",
            f"key-secret=sec0,iter-time={ITER_TIME},luks-version={version}",
            path, "1M")
        return path

    def luks_opts(self, path, rule=RULE):
        return (f"driver=luks,key-secret=sec0,file.driver=blkdebug,{rule},"
                f"file.file.filename={path}")

    def test_amend(self):
        for version in (1, 2):
            with self.subTest(version=version):
                path = self.luks(version)
                proc = self.assertFails(
                    ["amend", "--object", SECRET, "--object", NEW,
                     "--image-opts", self.luks_opts(path), "-o",
                     f"state=active,new-secret=sec1,iter-time={ITER_TIME}"],
                    "blkdebug: flush 1 injected")
                self.assertIn(path, proc.stderr)
                qil("amend", "--object", SECRET, "--object", NEW,
                    "--image-opts", self.luks_opts(path, "file.fail-read=0"),
                    "-o", f"state=active,new-secret=sec1,"
                    f"iter-time={ITER_TIME}")
                self.assertFails(
                    ["amend", "--object", SECRET, "--image-opts",
                     self.luks_opts(path), "-o", "state=inactive,keyslot=1"],
                    "blkdebug: flush 1 injected")

    def active_slots(self, path):
        data = self.info_json(path)["format-specific"]["data"]
        return [i for i, slot in enumerate(data["slots"]) if slot["active"]]

    def test_amend_key_material_not_synced(self):
        """The flush after a new slot's key material fails (only that one):
        the header is never written, so the slot is not enabled over key
        material that may not be on disk (cryptsetup: "IO error while
        encrypting keyslot"), and the old passphrase still opens."""
        for version in (1, 2):
            with self.subTest(version=version):
                path = self.luks(version)
                self.assertFails(
                    ["amend", "--object", SECRET, "--object", NEW,
                     "--image-opts",
                     self.luks_opts(path, "file.fail-flush=1"), "-o",
                     f"state=active,new-secret=sec1,iter-time={ITER_TIME}"],
                    "ey slot 1: Could not flush")
                self.assertEqual(self.active_slots(path), [0])
                qil("convert", "--object", SECRET, "--image-opts",
                    f"driver=luks,key-secret=sec0,file.filename={path}",
                    "-O", "raw", self.path("out.raw"))
                os.unlink(self.path("out.raw"))

    def test_resize(self):
        raw = self.path("disk.raw")
        random_file(raw, 1 << 20)
        for fmt, path in (("raw", raw), ("luks", self.luks(2))):
            with self.subTest(fmt=fmt):
                opts = (self.luks_opts(path) if fmt == "luks" else
                        target_opts("raw", path, self.RULE))
                proc = self.assertFails(["resize", "--object", SECRET,
                                         "--image-opts", opts, "2M"],
                                        "blkdebug: flush 1 injected")
                self.assertNotIn("Image resized", proc.stdout)

    def test_check_repair(self):
        img = self.path("leaky.qcow2")
        qil("create", "-f", "qcow2", img, "4M")
        f = Qcow2File(img)
        # A new image ends with its L1 table, not at a cluster boundary.
        end = -(-os.path.getsize(img) // f.cluster_size) * f.cluster_size
        with open(img, "r+b") as out:
            out.truncate(end + f.cluster_size)
        f.set_refcount(end >> f.cluster_bits, 1)
        opts = target_opts("qcow2", img, self.RULE)
        proc = qil("check", "-r", "all", "--image-opts", opts, check=False)
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn("blkdebug: flush 1 injected", proc.stderr)
        self.assertIn("Check failed", proc.stderr)
        self.assertNotIn("No errors were found", proc.stdout)
        # Without the fault the same repair succeeds.
        qil("check", "-r", "all", "--image-opts",
            target_opts("qcow2", img, "file.fail-read=0"))


class QemuSyntax(TestCase):
    """QEMU's own blkdebug spelling, as qemu-iotests write it: rules as
    options (inject-error.N.*, set-state.N.*), as a config file
    (blkdebug:CONFIG:IMAGE, file.config=), or in json:; the child named
    "image"."""

    def setUp(self):
        super().setUp()
        self.src, self.dst = self.path("src.raw"), self.path("dst.raw")
        random_file(self.src, 1 << 20)
        qil("create", "-f", "raw", self.dst, "1M")

    def conf(self, text):
        path = self.path("rules.conf")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_options(self):
        rules = ("file.inject-error.0.event=write_aio,"
                 "file.inject-error.0.errno=28")
        self.assertFails(
            ["convert", "-n", "-f", "raw", self.src, "--target-image-opts",
             f"driver=raw,file.driver=blkdebug,{rules},"
             f"file.image.filename={self.dst}"],
            "(blkdebug: injected): "
            "No space left on device")
        # The same rule on reads only: the copy into it succeeds.
        qil("convert", "-n", "-f", "raw", self.src, "--target-image-opts",
            f"driver=raw,file.driver=blkdebug,{rules},"
            f"file.inject-error.0.iotype=read,file.image.filename={self.dst}")
        self.assertEqual(file_bytes(self.dst), file_bytes(self.src))

    def test_once_and_sector(self):
        """sector= fails only the requests that touch that sector."""
        opts = ("driver=raw,file.driver=blkdebug,"
                "file.inject-error.0.event=read_aio,"
                "file.inject-error.0.sector=2048,"       # 1 MiB: past the end
                f"file.image.filename={self.src}")
        out = self.path("out.raw")
        qil("convert", "-O", "raw", "--image-opts", opts, out)
        self.assertEqual(file_bytes(out), file_bytes(self.src))
        self.assertFails(["convert", "-O", "raw", "--image-opts",
                          opts.replace("2048", "8"), self.path("out2.raw")],
                         "src.raw' at offset 0 (blkdebug: "
                         "injected): Input/output error")
        self.assertFalse(os.path.exists(self.path("out2.raw")))

    def test_config_file(self):
        conf = self.conf('# QEMU\'s format\n[inject-error]\n'
                         'event = "read_aio"\nerrno = "5"\n')
        self.assertFails(["convert", "-O", "raw", f"blkdebug:{conf}:{self.src}",
                          self.path("out.raw")],
                         "(blkdebug: injected): Input/output error")
        # No rules at all: blkdebug::IMAGE is the image.
        proc = qil("info", f"blkdebug::{self.src}")
        self.assertIn("virtual size: 1 MiB", proc.stdout)

    def test_compare_read_error(self):
        """compare: a read error exits 4 (qemu-img's code for it), named
        as qemu-img names it; rules armed by read_aio fire on guest data
        only, so the header and probe reads pass."""
        conf = self.conf('[inject-error]\nevent = "read_aio"\n')
        name = f"blkdebug:{conf}:{self.src}"
        proc = qil("compare", self.src, name, check=False)
        self.assertEqual(proc.returncode, 4, proc.stderr)
        self.assertIn(f"Error while reading offset 0 of {name}: "
                      "Input/output error", proc.stderr)
        qcow2 = self.path("img.qcow2")
        qil("convert", "-O", "qcow2", self.src, qcow2)
        proc = qil("compare", self.src, f"blkdebug:{conf}:{qcow2}",
                   check=False)
        self.assertEqual(proc.returncode, 4, proc.stderr)
        # Without rules the same images are identical.
        qil("compare", self.src, f"blkdebug::{qcow2}")

    def test_none_event_salvage(self):
        """Rules on the event "none" are armed from the start: convert
        --salvage copies around the one bad sector with qemu-img's warning
        and zeroes there."""
        name = ('json:{"driver":"raw","file":{"driver":"blkdebug",'
                '"inject-error":[{"event":"none","iotype":"read",'
                '"errno":5,"sector":100}],"image":{"driver":"file",'
                f'"filename":"{self.src}"}}}}}}')
        out = self.path("o.raw")
        self.assertFails(["convert", "-O", "raw", name, out],
                         "Input/output error")
        proc = qil("convert", "--salvage", "-O", "raw", name, out)
        self.assertEqual(proc.stderr, "qemu-img-lite: warning: error while "
                         "reading offset 51200: Input/output error\n")
        want = bytearray(file_bytes(self.src))
        want[51200:51712] = bytes(512)
        self.assertEqual(file_bytes(out), bytes(want))

    def test_set_state(self):
        """A flush fails only once a write_aio moved the state from 1 to 2;
        the same rule waiting on read_aio (no read comes) never fires."""
        for event, fails in (("write_aio", True), ("read_aio", False)):
            with self.subTest(event=event):
                conf = self.conf(
                    f'[set-state]\nstate = "1"\nevent = "{event}"\n'
                    'new_state = "2"\n\n[inject-error]\nstate = "2"\n'
                    'event = "flush_to_disk"\nerrno = "5"\n')
                args = ["convert", "-n", "-t", "writeback", "-f", "raw",
                        self.src, "--target-image-opts",
                        "driver=raw,file.driver=blkdebug,"
                        f"file.config={conf},file.image.filename={self.dst}"]
                if fails:
                    self.assertFails(args, "dst.raw' (blkdebug: injected)")
                else:
                    qil(*args)

    def test_json(self):
        name = ('json:{"driver":"raw","file":{"driver":"blkdebug",'
                '"inject-error":[{"event":"read_aio","errno":5,'
                '"once":true}],"image":{"driver":"file","filename":"'
                f'{self.src}"}}}}}}')
        self.assertFails(["convert", "-O", "raw", name, self.path("o.raw")],
                         "(blkdebug: injected): Input/output error")

    def test_refused(self):
        """Unknown events, types, numbers and keys: named, exit 1."""
        base = f"driver=raw,file.driver=blkdebug,file.image.filename={self.dst}"
        for rule, msg in (
                ("inject-error.0.event=bogus", "Invalid parameter 'bogus'"),
                ("inject-error.0.event=read_aio,inject-error.0.iotype=x",
                 "Invalid parameter 'x'"),
                ("inject-error.0.event=read_aio,inject-error.0.errno=five",
                 "Parameter 'errno' expects a number"),
                ("inject-error.0.event=read_aio,inject-error.0.colour=red",
                 "Invalid parameter 'colour'"),
                ("inject-error.0.errno=5", "Parameter 'event' is missing"),
                ("align=3", "Cannot meet constraints with align 3")):
            with self.subTest(rule=rule):
                rule = ",".join("file." + r for r in rule.split(","))
                self.assertFails(["info", "--image-opts", f"{base},{rule}"],
                                 msg)
        self.assertFails(["info", f"blkdebug:{self.path('none.conf')}:"
                          f"{self.dst}"],
                         "Could not read blkdebug config file")


if __name__ == "__main__":
    main()
