# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite snapshot: qcow2 internal snapshots listed, created,
applied and deleted as qemu-img 7.2 does, both ways with the real
qemu-img (its check clean after ours, ours after its), qemu-io verifying
the data; writes after a snapshot leave the snapshot's data intact
(copy on write); encrypted qcow2; bad input refused in qemu-img's words."""
import shutil
import struct

from qiltest import (SECRET, TestCase, main, qemu_img,
                     qil, run)

QEMU_IO = shutil.which("qemu-io")
MiB = 1 << 20


def qemu_io(path, *cmds, fmt="qcow2", image_opts=None, obj=None):
    args = [QEMU_IO]
    if obj:
        args += ["--object", obj]
    if image_opts:
        args += ["--image-opts", image_opts]
    else:
        args += ["-f", fmt, path]
    for c in cmds:
        args += ["-c", c]
    proc = run(args)
    if "fail" in proc.stdout.lower() or "error" in proc.stdout.lower():
        raise AssertionError(f"qemu-io {cmds}: {proc.stdout}")
    return proc


def pattern_raw(path, size, pieces):
    """A raw file of size bytes: (offset, length, byte) pieces over 0."""
    with open(path, "wb") as f:
        f.truncate(size)
        for off, length, byte in pieces:
            f.seek(off)
            f.write(bytes([byte]) * length)


class Snapshot(TestCase):
    def setUp(self):
        super().setUp()
        self.need_qemu_img()
        if not QEMU_IO:
            self.skipTest("qemu-io is not installed")

    def image(self, name="a.qcow2", size="16M", opts=None):
        path = self.path(name)
        args = ["create", "-q", "-f", "qcow2"]
        if opts:
            args += ["-o", opts]
        qemu_img(*args, path, size)
        return path

    def check_clean(self, *args):
        out = qemu_img("check", *args).stdout
        self.assertIn("No errors were found on the image.", out)
        out = qil("check", *args).stdout
        self.assertIn("No errors were found on the image.", out)

    def test_list_format_as_qemu_img(self):
        path = self.image()
        qemu_io(path, "write -P 0x11 0 1M")
        # Nothing at all without snapshots (qemu-img prints nothing).
        self.assertEqual(qil("snapshot", "-l", path).stdout, "")
        qil("snapshot", "-c", "first", path)
        qemu_img("snapshot", "-c", "second", path)
        ours = qil("snapshot", "-l", path).stdout
        self.assertEqual(ours, qemu_img("snapshot", "-l", path).stdout)
        self.assertEqual(qil("snapshot", path).stdout, ours)
        self.assertTrue(ours.startswith(
            "Snapshot list:\nID        TAG               VM SIZE          "
            "      DATE     VM CLOCK     ICOUNT\n1         first   "), ours)
        for out in ("human", "json"):
            self.assertEqual(qil("info", f"--output={out}", path).stdout,
                             qemu_img("info", f"--output={out}", path).stdout)
        info = self.info_json(path)
        self.assertEqual([s["name"] for s in info["snapshots"]],
                         ["first", "second"])
        self.assertEqual(info["snapshots"][0]["icount"], 0)

    def test_create_apply_delete_ours_then_qemu(self):
        path = self.image()
        qemu_io(path, "write -P 0x11 0 2M", "write -P 0x12 8M 64k")
        qil("snapshot", "-c", "s1", path)
        self.check_clean(path)
        qemu_io(path, "write -P 0x22 0 1M", "write -P 0x23 12M 4k")
        qil("snapshot", "-c", "s2", path)
        qemu_io(path, "write -P 0x33 512k 1M")
        self.check_clean(path)
        # qemu-img sees both and can go back to either.
        qemu_img("snapshot", "-a", "s1", path)
        qemu_io(path, "read -P 0x11 0 2M", "read -P 0x12 8M 64k",
                "read -P 0 12M 4k")
        self.check_clean(path)
        # Ours goes to s2 by id.
        qil("snapshot", "-a", "2", path)
        qemu_io(path, "read -P 0x22 0 1M", "read -P 0x11 1M 1M",
                "read -P 0x23 12M 4k")
        self.check_clean(path)
        qil("snapshot", "-d", "s1", path)
        self.check_clean(path)
        qemu_img("snapshot", "-d", "s2", path)
        self.check_clean(path)
        self.assertEqual(qil("snapshot", "-l", path).stdout, "")
        qemu_io(path, "read -P 0x22 0 1M", "read -P 0x23 12M 4k")

    def test_qemu_snapshots_ours_applied(self):
        path = self.image(opts="cluster_size=4096")
        qemu_io(path, "write -P 0x41 0 300k")
        qemu_img("snapshot", "-c", "a", path)
        qemu_io(path, "write -P 0x42 100k 100k")
        qemu_img("snapshot", "-c", "b", path)
        qemu_io(path, "write -P 0x43 0 1M")
        qil("snapshot", "-a", "a", path)
        self.check_clean(path)
        qemu_io(path, "read -P 0x41 0 300k", "read -P 0 300k 1M")
        qil("snapshot", "-a", "b", path)
        qemu_io(path, "read -P 0x41 0 100k", "read -P 0x42 100k 100k")
        qil("snapshot", "-d", "a", path)
        qil("snapshot", "-d", "b", path)
        self.check_clean(path)
        qemu_io(path, "read -P 0x41 0 100k", "read -P 0x42 100k 100k")

    def test_writes_after_snapshot_copy_on_write(self):
        """Our writes (convert -n, whole and partial clusters) go to new
        clusters; the snapshot reads what it held, and the L2 tables the
        snapshot shares are copied too."""
        path = self.image(size="8M")
        qemu_io(path, "write -P 0x11 0 4M", "write -z 6M 64k")
        qil("snapshot", "-c", "before", path)
        raw = self.path("new.raw")
        pattern_raw(raw, 8 * MiB, [(0, 3 * MiB + 1000, 0x22),
                                   (5 * MiB, 4096, 0x23)])
        qil("convert", "-n", "-f", "raw", "-O", "qcow2", raw, path)
        self.check_clean(path)
        qemu_io(path, "read -P 0x22 0 3146728", "read -P 0 3146728 2096152",
                "read -P 0x23 5M 4k")
        old = self.path("old.raw")
        qil("convert", "-l", "before", "-O", "raw", path, old)
        qemu_io(old, "read -P 0x11 0 4M", "read -P 0 4M 4M", fmt="raw")
        qemu_img("convert", "-l", "snapshot.name=before", "-O", "raw", path,
                 old)
        qemu_io(old, "read -P 0x11 0 4M", fmt="raw")
        # Back to it, and the data written since is gone; nothing leaks.
        qil("snapshot", "-a", "before", path)
        qil("snapshot", "-d", "before", path)
        self.check_clean(path)
        qemu_io(path, "read -P 0x11 0 4M", "read -P 0 4M 4M")

    def test_convert_and_measure_l(self):
        path = self.image()
        qemu_io(path, "write -P 0x11 0 1M")
        qemu_img("snapshot", "-c", "s1", path)
        qemu_io(path, "write -P 0x22 0 3M")
        for sel in ("s1", "1", "snapshot.id=1", "snapshot.name=s1",
                    "snapshot.id=1,snapshot.name=s1"):
            self.assertEqual(
                qil("measure", "-O", "qcow2", "-l", sel, path).stdout,
                qemu_img("measure", "-O", "qcow2", "-l", sel, path).stdout)
            out = self.path("out.raw")
            qil("convert", "-l", sel, "-O", "raw", path, out)
            qemu_io(out, "read -P 0x11 0 1M", "read -P 0 1M 15M", fmt="raw")
        for sel in ("nope", "snapshot.id=2", "snapshot.id=1,snapshot.name=x"):
            self.assertFails(["convert", "-l", sel, "-O", "raw", path,
                              self.path("x.raw")],
                             "Failed to load snapshot: Can't find snapshot")
        self.assertFails(["convert", "-l", "snapshot.foo=1", "-O", "raw",
                          path, self.path("x.raw")],
                         "Failed in parsing snapshot param")

    def test_encrypted_luks(self):
        path = self.path("enc.qcow2")
        opts = "encrypt.format=luks,encrypt.key-secret=sec0,encrypt.iter-time=10"
        qemu_img("create", "-q", "--object", SECRET, "-f", "qcow2", "-o",
                 opts, path, "4M")
        iopts = f"driver=qcow2,encrypt.key-secret=sec0,file.filename={path}"
        qemu_io(None, "write -P 0x51 0 2M", image_opts=iopts, obj=SECRET)
        # No key needed for the snapshot itself (qemu-img wants one).
        qil("snapshot", "-c", "s", path)
        raw = self.path("new.raw")
        pattern_raw(raw, 4 * MiB, [(0, MiB, 0x52)])
        qil("convert", "--object", SECRET, "-n", "-f", "raw",
            "--target-image-opts", raw, iopts)
        self.check_clean("--object", SECRET, "--image-opts", iopts)
        qemu_io(None, "read -P 0x52 0 1M", "read -P 0 1M 3M",
                image_opts=iopts, obj=SECRET)
        out = self.path("s.raw")
        qil("convert", "--object", SECRET, "-l", "s", "--image-opts", iopts,
            "-O", "raw", out)
        qemu_io(out, "read -P 0x51 0 2M", "read -P 0 2M 2M", fmt="raw")
        qemu_img("snapshot", "--object", SECRET, "-a", "s", "--image-opts",
                 iopts)
        qemu_io(None, "read -P 0x51 0 2M", image_opts=iopts, obj=SECRET)
        qil("snapshot", "-d", "s", path)
        self.check_clean("--object", SECRET, "--image-opts", iopts)

    def test_bad_input(self):
        path = self.image()
        self.assertFails(["snapshot", "-c", path],
                         "Expecting one image file name")
        self.assertFails(["snapshot", "-l", "-c", "x", path],
                         "Cannot mix '-l', '-a', '-c', '-d'")
        self.assertFails(["snapshot", "-a", "nope", path],
                         "Could not apply snapshot 'nope': Failed to load "
                         "snapshot: No such file or directory")
        self.assertFails(["snapshot", "-d", "nope", path],
                         "Could not delete snapshot 'nope': snapshot not "
                         "found")
        self.assertFails(["snapshot", "-U", "-c", "x", path],
                         "force-share=on can only be used with read-only "
                         "images")
        # Duplicate names are allowed, as qemu-img: a new id each.
        qil("snapshot", "-c", "dup", path)
        qil("snapshot", "-c", "dup", path)
        info = self.info_json(path)
        self.assertEqual([(s["id"], s["name"]) for s in info["snapshots"]],
                         [("1", "dup"), ("2", "dup")])
        # -d deletes by name, the first one; "1" is no name.
        self.assertFails(["snapshot", "-d", "1", path], "snapshot not found")
        qil("snapshot", "-d", "dup", path)
        self.assertEqual(self.info_json(path)["snapshots"][0]["id"], "2")
        self.check_clean(path)
        # Other formats have none.
        raw = self.path("a.raw")
        qil("create", "-q", raw, "1M")
        self.assertEqual(qil("snapshot", "-l", raw).stdout, "")
        self.assertFails(["snapshot", "-c", "x", raw],
                         "Could not create snapshot 'x': -95 (Operation not "
                         "supported)")

    def test_downgrade_with_snapshots(self):
        """amend -o compat=0.10 keeps snapshots of the image's size, as
        qemu-img; one of another size (which version 2 programs would
        not see) prevents it, in qemu-img's words."""
        path = self.image(size="1M")
        qemu_io(path, "write -P 0x61 0 64k")
        qil("snapshot", "-c", "s", path)
        ref = self.path("ref.qcow2")
        shutil.copy(path, ref)
        qil("amend", "-o", "compat=0.10", path)
        qemu_img("amend", "-o", "compat=0.10", ref)
        self.assertEqual(self.info_json(path)["format-specific"]["data"],
                         self.info_json(ref)["format-specific"]["data"])
        self.check_clean(path)
        qemu_img("snapshot", "-a", "s", path)
        qemu_io(path, "read -P 0x61 0 64k")
        # A snapshot of another size: refused, and the image unchanged.
        path = self.image(name="b.qcow2", size="1M")
        qil("snapshot", "-c", "s", path)
        qil("resize", "-q", path, "2M")
        self.assertFails(["amend", "-o", "compat=0.10", path],
                         "Internal snapshots prevent downgrade of image")
        self.assertEqual(
            self.info_json(path)["format-specific"]["data"]["compat"], "1.1")

    def test_corrupt_snapshot_l1_as_qemu_img(self):
        """A snapshot L1 table QEMU refuses (unaligned, too large): apply
        and amend to 0.10 fail as qemu-img's do, the reason on a line of
        its own and then the errno (qemu-iotests 080); nothing written."""
        for field, data, reason, errno in (
                (0, struct.pack(">Q", 0x400200),
                 "Snapshot L1 table offset invalid", "Invalid argument"),
                (8, struct.pack(">I", 0x10000000),
                 "Snapshot L1 table too large", "File too large")):
            path = self.image(size="64M")
            qemu_io(path, "write 0 512")
            qil("snapshot", "-c", "test", path)
            with open(path, "rb") as f:
                off = struct.unpack(">Q", f.read(72)[64:72])[0]
            with open(path, "r+b") as f:
                f.seek(off + field)
                f.write(data)
            with open(path, "rb") as f:
                before = f.read()
            for args, last in (
                    (["snapshot", "-a", "test", path],
                     "Could not apply snapshot 'test': Failed to load "
                     "snapshot: " + errno),
                    (["amend", "-o", "compat=0.10", path],
                     "Failed to turn zero into data clusters: " + errno)):
                ours = qil(*args, check=False)
                ref = qemu_img(*args, check=False)
                self.assertEqual(ours.returncode, 1)
                self.assertEqual(ref.returncode, 1)
                want = [f"qemu-img: {reason}", f"qemu-img: {last}"]
                self.assertEqual(ref.stderr.splitlines(), want)
                self.assertEqual(
                    [line.split(": ", 1)[1] for line in
                     ours.stderr.splitlines()],
                    [line.split(": ", 1)[1] for line in want])
                with open(path, "rb") as f:
                    self.assertEqual(f.read(), before)

    def test_refcount_of_cluster_past_end_as_qemu_img(self):
        """An L2 entry pointing far past the end of the file: snapshot -c
        fails in qemu-img's errno form (its refcount update cannot make a
        refcount block there: -EFBIG past the largest refcount table,
        else -EAGAIN), and writes no snapshot (qemu-iotests 080)."""
        for entry, msg in ((0xbfffffffffff0000, "-27 (File too large)"),
                           (0x800000ffffff0000,
                            "-11 (Resource temporarily unavailable)")):
            path = self.image(size="64M")
            qemu_io(path, "write 0 512")
            with open(path, "rb") as f:
                l1_off = struct.unpack(">Q", f.read(48)[40:48])[0]
                f.seek(l1_off)
                l2_off = struct.unpack(">Q", f.read(8))[0] & ((1 << 56) - 512)
            with open(path, "r+b") as f:
                f.seek(l2_off)
                f.write(struct.pack(">Q", entry))
            ref = self.path("ref.qcow2")
            shutil.copy(path, ref)
            self.assertFails(["snapshot", "-c", "test", path],
                             "Could not create snapshot 'test': " + msg)
            self.assertIn("Could not create snapshot 'test': " + msg,
                          qemu_img("snapshot", "-c", "test", ref,
                                   check=False).stderr)
            self.assertEqual(self.info_json(path).get("snapshots"), None)

    def test_amend_upgrade_rewrites_table(self):
        """compat=0.10 entries may lack the extra data version 3 needs:
        amend compat=1.1 writes the table again, as qemu-img does."""
        path = self.image(opts="compat=0.10")
        qemu_io(path, "write -P 0x61 0 64k")
        qemu_img("snapshot", "-c", "old", path)
        qil("amend", "-o", "compat=1.1", path)
        self.check_clean(path)
        self.assertEqual(self.info_json(path)["snapshots"][0]["name"], "old")
        qemu_img("snapshot", "-a", "old", path)
        qemu_io(path, "read -P 0x61 0 64k")

    def test_hostile_table(self):
        path = self.image(size="1M")
        qemu_img("snapshot", "-c", "s", path)
        with open(path, "rb") as f:
            hdr = f.read(72)
        nb, off = struct.unpack(">IQ", hdr[60:72])
        self.assertEqual(nb, 1)

        def patched(name, at, data):
            p = self.path(name)
            shutil.copy(path, p)
            with open(p, "r+b") as f:
                f.seek(at)
                f.write(data)
            return p

        # Too much extra data (QEMU's bound: 1 KiB).
        p = patched("extra.qcow2", off + 36, struct.pack(">I", 1 << 20))
        self.assertFails(["snapshot", "-l", p],
                         "Too much extra metadata in snapshot table entry 0")
        # A snapshot L1 table past the end of the file: refused, no crash.
        p = patched("l1.qcow2", off, struct.pack(">Q", 1 << 40))
        self.assertFails(["snapshot", "-a", "s", p], "Could not apply")
        self.assertFails(["convert", "-l", "s", "-O", "raw", p,
                          self.path("o.raw")], "Failed to load snapshot")
        # Many entries, the table running past the end of the file.
        p = patched("many.qcow2", 60, struct.pack(">I", 65536))
        proc = qil("snapshot", "-l", p, check=False)
        self.assertIn(proc.returncode, (0, 1))


if __name__ == "__main__":
    main()
