# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite map against the real qemu-img 7.2 map: the same bytes on
stdout and stderr (but the program name) and the same exit status, in
human and JSON output, for raw files with holes and odd sizes, LUKS, and
qcow2 images made by qemu-img and written by qemu-io: data, zero clusters
with and without host clusters, discards, compressed clusters, subclusters,
preallocation (metadata: holes in the file are zero data),
an external data file, encryption, and backing chains (with a backing file
shorter than its overlay) opened from another directory; --start-offset and
--max-length; -f, --image-opts, --object and -U; usage errors.
"""
import os
import shutil
import subprocess

import qiltest
from qiltest import (ITER_TIME, TOOL, TestCase, main, qemu_img, qil,
                     random_file)

QEMU_IO = shutil.which("qemu-io")
PASS = "map pass"
SECRET = f"secret,id=sec0,data={PASS}"


def run(args, cwd=None):
    return subprocess.run([str(a) for a in args], capture_output=True,
                          text=True, cwd=cwd)


def qemu_io(*args):
    proc = run([QEMU_IO, *args])
    if proc.returncode != 0:
        raise AssertionError(f"qemu-io {args}: {proc.stderr}")


def io(path, *cmds, fmt="qcow2", extra=()):
    args = [*extra, "-f", fmt, path] if fmt else [*extra, path]
    for c in cmds:
        args += ["-c", c]
    qemu_io(*args)


class MapTest(TestCase):
    def setUp(self):
        super().setUp()
        self.need_qemu_img()

    def assert_same_map(self, *args, cwd=None, outputs=("human", "json")):
        """map prints, fails and exits as qemu-img map."""
        for fmt in outputs:
            with self.subTest(output=fmt, args=args):
                ours = run([TOOL, "map", f"--output={fmt}", *args], cwd=cwd)
                theirs = run([shutil.which("qemu-img"), "map",
                              f"--output={fmt}", *args], cwd=cwd)
                self.assertEqual(ours.stdout, theirs.stdout)
                self.assertEqual(
                    ours.stderr.replace("qemu-img-lite: ", "qemu-img: "),
                    theirs.stderr)
                self.assertEqual(ours.returncode, theirs.returncode)
        return ours

    def qcow2(self, name, opts="", size="8M", writes=()):
        path = self.path(name)
        args = ["create", "-q", "-f", "qcow2"]
        if opts:
            args += ["-o", opts]
        qemu_img(*args, path, size)
        if writes:
            io(path, *writes)
        return path

    # ---- raw and luks

    def test_raw_holes_and_odd_size(self):
        path = self.path("sparse.raw")
        with open(path, "wb") as f:
            f.truncate(3 * 1024 * 1024 + 1000)
            for off in (0, 1 << 20, 3 << 20):
                f.seek(off)
                f.write(os.urandom(700))
        self.assert_same_map(path)
        self.assert_same_map("-f", "raw", path)
        for s, l in (("0", "1"), ("100", "5000"), ("1M", "1M"), ("4095", None),
                     ("3M", None), ("16M", None), (None, "0"),
                     (None, "70k")):
            args = []
            if s is not None:
                args += ["--start-offset", s]
            if l is not None:
                args += ["-l", l]
            self.assert_same_map(*args, path)

    def test_new_raw_first_block(self):
        """A raw image each tool just created maps the same: qemu-img (its
        allocate_first_block()) writes the first 4 KiB, so do we; with
        cache.direct=on an unaligned end of file goes with the data before
        it (qemu-iotests 253)."""
        for size, name in ((1 << 20, "a.raw"), (1000, "b.raw"),
                           (0, "c.raw")):
            ours, theirs = self.path("q-" + name), self.path(name)
            qil("create", "-q", "-f", "raw", ours, str(size))
            qemu_img("create", "-q", "-f", "raw", theirs, str(size))
            mine = run([TOOL, "map", "--output=json", ours]).stdout
            self.assertEqual(mine, run([shutil.which("qemu-img"), "map",
                                        "--output=json", theirs]).stdout)
        path = self.path("odd.raw")
        with open(path, "wb") as f:
            f.truncate((1 << 20) - 1)
            f.seek((1 << 20) - 65536)
            f.write(os.urandom(65535))
        self.assert_same_map("--image-opts", "driver=raw,file.driver=file,"
                             f"file.filename={path},cache.direct=on",
                             outputs=("json",))

    def test_null_co_json_single_quotes(self):
        """QEMU's null-co driver, named in json: with single quotes as
        qemu-iotests write it (150): convert it and map the result, both
        tools, sparse and not (-S 0)."""
        src = "json:{ 'driver': 'null-co', 'size': 1048576, " \
              "'read-zeroes': true }"
        for extra in ([], ["-S", "0"]):
            ours, theirs = self.path("ours.raw"), self.path("theirs.raw")
            for p in (ours, theirs):
                if os.path.exists(p):
                    os.unlink(p)
            qil("convert", *extra, "-O", "raw", src, ours)
            qemu_img("convert", *extra, "-O", "raw", src, theirs)
            self.assertEqual(run([TOOL, "map", "--output=json", ours]).stdout,
                             run([shutil.which("qemu-img"), "map",
                                  "--output=json", theirs]).stdout)
        self.assert_same_map(src, outputs=("json",))

    def test_raw_full_and_empty(self):
        full = self.path("full.raw")
        random_file(full, 300000)
        self.assert_same_map(full)
        empty = self.path("empty.raw")
        open(empty, "wb").close()
        self.assert_same_map(empty)
        hole = self.path("hole.raw")
        with open(hole, "wb") as f:
            f.truncate(1 << 30)
        self.assert_same_map(hole)

    def test_luks(self):
        self.need_luks()
        path, _ = self.make_luks("img.luks", "1M")
        opts = f"driver=luks,key-secret=sec0,file.filename={path}"
        # No host offsets: JSON shows one data run, human output refuses.
        self.assert_same_map("--object", qiltest.SECRET, "--image-opts",
                             opts)
        # Opened as raw: the header and the ciphertext are plain data.
        self.assert_same_map("-f", "raw", path)
        # Without the key: refused, as qemu-img does (message differs).
        proc = qil("map", path, check=False)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("key-secret", proc.stderr)

    # ---- qcow2

    def need_qemu_io(self):
        if not QEMU_IO:
            self.skipTest("qemu-io is not installed")

    def test_qcow2_clusters(self):
        self.need_qemu_io()
        path = self.qcow2("c.qcow2", writes=[
            "write -P 0x11 5M 64k", "write -P 0x22 0 4k",
            "write -P 0x33 2047k 130k", "write -z 5M 16k",
            "write -P 0x44 7M 1M", "write -P 0x55 1M 512",
            "discard 7M 64k", "write -z 3M 1M",
            # zero flag on an allocated cluster: keeps its host offset
            "write -P 0x66 6M 128k", "write -z 6M 64k"])
        self.assert_same_map(path)
        self.assert_same_map("-f", "qcow2", "-U", path)
        self.assert_same_map("--image-opts", f"driver=qcow2,file.filename="
                             f"{path}")
        for s, l in (("5M", "64k"), ("100", "1M"), ("7M", None),
                     ("8M", None), ("1M", "0")):
            args = ["-s", s] + (["-l", l] if l else [])
            self.assert_same_map(*args, path)

    def test_qcow2_v2_and_small_clusters(self):
        self.need_qemu_io()
        for opts in ("compat=0.10", "cluster_size=512", "cluster_size=2M"):
            with self.subTest(opts=opts):
                path = self.qcow2(f"{opts}.qcow2", opts, writes=[
                    "write -P 1 0 1k", "write -P 2 1M 3k", "write -z 2M 1M",
                    "write -P 3 5M 1M", "discard 5M 512k"])
                self.assert_same_map(path)

    def test_qcow2_preallocation(self):
        # metadata: data clusters that are holes in the file read as zero
        # data (QEMU's detection of metadata preallocation); falloc, full:
        # plain data.
        self.need_qemu_io()
        for mode in ("metadata", "falloc", "full"):
            with self.subTest(preallocation=mode):
                path = self.qcow2(f"{mode}.qcow2", f"preallocation={mode}",
                                  size="4M", writes=["write -P 1 1M 64k",
                                                     "write -z 2M 64k"])
                self.assert_same_map(path)

    def test_qcow2_compressed(self):
        self.need_qemu_io()
        src = self.path("src.raw")
        random_file(src, 1 << 20)
        with open(src, "r+b") as f:
            f.seek(256 << 10)
            f.write(bytes(256 << 10))
        path = self.path("comp.qcow2")
        qemu_img("convert", "-q", "-c", "-f", "raw", "-O", "qcow2", src,
                 path)
        # JSON: data without offsets; human: refused (qemu-img's message).
        self.assert_same_map(path)
        io(path, "write -P 7 0 64k")
        self.assert_same_map("-s", "0", "-l", "64k", path)

    def test_qcow2_subclusters(self):
        self.need_qemu_io()
        path = self.qcow2("sub.qcow2", "extended_l2=on,cluster_size=64k",
                          writes=["write -P 1 0 2k", "write -P 2 70k 4k",
                                  "write -z 140k 8k", "write -P 3 200k 64k",
                                  "write -z 210k 2k", "discard 240k 8k"])
        self.assert_same_map(path)
        base = self.path("subbase.raw")
        random_file(base, 1 << 20)
        top = self.path("subtop.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", "-o",
                 "extended_l2=on,cluster_size=64k", "-b", base, "-F", "raw",
                 top)
        io(top, "write -P 9 4k 2k", "write -z 100k 2k")
        self.assert_same_map(top)

    def test_qcow2_data_file(self):
        # data_file_raw: guest offset 0 is host offset 0 of the data file.
        self.need_qemu_io()
        for raw in ("off", "on"):
            with self.subTest(data_file_raw=raw):
                path = self.qcow2(f"ext-{raw}.qcow2",
                                  f"data_file={self.path(raw + '.data')},"
                                  f"data_file_raw={raw}",
                                  writes=["write -P 1 0 64k",
                                          "write -P 2 3M 4k",
                                          "write -z 1M 64k"])
                self.assert_same_map(path)
                self.assert_same_map("-s", "1000", "-l", "99999", path)

    def test_qcow2_odd_size(self):
        self.need_qemu_io()
        path = self.qcow2("odd.qcow2", size="1000000",
                          writes=["write -P 1 999000 1000",
                                  "write -P 2 0 100"])
        self.assert_same_map(path)
        self.assert_same_map("-s", "999424", path)

    def test_qcow2_encrypted(self):
        self.need_qemu_io()
        path = self.path("enc.qcow2")
        qemu_img("create", "-q", "--object", SECRET, "-f", "qcow2", "-o",
                 f"encrypt.format=luks,encrypt.key-secret=sec0,"
                 f"encrypt.iter-time={ITER_TIME}", path, "4M")
        opts = f"driver=qcow2,encrypt.key-secret=sec0,file.filename={path}"
        io(opts, "write -P 1 1M 64k", "write -z 2M 64k", fmt=None,
           extra=["--object", SECRET, "--image-opts"])
        self.assert_same_map("--object", SECRET, "--image-opts", opts)

    def test_backing_chain(self):
        self.need_qemu_io()
        os.mkdir(self.path("d"))
        base = self.path("d/base.raw")
        with open(base, "wb") as f:
            f.truncate(3 << 20)
            f.seek(1 << 20)
            f.write(os.urandom(8192))
        mid = self.path("d/mid.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", "-b", "base.raw", "-F",
                 "raw", mid, "6M")
        io(mid, "write -P 1 2M 64k", "write -z 1M 4k", "write -P 2 4M 4k")
        top = self.path("d/top.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", "-b", "mid.qcow2", "-F",
                 "qcow2", top, "8M")
        io(top, "write -P 3 0 4k", "write -P 4 2M 4k", "write -z 5M 64k")
        for cwd in (self.dir, "/"):
            name = "d/top.qcow2" if cwd == self.dir else top
            self.assert_same_map(name, cwd=cwd)
            self.assert_same_map("-s", "1M", "-l", "3M", name, cwd=cwd)

    def test_chain_under_a_filter(self):
        """A blkdebug filter on top, with QEMU's size-typed align=4k: the
        map walks the image's chain under it (qemu-iotests 204)."""
        self.need_qemu_io()
        base = self.qcow2("fb.qcow2", size="4M", writes=("write -P 1 0 4M",))
        top = self.path("ft.qcow2")
        qemu_img("create", "-q", "-f", "qcow2", "-b", base, "-F", "qcow2",
                 top, "4M")
        io(top, "write -P 2 0 1M")
        self.assert_same_map(
            "--image-opts", "driver=blkdebug,image.driver=qcow2,"
            f"image.file.driver=file,image.file.filename={top},align=4k")

    # ---- usage

    def test_usage_errors(self):
        path = self.path("x.raw")
        random_file(path, 4096)
        for args in (["-s", "x", path], ["-l", "-1", path],
                     ["-s", "1Q", path], ["--output=yaml", path],
                     [path, path], [], [self.path("missing.raw")]):
            with self.subTest(args=args):
                proc = qil("map", *args, check=False)
                theirs = run([shutil.which("qemu-img"), "map", *args])
                self.assertEqual(proc.returncode, theirs.returncode)
                self.assertEqual(proc.returncode, 1)
        self.assert_same_map("-s", "x", path, outputs=("human",))
        self.assert_same_map("-l", "-1", path, outputs=("human",))


if __name__ == "__main__":
    main()
