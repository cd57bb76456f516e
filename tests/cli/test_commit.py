#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-img-lite commit (issue 26): the overlay's data goes into its
backing file (or, with -b, into a deeper image of the chain, through the
images between), the overlay is emptied unless -d or -b; zero runs free
the base's clusters as qemu-img's commit does. Checked with qemu-img
(check, the data it reads, map) and against qemu-img's own commit."""
import json
import os
import shutil

from qiltest import (QEMU_IMG, SECRET, TOOL, TestCase, file_bytes, main,
                     qemu_img, qil, run)

QEMU_IO = shutil.which("qemu-io")
CS = 65536
SIZE = 8 * CS


def data_extents(path):
    """The (start, end) runs of a file that hold data (not holes)."""
    runs = []
    fd = os.open(path, os.O_RDONLY)
    try:
        end, off = os.fstat(fd).st_size, 0
        while off < end:
            try:
                start = os.lseek(fd, off, os.SEEK_DATA)
            except OSError:
                break
            off = os.lseek(fd, start, os.SEEK_HOLE)
            runs.append((start, off))
    finally:
        os.close(fd)
    return runs


class Commit(TestCase):
    def setUp(self):
        super().setUp()
        if not QEMU_IMG or not QEMU_IO:
            self.skipTest("qemu-img and qemu-io are needed (qemu-utils)")

    def io(self, img, *cmds, opts=None):
        args = [QEMU_IO]
        for c in cmds:
            args += ["-c", c]
        if opts:
            args += ["--object", SECRET, "--image-opts", opts]
        else:
            args.append(img)
        run(args)

    def mk(self, name, backing=None, encrypt=False):
        path = self.path(name)
        args = ["create", "-q", "-f", "qcow2"]
        if backing:
            args += ["-b", backing, "-F", "qcow2"]
        if encrypt:
            args += ["--object", SECRET, "-o", "encrypt.format=luks,"
                     "encrypt.key-secret=sec0,encrypt.iter-time=10"]
        qemu_img(*args, path, str(SIZE))
        return path

    def data(self, img, opts=None):
        out = self.path("data.raw")
        if os.path.exists(out):
            os.unlink(out)
        if opts:
            qemu_img("convert", "--object", SECRET, "--image-opts", opts,
                     "-O", "raw", out)
        else:
            qemu_img("convert", "-U", img, "-O", "raw", out)
        with open(out, "rb") as f:
            return f.read()

    def own(self, img):
        """(start, length) of what img holds itself."""
        return [(e["start"], e["length"]) for e in json.loads(qemu_img(
            "map", "--output=json", "-U", img).stdout)
            if e["depth"] == 0 and (e["data"] or e["zero"])
            and "offset" in e]

    def chain(self, tag):
        base = self.mk(f"{tag}-base.qcow2")
        mid = self.mk(f"{tag}-mid.qcow2", backing=f"{tag}-base.qcow2")
        top = self.mk(f"{tag}-top.qcow2", backing=f"{tag}-mid.qcow2")
        self.io(base, f"write -P 1 0 {4 * CS}")
        self.io(mid, f"write -P 2 {CS} {2 * CS}")
        self.io(top, f"write -P 3 {2 * CS} 4096", f"write -z {3 * CS} {CS}",
                f"write -P 4 {7 * CS} {CS}")
        return base, mid, top

    def test_commit_into_backing_file_as_qemu_img(self):
        base, mid, top = self.chain("ours")
        seen = self.data(top)
        before_base = self.data(base)
        self.assertIn("Image committed.", qil("commit", top).stdout)
        self.assertEqual(self.data(top), seen)
        self.assertEqual(self.data(mid), seen)
        self.assertEqual(self.data(base), before_base)
        self.assertEqual(self.own(top), [])
        for img in (top, mid, base):
            qemu_img("check", img)
        # qemu-img's commit of the same chain: the same data everywhere.
        tb, tm, tt = self.chain("theirs")
        qemu_img("commit", tt)
        self.assertEqual(self.data(tm), self.data(mid))
        self.assertEqual(self.data(tt), self.data(top))

    def test_drop_and_deeper_base(self):
        """-d keeps the overlay; -b BASE (two levels down) writes what the
        images above it hold and implies -d."""
        base, mid, top = self.chain("d")
        seen = self.data(top)
        top_own = self.own(top)
        qil("commit", "-d", top)
        self.assertEqual(self.own(top), top_own)
        self.assertEqual(self.data(mid), seen)
        base, mid, top = self.chain("b")
        mid_own = self.own(mid)
        qil("commit", "-b", base, top)
        self.assertEqual(self.data(base), seen)
        self.assertEqual(self.own(top), top_own)
        self.assertEqual(self.own(mid), mid_own)
        qemu_img("check", base)
        self.assertFails(["commit", "-b", self.path("nowhere.qcow2"), top],
                         "Did not find")
        lone = self.mk("lone.qcow2")
        self.assertFails(["commit", lone],
                         "Image does not have a backing file")

    def test_base_names_relative_to_the_image(self):
        """-b NAME, as QEMU: the name the header stores, or a path taken
        relative to the image's own directory, not the working directory
        (qemu-iotests 020)."""
        sub = self.path("sub")
        os.mkdir(sub)
        for name, back in (("t.base", None), ("t.mid", "t.base"),
                           ("t", "t.mid")):
            args = ["-b", back, "-F", "qcow2"] if back else []
            qemu_img("create", "-q", "-f", "qcow2", *args,
                     os.path.join(sub, name), "1M")
        cwd = os.getcwd()
        self.addCleanup(os.chdir, cwd)
        os.chdir(self.dir)
        qil("commit", "-b", "t.mid", "sub/t")
        self.assertFails(["commit", "-b", "sub/t.mid", "sub/t"],
                         "Did not find 'sub/t.mid' in the backing chain of "
                         "'sub/t'")
        qil("commit", "-b", os.path.join(sub, "t.mid"), "sub/t")

    def test_zeroes_free_base_clusters(self):
        """An overlay of zeroes over a full base: the base's clusters are
        freed (qemu-iotests 313), check clean, the data zero."""
        base = self.mk("z-base.qcow2")
        self.io(base, f"write -P 7 0 {SIZE}")
        top = self.mk("z-top.qcow2", backing="z-base.qcow2")
        self.io(top, f"write -z 0 {SIZE}")
        qil("commit", top)
        self.assertEqual(self.data(base), bytes(SIZE))
        out = qemu_img("check", "--output=json", base).stdout
        self.assertEqual(json.loads(out).get("allocated-clusters", 0), 0)

    def test_encrypted_overlay(self):
        """A LUKS qcow2 overlay on a plain base: its plain text goes down."""
        base = self.mk("e-base.qcow2")
        self.io(base, f"write -P 1 0 {SIZE}")
        top = self.mk("e-top.qcow2", backing="e-base.qcow2", encrypt=True)
        opts = f"driver=qcow2,encrypt.key-secret=sec0,file.filename={top}"
        self.io(top, f"write -P 9 {CS} {CS}", opts=opts)
        seen = self.data(top, opts)
        qil("commit", "--object", SECRET, "--image-opts", opts)
        self.assertEqual(self.data(base), seen)
        self.assertEqual(self.data(top, opts), seen)

    def twins(self, opts=()):
        """The same overlay on the same base in two directories (the
        names inside the images alike), for our commit and qemu-img's."""
        tops = []
        for side in ("ours", "theirs"):
            d = self.path(side)
            os.makedirs(d, exist_ok=True)
            base, top = os.path.join(d, "t.base"), os.path.join(d, "t.top")
            qemu_img("create", "-q", "-f", "qcow2", base, "64M")
            qemu_img("create", "-q", "-f", "qcow2", *opts, "-b", "t.base",
                     "-F", "qcow2", top, "64M")
            self.io(top, "write -P 1 0 64k", "write -c -P 2 128k 64k",
                    "write -z 256k 64k", f"write -P 3 {CS * 100} {CS}")
            tops.append(top)
        return tops

    def overlay_map(self, top):
        """qemu-img's map of what top itself holds (its backing file
        left out)."""
        spec = json.dumps({"driver": "qcow2", "backing": None,
                           "file": {"driver": "file", "filename": top}})
        return json.loads(qemu_img("map", "--output=json", "-U",
                                   "json:" + spec).stdout)

    def check_lines(self, cmd, img):
        """check -r all's output, and qemu-img check's afterwards."""
        out = run([*cmd, "check", "-r", "all", img], check=False)
        after = qemu_img("check", img, check=False)
        return out.stdout, out.returncode, after.stdout, after.returncode

    def test_overlay_emptied_as_qemu_img(self):
        """A version 3 overlay is reset to a new image's layout (header,
        refcount table, refcount block, L1 table, then the file ends), byte
        for byte what qemu-img's commit leaves; a version 2 one (no dirty
        bit: qemu-img then discards every cluster) holds nothing after,
        its freed clusters (a compressed one too) punched out of the file
        as qemu-img does."""
        ours, theirs = self.twins()
        qil("commit", ours)
        qemu_img("commit", theirs)
        self.assertEqual(file_bytes(ours), file_bytes(theirs))
        self.assertEqual(os.path.getsize(ours), 4 * CS)
        ours, theirs = self.twins(("-o", "compat=0.10"))
        qil("commit", ours)
        qemu_img("commit", theirs)
        self.assertEqual(self.overlay_map(ours), self.overlay_map(theirs))
        self.assertEqual(data_extents(ours), data_extents(theirs))
        qemu_img("check", ours)

    def test_fault_while_emptying_as_qemu_img(self):
        """A blkdebug fault at each of qemu-img's emptying steps (the events
        qemu-iotests 098 names): the same message, the same image left
        dirty, and check -r all repairs it with qemu-img's lines."""
        for event in ("l1_update", "empty_image_prepare", "reftable_update",
                      "refblock_alloc"):
            with self.subTest(event=event):
                ours, theirs = self.twins()
                conf = self.path("blkdebug.conf")
                with open(conf, "w") as f:
                    f.write(f'[inject-error]\nevent = "{event}"\n')
                proc = self.assertFails(["commit", f"blkdebug:{conf}:{ours}"])
                self.assertEqual(
                    proc.stderr, f"qemu-img-lite: Failed to empty blkdebug:"
                    f"{conf}:{ours}: Input/output error\n")
                qemu_img("commit", f"blkdebug:{conf}:{theirs}", check=False)
                self.assertEqual(file_bytes(ours), file_bytes(theirs))
                # Dirty: our writer leaves it to check -r all.
                self.assertFails(["commit", ours], "dirty bit is set")
                want = self.check_lines([QEMU_IMG], theirs)
                self.assertEqual(self.check_lines([TOOL], ours), want)
                self.assertEqual(want[3], 0)

    def test_json_backing_name(self):
        """A backing file named by json:{...} options in the header is
        opened as on the command line (qemu-iotests 020): the overlay reads
        through it, and commit writes through it, here into a blkdebug
        node whose first data write fails with ENOSPC."""
        base = self.mk("j-base.qcow2")
        self.io(base, f"write -P 5 0 {CS}")
        spec = json.dumps({"driver": "qcow2", "file": {
            "driver": "file", "filename": base}})
        top = self.path("j-top.qcow2")
        out = qil("create", "-f", "qcow2", "-b", "json:" + spec, "-F",
                  "qcow2", top).stdout
        # qemu-img's line: a comma in an option's value is doubled.
        self.assertIn("backing_file=" + ("json:" + spec).replace(",", ",,"),
                      out)
        self.io(top, f"write -P 6 {CS} {CS}")
        self.assertEqual(self.data(top), self.data(base)[:CS] + b"\6" * CS +
                         bytes(SIZE - 2 * CS))
        info = json.loads(qil("info", "--output=json", top).stdout)
        self.assertEqual(info["backing-filename"], "json:" + spec)
        seen = self.data(top)
        qil("commit", top)
        self.assertEqual(self.data(base)[:2 * CS], seen[:2 * CS])
        # qemu-iotests 020's backing file, which fails the first write.
        bd = ("json:{'driver': 'qcow2', 'file': { 'driver': 'blkdebug', "
              "'inject-error': [{ 'event': 'write_aio', 'errno': 28, "
              "'once': true }], 'image': { 'driver': 'file', "
              "'filename': '%s' }}}" % base)
        top2 = self.path("j-top2.qcow2")
        qil("create", "-q", "-f", "qcow2", "-b", bd, "-F", "qcow2", top2)
        self.io(top2, f"writev 0 {CS}")
        self.assertFails(["commit", top2],
                         "Block job failed: No space left on device")

    def test_json_backing_name_network_refused(self):
        """A json:{...} backing name in a header that names an nbd or rbd
        node, or a filename with such a protocol, is refused at open: an
        image must not make the tool connect anywhere. (qemu-img creates
        such an overlay without opening the backing file with -u.)"""
        for i, spec in enumerate([
                {"driver": "raw", "file": {"driver": "nbd", "server": {
                    "type": "inet", "host": "127.0.0.1", "port": "1"},
                    "export": "x"}},
                {"driver": "raw", "file": {"filename": "nbd://127.0.0.1:1/x"}},
                {"driver": "rbd", "pool": "p", "image": "i"}]):
            top = self.path(f"jn-{i}.qcow2")
            run([QEMU_IMG, "create", "-q", "-f", "qcow2", "-u", "-b",
                 "json:" + json.dumps(spec), "-F", "raw", top, "1M"])
            r = qil("info", top, check=False)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("local file", r.stderr)


if __name__ == "__main__":
    main()
