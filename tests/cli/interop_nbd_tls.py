#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""The NBD client over TLS (block/nbd.c, docs/nbd.md): nbdkit and qemu-nbd
requiring TLS with pre-shared keys (psktool) and X.509 certificates
(certtool) made here, reached with --object tls-creds-psk / tls-creds-x509
and tls-creds=, file.tls-creds= under a format, and nbds:// names; a LUKS
image read and written over TLS; and every mismatch (no TLS, wrong key,
untrusted certificate, wrong name, a server without TLS, credentials
libnbd would not check) a clear error naming the server, exit 1, quickly."""

import os
import shutil
import subprocess
import time

from interop_nbd import NBDKIT, QEMU_NBD, NBDTest, free_port
from qiltest import ITER_TIME, SECRET, file_bytes, main, qil, random_file

PSKTOOL = shutil.which("psktool")
CERTTOOL = shutil.which("certtool")
# A mismatch must be reported well before anything times out.
QUICK = 20


def run_tool(tool, *args):
    proc = subprocess.run([tool, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise AssertionError(f"{tool} {args}: {proc.stderr}")


class TLSTest(NBDTest):
    def setUp(self):
        super().setUp()
        if not NBDKIT:
            self.skipTest("nbdkit is not installed")

    def psk_dir(self, name, user="alice"):
        """A directory with keys.psk for user, as QEMU and nbdkit read it."""
        if not PSKTOOL:
            self.skipTest("psktool is not installed (gnutls-bin)")
        d = self.path(name)
        os.makedirs(d, exist_ok=True)
        run_tool(PSKTOOL, "-u", user, "-p", os.path.join(d, "keys.psk"))
        return d

    def x509_dirs(self, prefix="x509", client_cert=False):
        """A CA, a server certificate for localhost and 127.0.0.1 signed by
        it (and a client certificate): (server dir, client dir) in QEMU's
        layout."""
        if not CERTTOOL:
            self.skipTest("certtool is not installed (gnutls-bin)")
        srv, cli = self.path(prefix + "-server"), self.path(prefix + "-client")
        os.makedirs(srv)
        os.makedirs(cli)
        ca_key = self.path(prefix + "-ca-key.pem")
        ca_info = self.path(prefix + "-ca.info")
        with open(ca_info, "w") as f:
            f.write("cn = qemu-img-lite test CA\nca\ncert_signing_key\n"
                    "expiration_days = 2\n")
        run_tool(CERTTOOL, "--generate-privkey", "--outfile", ca_key)
        run_tool(CERTTOOL, "--generate-self-signed", "--load-privkey", ca_key,
                 "--template", ca_info, "--outfile",
                 os.path.join(srv, "ca-cert.pem"))
        shutil.copy(os.path.join(srv, "ca-cert.pem"), cli)
        key = os.path.join(srv, "server-key.pem")
        info = self.path(prefix + "-server.info")
        with open(info, "w") as f:
            f.write("cn = localhost\ndns_name = localhost\n"
                    "ip_address = 127.0.0.1\ntls_www_server\nencryption_key\n"
                    "signing_key\nexpiration_days = 2\n")
        run_tool(CERTTOOL, "--generate-privkey", "--outfile", key)
        run_tool(CERTTOOL, "--generate-certificate", "--load-ca-certificate",
                 os.path.join(srv, "ca-cert.pem"), "--load-ca-privkey", ca_key,
                 "--load-privkey", key, "--template", info, "--outfile",
                 os.path.join(srv, "server-cert.pem"))
        if client_cert:
            key = os.path.join(cli, "client-key.pem")
            with open(info, "w") as f:
                f.write("cn = client\ntls_www_client\nencryption_key\n"
                        "signing_key\nexpiration_days = 2\n")
            run_tool(CERTTOOL, "--generate-privkey", "--outfile", key)
            run_tool(CERTTOOL, "--generate-certificate",
                     "--load-ca-certificate",
                     os.path.join(srv, "ca-cert.pem"), "--load-ca-privkey",
                     ca_key, "--load-privkey", key, "--template", info,
                     "--outfile", os.path.join(cli, "client-cert.pem"))
        return srv, cli

    def nbdkit_tls(self, tls_args, plugin, port=None):
        """nbdkit requiring TLS, on a unix socket or 127.0.0.1:port."""
        if port:
            self.serve([NBDKIT, "-f", "--tls=require", *tls_args,
                        "-i", "127.0.0.1", "-p", str(port), *plugin],
                       port=port)
            return None
        sock = self.path(f"tls{len(self.servers)}.sock")
        self.serve([NBDKIT, "-f", "--tls=require", *tls_args, "-U", sock,
                    *plugin], sock=sock)
        return sock

    def assertQuickFail(self, args, message):
        start = time.monotonic()
        proc = self.assertFails(args, message)
        self.assertLess(time.monotonic() - start, QUICK)
        return proc


class PSK(TLSTest):
    def test_nbdkit_psk(self):
        """nbdkit --tls-psk: tls-creds-psk with tls-creds=, an nbds+unix://
        name with tls-creds= or libnbd's tls-psk-file= and user@."""
        d = self.psk_dir("psk")
        src = self.path("src.raw")
        random_file(src, 1 << 20)
        sock = self.nbdkit_tls(
            ["--tls-psk=" + os.path.join(d, "keys.psk")], ["file", src])
        obj = f"tls-creds-psk,id=tls0,dir={d},username=alice"
        names = [
            ["--image-opts", f"driver=raw,file.driver=nbd,"
             f"file.server.type=unix,file.server.path={sock},"
             "file.tls-creds=tls0"],
            ["-f", "raw", f"nbds+unix:///?socket={sock}&tls-creds=tls0"],
            ["-f", "raw", f"nbds+unix://alice@/?socket={sock}&tls-psk-file="
             + os.path.join(d, "keys.psk")],
        ]
        for i, name in enumerate(names):
            with self.subTest(name=name[-1]):
                out = self.path(f"out{i}.raw")
                qil("convert", "--object", obj, *name, "-O", "raw", out)
                self.assertEqual(file_bytes(out), file_bytes(src))
        info = self.info_json("--object", obj, "-f", "raw",
                              f"nbds+unix:///?socket={sock}&tls-creds=tls0")
        self.assertEqual(info["virtual-size"], 1 << 20)

    def test_luks_over_tls(self):
        """A LUKS2 image of ours served by nbdkit over TLS: read through
        file.tls-creds=, written back (convert -n), read locally."""
        d = self.psk_dir("psk")
        src, src2 = self.path("src.raw"), self.path("src2.raw")
        random_file(src, 4 << 20, seed=5)
        random_file(src2, 4 << 20, seed=6)
        img = self.path("img.luks")
        qil("convert", "--object", SECRET, "-f", "raw", "-O", "luks", "-o",
            f"key-secret=sec0,iter-time={ITER_TIME},luks-version=2", src,
            img)
        sock = self.nbdkit_tls(
            ["--tls-psk=" + os.path.join(d, "keys.psk")], ["file", img])
        obj = f"tls-creds-psk,id=tls0,dir={d},username=alice"
        opts = ("driver=luks,key-secret=sec0,file.driver=nbd,"
                f"file.server.type=unix,file.server.path={sock},"
                "file.tls-creds=tls0")
        out = self.path("out.raw")
        qil("convert", "--object", SECRET, "--object", obj, "--image-opts",
            opts, "-O", "raw", out)
        self.assertEqual(file_bytes(out), file_bytes(src))
        qil("convert", "-n", "--object", SECRET, "--object", obj, "-f", "raw",
            src2, "--target-image-opts", opts)
        self.stop()
        local = self.path("local.raw")
        qil("convert", "--object", SECRET, "--image-opts",
            f"driver=luks,key-secret=sec0,file.filename={img}", "-O", "raw",
            local)
        self.assertEqual(file_bytes(local), file_bytes(src2))

    def test_qemu_nbd_psk(self):
        """qemu-nbd --object tls-creds-psk,endpoint=server --tls-creds."""
        if not QEMU_NBD:
            self.skipTest("qemu-nbd is not installed")
        d = self.psk_dir("psk", user="qemu")
        src = self.path("src.raw")
        random_file(src, 1 << 20, seed=7)
        served = self.path("served.raw")
        shutil.copy(src, served)
        sock = self.path("q.sock")
        self.serve([QEMU_NBD, "-t", "-f", "raw", "-k", sock, "--object",
                    f"tls-creds-psk,id=tls0,endpoint=server,dir={d}",
                    "--tls-creds", "tls0", served], sock=sock)
        out = self.path("out.raw")
        # QEMU's default PSK username, "qemu", when the object names none.
        qil("convert", "--object", f"tls-creds-psk,id=tls0,dir={d}",
            "--image-opts", f"driver=raw,file.driver=nbd,file.server.path="
            f"{sock},file.tls-creds=tls0", "-O", "raw", out)
        self.assertEqual(file_bytes(out), file_bytes(src))

    def test_mismatches(self):
        """No TLS against a server requiring it; the wrong key; the wrong
        username; TLS against a server without it."""
        d = self.psk_dir("psk")
        bad = self.psk_dir("bad")
        sock = self.nbdkit_tls(
            ["--tls-psk=" + os.path.join(d, "keys.psk")],
            ["memory", "size=1M"])
        uri = f"nbd+unix:///?socket={sock}"
        tls_uri = f"nbds+unix:///?socket={sock}"
        self.assertQuickFail(
            ["info", uri], f"Could not connect to '{uri}': handshake: "
            "server requires TLS")
        proc = self.assertQuickFail(
            ["info", "--object", f"tls-creds-psk,id=tls0,dir={bad},"
             "username=alice", f"{tls_uri}&tls-creds=tls0"],
            f"Could not connect to '{tls_uri}'")
        self.assertIn("pre-shared key", proc.stderr)
        self.assertQuickFail(
            ["info", "--object", f"tls-creds-psk,id=tls0,dir={d}",
             f"{tls_uri}&tls-creds=tls0"],
            "username qemu was not found")
        plain = self.nbdkit("memory", "size=1M", sock_name="plain.sock")
        self.assertQuickFail(
            ["info", "--object", f"tls-creds-psk,id=tls0,dir={d},"
             "username=alice", f"nbds+unix:///?socket={plain}&tls-creds=tls0"],
            "server refused TLS")
        # Options that need TLS, without it; a server's credentials.
        self.assertQuickFail(
            ["info", "--image-opts", f"driver=nbd,server.path={sock},"
             "tls-hostname=localhost"], "need TLS")
        self.assertQuickFail(
            ["info", "--object", f"tls-creds-psk,id=tls1,dir={d},"
             "endpoint=server", f"{tls_uri}&tls-creds=tls1"],
            "expecting a client endpoint")
        self.assertQuickFail(["info", f"{tls_uri}&tls-creds=none"],
                             "No TLS credentials with id 'none'")
        self.assertQuickFail(["info", f"{uri}&tls-creds=tls0"],
                             "TLS settings go with nbds:// names")


class X509(TLSTest):
    def test_nbdkit_x509_tcp(self):
        """nbdkit --tls-certificates on 127.0.0.1: the certificate checked
        against the host connected to, by IP address and by name."""
        srv, cli = self.x509_dirs()
        src = self.path("src.raw")
        random_file(src, 1 << 20, seed=8)
        port = free_port()
        self.nbdkit_tls(["--tls-certificates=" + srv], ["file", src],
                        port=port)
        obj = f"tls-creds-x509,id=tls0,dir={cli},endpoint=client"
        names = [
            ["--image-opts", "driver=raw,file.driver=nbd,file.server.host="
             f"127.0.0.1,file.server.port={port},file.tls-creds=tls0"],
            ["-f", "raw", f"nbds://localhost:{port}/?tls-creds=tls0"],
            ["-f", "raw", f"nbds://127.0.0.1:{port}/?tls-certificates={cli}"],
        ]
        for i, name in enumerate(names):
            with self.subTest(name=name[-1]):
                out = self.path(f"out{i}.raw")
                qil("convert", "--object", obj, *name, "-O", "raw", out)
                self.assertEqual(file_bytes(out), file_bytes(src))

    def test_qemu_nbd_x509(self):
        """qemu-nbd --object tls-creds-x509,endpoint=server, on TCP: a LUKS
        image read over TLS. qemu-nbd checks the client's certificate too
        (verify-peer=on, QEMU's default): without one, refused."""
        if not QEMU_NBD:
            self.skipTest("qemu-nbd is not installed")
        srv, cli = self.x509_dirs(client_cert=True)
        src = self.path("src.raw")
        random_file(src, 2 << 20, seed=9)
        img = self.path("img.luks")
        qil("convert", "--object", SECRET, "-f", "raw", "-O", "luks", "-o",
            f"key-secret=sec0,iter-time={ITER_TIME}", src, img)
        port = free_port()
        self.serve([QEMU_NBD, "-t", "-f", "raw", "-b", "127.0.0.1", "-p",
                    str(port), "--object",
                    f"tls-creds-x509,id=tls0,endpoint=server,dir={srv}",
                    "--tls-creds", "tls0", img], port=port)
        out = self.path("out.raw")
        qil("convert", "--object", SECRET, "--object",
            f"tls-creds-x509,id=tls0,dir={cli}", "--image-opts",
            "driver=luks,key-secret=sec0,file.driver=nbd,file.server.host="
            f"127.0.0.1,file.server.port={port},file.tls-creds=tls0", "-O",
            "raw", out)
        self.assertEqual(file_bytes(out), file_bytes(src))
        for f in ("client-cert.pem", "client-key.pem"):
            os.unlink(os.path.join(cli, f))
        self.assertQuickFail(
            ["info", "--object", f"tls-creds-x509,id=tls0,dir={cli}",
             f"nbds://127.0.0.1:{port}/?tls-creds=tls0"],
            "client certificate")

    def test_mismatches(self):
        """An untrusted certificate, a name the certificate lacks, x509
        over a unix socket (libnbd would not check it: refused unless
        verify-peer=off), nbds:// without credentials."""
        srv, cli = self.x509_dirs()
        _, other = self.x509_dirs("other")
        port = free_port()
        self.nbdkit_tls(["--tls-certificates=" + srv], ["memory", "size=1M"],
                        port=port)
        name = f"nbds://127.0.0.1:{port}/"
        proc = self.assertQuickFail(
            ["info", "--object", f"tls-creds-x509,id=tls0,dir={other}",
             f"{name}?tls-creds=tls0"],
            f"Could not connect to '{name}': gnutls_handshake: Error in the "
            "certificate verification")
        self.assertIn("not trusted", proc.stderr)
        self.assertQuickFail(
            ["info", "--object", f"tls-creds-x509,id=tls0,dir={cli}",
             f"{name}?tls-creds=tls0&tls-hostname=example.com"],
            "example.com")
        self.assertQuickFail(["info", name], "TLS needs credentials")
        self.assertQuickFail(
            ["info", f"{name}?tls-certificates={self.dir}"],
            "no CA certificate")
        # With verify-peer=off an untrusted certificate is accepted.
        qil("info", "--object",
            f"tls-creds-x509,id=tls0,dir={other},verify-peer=off",
            f"{name}?tls-creds=tls0")
        sock = self.nbdkit_tls(["--tls-certificates=" + srv],
                               ["memory", "size=1M"])
        unix = f"nbds+unix:///?socket={sock}"
        self.assertQuickFail(
            ["info", "--object", f"tls-creds-x509,id=tls0,dir={cli}",
             f"{unix}&tls-creds=tls0"],
            "cannot verify a server certificate over a unix socket")
        qil("info", "--object",
            f"tls-creds-x509,id=tls0,dir={cli},verify-peer=off",
            f"{unix}&tls-creds=tls0")


if __name__ == "__main__":
    main()
