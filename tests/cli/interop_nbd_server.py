#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""qemu-nbd-lite (nbdkit with qemu-nbd-lite/plugin.c) serving images to
real NBD clients: nbdinfo, nbdcopy, nbdfuse, qemu-img and qemu-io. Raw,
LUKS1 (qemu-img-made), LUKS2 (cryptsetup-made, argon2id) and qcow2 with
LUKS inside (qemu-img-made) are read and written through the export and
checked by other tools: qemu-img on the image file, cryptsetup's volume
key with an independent AES-XTS decryption (python's cryptography), and
qemu-img check. Then qemu-nbd's options (-r, -x, -D, --fork, --pid-file,
-t, -e, --discard, --detect-zeroes, --tls-creds), the image lock, the
errors, and a server killed with SIGKILL in the middle of a copy."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time

from qiltest import (CRYPTSETUP, PASSPHRASE, QEMU_IMG, SECRET, TestCase,
                     file_bytes, main, qemu_img, qil, random_file, run)

SERVER = os.environ.get("QIL_NBD_SERVER", "")
NBDKIT = shutil.which("nbdkit")
NBDINFO = shutil.which("nbdinfo")
NBDCOPY = shutil.which("nbdcopy")
NBDFUSE = shutil.which("nbdfuse")
FUSERMOUNT = shutil.which("fusermount3") or shutil.which("fusermount")
QEMU_IO = shutil.which("qemu-io")
PSKTOOL = shutil.which("psktool")
CERTTOOL = shutil.which("certtool")
MiB = 1 << 20

try:
    from cryptography.hazmat.primitives.ciphers import (Cipher, algorithms,
                                                        modes)
except ImportError:
    Cipher = None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unix_uri(sock, export=""):
    return f"nbd+unix:///{export}?socket={sock}"


class ServerTest(TestCase):
    def setUp(self):
        super().setUp()
        if not SERVER or not os.path.exists(SERVER):
            self.skipTest("qemu-nbd-lite was not built (it needs nbdkit's "
                          "plugin API: nbdkit-plugin-dev, which "
                          "scripts/install-deps.sh installs)")
        if not NBDKIT:
            self.skipTest("nbdkit is not installed")
        self.servers = []
        self.pw = self.path("pw.txt")
        with open(self.pw, "w") as f:
            f.write(PASSPHRASE)

    def tearDown(self):
        for proc in self.servers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            proc.stderr.close()
        super().tearDown()

    def need(self, *tools):
        for name, path in tools:
            if not path:
                self.skipTest(f"{name} is not installed "
                              "(scripts/install-deps.sh installs it)")

    def serve(self, *args, sock=None, port=None, persistent=True):
        """qemu-nbd-lite in the foreground on a unix socket (or a TCP port
        on 127.0.0.1); returns (process, uri) once it listens."""
        cmd = [SERVER]
        if persistent:
            cmd.append("-t")
        if port:
            cmd += ["-b", "127.0.0.1", "-p", str(port)]
        else:
            sock = sock or self.path("srv.sock")
            # An earlier server's socket stays behind (as qemu-nbd's).
            if os.path.exists(sock):
                os.unlink(sock)
            cmd += ["-k", sock]
        cmd += [str(a) for a in args]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        self.servers.append(proc)
        for _ in range(400):
            if sock and os.path.exists(sock):
                return proc, unix_uri(sock)
            if port:
                try:
                    socket.create_connection(("127.0.0.1", port),
                                             0.1).close()
                    return proc, f"nbd://127.0.0.1:{port}/"
                except OSError:
                    pass
            if proc.poll() is not None:
                self.fail(f"qemu-nbd-lite exited {proc.returncode}: "
                          f"{proc.stderr.read()}")
            time.sleep(0.05)
        self.fail("qemu-nbd-lite did not start listening")

    def stop(self, proc):
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)

    def secret_args(self, sid="sec0"):
        return ["--object", f"secret,id={sid},file={self.pw}"]

    def luks_opts(self, img, fmt="luks"):
        if fmt == "qcow2":
            return (f"driver=qcow2,encrypt.key-secret=sec0,"
                    f"file.filename={img}")
        return f"driver=luks,key-secret=sec0,file.filename={img}"

    def plain_of(self, img, fmt="luks"):
        """The image's plain contents, as qemu-img (or we) decrypt them."""
        out = self.path("plain-of.raw")
        if os.path.exists(out):
            os.unlink(out)
        if fmt == "qcow2-plain":
            qemu_img("convert", "-f", "qcow2", img, "-O", "raw", out)
            return file_bytes(out)
        opts = self.luks_opts(img, fmt) if fmt != "raw" else None
        if QEMU_IMG and fmt != "luks2":
            args = ["convert", "--object", SECRET]
            args += ["--image-opts", opts] if opts else ["-f", "raw", img]
            qemu_img(*args, "-O", "raw", out)
        else:
            qil("convert", "--object", SECRET, "--image-opts",
                self.luks_opts(img), "-O", "raw", out)
        return file_bytes(out)

    def cryptsetup_luks2(self, name, size):
        """A LUKS2 image as cryptsetup makes it: argon2id, 4 KiB sectors."""
        self.need(("cryptsetup", CRYPTSETUP))
        img = self.path(name)
        with open(img, "wb") as f:
            f.truncate(size)
        run([CRYPTSETUP, "luksFormat", "--batch-mode", "--type", "luks2",
             "--pbkdf", "argon2id", "--pbkdf-memory", "32768",
             "--pbkdf-force-iterations", "4", "--sector-size", "4096",
             "--key-file", self.pw, img])
        return img

    def volume_key_decrypt(self, img, offset, length):
        """Plain text of [offset, +length) of a LUKS2 aes-xts-plain64
        image, decrypted with the volume key cryptsetup dumps and
        python's AES-XTS: nothing of ours in the path."""
        if Cipher is None:
            self.skipTest("python3's cryptography module is missing "
                          "(python3-cryptography)")
        dumped = run([CRYPTSETUP, "luksDump", "--dump-volume-key",
                      "--batch-mode", "--key-file", self.pw, img]).stdout
        key = bytes.fromhex("".join(re.search(
            r"MK dump:\s*((?:[0-9a-f ]+\n\s*)+)", dumped).group(1).split()))
        meta = json.loads(run([CRYPTSETUP, "luksDump", "--dump-json-metadata",
                               img]).stdout)
        seg = meta["segments"]["0"]
        self.assertEqual(seg["encryption"], "aes-xts-plain64")
        ss = seg["sector_size"]
        self.assertEqual(offset % ss, 0)
        with open(img, "rb") as f:
            f.seek(int(seg["offset"]) + offset)
            data = f.read(length)
        plain = bytearray()
        for i in range(0, length, ss):
            # plain64 counts 512-byte units whatever the sector size.
            iv = ((offset + i) // 512).to_bytes(16, "little")
            d = Cipher(algorithms.AES(key), modes.XTS(iv)).decryptor()
            plain += d.update(data[i:i + ss]) + d.finalize()
        return bytes(plain)


class Serve(ServerTest):
    def test_luks2_cryptsetup_read_write(self):
        """A cryptsetup LUKS2 image (argon2id) served read-write: nbdcopy
        writes, qemu-io writes and reads a pattern, nbdcopy and qemu-img
        read back; the data on disk decrypts with cryptsetup's volume key."""
        self.need(("nbdcopy", NBDCOPY), ("qemu-io", QEMU_IO))
        img = self.cryptsetup_luks2("c.luks2", 48 * MiB)
        src = self.path("src.raw")
        random_file(src, 32 * MiB, seed=7)
        proc, uri = self.serve(*self.secret_args(), "--image-opts",
                               self.luks_opts(img), "-e", "0")
        run([NBDCOPY, src, uri])
        run([QEMU_IO, "-f", "raw", "-c", "write -P 0xa5 1M 96k",
             "-c", "write -P 0x3c 30000k 4k", "-c", "read -P 0xa5 1M 96k",
             uri])
        want = bytearray(file_bytes(src))
        want[MiB:MiB + 96 * 1024] = b"\xa5" * (96 * 1024)
        want[30000 * 1024:30004 * 1024] = b"\x3c" * 4096
        back = self.path("back.raw")
        run([NBDCOPY, uri, back])
        self.assertEqual(file_bytes(back), bytes(want))
        if QEMU_IMG:
            viaq = self.path("viaq.raw")
            qemu_img("convert", "-f", "raw", uri, "-O", "raw", viaq)
            self.assertEqual(file_bytes(viaq), bytes(want))
        self.stop(proc)
        self.assertEqual(self.volume_key_decrypt(img, 0, 32 * MiB),
                         bytes(want[:32 * MiB]))
        run([CRYPTSETUP, "luksDump", img])

    def test_luks1_qemu_img(self):
        """A LUKS1 image qemu-img made: read and written over our export,
        qemu-img decrypts the result."""
        self.need(("qemu-img", QEMU_IMG), ("nbdcopy", NBDCOPY))
        img = self.path("q.luks")
        qemu_img("create", "--object", SECRET, "-f", "luks", "-o",
                 "key-secret=sec0,iter-time=10", img, "16M")
        src = self.path("src.raw")
        random_file(src, 16 * MiB, seed=3)
        proc, uri = self.serve(*self.secret_args(), "--image-opts",
                               self.luks_opts(img), "-e", "2")
        if NBDINFO:
            exp = json.loads(run([NBDINFO, "--json", uri]).stdout)[
                "exports"][0]
            self.assertEqual(exp["export-size"], 16 * MiB)
            self.assertTrue(exp["can_multi_conn"])
        run([NBDCOPY, src, uri])
        self.stop(proc)
        self.assertEqual(self.plain_of(img), file_bytes(src))

    def test_qcow2_luks_qemu_img(self):
        """qcow2 with LUKS inside, made by qemu-img: written over our export
        with qemu-io, then qemu-img check is clean and qemu-img reads the
        data we wrote."""
        self.need(("qemu-img", QEMU_IMG), ("qemu-io", QEMU_IO))
        img = self.path("e.qcow2")
        qemu_img("create", "--object", SECRET, "-f", "qcow2", "-o",
                 "encrypt.format=luks,encrypt.key-secret=sec0,"
                 "encrypt.iter-time=10,cluster_size=65536", img, "32M")
        proc, uri = self.serve(*self.secret_args(), "--image-opts",
                               self.luks_opts(img, "qcow2"))
        run([QEMU_IO, "-f", "raw", "-c", "write -P 0x11 0 200k",
             "-c", "write -P 0x22 10M 64k", "-c", "write -z 5M 1M", uri])
        if NBDINFO:
            # qcow2 clusters never written are known zero (holes).
            m = run([NBDINFO, "--map", uri]).stdout
            self.assertRegex(m, r"hole,zero")
        self.stop(proc)
        qemu_img("check", "--object", SECRET, "--image-opts",
                 self.luks_opts(img, "qcow2"))
        want = bytearray(32 * MiB)
        want[0:200 * 1024] = b"\x11" * (200 * 1024)
        want[10 * MiB:10 * MiB + 65536] = b"\x22" * 65536
        self.assertEqual(self.plain_of(img, "qcow2"), bytes(want))

    def test_qcow2_backing_chain(self):
        """A qcow2 overlay on a raw backing file, served read-write: reads
        see the backing data where the overlay has none, writes land in
        the overlay (the backing file is not touched), qemu-img agrees."""
        self.need(("qemu-img", QEMU_IMG), ("nbdcopy", NBDCOPY),
                  ("qemu-io", QEMU_IO))
        base = self.path("base.raw")
        random_file(base, 8 * MiB, seed=5)
        before = file_bytes(base)
        top = self.path("top.qcow2")
        qemu_img("create", "-f", "qcow2", "-b", base, "-F", "raw", top)
        proc, uri = self.serve("-f", "qcow2", top)
        run([QEMU_IO, "-f", "raw", "-c", "write -P 0x5a 2M 128k", uri])
        got = self.path("got.raw")
        run([NBDCOPY, uri, got])
        self.stop(proc)
        want = bytearray(before)
        want[2 * MiB:2 * MiB + 131072] = b"\x5a" * 131072
        self.assertEqual(file_bytes(got), bytes(want))
        self.assertEqual(file_bytes(base), before)
        qemu_img("check", top)
        self.assertEqual(self.plain_of(top, "qcow2-plain"), bytes(want))

    def test_raw_tcp_block_status(self):
        """A sparse raw file over TCP: holes reach nbdinfo --map and
        qemu-img map, data reads back, -D and -x are what nbdinfo lists."""
        self.need(("nbdinfo", NBDINFO))
        img = self.path("sparse.raw")
        with open(img, "wb") as f:
            f.truncate(8 * MiB)
            f.seek(3 * MiB)
            f.write(b"\x77" * MiB)
        port = free_port()
        proc, uri = self.serve("-f", "raw", "-x", "disk", "-D", "my disk",
                               img, port=port)
        uri = f"nbd://127.0.0.1:{port}/disk"
        listing = json.loads(run([NBDINFO, "--list", "--json",
                                  f"nbd://127.0.0.1:{port}"]).stdout)
        names = [(e["export-name"], e.get("description"))
                 for e in listing["exports"]]
        self.assertEqual(names, [("disk", "my disk")])
        m = run([NBDINFO, "--map", uri]).stdout.split("\n")
        self.assertRegex(m[0], r"^\s+0\s+3145728\s+3\s+hole,zero")
        self.assertRegex(m[1], r"^\s+3145728\s+1048576\s+0\s+data")
        if QEMU_IMG:
            theirs = json.loads(qemu_img("map", "--output=json", "-f", "raw",
                                         uri).stdout)
            self.assertEqual([(e["start"], e["length"], e["data"])
                              for e in theirs],
                             [(0, 3 * MiB, False), (3 * MiB, MiB, True),
                              (4 * MiB, 4 * MiB, False)])
        # Our own client: the bytes, and the holes (map).
        ours = self.path("ours.raw")
        qil("convert", "-f", "raw", uri, "-O", "raw", ours)
        self.assertEqual(file_bytes(ours), file_bytes(img))
        mine = json.loads(qil("map", "--output=json", "-f", "raw",
                              uri).stdout)
        self.assertEqual([(e["start"], e["length"], e["data"])
                          for e in mine],
                         [(0, 3 * MiB, False), (3 * MiB, MiB, True),
                          (4 * MiB, 4 * MiB, False)])
        # An export name it does not serve is refused (qemu-nbd's rule).
        proc2 = run([NBDINFO, f"nbd://127.0.0.1:{port}/other"], check=False)
        self.assertNotEqual(proc2.returncode, 0)
        self.stop(proc)


class Options(ServerTest):
    def test_read_only_and_locks(self):
        """-r refuses writes; a read-write server holds the image's write
        lock (a second server, qemu-img and our tool are refused) and -r -U
        serves beside it."""
        img, _ = self.make_luks("l.luks", "4M")
        proc, uri = self.serve(*self.secret_args(), "--image-opts",
                               self.luks_opts(img))
        out = run([SERVER, "-k", self.path("b.sock"), *self.secret_args(),
                   "--image-opts", self.luks_opts(img)], check=False)
        self.assertEqual(out.returncode, 1)
        self.assertTrue(out.stderr.startswith("qemu-nbd-lite: "), out.stderr)
        self.assertIn("lock", out.stderr)
        self.assertFails(["resize", "--object", SECRET, "--image-opts",
                          self.luks_opts(img), "8M"], "lock")
        if QEMU_IO:
            q = run([QEMU_IO, "-f", "raw", "-c", "write 0 512", img],
                    check=False)
            self.assertNotEqual(q.returncode, 0)
            self.assertIn("lock", q.stderr)
        # -U with -r: no lock taken, served beside the writer.
        ro, ro_uri = self.serve(*self.secret_args(), "-r", "-U",
                                "--image-opts", self.luks_opts(img),
                                sock=self.path("ro.sock"))
        if QEMU_IO:
            w = run([QEMU_IO, "-f", "raw", "-c", "write 0 4k", ro_uri],
                    check=False)
            self.assertNotEqual(w.returncode, 0)
            self.assertIn("ermission", w.stderr + w.stdout)
        self.stop(ro)
        self.stop(proc)
        # -U without -r is refused, as qemu-nbd refuses it.
        out = run([SERVER, "-U", "-k", self.path("c.sock"), img],
                  check=False)
        self.assertEqual(out.returncode, 1)
        self.assertIn("--read-only", out.stderr)

    def test_errors(self):
        """A wrong passphrase, a missing file, a missing secret, a bad
        option: exit 1, a message, nothing listening."""
        img, _ = self.make_luks("l.luks", "4M")
        bad = self.path("bad.txt")
        with open(bad, "w") as f:
            f.write("wrong")
        sock = self.path("x.sock")
        cases = [
            (["--object", f"secret,id=sec0,file={bad}", "--image-opts",
              self.luks_opts(img)], "Invalid password"),
            ([self.path("missing.img")], "No such file"),
            (["-f", "luks", img], "key-secret"),
            (["--discard=sometimes", "-f", "raw", img], "discard"),
            (["--tls-creds", "nope", "-f", "raw", img],
             "No TLS credentials with id 'nope'"),
            (["-c", "/dev/nbd0", img], "nbdfuse"),
        ]
        for args, msg in cases:
            with self.subTest(args=args):
                t0 = time.monotonic()
                out = run([SERVER, "-k", sock, *args], check=False)
                self.assertEqual(out.returncode, 1, out.stderr)
                self.assertIn(msg, out.stderr)
                self.assertNotIn("wrong", out.stderr)
                self.assertLess(time.monotonic() - t0, 30)
                self.assertFalse(os.path.exists(sock))

    def test_fork_pid_file_and_exit_on_last_client(self):
        """--fork returns once the server listens, --pid-file names it;
        without -t it exits after its last client, with -t it stays."""
        self.need(("nbdinfo", NBDINFO))
        img = self.path("r.raw")
        random_file(img, MiB)
        sock, pidf = self.path("f.sock"), self.path("f.pid")
        run([SERVER, "--fork", "--pid-file", pidf, "-k", sock, "-f", "raw",
             img])
        self.assertTrue(os.path.exists(sock))
        with open(pidf) as f:
            pid = int(f.read())
        os.kill(pid, 0)
        self.assertEqual(run([NBDINFO, "--size", unix_uri(sock)]).stdout,
                         f"{MiB}\n")
        for _ in range(200):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, signal.SIGKILL)
            self.fail("the server did not exit after its last client")
        # -t: two clients in turn, still there.
        run([SERVER, "-t", "--fork", "--pid-file", pidf, "-k", sock, "-f",
             "raw", img])
        with open(pidf) as f:
            pid = int(f.read())
        try:
            for _ in range(2):
                run([NBDINFO, "--size", unix_uri(sock)])
            time.sleep(0.3)
            os.kill(pid, 0)
        finally:
            os.kill(pid, signal.SIGTERM)

    def test_shared_limit(self):
        """-e 1 (the default) serves one client at a time: a second one
        waits, as with qemu-nbd, and is served once the first has gone; a
        server stopped while a client waits still exits at once."""
        self.need(("nbdinfo", NBDINFO), ("qemu-io", QEMU_IO))
        img = self.path("r.raw")
        random_file(img, MiB)
        proc, uri = self.serve("-f", "raw", img)

        def hold():
            # qemu-io holds its connection until its stdin closes.
            first = subprocess.Popen([QEMU_IO, "-f", "raw", uri],
                                     stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
            first.stdin.write("read 0 4k\n")
            first.stdin.flush()
            self.assertIn("read 4096/4096", first.stdout.readline())
            return first

        first = hold()
        second = subprocess.Popen([NBDINFO, "--size", uri],
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(1)
            self.assertIsNone(second.poll(), "the second client was not "
                              "kept waiting while the first is connected")
        finally:
            first.communicate("quit\n", timeout=30)
        out, err = second.communicate(timeout=30)
        self.assertEqual((second.returncode, out), (0, f"{MiB}\n"), err)
        # A waiting client is let go when the server is stopped, and does
        # not hold up its exit. (nbdkit itself waits for connected clients
        # to leave: qemu-io's, here.)
        first = hold()
        second = subprocess.Popen([NBDINFO, "--size", uri],
                                  stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            self.assertIsNone(second.poll())
            proc.terminate()
            self.assertNotEqual(second.wait(timeout=10), 0)
        finally:
            first.communicate("quit\n", timeout=30)
            second.wait(timeout=30)
        proc.wait(timeout=10)

    def test_discard_and_detect_zeroes(self):
        """--discard=unmap lets trims through to a raw file (its blocks are
        freed); ignore, the default, offers no trim; --detect-zeroes=on turns
        a write of zeroes into a zero write (no blocks allocated)."""
        self.need(("nbdinfo", NBDINFO), ("qemu-io", QEMU_IO))
        img = self.path("d.raw")
        with open(img, "wb") as f:
            f.write(os.urandom(4 * MiB))
        proc, uri = self.serve("-f", "raw", img)
        self.assertIn("can_trim: false", run([NBDINFO, uri]).stdout)
        self.stop(proc)
        proc, uri = self.serve("-f", "raw", "--discard=unmap", img)
        run([QEMU_IO, "-f", "raw", "-c", "discard 0 2M", uri])
        self.stop(proc)
        self.assertLessEqual(os.stat(img).st_blocks * 512, 2 * MiB + 65536)
        # Zeroes written as data, detected: with unmap (and --discard=unmap)
        # they become a hole; with "on" only a zero write (blocks stay).
        for mode, extra, sparse in (("unmap", ["--discard=unmap"], True),
                                    ("on", [], False)):
            img2 = self.path(f"z-{mode}.raw")
            with open(img2, "wb") as f:
                f.write(os.urandom(4 * MiB))
            proc, uri = self.serve("-f", "raw", f"--detect-zeroes={mode}",
                                   *extra, img2, sock=self.path("z.sock"))
            run([QEMU_IO, "-f", "raw", "-c", "write -P 0 0 2M",
                 "-c", "write -P 1 2M 1M", uri])
            self.stop(proc)
            data = file_bytes(img2)
            self.assertEqual(data[:2 * MiB], bytes(2 * MiB))
            self.assertEqual(data[2 * MiB:3 * MiB], b"\x01" * MiB)
            used = os.stat(img2).st_blocks * 512
            if sparse:
                self.assertLessEqual(used, 2 * MiB + 65536, mode)
            else:
                self.assertGreaterEqual(used, 4 * MiB, mode)

    def test_tls_psk(self):
        """--tls-creds with a tls-creds-psk object: a client with the key
        reads the LUKS image's plain text; one without TLS is refused."""
        self.need(("psktool", PSKTOOL), ("nbdinfo", NBDINFO),
                  ("nbdcopy", NBDCOPY))
        keys = self.path("tls")
        os.mkdir(keys)
        run([PSKTOOL, "-u", "alice", "-p", os.path.join(keys, "keys.psk")])
        img, raw = self.make_luks("t.luks", "4M")
        sock = self.path("t.sock")
        proc, _ = self.serve(
            *self.secret_args(), "--object",
            f"tls-creds-psk,id=tls0,dir={keys},endpoint=server",
            "--tls-creds", "tls0", "--image-opts", self.luks_opts(img),
            sock=sock)
        plain = run([NBDINFO, "--size", unix_uri(sock)], check=False)
        self.assertNotEqual(plain.returncode, 0)
        tls_uri = (f"nbds+unix://alice@/?socket={sock}"
                   f"&tls-psk-file={keys}/keys.psk")
        out = self.path("out.raw")
        run([NBDCOPY, tls_uri, out])
        self.assertEqual(file_bytes(out), file_bytes(raw))
        self.stop(proc)
        # A client-side object is refused as a server's credentials.
        bad = run([SERVER, "-k", self.path("u.sock"), "--object",
                   f"tls-creds-psk,id=tls0,dir={keys}", "--tls-creds",
                   "tls0", img], check=False)
        self.assertEqual(bad.returncode, 1)
        self.assertIn("server endpoint", bad.stderr)


    def make_x509(self, name, cn):
        """A CA and a server certificate for cn (127.0.0.1 too), as
        certtool makes them, in QEMU's file names; returns (server_dir,
        client_dir), the client's holding the CA's certificate alone."""
        d = self.path(name)
        os.mkdir(d)

        def certtool(*args, template=None):
            cmd = [CERTTOOL, *args]
            if template:
                tpl = os.path.join(d, "tpl.info")
                with open(tpl, "w") as f:
                    f.write(template)
                cmd += ["--template", tpl]
            return run(cmd).stdout

        for key in ("ca-key.pem", "server-key.pem"):
            with open(os.path.join(d, key), "w") as f:
                f.write(certtool("--generate-privkey"))
        certtool("--generate-self-signed", "--load-privkey",
                 os.path.join(d, "ca-key.pem"), "--outfile",
                 os.path.join(d, "ca-cert.pem"),
                 template=f"cn = {name} CA\nca\ncert_signing_key\n"
                          "expiration_days = 2\n")
        certtool("--generate-certificate", "--load-privkey",
                 os.path.join(d, "server-key.pem"),
                 "--load-ca-certificate", os.path.join(d, "ca-cert.pem"),
                 "--load-ca-privkey", os.path.join(d, "ca-key.pem"),
                 "--outfile", os.path.join(d, "server-cert.pem"),
                 template=f"cn = {cn}\ndns_name = {cn}\n"
                          "ip_address = 127.0.0.1\ntls_www_server\n"
                          "encryption_key\nsigning_key\n"
                          "expiration_days = 2\n")
        client = self.path(name + "-client")
        os.mkdir(client)
        shutil.copy(os.path.join(d, "ca-cert.pem"), client)
        return d, client

    def test_tls_x509(self):
        """--tls-creds with a tls-creds-x509 object: qemu-img (its own TLS
        client, QEMU's object syntax) and nbdinfo read the LUKS image's
        plain text; a client trusting another CA is refused."""
        self.need(("certtool", CERTTOOL), ("qemu-img", QEMU_IMG),
                  ("nbdinfo", NBDINFO))
        server_dir, client_dir = self.make_x509("pki", "localhost")
        _, other_client = self.make_x509("other", "localhost")
        img, raw = self.make_luks("x.luks", "4M")
        sock = self.path("x.sock")
        proc, _ = self.serve(
            *self.secret_args(), "--object",
            f"tls-creds-x509,id=tls0,dir={server_dir},endpoint=server,"
            "verify-peer=off", "--tls-creds", "tls0", "--image-opts",
            self.luks_opts(img), sock=sock)
        out = self.path("out.raw")
        qemu_img("convert", "--object",
                 f"tls-creds-x509,id=tls0,dir={client_dir},endpoint=client",
                 "--image-opts", f"driver=nbd,server.type=unix,"
                 f"server.path={sock},tls-creds=tls0,tls-hostname=localhost",
                 "-O", "raw", out)
        self.assertEqual(file_bytes(out), file_bytes(raw))
        self.assertEqual(run([NBDINFO, "--size",
                              f"nbds+unix:///?socket={sock}"
                              f"&tls-certificates={client_dir}"]).stdout,
                         f"{4 * MiB}\n")
        # (libnbd 1.14 does not check the server's certificate on a unix
        # socket, where it has no host name: qemu-img does.)
        bad = qemu_img("info", "--object", f"tls-creds-x509,id=tls0,"
                       f"dir={other_client},endpoint=client",
                       "--image-opts", f"driver=nbd,server.type=unix,"
                       f"server.path={sock},tls-creds=tls0,"
                       "tls-hostname=localhost", check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("issuer", bad.stderr)
        plain = qemu_img("info", "--image-opts", "driver=nbd,"
                         f"server.type=unix,server.path={sock}", check=False)
        self.assertNotEqual(plain.returncode, 0)
        self.assertIn("TLS", plain.stderr)
        self.stop(proc)


class Faults(ServerTest):
    def test_sigkill_during_nbdcopy(self):
        """SIGKILL the server in the middle of a long nbdcopy into a
        qcow2+LUKS image: after a restart the image opens, qemu-img check
        is clean, and every 64 KiB block holds the old or the new data."""
        self.need(("nbdcopy", NBDCOPY), ("qemu-img", QEMU_IMG))
        size = 48 * MiB
        img = self.path("k.qcow2")
        old = self.path("old.raw")
        random_file(old, size, seed=11)
        qil("convert", "--object", SECRET, "-f", "raw", old, "-O", "qcow2",
            "-o", "encrypt.format=luks,encrypt.key-secret=sec0,"
            "encrypt.iter-time=10", img)
        new = self.path("new.raw")
        random_file(new, size, seed=12)
        for delay in (0.15, 0.4):
            with self.subTest(delay=delay):
                proc, uri = self.serve(*self.secret_args(), "--image-opts",
                                       self.luks_opts(img, "qcow2"))
                copy = subprocess.Popen([NBDCOPY, "--flush", new, uri],
                                        stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
                time.sleep(delay)
                proc.kill()
                proc.wait()
                rc = copy.wait(60)
                self.assertNotEqual(rc, None)
                qemu_img("check", "--object", SECRET, "--image-opts",
                         self.luks_opts(img, "qcow2"))
                got = self.plain_of(img, "qcow2")
                o, n = file_bytes(old), file_bytes(new)
                bs = 65536
                for i in range(0, size, bs):
                    blk = got[i:i + bs]
                    if blk != o[i:i + bs]:
                        self.assertEqual(blk, n[i:i + bs],
                                         f"block at {i} is neither old nor "
                                         "new data")
                # The next round starts from what this one left.
                with open(old, "wb") as f:
                    f.write(got)


class Fuse(ServerTest):
    def test_nbdfuse_write_luks2(self):
        """The recipe of docs/nbd.md: nbdfuse mounts our export of a
        cryptsetup LUKS2 image as a plain file, without root's kernel
        modules; written with dd, read with cmp; the ciphertext on disk
        decrypts with cryptsetup's volume key to what was written."""
        self.need(("nbdfuse", NBDFUSE), ("fusermount3", FUSERMOUNT))
        if not os.path.exists("/dev/fuse"):
            self.skipTest("no /dev/fuse")
        img = self.cryptsetup_luks2("f.luks2", 40 * MiB)
        proc, uri = self.serve(*self.secret_args(), "--image-opts",
                               self.luks_opts(img))
        mnt = self.path("mnt")
        os.mkdir(mnt)
        fuse = subprocess.Popen([NBDFUSE, os.path.join(mnt, "disk"), uri],
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True)
        disk = os.path.join(mnt, "disk")
        try:
            for _ in range(200):
                if os.path.exists(disk):
                    break
                if fuse.poll() is not None:
                    self.fail(f"nbdfuse exited: {fuse.stderr.read()}")
                time.sleep(0.05)
            self.assertEqual(os.path.getsize(disk), 24 * MiB)
            data = os.urandom(3 * MiB)
            with open(disk, "r+b") as f:
                f.seek(MiB)
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            with open(disk, "rb") as f:
                f.seek(MiB)
                self.assertEqual(f.read(len(data)), data)
        finally:
            run([FUSERMOUNT, "-u", mnt], check=False)
            fuse.communicate(timeout=30)
        self.stop(proc)
        self.assertEqual(self.volume_key_decrypt(img, MiB, 3 * MiB), data)


if __name__ == "__main__":
    main()
