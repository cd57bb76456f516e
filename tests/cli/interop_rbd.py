#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The RBD protocol driver (block/rbd.c, librbd) against a real Ceph
cluster: one mon and one bluestore OSD on loopback, started once for the
whole module by scripts/ceph-cluster.sh and stopped at its end. Raw images
into RBD and back, byte for byte, holes kept (map); info, compare, resize,
check, create options; the real qemu-img's rbd driver reading what we
wrote and writing what we read; LUKS1 and LUKS2 on RBD both ways with
qemu-img; an image encrypted by librbd itself (rbd encryption format)
opened by our luks driver, its data what qemu-img's encrypt.format=luks2
wrote; and the refusals (no cluster, no pool, no image, a name in use, a
snapshot opened for writing, a failed copy that must leave no image)."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

import qiltest
from qiltest import (CRYPTSETUP, ITER_TIME, PASSPHRASE, QEMU_IMG, SECRET,
                     TOOL, TestCase, file_bytes, have_luks, main, qemu_img,
                     qil, random_file)

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      "scripts", "ceph-cluster.sh")
CEPH_TOOLS = ("ceph-mon", "ceph-osd", "ceph", "rbd")

CLUSTER_DIR = None      # set by setUpModule when a cluster runs
CONF = None
SKIP_REASON = None

# Any one command may take this long (librbd's argon2id calibration takes
# seconds, more on a loaded machine); past it the test fails naming the
# command (a cluster that stopped answering), not meson's module timeout.
qiltest.COMMAND_TIMEOUT = 240


def tool_has_rbd():
    proc = qil("info", "rbd:rbd/x", check=False)
    return "Unknown protocol" not in proc.stderr


def setUpModule():
    global CLUSTER_DIR, CONF, SKIP_REASON
    if not tool_has_rbd():
        SKIP_REASON = ("qemu-img-lite was built without librbd "
                       "(scripts/install-deps.sh installs librbd-dev)")
        return
    missing = [t for t in CEPH_TOOLS if not shutil.which(t)]
    if missing:
        SKIP_REASON = (f"{', '.join(missing)} not installed (scripts/"
                       "install-deps.sh installs ceph-mon, ceph-osd, "
                       "ceph-common)")
        return
    CLUSTER_DIR = tempfile.mkdtemp(prefix="qil-ceph-")
    start = time.monotonic()
    proc = subprocess.run([SCRIPT, "start", CLUSTER_DIR], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        stop_cluster()
        raise RuntimeError(f"the test cluster did not start: {proc.stderr}")
    CONF = proc.stdout.strip()
    print(f"ceph cluster up in {time.monotonic() - start:.1f} s")
    # meson ends a module that overruns its timeout with SIGTERM: stop the
    # daemons then too, or they outlive the test run.
    signal.signal(signal.SIGTERM, on_sigterm)


def on_sigterm(signum, frame):
    stop_cluster()
    os._exit(128 + signum)


def stop_cluster():
    global CLUSTER_DIR
    if CLUSTER_DIR:
        subprocess.run([SCRIPT, "stop", CLUSTER_DIR], capture_output=True)
        shutil.rmtree(CLUSTER_DIR, ignore_errors=True)
        CLUSTER_DIR = None


def tearDownModule():
    stop_cluster()


def osd_pid():
    with open(os.path.join(CLUSTER_DIR, "run", "osd.0.pid")) as f:
        return int(f.read())


def kill_osd():
    """SIGKILL osd.0 and wait until the process is gone: a new OSD cannot
    take the store's lock while the old one (in uninterruptible I/O on a
    loaded disk) still holds it. Returns the pid."""
    pid = osd_pid()
    os.kill(pid, signal.SIGKILL)
    for _ in range(600):
        if not os.path.exists(f"/proc/{pid}"):
            break
        time.sleep(0.1)
    return pid


def restart_osd(old_pid):
    """Start osd.0 again after kill_osd() and wait until it serves: the
    mon is told first that the old one is down (alone, no peer reports
    it, and "HEALTH_OK" would be the mon's stale view), then HEALTH_OK
    must come from a new OSD process that a write reaches."""
    ceph = ["ceph", "-c", CONF]
    subprocess.run(ceph + ["osd", "down", "0"], capture_output=True,
                   timeout=60)
    subprocess.run(["ceph-osd", "-c", CONF, "-i", "0"], check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=60)
    health = ""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        health = subprocess.run(ceph + ["health"], capture_output=True,
                                text=True, timeout=60).stdout.strip()
        try:
            if health == "HEALTH_OK" and osd_pid() != old_pid:
                probe = subprocess.run(
                    ["rados", "-c", CONF, "-p", "rbd", "put", "osd-probe",
                     "/dev/null"], capture_output=True, timeout=30)
                if probe.returncode == 0:
                    return
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass        # no pid file yet, or the write did not get through
        time.sleep(0.5)
    raise AssertionError(f"the OSD did not come back: {health}")


def rbd(*args, check=True, input=None):
    proc = subprocess.run(["rbd", "-c", CONF, *args], capture_output=True,
                          text=True, input=input,
                          timeout=qiltest.COMMAND_TIMEOUT)
    if check and proc.returncode != 0:
        raise AssertionError(f"rbd {' '.join(args)} exited "
                             f"{proc.returncode}: {proc.stderr}")
    return proc


def images():
    return set(json.loads(rbd("ls", "--format", "json", "rbd").stdout))


class RBDTest(TestCase):
    counter = 0

    def setUp(self):
        super().setUp()
        if SKIP_REASON:
            self.skipTest(SKIP_REASON)

    def new_name(self):
        """A pool/image of this test, not yet in the cluster."""
        RBDTest.counter += 1
        return f"{self._testMethodName[5:]}-{RBDTest.counter}"

    @staticmethod
    def name(image, pool="rbd"):
        return f"rbd:{pool}/{image}:conf={CONF}"

    @staticmethod
    def opts(image, pool="rbd"):
        return f"driver=rbd,pool={pool},image={image},conf={CONF}"

    def sparse_source(self, size=24 << 20):
        """A raw file: data, a 8 MiB hole, data, a hole to the end."""
        src = self.path("src.raw")
        random_file(src, 6 << 20, seed=7)
        with open(src, "r+b") as f:
            f.truncate(size)
            f.seek(14 << 20)
            f.write(os.urandom(3 << 20))
        return src

    def map_extents(self, *args):
        """map --output=json as (start, length, data, zero) tuples."""
        out = json.loads(qil("map", "--output=json", *args).stdout)
        return [(e["start"], e["length"], e["data"], e["zero"]) for e in out]


class Raw(RBDTest):
    def test_roundtrip_sparse(self):
        """raw -> RBD -> raw, byte for byte; holes stay holes: in the
        image (map) and in the copy back."""
        src, back = self.sparse_source(), self.path("back.raw")
        img = self.new_name()
        qil("convert", "-f", "raw", src, "-O", "raw", self.name(img))
        info = self.info_json(self.name(img))
        self.assertEqual(info["format"], "raw")
        self.assertEqual(info["virtual-size"], 24 << 20)
        self.assertEqual(info["filename"], f"rbd:rbd/{img}")
        qil("convert", "-O", "raw", self.name(img), back)
        self.assertEqual(file_bytes(back), file_bytes(src))
        # Only what was written is allocated, in 4 MiB objects.
        self.assertLess(os.stat(back).st_blocks * 512, 13 << 20)
        extents = self.map_extents(self.name(img))
        self.assertEqual([(s, n, d) for s, n, d, z in extents],
                         [(0, 8 << 20, True), (8 << 20, 4 << 20, False),
                          (12 << 20, 8 << 20, True),
                          (20 << 20, 4 << 20, False)])
        self.assertIn("identical", qil("compare", "-f", "raw", "-F", "raw",
                                       src, self.name(img)).stdout)
        du = rbd("du", "--format", "json", f"rbd/{img}").stdout
        self.assertLessEqual(json.loads(du)["images"][0]["used_size"],
                             16 << 20)

    def test_image_opts_and_namespace(self):
        """--image-opts driver=rbd, and an image in a namespace."""
        src = self.path("src.raw")
        random_file(src, 1 << 20)
        rbd("namespace", "create", "rbd/ns1")
        img = self.new_name()
        qil("convert", "-f", "raw", src, "-O", "raw",
            f"rbd:rbd/ns1/{img}:conf={CONF}")
        self.assertIn(img, rbd("ls", "rbd/ns1").stdout)
        self.assertNotIn(img, images())
        back = self.path("back.raw")
        qil("convert", "--image-opts", self.opts(img) + ",namespace=ns1",
            "-O", "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(src))

    def test_create_cluster_size_resize(self):
        img = self.new_name()
        qil("create", "-f", "raw", "-o", "cluster_size=1M", self.name(img),
            "64M")
        info = json.loads(rbd("info", "--format", "json",
                              f"rbd/{img}").stdout)
        self.assertEqual((info["size"], info["order"]), (64 << 20, 20))
        qil("resize", self.name(img), "96M")
        self.assertEqual(self.info_json(self.name(img))["virtual-size"],
                         96 << 20)
        qil("resize", "--shrink", self.name(img), "32M")
        info = json.loads(rbd("info", "--format", "json",
                              f"rbd/{img}").stdout)
        self.assertEqual(info["size"], 32 << 20)
        self.assertFails(["create", "-f", "raw", "-o", "cluster_size=3M",
                          self.name(self.new_name()), "1M"], "power of 2")
        # raw has no checks, as with qemu-img (exit 63)
        proc = qil("check", self.name(img), check=False)
        self.assertEqual(proc.returncode, 63, proc.stderr)

    def test_dd(self):
        src = self.path("src.raw")
        random_file(src, 3 << 20)
        img = self.new_name()
        qil("dd", "-f", "raw", "-O", "raw", "bs=1M", f"if={src}",
            f"of={self.name(img)}")
        self.assertIn("identical", qil("compare", "-f", "raw", "-F", "raw",
                                       src, self.name(img)).stdout)

    def test_snapshot_read_only(self):
        src = self.path("src.raw")
        random_file(src, 1 << 20)
        img = self.new_name()
        qil("convert", "-f", "raw", src, "-O", "raw", self.name(img))
        rbd("snap", "create", f"rbd/{img}@s1")
        random_file(src, 1 << 20, seed=2)
        qil("convert", "-n", "-f", "raw", src, "-O", "raw", self.name(img))
        back = self.path("back.raw")
        qil("convert", "-O", "raw", f"rbd:rbd/{img}@s1:conf={CONF}", back)
        random_file(src, 1 << 20)
        self.assertEqual(file_bytes(back), file_bytes(src))
        self.assertFails(["resize", f"rbd:rbd/{img}@s1:conf={CONF}", "2M"],
                         "RBD snapshots are always read-only")


class QemuImg(RBDTest):
    def setUp(self):
        super().setUp()
        self.need_qemu_img()

    def test_qemu_img_reads_ours_and_we_read_its(self):
        src = self.sparse_source()
        ours, theirs = self.new_name(), self.new_name()
        qil("convert", "-f", "raw", src, "-O", "raw", self.name(ours))
        back = self.path("back.raw")
        qemu_img("convert", "-f", "raw", "-O", "raw", self.name(ours), back)
        self.assertEqual(file_bytes(back), file_bytes(src))
        qemu_img("convert", "-f", "raw", src, "-O", "raw", self.name(theirs))
        back2 = self.path("back2.raw")
        qil("convert", "-O", "raw", self.name(theirs), back2)
        self.assertEqual(file_bytes(back2), file_bytes(src))
        # The same allocation as qemu-img sees it (its rbd driver reads
        # the object map too).
        theirs_map = json.loads(qemu_img("map", "--output=json", "-f", "raw",
                                         self.name(ours)).stdout)
        self.assertEqual([(e["start"], e["length"], e["data"], e["zero"])
                          for e in theirs_map],
                         self.map_extents(self.name(ours)))


class Luks(RBDTest):
    def setUp(self):
        super().setUp()
        self.need_luks()
        self.need_qemu_img()

    def luks_on_rbd(self, image):
        return (f"driver=luks,key-secret=sec0,file.driver=rbd,"
                f"file.pool=rbd,file.image={image},file.conf={CONF}")

    def librbd_opts(self, image):
        """qemu-img's rbd driver with librbd's own LUKS2 decryption."""
        return (f"driver=rbd,pool=rbd,image={image},conf={CONF},"
                f"encrypt.format=luks2,encrypt.key-secret=sec0")

    def make(self, version, src):
        img = self.new_name()
        qil("convert", "--object", SECRET, "-f", "raw", src, "-O", "luks",
            "-o", f"key-secret=sec0,iter-time={ITER_TIME},"
            f"luks-version={version}", self.name(img))
        info = self.info_json(self.name(img))
        self.assertEqual(info["format"], "luks")
        self.assertTrue(info["encrypted"])
        return img

    def test_luks1_both_ways(self):
        """Our LUKS1 on RBD read by qemu-img's luks driver on its rbd
        node, and by librbd's LUKS1 (encrypt.format=luks); then qemu-img
        writes new data into it, which we read."""
        src, back = self.path("src.raw"), self.path("back.raw")
        random_file(src, 8 << 20)
        img = self.make(1, src)
        qemu_img("convert", "--object", SECRET, "--image-opts",
                 self.luks_on_rbd(img), "-O", "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(src))
        os.unlink(back)
        qemu_img("convert", "--object", SECRET, "--image-opts",
                 self.librbd_opts(img).replace("luks2", "luks"), "-O",
                 "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(src))
        random_file(src, 8 << 20, seed=5)
        qemu_img("convert", "-n", "--object", SECRET, "-f", "raw", src,
                 "--target-image-opts", self.luks_on_rbd(img))
        os.unlink(back)
        qil("convert", "--object", SECRET, "--image-opts",
            self.luks_on_rbd(img), "-O", "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(src))

    def test_amend_and_object_size(self):
        """A key slot added to LUKS2 on RBD (amend) opens it; the object
        size given to a luks convert goes to the RBD image."""
        src, back = self.path("src.raw"), self.path("back.raw")
        random_file(src, 2 << 20)
        img = self.new_name()
        qil("convert", "--object", SECRET, "-f", "raw", src, "-O", "luks",
            "-o", f"key-secret=sec0,iter-time={ITER_TIME},luks-version=2,"
            "cluster_size=1M", self.name(img))
        info = json.loads(rbd("info", "--format", "json",
                              f"rbd/{img}").stdout)
        self.assertEqual(info["order"], 20)
        qil("amend", "--object", SECRET, "--object",
            "secret,id=sec1,data=other pass", "--image-opts",
            self.luks_on_rbd(img), "-o",
            f"state=active,new-secret=sec1,iter-time={ITER_TIME}")
        qil("convert", "--object", "secret,id=sec0,data=other pass",
            "--image-opts", self.luks_on_rbd(img), "-O", "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(src))

    def test_luks2_with_librbd_encryption(self):
        """Our LUKS2 on RBD has librbd's layout (16 MiB data offset,
        4096-byte sectors, the header area written whole as librbd
        writes it): librbd's own decryption (qemu-img's
        encrypt.format=luks2; QEMU 7.2 has no LUKS2 of its own) reads
        it, and what qemu-img writes through it we read.

        Read with qemu-img convert: QEMU 7.2's rbd block status on an
        encrypted image asks librbd in offsets of the raw image, so an
        unwritten object of the header area would be taken for a hole
        of the data (8 MiB here: raw objects 0 and 1)."""
        src, back = self.path("src.raw"), self.path("back.raw")
        random_file(src, 8 << 20)
        img = self.make(2, src)
        qemu_img("convert", "--object", SECRET, "--image-opts",
                 self.librbd_opts(img), "-O", "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(src))
        random_file(src, 8 << 20, seed=6)
        qemu_img("convert", "-n", "--object", SECRET, "-f", "raw", src,
                 "--target-image-opts", self.librbd_opts(img))
        os.unlink(back)
        qil("convert", "--object", SECRET, "--image-opts",
            self.luks_on_rbd(img), "-O", "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(src))


class Reencrypt(RBDTest):
    """reencrypt in place on RBD: the LUKS2 header inside the image."""

    def setUp(self):
        super().setUp()
        self.need_luks()

    def luks_on_rbd(self, image):
        return (f"driver=luks,key-secret=sec0,file.driver=rbd,"
                f"file.pool=rbd,file.image={image},file.conf={CONF}")

    def raw_image(self, size):
        """A raw RBD image of size bytes, 16 MiB of room at its end."""
        src = self.path("src.raw")
        random_file(src, size, seed=11)
        img = self.new_name()
        rbd("create", "--size", f"{(size >> 20) + 16}M", f"rbd/{img}")
        qil("convert", "-n", "-f", "raw", src, "-O", "raw", self.name(img))
        return img, src

    def check_plain(self, img, src):
        back = self.path("back.raw")
        if os.path.exists(back):
            os.unlink(back)
        qil("convert", "--object", SECRET, "--image-opts",
            self.luks_on_rbd(img), "-O", "raw", back)
        with open(back, "rb") as f:
            self.assertEqual(f.read(os.path.getsize(src)), file_bytes(src))

    def test_encrypt_then_new_key(self):
        """--encrypt in two steps (--init-only, --resume-only), then a new
        volume key; the plain text survives both."""
        img, src = self.raw_image(24 << 20)
        qil("reencrypt", "--object", SECRET, "--encrypt", "--init-only",
            "-o", f"key-secret=sec0,iter-time={ITER_TIME}", self.name(img))
        qil("reencrypt", "--object", SECRET, "--resume-only", "-o",
            "key-secret=sec0", self.name(img))
        self.assertEqual(self.info_json(self.name(img))["format"], "luks")
        self.check_plain(img, src)
        before = self.info_json(self.name(img))["format-specific"]
        qil("reencrypt", "--object", SECRET, "-o",
            f"key-secret=sec0,iter-time={ITER_TIME}", self.name(img))
        self.check_plain(img, src)
        self.assertNotEqual(
            self.info_json(self.name(img))["format-specific"], before)

    def test_encrypt_killed_and_resumed(self):
        """SIGKILL in the middle of --encrypt (1 MiB hot zones; killed
        once its progress passes 20 %), then --resume-only: every byte of
        the plain text is there. The header and each step's metadata
        reach the OSD through flushes, past librbd's write-back cache."""
        img, src = self.raw_image(48 << 20)
        self.kill_at(20, "--encrypt", "--hotzone-size", "1M", "-o",
                     f"key-secret=sec0,iter-time={ITER_TIME}",
                     self.name(img))
        qil("reencrypt", "--object", SECRET, "--resume-only", "-o",
            "key-secret=sec0", self.name(img))
        self.check_plain(img, src)

    def kill_at(self, percent, *args):
        """reencrypt -p ARGS, SIGKILLed once its progress passes
        percent."""
        proc = subprocess.Popen([TOOL, "reencrypt", "-p", "--object", SECRET,
                                 *args], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
        line = b""
        while proc.poll() is None:
            c = proc.stdout.read(1)
            if c != b"\r":
                line += c
                continue
            # "    (23.44/100%) 40.1 MiB/s, 0:01 left"
            if float(line.split(b"(")[1].split(b"/")[0]) >= percent:
                proc.kill()
                break
            line = b""
        proc.wait()
        proc.stdout.close()
        self.assertEqual(proc.returncode, -9, "done before the kill")

    def test_decrypt_killed_and_resumed(self):
        """--decrypt of LUKS2 on RBD: the header goes to a local file
        (--header, required: nothing sits beside an RBD image), the
        plain text ends at the image's start; SIGKILLed at 30 %, then
        --resume-only (given with --image-opts): the image is the plain
        text, byte for byte and of its size, and the header file is
        gone."""
        src = self.path("src.raw")
        random_file(src, 40 << 20, seed=12)
        img = self.new_name()
        qil("convert", "--object", SECRET, "-f", "raw", src, "-O", "luks",
            "-o", f"key-secret=sec0,iter-time={ITER_TIME},luks-version=2",
            self.name(img))
        self.assertFails(["reencrypt", "--decrypt", "--object", SECRET,
                          "-o", "key-secret=sec0", self.name(img)],
                         "needs --header FILE")
        hdr = self.path("hdr.luks2")
        self.kill_at(30, "--decrypt", "--hotzone-size", "1M", "--header",
                     hdr, "-o", "key-secret=sec0", self.name(img))
        self.assertTrue(os.path.exists(hdr))
        # resumed through --image-opts: the RBD node named by its options
        qil("reencrypt", "--object", SECRET, "--resume-only", "--header",
            hdr, "--image-opts", self.luks_on_rbd(img))
        self.assertFalse(os.path.exists(hdr))
        info = self.info_json(self.name(img))
        self.assertEqual((info["format"], info["virtual-size"]),
                         ("raw", 40 << 20))
        qil("compare", "-f", "raw", "-F", "raw", src, self.name(img))


class LibrbdEncryption(RBDTest):
    """Images that librbd encrypts itself (rbd encryption format; QEMU's
    driver=rbd,encrypt.format=luks2): LUKS2 with 4096-byte sectors and
    the data 16 MiB in, which our luks driver opens on the rbd node."""

    def setUp(self):
        super().setUp()
        self.need_luks()
        self.need_qemu_img()
        self.passfile = self.path("pass.txt")
        with open(self.passfile, "w") as f:
            f.write(PASSPHRASE)

    def librbd_opts(self, image):
        return (f"driver=rbd,pool=rbd,image={image},conf={CONF},"
                f"encrypt.format=luks2,encrypt.key-secret=sec0")

    def ours(self, image):
        return (f"driver=luks,key-secret=sec0,file.driver=rbd,"
                f"file.pool=rbd,file.image={image},file.conf={CONF}")

    def test_rbd_encryption_format(self):
        """rbd encryption format (argon2id as librbd calibrates it: each
        open takes seconds); qemu-img writes through librbd's
        encryption, we read the same plain text, and the other way."""
        img = self.new_name()
        rbd("create", "--size", "24M", f"rbd/{img}")
        rbd("encryption", "format", f"rbd/{img}", "luks2", self.passfile)
        src = self.path("src.raw")
        random_file(src, 8 << 20)
        qemu_img("convert", "-n", "--object", SECRET, "-f", "raw", src,
                 "--target-image-opts", self.librbd_opts(img))
        info = self.info_json("--object", SECRET, "--image-opts",
                              self.ours(img))
        self.assertEqual(info["virtual-size"], 8 << 20)
        back = self.path("back.raw")
        qil("convert", "--object", SECRET, "--image-opts", self.ours(img),
            "-O", "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(src))
        random_file(src, 8 << 20, seed=9)
        qil("convert", "-n", "--object", SECRET, "-f", "raw", src,
            "--target-image-opts", self.ours(img))
        qemu_img("convert", "--object", SECRET, "--image-opts",
                 self.librbd_opts(img), "-O", "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(src))

    def test_cryptsetup_image_imported(self):
        """The fast way to a librbd-encrypted image (the issue's advice):
        cryptsetup LUKS2 with librbd's layout and PBKDF2 at 1000
        iterations, rbd import; librbd (qemu-img) and we read the same."""
        self.need_cryptsetup()
        disk = self.path("disk.luks2")
        with open(disk, "wb") as f:
            f.truncate(24 << 20)
        subprocess.run([CRYPTSETUP, "luksFormat", "--batch-mode", "--type",
                        "luks2", "--sector-size", "4096", "--offset",
                        str(16 << 11), "--pbkdf", "pbkdf2",
                        "--pbkdf-force-iterations", "1000",
                        "--key-file", self.passfile, disk], check=True,
                       capture_output=True)
        img = self.new_name()
        rbd("import", "--no-progress", disk, f"rbd/{img}")
        src = self.path("src.raw")
        random_file(src, 8 << 20, seed=3)
        qil("convert", "-n", "--object", SECRET, "-f", "raw", src,
            "--target-image-opts", self.ours(img))
        back = self.path("back.raw")
        qemu_img("convert", "--object", SECRET, "--image-opts",
                 self.librbd_opts(img), "-O", "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(src))


def mon_address():
    """The test cluster's monitor as (host, port), from its conf."""
    with open(CONF) as f:
        for line in f:
            if line.startswith("mon host"):
                addr = line.split("v2:")[1].split("]")[0]
                host, port = addr.rsplit(":", 1)
                return host, port
    raise AssertionError("no mon host in the conf")


def admin_key():
    proc = subprocess.run(["ceph-authtool", "-p", "-n", "client.admin",
                           os.path.join(CLUSTER_DIR, "keyring")],
                          capture_output=True, text=True, check=True)
    return proc.stdout.strip()


class Options(RBDTest):
    """QEMU's rbd options beyond the name: the monitors (server.N), the
    cephx key from a secret object (key-secret, password-secret), the
    auth methods; create -f rbd (the protocol as the format) and what
    info shows of an RBD image."""

    def test_server_and_key_secret(self):
        """No conf file at all (conf=/dev/null): the monitor from
        server.0.host/port, the key from a secret object (base64, as
        QEMU reads it), cephx required; a wrong key and an unknown user
        are refused with exit 1."""
        img = self.new_name()
        qil("create", "-f", "raw", self.name(img), "4M")
        host, port = mon_address()
        key = f"secret,id=ck,format=base64,data={admin_key()}"
        opts = (f"driver=rbd,pool=rbd,image={img},conf=/dev/null,"
                f"user=admin,key-secret=ck,server.0.host={host},"
                f"server.0.port={port},auth-client-required.0=cephx")
        info = self.info_json("--object", key, "--image-opts", opts)
        self.assertEqual(info["virtual-size"], 4 << 20)
        # QEMU's create option for the same key
        img2 = self.new_name()
        qil("create", "-f", "rbd", "--object", key, "-o",
            "password-secret=ck",
            f"rbd:rbd/{img2}:conf=/dev/null:mon_host={host}\\:{port}",
            "1M")
        self.assertIn(img2, images())
        # a well-formed key that is not the user's: refused after the
        # mount timeout (librados retries the handshake until then)
        wrong = subprocess.run(["ceph-authtool", "--gen-print-key"],
                               capture_output=True, text=True,
                               check=True).stdout.strip()
        start = time.monotonic()
        self.assertFails(
            ["info", f"rbd:rbd/{img}:conf=/dev/null:mon_host={host}\\:"
             f"{port}:key={wrong}:client_mount_timeout=3"],
            "or the key was refused")
        self.assertLess(time.monotonic() - start, 20)
        self.assertFails(["info", f"rbd:rbd/{img}:conf={CONF}:id=nobody"],
                         "Permission denied")
        self.assertFails(["info", "--image-opts",
                          opts + ",server.1.host=127.0.0.1"],
                         "'server.1' needs both a host and a port")
        self.assertFails(["info", "--object", key, "--image-opts",
                          opts.replace("cephx", "kerberos")],
                         "takes 'cephx' or 'none'")

    def test_create_f_rbd_and_info(self):
        """create -f rbd with qemu-img's options; info shows the object
        size and the format-specific part as qemu-img 7.2 does."""
        img = self.new_name()
        qil("create", "-f", "rbd", "-o", "cluster_size=1M",
            self.name(img), "8M")
        info = json.loads(rbd("info", "--format", "json",
                              f"rbd/{img}").stdout)
        self.assertEqual((info["size"], info["order"]), (8 << 20, 20))
        ours = self.info_json("--image-opts", self.opts(img))
        self.assertEqual(ours["cluster-size"], 1 << 20)
        self.assertEqual(ours["format-specific"],
                         {"type": "rbd", "data": {}})
        self.assertEqual(self.info_json(self.name(img))["cluster-size"],
                         1 << 20)
        if QEMU_IMG:
            theirs = json.loads(qemu_img("info", "--output=json",
                                         "--image-opts",
                                         self.opts(img)).stdout)
            for key in ("virtual-size", "cluster-size", "format",
                        "format-specific"):
                self.assertEqual(ours[key], theirs[key], key)
        self.assertFails(["create", "-f", "rbd", self.path("x.img"), "1M"],
                         "is not a name of the 'rbd' protocol")
        self.assertFails(["create", "-f", "rbd", "-o", "preallocation=full",
                          self.name(self.new_name()), "1M"],
                         "Invalid parameter 'preallocation'")


class LibrbdCrypt(RBDTest):
    """QEMU's encrypt.* options of the rbd driver: librbd encrypts
    (rbd_encryption_format, rbd_encryption_load), as with qemu-img.
    librbd calibrates argon2id: each format takes seconds, each open
    3-4 s here."""

    def setUp(self):
        super().setUp()
        self.need_qemu_img()

    def crypt_opts(self, img, fmt="luks2"):
        return (f"driver=rbd,pool=rbd,image={img},conf={CONF},"
                f"encrypt.format={fmt},encrypt.key-secret=sec0")

    def test_convert_o_encrypt_both_ways(self):
        """convert -O rbd -o encrypt.format=luks2: librbd's LUKS2 made
        and written through; qemu-img reads the same plain text through
        librbd, and so do we (driver=rbd,encrypt.* and our own luks
        driver); info shows the encryption as qemu-img does; a wrong
        passphrase is refused."""
        src, back = self.path("src.raw"), self.path("back.raw")
        random_file(src, 6 << 20, seed=21)
        img = self.new_name()
        qil("convert", "--object", SECRET, "-f", "raw", src, "-O", "rbd",
            "-o", "encrypt.format=luks2,encrypt.key-secret=sec0",
            self.name(img))
        qemu_img("convert", "--object", SECRET, "--image-opts",
                 self.crypt_opts(img), "-O", "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(src))
        qil("compare", "--object", SECRET, "--image-opts",
            f"driver=raw,file.filename={src}", self.crypt_opts(img))
        if have_luks():
            qil("compare", "--object", SECRET, "--image-opts",
                f"driver=raw,file.filename={src}",
                f"driver=luks,key-secret=sec0,file.driver=rbd,"
                f"file.pool=rbd,file.image={img},file.conf={CONF}")
        info = self.info_json("--image-opts", self.opts(img))
        self.assertEqual(info["format-specific"]["data"],
                         {"encryption-format": "luks2"})
        out = qil("info", "--image-opts", self.opts(img)).stdout
        self.assertIn("Format specific information:\n"
                      "    encryption format: luks2\n", out)
        info = self.info_json("--object", SECRET, "--image-opts",
                              self.crypt_opts(img, "luks-any"))
        self.assertEqual(info["virtual-size"], 6 << 20)
        self.assertFails(["info", "--object", "secret,id=sec0,data=wrong",
                          "--image-opts", self.crypt_opts(img)],
                         "Could not load the LUKS2 encryption")

    def test_luks1_create_then_qemu_img_writes(self):
        """create -f rbd -o encrypt.format=luks: the size given is the
        size seen through the encryption (the image grows by the header,
        as QEMU makes it); qemu-img writes through librbd's LUKS1, we
        read it back through ours."""
        img = self.new_name()
        qil("create", "-f", "rbd", "--object", SECRET, "-o",
            "encrypt.format=luks,encrypt.key-secret=sec0", self.name(img),
            "8M")
        info = self.info_json("--object", SECRET, "--image-opts",
                              self.crypt_opts(img, "luks"))
        self.assertEqual(info["virtual-size"], 8 << 20)
        src, back = self.path("src.raw"), self.path("back.raw")
        random_file(src, 8 << 20, seed=22)
        qemu_img("convert", "-n", "--object", SECRET, "-f", "raw", src,
                 "--target-image-opts", self.crypt_opts(img, "luks"))
        qil("convert", "--object", SECRET, "--image-opts",
            self.crypt_opts(img, "luks"), "-O", "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(src))


class Clone(RBDTest):
    def test_clone_reads_parent_and_own_writes(self):
        """A clone (rbd snap create/protect, rbd clone) reads its parent's
        data where it has none of its own, and its own where written;
        the parent's snapshot does not change."""
        src = self.path("src.raw")
        random_file(src, 8 << 20, seed=23)
        parent = self.new_name()
        qil("convert", "-f", "raw", src, "-O", "raw", self.name(parent))
        rbd("snap", "create", f"rbd/{parent}@base")
        rbd("snap", "protect", f"rbd/{parent}@base")
        child = self.new_name()
        rbd("clone", f"rbd/{parent}@base", f"rbd/{child}")
        qil("compare", "-f", "raw", "-F", "raw", src, self.name(child))
        # one object of its own (qemu-io: a tool that writes in place)
        qemu_io = shutil.which("qemu-io")
        if not qemu_io:
            self.skipTest("qemu-io is not installed")
        subprocess.run([qemu_io, "-f", "raw", "-c", "write -P 0x5a 3M 1M",
                        self.name(child)], check=True, capture_output=True)
        expect = bytearray(file_bytes(src))
        expect[3 << 20:4 << 20] = b"\x5a" * (1 << 20)
        back = self.path("back.raw")
        qil("convert", "-f", "raw", self.name(child), "-O", "raw", back)
        self.assertEqual(file_bytes(back), bytes(expect))
        qil("compare", "-f", "raw", "-F", "raw", src,
            self.name(parent + "@base"))


class Errors(RBDTest):
    def test_no_cluster(self):
        """A monitor that does not answer: a clear error, exit 1, within
        client_mount_timeout."""
        start = time.monotonic()
        self.assertFails(["info", "rbd:rbd/x:mon_host=127.0.0.1\\:1:"
                          "client_mount_timeout=3"],
                         "Could not connect to the Ceph cluster for "
                         "'rbd:rbd/x' (no answer in 3 s, or the key was "
                         "refused)")
        self.assertLess(time.monotonic() - start, 20)

    def test_missing_pool_and_image(self):
        self.assertFails(["info", self.name("x", pool="nopool")],
                         "pool 'nopool' does not exist")
        self.assertFails(["info", self.name("nothere")],
                         "Could not open 'rbd:rbd/nothere': No such file")
        self.assertFails(["convert", "-O", "raw", self.name("nothere"),
                          self.path("out.raw")], "No such file")

    def test_name_in_use(self):
        img = self.new_name()
        qil("create", "-f", "raw", self.name(img), "1M")
        self.assertFails(["create", "-f", "raw", self.name(img), "2M"],
                         "File exists")
        src = self.path("src.raw")
        random_file(src, 1 << 20)
        self.assertFails(["convert", "-f", "raw", src, "-O", "raw",
                          self.name(img)], "File exists")
        self.assertEqual(self.info_json(self.name(img))["virtual-size"],
                         1 << 20)

    def test_failed_convert_leaves_nothing(self):
        """A copy that fails half-way (a read error injected by blkdebug)
        leaves no image: neither under its name nor a hidden one."""
        src = self.path("src.raw")
        # 2 MiB jobs into RBD: the 5th read is well inside the copy.
        random_file(src, 16 << 20)
        before = images()
        img = self.new_name()
        self.assertFails(["convert", "--image-opts",
                          "driver=raw,file.driver=blkdebug,file.fail-read=5,"
                          f"file.file.filename={src}", "-O", "raw",
                          self.name(img)], "Input/output error")
        self.assertEqual(images(), before)

    def test_abandoned_hidden_images_removed(self):
        """Hidden images a killed creation left (no watcher, older than a
        minute; the age is 0 here) go when the name is next created; one
        a live client has open (rbd watch) stays, and so does a fresh
        unwatched one at the default age."""
        img = self.new_name()
        dead, live = f".{img}.0abcde", f".{img}.1abcde"
        rbd("create", "--size", "1M", f"rbd/{dead}")
        rbd("create", "--size", "1M", f"rbd/{live}")
        qil("create", "-f", "raw", self.name(img), "1M")
        self.assertLessEqual({dead, live}, images())
        rbd("rm", "--no-progress", f"rbd/{img}")
        watcher = subprocess.Popen(["rbd", "-c", CONF, "watch",
                                    f"rbd/{live}"], stdin=subprocess.PIPE,
                                   stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                if "watcher=" in rbd("status", f"rbd/{live}").stdout:
                    break
                time.sleep(0.1)
            subprocess.run([TOOL, "create", "-f", "raw", self.name(img),
                            "1M"], check=True, capture_output=True,
                           env=dict(os.environ,
                                    QIL_TEST_RBD_ABANDONED_AGE="-1"))
        finally:
            watcher.communicate(b"\n", timeout=30)
        names = images()
        self.assertNotIn(dead, names)
        self.assertIn(live, names)
        self.assertIn(img, names)
        rbd("rm", "--no-progress", f"rbd/{live}")

    def test_bad_names(self):
        self.assertFails(["info", "rbd:rbd"], "expected rbd:POOL/IMAGE")
        self.assertFails(["info", "rbd:rbd/x:conf"], "has no value")
        self.assertFails(["info", "rbd:rbd/x:conf=/nonexistent.conf"],
                         "Could not read the Ceph configuration")



class ZzOsdKilled(RBDTest):
    """Runs last (unittest orders the classes by name): should the OSD
    not come back, no other test loses its cluster."""

    def test_osd_killed_mid_convert(self):
        """The only OSD SIGKILLed during a copy into RBD: the copy fails
        with librados's timeout (5 s here; 60 s by default), exit 1, no
        hang, and nothing under the name; then the OSD comes back."""
        src = self.path("src.raw")
        random_file(src, 256 << 20)
        img = self.new_name()
        old_pid = osd_pid()
        proc = subprocess.Popen(
            [TOOL, "convert", "-f",
             "raw", src, "-O", "raw",
             f"rbd:rbd/{img}:conf={CONF}:rados_osd_op_timeout=5"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            # Once the hidden image is there, the copy is under way.
            for _ in range(200):
                if any(i.startswith(f".{img}.") for i in images()):
                    break
                time.sleep(0.05)
            time.sleep(0.3)
            old_pid = kill_osd()
            _, err = proc.communicate(timeout=120)
            self.assertEqual(proc.returncode, 1, err)
            self.assertIn("Connection timed out", err)
        finally:
            if proc.poll() is None:
                proc.kill()
            restart_osd(old_pid)
        names = images()
        self.assertNotIn(img, names)
        # Removing the hidden image needed the OSD: it may be left.
        for leftover in [i for i in names if i.startswith(f".{img}.")]:
            rbd("rm", "--no-progress", f"rbd/{leftover}")


if __name__ == "__main__":
    main()
