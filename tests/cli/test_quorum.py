#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The quorum driver (block/quorum.c): reads are voted among the children
(the content vote-threshold of them agree on wins, else an error), writes
reach every child; and "info" names what no file name can say as
json:{...}, and a backing file over a quorum node "cannot determine actual
path", as qemu-img 7.2 does (qemu-iotests 110)."""

import os
import re

from qiltest import TestCase, file_bytes, main, qemu_img, qil, random_file


def quorum_opts(paths, threshold, extra=""):
    children = ",".join(f"file.children.{i}.filename={p}"
                        for i, p in enumerate(paths))
    return (f"driver=raw,file.driver=quorum,"
            f"file.vote-threshold={threshold},{children}{extra}")


def flip_byte(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xff]))


class QuorumVoting(TestCase):
    def three_copies(self, size=1 << 20):
        paths = [self.path(f"c{i}.raw") for i in range(3)]
        random_file(paths[0], size)
        for p in paths[1:]:
            with open(p, "wb") as f:
                f.write(file_bytes(paths[0]))
        return paths

    def read_through(self, paths, threshold, extra=""):
        out = self.path("out.raw")
        qil("convert", "-O", "raw", "--image-opts",
            quorum_opts(paths, threshold, extra), out)
        return file_bytes(out)

    def test_majority_wins(self):
        paths = self.three_copies(4 << 20)
        good = file_bytes(paths[0])
        flip_byte(paths[2], 4096)      # one child differs
        self.assertEqual(self.read_through(paths, 2), good)
        # Another child, in another request (votes are per request).
        flip_byte(paths[0], (3 << 20) + 8192)
        self.assertEqual(self.read_through(paths, 2), good)

    def test_no_majority_is_an_error(self):
        paths = self.three_copies()
        flip_byte(paths[1], 100)
        flip_byte(paths[2], 200)
        proc = self.assertFails(
            ["convert", "-O", "raw", "--image-opts",
             quorum_opts(paths, 2), self.path("out.raw")],
            "children disagree")
        self.assertIn("vote-threshold is 2", proc.stderr)
        # threshold 1: the content most children agree on is enough.
        self.read_through(paths, 1)

    def test_unreadable_children_do_not_vote(self):
        paths = self.three_copies()
        good = file_bytes(paths[0])
        os.truncate(paths[2], 0)       # a size mismatch: refused
        self.assertFails(["convert", "-O", "raw", "--image-opts",
                          quorum_opts(paths, 2), self.path("o.raw")],
                         "children differ in size")
        self.assertEqual(self.read_through(paths[:2], 2), good)

    def test_write_reaches_all_children(self):
        paths = self.three_copies()
        src = self.path("src.raw")
        random_file(src, 1 << 20, seed=7)
        qil("convert", "-n", "-f", "raw", src, "--target-image-opts",
            quorum_opts(paths, 2))
        for p in paths:
            self.assertEqual(file_bytes(p), file_bytes(src), p)

    def test_read_only_repairs_nothing(self):
        """rewrite-corrupted writes only through a read-write node."""
        paths = self.three_copies()
        bad = self.path("bad.raw")
        flip_byte(paths[1], 5000)
        with open(bad, "wb") as f:
            f.write(file_bytes(paths[1]))
        qil("compare", "--image-opts",
            quorum_opts(paths, 2, ",file.rewrite-corrupted=on"),
            paths[0])
        self.assertEqual(file_bytes(paths[1]), file_bytes(bad))

    def test_bad_options(self):
        paths = self.three_copies(4096)
        out = self.path("o.raw")
        for opts, msg in [
                (quorum_opts(paths, 4), "threshold may not exceed children"),
                (quorum_opts(paths, 0), "'vote-threshold' expects a value"),
                ("driver=raw,file.driver=quorum,file.vote-threshold=1",
                 "Number of provided children must be 1 or more"),
                (quorum_opts(paths, 1, ",file.read-pattern=x"),
                 "read-pattern"),
                (quorum_opts(paths, 1, ",file.bogus=1"), "bogus")]:
            self.assertFails(["convert", "-O", "raw", "--image-opts", opts,
                              out], msg)

    def test_fifo_reads_first_child(self):
        paths = self.three_copies()
        flip_byte(paths[1], 10)
        flip_byte(paths[2], 20)
        self.assertEqual(
            self.read_through(paths, 2, ",file.read-pattern=fifo"),
            file_bytes(paths[0]))


def human_info(args, tool):
    """info's lines that qemu-iotests 110 shows, the json: body masked."""
    proc = tool("info", *args)
    keep = ("image:", "file format:", "virtual size:", "backing file:")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(keep)]
    return [re.sub(r"^image: json:\{.*\}$", "image: json:{...}", ln)
            for ln in lines]


class QuorumInfo(TestCase):
    def setUp(self):
        super().setUp()
        self.need_qemu_img()
        os.chdir(self.dir)
        qil("create", "-f", "qcow2", "t.qcow2.base", "64M")
        qil("create", "-f", "qcow2", "-b", "t.qcow2.base", "-F", "qcow2",
            "t.qcow2", "64M")
        self.top = self.path("t.qcow2")

    def compare(self, name, extra=()):
        ours = human_info([*extra, name], qil)
        theirs = human_info([*extra, name], qemu_img)
        self.assertEqual(ours, theirs)
        return ours

    def test_blkdebug_with_rules_is_json(self):
        name = ("json:{'driver':'qcow2','file':{'driver':'blkdebug',"
                "'image':{'driver':'file','filename':'%s'},"
                "'set-state':[{'event':'read_aio','new_state':42}]}}"
                % self.top)
        lines = self.compare(name)
        self.assertEqual(lines[0], "image: json:{...}")
        self.assertIn(f"actual path: {self.path('t.qcow2.base')}", lines[3])
        # The name given back opens the same image.
        info = self.info_json(name)
        self.assertTrue(info["filename"].startswith("json:{"))
        again = self.info_json(info["filename"])
        self.assertEqual(again["virtual-size"], 64 << 20)

    def test_plain_names_stay_plain(self):
        for name in [self.top,
                     "json:{'driver':'qcow2','file':{'driver':'file',"
                     "'filename':'%s'}}" % self.top]:
            lines = self.compare(name)
            self.assertEqual(lines[0], f"image: {self.top}")

    def test_backing_over_quorum(self):
        with open(self.top, "rb") as f, open("t.qcow2.copy", "wb") as g:
            g.write(f.read())
        name = ("json:{'driver':'qcow2','file':{'driver':'quorum',"
                "'vote-threshold':1,'children':["
                "{'driver':'file','filename':'%s'},"
                "{'driver':'file','filename':'%s'}]}}"
                % (self.top, self.path("t.qcow2.copy")))
        lines = self.compare(name)
        self.assertEqual(lines[0], "image: json:{...}")
        self.assertEqual(lines[3],
                         "backing file: t.qcow2.base (cannot determine "
                         "actual path)")
        info = self.info_json(name)
        self.assertNotIn("full-backing-filename", info)
        self.assertEqual(info["backing-filename"], "t.qcow2.base")
        # Following the chain needs the path: an error, as in qemu-img.
        proc = self.assertFails(["info", "--backing-chain", name],
                                "Could not determine absolute backing "
                                "filename")
        theirs = qemu_img("info", "--backing-chain", name, check=False)
        self.assertEqual(theirs.returncode, 1)
        self.assertEqual(proc.stdout, theirs.stdout)


if __name__ == "__main__":
    main()
