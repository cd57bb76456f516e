# SPDX-License-Identifier: GPL-2.0-or-later
"""Block devices and header-only files (issue 15 item 10).

create -f luks (and luks2, and raw) onto an existing block device, as
qemu-img creates onto one: the header is written into the device, which is
not truncated nor cleared past what the image uses; with no size the image
fills the device; a size beyond the device, and preallocation, are refused
with qemu-img's messages, and a failed create leaves the device node alone.
The devices are loop devices over files in the test's directory (root and
a working losetup are needed, else those tests skip). The image is then
read by qemu-img and cryptsetup, written with convert -n and dd; convert
(without -n) writes onto a device in place too, as qemu-img.

info of a file that is a LUKS header and no payload (cryptsetup
luksHeaderBackup output, a detached header made with cryptsetup --header)
shows the header, as cryptsetup luksDump reads it, with size 0.
"""
import json
import os
import shutil
import subprocess

import qiltest
from qiltest import (CRYPTSETUP, ITER_TIME, SECRET, TestCase, file_bytes,
                     main, qemu_img, qil, random_file, run)

LOSETUP = shutil.which("losetup") or (
    "/usr/sbin/losetup" if os.path.exists("/usr/sbin/losetup") else None)
CREATE = ["--object", SECRET, "-o", f"key-secret=sec0,iter-time={ITER_TIME}"]


def cryptsetup(*args, input=None):
    return run([CRYPTSETUP, *args], input=input)


class DeviceTest(TestCase):
    def setUp(self):
        super().setUp()
        self.need_luks()
        self.loops = []

    def tearDown(self):
        for dev in self.loops:
            subprocess.run([LOSETUP, "-d", dev], capture_output=True)
        super().tearDown()

    def loop(self, size, fill=True, sector_size=None):
        """A loop device over a file of size bytes (random if fill), with
        logical blocks of sector_size bytes (losetup's default: 512)."""
        if os.geteuid() != 0 or not LOSETUP:
            self.skipTest("loop devices need root and losetup")
        backing = self.path(f"loop{len(self.loops)}.img")
        if fill:
            random_file(backing, size, seed=7)
        else:
            with open(backing, "wb") as f:
                f.truncate(size)
        extra = ["--sector-size", str(sector_size)] if sector_size else []
        proc = subprocess.run([LOSETUP, "-f", "--show", *extra, backing],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            self.skipTest(f"losetup does not work here: {proc.stderr}")
        dev = proc.stdout.strip()
        self.loops.append(dev)
        return dev, backing

    def test_luks_fills_device(self):
        dev, backing = self.loop(8 << 20)
        proc = qil("create", "-f", "luks", *CREATE, dev)
        self.assertIn("size=6320128", proc.stdout)
        info = self.info_json(dev)
        self.assertEqual(info["virtual-size"], (8 << 20) - 2068480)
        self.assertEqual(os.path.getsize(backing), 8 << 20)
        if qiltest.QEMU_IMG:
            theirs = json.loads(qemu_img("info", "--output=json",
                                         dev).stdout)
            self.assertEqual(theirs["virtual-size"], info["virtual-size"])
            self.assertEqual(theirs["format"], "luks")
        if CRYPTSETUP:
            dump = cryptsetup("luksDump", dev).stdout
            self.assertIn("Version:       \t1", dump)
            self.assertIn(info["format-specific"]["data"]["uuid"], dump)

    def test_luks_smaller_than_device_keeps_the_rest(self):
        dev, backing = self.loop(8 << 20)
        before = file_bytes(backing)
        qil("create", "-f", "luks", *CREATE, dev, "1M")
        after = file_bytes(backing)
        end = 2068480 + (1 << 20)
        self.assertNotEqual(after[:4096], before[:4096])
        self.assertEqual(after[end:], before[end:])
        # The virtual size is the device's, as qemu-img reads it.
        self.assertEqual(self.info_json(dev)["virtual-size"],
                         (8 << 20) - 2068480)

    def test_luks2_and_data(self):
        dev, _ = self.loop(32 << 20)
        qil("create", "-f", "luks", *CREATE[:3],
            f"key-secret=sec0,iter-time={ITER_TIME},luks-version=2", dev)
        info = self.info_json(dev)["format-specific"]["data"]
        self.assertEqual(info["version"], 2)
        if CRYPTSETUP:
            self.assertIn("Version:       \t2",
                          cryptsetup("luksDump", dev).stdout)
        # Write data into it, read it back through the key.
        size = self.info_json(dev)["virtual-size"]
        src = self.path("src.raw")
        random_file(src, size)
        opts = f"driver=luks,key-secret=sec0,file.filename={dev}"
        qil("convert", "-n", "--object", SECRET, "--target-image-opts",
            "-f", "raw", src, opts)
        back = self.path("back.raw")
        qil("convert", "--object", SECRET, "--image-opts", opts, "-O",
            "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(src))

    def test_qemu_img_reads_our_luks1_data(self):
        self.need_qemu_img()
        dev, _ = self.loop(4 << 20)
        qil("create", "-q", "-f", "luks", *CREATE, dev)
        size = self.info_json(dev)["virtual-size"]
        src = self.path("src.raw")
        random_file(src, size, seed=3)
        opts = f"driver=luks,key-secret=sec0,file.filename={dev}"
        qil("convert", "-n", "--object", SECRET, "--target-image-opts",
            "-f", "raw", src, opts)
        back = self.path("back.raw")
        qemu_img("convert", "--object", SECRET, "--image-opts", opts, "-O",
                 "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(src))

    def test_refusals_keep_the_device(self):
        dev, backing = self.loop(4 << 20)
        before = file_bytes(backing)
        for args, msg in (
                (["-f", "luks", *CREATE, dev, "16M"],
                 "Cannot grow device files"),
                (["-f", "raw", dev, "16M"], "Cannot grow device files"),
                (["-f", "raw", "-o", "preallocation=full", dev, "1M"],
                 "Preallocation mode 'full' unsupported for this "
                 "non-regular file"),
                (["-f", "luks", "--object", SECRET, "-o",
                  f"key-secret=sec0,iter-time={ITER_TIME},"
                  "preallocation=falloc", dev, "1M"],
                 "Preallocation mode 'falloc' unsupported for this "
                 "non-regular file"),
                (["-f", "luks", *CREATE[:3],
                  f"key-secret=sec0,iter-time={ITER_TIME},luks-version=2",
                  dev], "Cannot grow device files")):
            with self.subTest(args=args):
                self.assertFails(["create", *args], msg)
                self.assertTrue(os.path.exists(dev))
        # A raw image of the device's size or less: nothing is written.
        qil("create", "-f", "raw", dev)
        qil("create", "-f", "raw", dev, "1M")
        self.assertEqual(file_bytes(backing)[4096:], before[4096:])

    def test_convert_onto_device(self):
        # As qemu-img: a device target is written in place, without -n.
        dev, backing = self.loop(4 << 20)
        src = self.path("src.raw")
        random_file(src, 1000000, seed=5)
        before = file_bytes(backing)
        qil("convert", "-f", "raw", "-O", "raw", src, dev)
        after = file_bytes(backing)
        self.assertEqual(after[:1000000], file_bytes(src))
        self.assertEqual(after[1000448:], before[1000448:])
        big = self.path("big.raw")
        random_file(big, 5 << 20)
        self.assertFails(["convert", "-f", "raw", "-O", "raw", big, dev],
                         "Cannot grow device files")
        self.assertTrue(os.path.exists(dev))
        # LUKS onto the device, read back by qemu-img.
        qil("convert", "--object", SECRET, "-f", "raw", "-O", "luks", "-o",
            f"key-secret=sec0,iter-time={ITER_TIME}", src, dev)
        if qiltest.QEMU_IMG:
            back = self.path("back.raw")
            qemu_img("convert", "--object", SECRET, "--image-opts",
                     f"driver=luks,key-secret=sec0,file.filename={dev}",
                     "-O", "raw", back)
            self.assertEqual(file_bytes(back)[:1000000], file_bytes(src))

    def test_qcow2_on_device(self):
        # As qemu-img: the metadata is written at the start of the device.
        self.need_qemu_img()
        dev, backing = self.loop(8 << 20)
        qil("create", "-q", "-f", "qcow2", dev, "4M")
        info = self.info_json(dev)
        self.assertEqual((info["format"], info["virtual-size"]),
                         ("qcow2", 4 << 20))
        self.assertEqual(os.path.getsize(backing), 8 << 20)
        check = qemu_img("check", "-f", "qcow2", dev)
        self.assertIn("No errors were found", check.stdout)
        self.assertFails(["create", "-f", "qcow2", "-o",
                          "preallocation=full", dev, "1M"],
                         "Preallocation mode 'full' unsupported for this "
                         "non-regular file")

    def test_dd_onto_device(self):
        dev, backing = self.loop(1 << 20, fill=False)
        src = self.path("src.raw")
        random_file(src, 300000)
        qil("dd", f"if={src}", f"of={dev}", "bs=4k")
        data = file_bytes(backing)
        self.assertEqual(data[:300000], file_bytes(src))
        self.assertEqual(len(data), 1 << 20)


    def test_salvage_narrows_to_the_logical_block(self):
        """convert --salvage reads a failed chunk again one logical block
        at a time: the device's own (BLKSSZGET), so a bad 512 bytes on a
        device of 4096-byte blocks lose that block, and only it."""
        for sector in (512, 4096):
            with self.subTest(sector=sector):
                dev, backing = self.loop(4 << 20, sector_size=sector)
                data = file_bytes(backing)
                bad = (1 << 20) + 3 * 512
                out = self.path(f"out{sector}.raw")
                proc = qil("convert", "--salvage", "-O", "raw",
                           "--image-opts",
                           f"driver=raw,file.driver=blkdebug,"
                           f"file.bad-offset={bad},file.bad-bytes=512,"
                           f"file.file.filename={dev}", out)
                start = bad - bad % sector
                self.assertEqual(proc.stderr.count("warning: error while "
                                                   f"reading offset {start}:"),
                                 1, proc.stderr)
                self.assertEqual(proc.stderr.count("warning:"), 1)
                got = file_bytes(out)
                self.assertEqual(got[start:start + sector], bytes(sector))
                self.assertEqual(got[:start], data[:start])
                self.assertEqual(got[start + sector:], data[start + sector:])


class HeaderOnlyTest(TestCase):
    def setUp(self):
        super().setUp()
        self.need_luks()
        self.need_cryptsetup()

    def format(self, version, path, *extra):
        args = ["luksFormat", "-q", "--type", f"luks{version}",
                "--pbkdf-force-iterations", "1000", "--key-file", "-"]
        if version == 2:
            args += ["--pbkdf", "pbkdf2"]
        cryptsetup(*args, *extra, path, input=qiltest.PASSPHRASE)

    def assert_header_info(self, header, full=None):
        """info of a header-only file: the header, size 0, no failure."""
        info = self.info_json(header)
        data = info["format-specific"]["data"]
        self.assertEqual(info["virtual-size"], 0)
        self.assertEqual(info["format"], "luks")
        self.assertTrue(data.get("detached-header"))
        self.assertTrue(data["slots"][0]["active"])
        dump = cryptsetup("luksDump", header).stdout
        self.assertIn(data["uuid"], dump)
        if full:
            whole = self.info_json(full)["format-specific"]["data"]
            for key in ("uuid", "cipher-alg", "cipher-mode", "slots",
                        "payload-offset", "master-key-iters"):
                self.assertEqual(data[key], whole[key], key)
        human = qil("info", header).stdout
        self.assertIn("virtual size: 0 B (0 bytes)", human)
        self.assertIn("detached header: true", human)
        # Only info reads it: a copy of its data is refused.
        self.assertFails(["convert", "--object", SECRET, "--image-opts",
                          f"driver=luks,key-secret=sec0,file.filename="
                          f"{header}", "-O", "raw", self.path("x.raw")])
        return data

    def test_header_backup_luks1(self):
        dev = self.path("dev1.img")
        random_file(dev, 4 << 20)
        self.format(1, dev)
        backup = self.path("hdr1.bak")
        cryptsetup("luksHeaderBackup", dev, "--header-backup-file", backup)
        self.assertLess(os.path.getsize(backup), 2097152)
        self.assert_header_info(backup, dev)

    def test_detached_headers(self):
        for version in (1, 2):
            with self.subTest(version=version):
                data = self.path(f"data{version}.img")
                random_file(data, 4 << 20)
                header = self.path(f"hdr{version}.img")
                with open(header, "wb") as f:
                    f.truncate(16 << 20)
                self.format(version, data, "--header", header)
                info = self.assert_header_info(header)
                self.assertEqual(info["payload-offset"], 0)

    def test_our_detached_headers(self):
        for version in (1, 2):
            with self.subTest(version=version):
                header = self.path(f"ours{version}.hdr")
                qil("create", "-q", "-f", "luks", "--object", SECRET, "-o",
                    f"key-secret=sec0,iter-time={ITER_TIME},"
                    f"detached-header=on,luks-version={version}", header)
                self.assert_header_info(header)

    def test_header_backup_luks2_unchanged(self):
        # A LUKS2 backup is a whole image with no payload: as before.
        dev = self.path("dev2.img")
        random_file(dev, 20 << 20)
        self.format(2, dev)
        backup = self.path("hdr2.bak")
        cryptsetup("luksHeaderBackup", dev, "--header-backup-file", backup)
        info = self.info_json(backup)
        self.assertEqual(info["virtual-size"], 0)
        self.assertNotIn("detached-header", info["format-specific"]["data"])


if __name__ == "__main__":
    main()
