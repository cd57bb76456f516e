#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The NBD protocol driver (block/nbd.c, libnbd) against real servers on
loopback and unix sockets: nbdkit (memory and file plugins) and qemu-nbd.
Every name form qemu-img takes; raw, LUKS2 and qcow2 with LUKS inside read
and written over NBD and compared byte for byte with what the servers
hold; block status from the server; and the refusals (no server, a wrong
export name, a read-only export, creation); a server that never answers
(open-timeout) and one killed in the middle of a convert, either way."""

import json
import os
import shutil
import signal
import socket
import subprocess
import time

from qiltest import (CRYPTSETUP, ITER_TIME, PASSPHRASE, QEMU_IMG, SECRET,
                     TestCase, file_bytes, main, qemu_img, qil, random_file,
                     thread_stacks)

NBDKIT = shutil.which("nbdkit")
QEMU_NBD = shutil.which("qemu-nbd")


def tool_has_nbd():
    proc = qil("info", "nbd+unix:///?socket=/nonexistent", check=False)
    return "Unknown protocol" not in proc.stderr


HAVE_NBD = tool_has_nbd()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NBDTest(TestCase):
    def setUp(self):
        super().setUp()
        if not HAVE_NBD:
            self.skipTest("qemu-img-lite was built without libnbd "
                          "(scripts/install-deps.sh installs libnbd-dev)")
        self.servers = []

    def tearDown(self):
        for proc in self.servers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        super().tearDown()

    def serve(self, args, sock=None, port=None):
        """Start a server in the foreground; wait until it listens."""
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        self.servers.append(proc)
        for _ in range(200):
            if sock and os.path.exists(sock):
                return proc
            if port:
                try:
                    socket.create_connection(("127.0.0.1", port), 0.1).close()
                    return proc
                except OSError:
                    pass
            if proc.poll() is not None:
                self.fail(f"{args[0]} exited: {proc.stderr.read()}")
            time.sleep(0.05)
        self.fail(f"{args[0]} did not start listening")

    def nbdkit(self, *plugin, sock_name="nbd.sock", extra=()):
        if not NBDKIT:
            self.skipTest("nbdkit is not installed")
        sock = self.path(sock_name)
        self.serve([NBDKIT, "-f", "-U", sock, *extra, *plugin], sock=sock)
        return sock

    def qemu_nbd(self, image, fmt="raw", sock_name="qnbd.sock", extra=()):
        if not QEMU_NBD:
            self.skipTest("qemu-nbd is not installed")
        sock = self.path(sock_name)
        # -t: stay up after the first client (info) disconnects.
        self.serve([QEMU_NBD, "-t", "-f", fmt, "-k", sock, *extra, image],
                   sock=sock)
        return sock

    @staticmethod
    def unix_uri(sock, export=""):
        return f"nbd+unix:///{export}?socket={sock}"

    def stop(self, proc=None):
        proc = proc or self.servers[-1]
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)

    def read_then_write(self, opts, src, src2):
        """Over the export opts names: its data is src's; then src2 is
        written into it (convert -n) and the server stopped."""
        out = self.path("out.raw")
        qil("convert", "--object", SECRET, "--image-opts", opts, "-O", "raw",
            out)
        self.assertEqual(file_bytes(out), file_bytes(src))
        qil("convert", "-n", "--object", SECRET, "-f", "raw", src2,
            "--target-image-opts", opts)
        self.stop()


class Raw(NBDTest):
    def test_roundtrip_and_block_status(self):
        """convert -n into an nbdkit memory export and back; the half
        never written reads as a hole."""
        src, back = self.path("src.raw"), self.path("back.raw")
        random_file(src, 4 << 20)
        sock = self.nbdkit("memory", "size=8M")
        uri = self.unix_uri(sock)
        info = self.info_json(uri)
        self.assertEqual(info["format"], "raw")
        self.assertEqual(info["virtual-size"], 8 << 20)
        full = self.path("full.raw")
        with open(full, "wb") as f:
            f.write(file_bytes(src) + bytes(4 << 20))
        qil("convert", "-n", "-f", "raw", full, "-O", "raw", uri)
        qil("convert", "-f", "raw", uri, "-O", "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(full))
        self.assertIn("identical", qil("compare", "-f", "raw", "-F", "raw",
                                       full, uri).stdout)
        # The server's base:allocation: the zero half is known zero (a
        # server that does not say would make it all data), the rest not.
        extents = json.loads(qil("map", "--output=json", uri).stdout)
        tail = [e for e in extents if e["start"] >= 4 << 20]
        self.assertTrue(tail)
        self.assertTrue(all(e["zero"] for e in tail), extents)
        self.assertFalse(any(e["zero"] for e in extents
                             if e["start"] < 4 << 20), extents)
        # And qemu-img's own NBD driver maps the export the same way.
        if QEMU_IMG:
            theirs = qemu_img("map", "--output=json", "-f", "raw", uri)
            self.assertEqual(extents, json.loads(theirs.stdout))

    def test_name_forms(self):
        """nbd://HOST:PORT/EXPORT, nbd+tcp://, nbd:HOST:PORT:exportname=,
        nbd:unix:PATH and --image-opts reach the same export."""
        if not NBDKIT:
            self.skipTest("nbdkit is not installed")
        src = self.path("src.raw")
        random_file(src, 1 << 20)
        port = free_port()
        self.serve([NBDKIT, "-f", "-i", "127.0.0.1", "-p", str(port),
                    "-e", "disk", "file", src], port=port)
        names = [f"nbd://127.0.0.1:{port}/disk",
                 f"nbd+tcp://127.0.0.1:{port}/disk",
                 f"nbd:127.0.0.1:{port}:exportname=disk"]
        for name in names:
            with self.subTest(name=name):
                out = self.path("out.raw")
                qil("convert", "-f", "raw", name, "-O", "raw", out)
                self.assertEqual(file_bytes(out), file_bytes(src))
                os.unlink(out)
        out = self.path("opts.raw")
        qil("convert", "--image-opts",
            f"driver=raw,file.driver=nbd,file.server.type=inet,"
            f"file.server.host=127.0.0.1,file.server.port={port},"
            "file.export=disk", "-O", "raw", out)
        self.assertEqual(file_bytes(out), file_bytes(src))
        sock = self.nbdkit("file", src, sock_name="u.sock")
        out2 = self.path("legacy.raw")
        qil("convert", "-f", "raw", f"nbd:unix:{sock}", "-O", "raw", out2)
        self.assertEqual(file_bytes(out2), file_bytes(src))

    def test_refusals(self):
        """No server, a wrong export, a read-only export written, creation
        on NBD: clear errors, exit 1, nothing left locally."""
        self.assertFails(["info", self.unix_uri(self.path("none.sock"))],
                         "Could not connect to")
        src = self.path("src.raw")
        random_file(src, 1 << 20)
        # qemu-nbd refuses export names it does not serve (nbdkit's
        # plugins serve any).
        served = self.path("served.raw")
        shutil.copy(src, served)
        qsock = self.qemu_nbd(served, extra=("-x", "disk"))
        self.assertFails(["info", self.unix_uri(qsock, "other")],
                         "Could not connect to")
        self.assertEqual(self.info_json(self.unix_uri(qsock, "disk"))[
            "virtual-size"], 1 << 20)
        sock = self.nbdkit("file", served, extra=("-r",))
        self.assertFails(["convert", "-n", "-f", "raw", src, "-O", "raw",
                          self.unix_uri(sock)], "read-only")
        self.assertFails(["create", "-f", "raw", self.unix_uri(sock), "1M"],
                         "does not support image creation")
        self.assertFails(["info", "nbd+unix:///x"], "socket")


class Failures(NBDTest):
    """A server that never answers, or dies mid-convert: a clear error
    naming it, exit 1, in bounded time, and no local target left."""

    def test_open_timeout(self):
        """A TCP port that accepts and never speaks: open-timeout=1 ends the
        wait after about a second, saying so."""
        with socket.socket() as silent:
            silent.bind(("127.0.0.1", 0))
            silent.listen(8)
            port = silent.getsockname()[1]
            start = time.monotonic()
            self.assertFails(["info", "--image-opts",
                              "driver=nbd,server.host=127.0.0.1,"
                              f"server.port={port},open-timeout=1"],
                             f"Could not connect to 'nbd://127.0.0.1:{port}/':"
                             " no answer within 1 seconds")
            self.assertLess(time.monotonic() - start, 10)

    def run_and_kill(self, args, server, after=0.7):
        """Run the tool with args, SIGKILL server after `after` seconds;
        the tool's result (it must end within a minute)."""
        proc = subprocess.Popen([os.environ.get("QIL_TOOL", "qemu-img-lite"),
                                 *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        time.sleep(after)
        if proc.poll() is not None:
            self.fail("finished before the kill: " + proc.stderr.read())
        server.kill()
        server.wait()
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            stacks = thread_stacks(proc.pid)
            proc.kill()
            _, err = proc.communicate()
            self.fail("the tool hung after the server was killed; its "
                      f"stderr: {err}\nits threads:\n{stacks}")
        return proc.returncode, err

    def test_server_killed_reading(self):
        """convert from an export to a new local raw file, and to a new
        LUKS image, killed mid-copy: nothing left under the target's name
        (nor a hidden temporary one)."""
        if not NBDKIT:
            self.skipTest("nbdkit is not installed")
        src = self.path("src.raw")
        random_file(src, 64 << 20)
        outdir = self.path("out")
        os.mkdir(outdir)
        targets = [["-O", "raw"],
                   ["--object", SECRET, "-O", "luks", "-o",
                    f"key-secret=sec0,iter-time={ITER_TIME}"]]
        for i, target in enumerate(targets):
            with self.subTest(target=target[-1]):
                sock = self.path(f"k{i}.sock")
                # 20 ms per read: 256 chunks take seconds, not milliseconds.
                server = self.serve([NBDKIT, "-f", "-U", sock,
                                     "--filter=delay", "file", src,
                                     "delay-read=20ms"], sock=sock)
                uri = self.unix_uri(sock)
                rc, err = self.run_and_kill(
                    ["convert", "-f", "raw", uri, *target,
                     os.path.join(outdir, f"out{i}")], server)
                self.assertEqual(rc, 1, err)
                self.assertIn(f"Could not read '{uri}': the connection to "
                              "the server was lost", err)
                self.assertEqual(os.listdir(outdir), [])

    def test_server_killed_writing(self):
        """convert -n into an export whose server is killed mid-copy."""
        if not NBDKIT:
            self.skipTest("nbdkit is not installed")
        src = self.path("src.raw")
        random_file(src, 64 << 20)
        sock = self.path("w.sock")
        server = self.serve([NBDKIT, "-f", "-U", sock, "--filter=delay",
                             "memory", "size=64M", "delay-write=20ms"],
                            sock=sock)
        uri = self.unix_uri(sock)
        rc, err = self.run_and_kill(["convert", "-n", "-f", "raw", src,
                                     "-O", "raw", uri], server)
        self.assertEqual(rc, 1, err)
        self.assertIn(f"Could not write '{uri}'", err)
        self.assertIn("the connection to the server was lost", err)


class Encrypted(NBDTest):
    def test_luks2_over_qemu_nbd(self):
        """A LUKS2 image of ours served raw by qemu-nbd: probed as luks over
        NBD, read and written through it; cryptsetup and we read the
        result from the file."""
        src, src2 = self.path("src.raw"), self.path("src2.raw")
        random_file(src, 4 << 20, seed=1)
        random_file(src2, 4 << 20, seed=2)
        img = self.path("img.luks")
        qil("convert", "--object", SECRET, "-f", "raw", "-O", "luks", "-o",
            f"key-secret=sec0,iter-time={ITER_TIME},luks-version=2", src,
            img)
        sock = self.qemu_nbd(img)
        opts = ("driver=luks,key-secret=sec0,file.driver=nbd,"
                f"file.server.type=unix,file.server.path={sock}")
        self.assertEqual(self.info_json(self.unix_uri(sock))["format"],
                         "luks")
        self.read_then_write(opts, src, src2)
        local = self.path("local.raw")
        qil("convert", "--object", SECRET, "--image-opts",
            f"driver=luks,key-secret=sec0,file.filename={img}", "-O", "raw",
            local)
        self.assertEqual(file_bytes(local), file_bytes(src2))
        if CRYPTSETUP:
            proc = subprocess.run([CRYPTSETUP, "open", "--test-passphrase",
                                   img], input=PASSPHRASE, text=True,
                                  capture_output=True)
            self.assertEqual(proc.returncode, 0, proc.stderr)

    def test_qcow2_luks_over_nbdkit(self):
        """qcow2 with LUKS inside, served by nbdkit's file plugin: read and
        written over NBD; qemu-img checks and reads the file after."""
        self.need_qemu_img()
        src, src2 = self.path("src.raw"), self.path("src2.raw")
        random_file(src, 2 << 20, seed=3)
        random_file(src2, 2 << 20, seed=4)
        img = self.path("img.qcow2")
        qil("convert", "--object", SECRET, "-f", "raw", "-O", "qcow2", "-o",
            f"encrypt.format=luks,encrypt.key-secret=sec0,"
            f"encrypt.iter-time={ITER_TIME}", src, img)
        sock = self.nbdkit("file", img)
        opts = ("driver=qcow2,encrypt.key-secret=sec0,file.driver=nbd,"
                f"file.server.type=unix,file.server.path={sock}")
        self.read_then_write(opts, src, src2)
        check = qemu_img("check", "--object", SECRET, "--image-opts",
                         f"driver=qcow2,encrypt.key-secret=sec0,"
                         f"file.filename={img}", check=False)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        back = self.path("back.raw")
        qemu_img("convert", "--object", SECRET, "--image-opts",
                 f"driver=qcow2,encrypt.key-secret=sec0,file.filename={img}",
                 "-O", "raw", back)
        self.assertEqual(file_bytes(back), file_bytes(src2))


if __name__ == "__main__":
    main()
