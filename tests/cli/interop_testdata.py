# SPDX-License-Identifier: GPL-2.0-or-later
"""cryptsetup's own LUKS1 test images (QIL_TESTDATA/cryptsetup): every one
opens, and its data area holds the vfat file system with UUID DEAD-BABE;
the compatibility images open; hostile headers are refused cleanly."""
import glob
import lzma
import os
import shutil
import struct
import subprocess
import tarfile

from qiltest import TESTDATA, TestCase, file_bytes, main, qil

CS_DIR = os.path.join(TESTDATA, "cryptsetup") if TESTDATA else ""


def vfat_volume_id(boot):
    """The volume ID of a FAT boot sector, or None if it is not one."""
    if boot[510:512] != b"\x55\xaa":
        return None
    if boot[0x52:0x57] == b"FAT32":
        return struct.unpack_from("<I", boot, 0x43)[0]
    if boot[0x36:0x39] == b"FAT":
        return struct.unpack_from("<I", boot, 0x27)[0]
    return None


class TestData(TestCase):
    def setUp(self):
        super().setUp()
        if not CS_DIR or not os.path.isdir(CS_DIR):
            self.skipTest(f"no shared test data at '{CS_DIR}' "
                          "(QIL_TESTDATA)")
        self.need_luks()

    def unxz(self, name):
        out = self.path(name[:-3] if name.endswith(".xz") else name)
        with lzma.open(os.path.join(CS_DIR, name)) as f, \
                open(out, "wb") as g:
            shutil.copyfileobj(f, g)
        return out

    def test_luks1_images_hold_dead_babe(self):
        with tarfile.open(os.path.join(CS_DIR, "luks1-images.tar.xz")) as t:
            t.extractall(self.dir)
        images = sorted(glob.glob(self.path("luks1-images/*.img")))
        self.assertEqual(len(images), 12)
        keyfile = self.path("luks1-images/keyfile1")
        for img in images:
            with self.subTest(image=os.path.basename(img)):
                raw = img + ".raw"
                qil("convert", "--object", f"secret,id=k,file={keyfile}",
                    "--image-opts",
                    f"driver=luks,key-secret=k,file.filename={img}",
                    "-O", "raw", raw)
                self.assertEqual(vfat_volume_id(file_bytes(raw)[:512]),
                                 0xDEADBABE)
                if shutil.which("blkid") or os.path.exists("/sbin/blkid"):
                    blkid = shutil.which("blkid") or "/sbin/blkid"
                    out = subprocess.run([blkid, "-p", raw],
                                         capture_output=True, text=True)
                    self.assertIn('UUID="DEAD-BABE"', out.stdout)
                os.unlink(raw)

    def test_compat_images(self):
        # (compatimage's other passphrases in the README are slots that
        # cryptsetup's own tests add first: only slot 0 is there)
        for name, key in [("compatimage.img.xz", "compatkey"),
                          ("compatv10image.img.xz", "compatkey")]:
            with self.subTest(image=name, key=key):
                img = self.unxz(name)
                raw = self.path("out.raw")
                opts = f"driver=luks,key-secret=k,file.filename={img}"
                qil("convert", "--object", f"secret,id=k,data={key}",
                    "--image-opts", opts, "-O", "raw", raw)
                self.assertGreater(os.path.getsize(raw), 0)
                proc = qil("convert", "--object", "secret,id=k,data=bad",
                           "--image-opts", opts, "-O", "raw",
                           self.path("bad.raw"), check=False)
                self.assertEqual(proc.returncode, 1)
                self.assertIn("Invalid password", proc.stderr)
                self.assertFalse(os.path.exists(self.path("bad.raw")))
                os.unlink(raw)
                os.unlink(img)

    def test_hostile_headers_refused(self):
        names = sorted(os.path.basename(p) for p in
                       glob.glob(os.path.join(CS_DIR, "evil_hdr-*.xz")))
        self.assertTrue(names)
        for name in names:
            with self.subTest(header=name):
                img = self.unxz(name)
                before = file_bytes(img)
                out = self.path("out.raw")
                proc = qil("convert", "--object", "secret,id=k,data=x",
                           "--image-opts",
                           f"driver=luks,key-secret=k,file.filename={img}",
                           "-O", "raw", out, check=False)
                self.assertEqual(proc.returncode, 1, proc.stderr)
                self.assertTrue(proc.stderr.startswith("qemu-img-lite: "))
                self.assertFalse(os.path.exists(out))
                self.assertEqual(file_bytes(img), before)
                os.unlink(img)


if __name__ == "__main__":
    main()
