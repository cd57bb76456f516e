# SPDX-License-Identifier: GPL-2.0-or-later
"""--object secret,...: data, base64, file (any bytes), file=/dev/stdin,
prompt=on, encrypted secrets (keyid, iv), refusals (invalid base64, an
empty passphrase for a new key slot), passphrases, file names and option
values of any bytes in any locale, and no secret in any message."""
import base64
import json
import os
import pty
import select
import shutil
import signal
import subprocess
import time

from qiltest import (CRYPTSETUP, ITER_TIME, PASSPHRASE, QEMU_IMG,
                     QEMU_IMG_TRIES, SECRET, TOOL, TestCase, file_bytes, main,
                     qemu_img, qil, random_file, run)

OPENSSL = shutil.which("openssl")
SECRET_ENCRYPT = os.environ.get("QIL_SECRET_ENCRYPT")


def run_bytes(args, locale=None, input=None):
    """Run a command whose arguments may be any bytes, under LC_ALL=locale;
    its output stays bytes."""
    env = dict(os.environ)
    if locale:
        env["LC_ALL"] = locale
    return subprocess.run(
        [a if isinstance(a, bytes) else os.fsencode(str(a)) for a in args],
        capture_output=True, env=env, input=input)


class Secrets(TestCase):
    def convert_with(self, create_secret, open_secret):
        """raw -> luks with one secret definition, back with another."""
        raw = self.path("src.raw")
        random_file(raw, 1 << 20)
        luks, back = self.path("a.luks"), self.path("back.raw")
        for p in (luks, back):
            if os.path.exists(p):
                os.unlink(p)
        qil("convert", "--object", create_secret, "-O", "luks", "-o",
            f"key-secret=k,iter-time={ITER_TIME}", raw, luks)
        proc = qil("convert", "--object", open_secret, "--image-opts",
                   f"driver=luks,key-secret=k,file.filename={luks}", "-O",
                   "raw", back, check=False)
        return proc.returncode == 0 and file_bytes(back) == file_bytes(raw)

    def test_data_base64_and_file_agree(self):
        self.need_luks()
        phrase = "correct horse"
        keyfile = self.path("key")
        with open(keyfile, "w") as f:
            f.write(phrase)
        b64 = base64.b64encode(phrase.encode()).decode()
        self.assertTrue(self.convert_with(
            f"secret,id=k,data={phrase}",
            f"secret,id=k,data={b64},format=base64"))
        self.assertTrue(self.convert_with(
            f"secret,id=k,file={keyfile}", f"secret,id=k,data={phrase}"))
        self.assertFalse(self.convert_with(
            f"secret,id=k,file={keyfile}", "secret,id=k,data=correct"))

    def test_json_object(self):
        """--object as QEMU's JSON ({"qom-type": ...}), as libvirt passes
        it, defines the same secret as the key=value form."""
        self.need_luks()
        self.assertTrue(self.convert_with(
            '{"qom-type":"secret","id":"k","data":"a,b"}',
            "secret,id=k,data=a,,b"))
        self.assertFalse(self.convert_with(
            '{"qom-type":"secret","id":"k","data":"a,b"}',
            '{"qom-type":"secret","id":"k","data":"a"}'))

    def test_binary_key_file(self):
        self.need_luks()
        keyfile = self.path("binkey")
        with open(keyfile, "wb") as f:
            f.write(bytes(range(256)) + b"\xff\x00\xc3\x28")  # not UTF-8
        b64 = base64.b64encode(file_bytes(keyfile)).decode()
        self.assertTrue(self.convert_with(
            f"secret,id=k,file={keyfile}",
            f"secret,id=k,data={b64},format=base64"))

    def test_comma_in_data(self):
        self.need_luks()
        self.assertTrue(self.convert_with("secret,id=k,data=a,,b",
                                          "secret,id=k,data=a,,b"))
        self.assertFalse(self.convert_with("secret,id=k,data=a,,b",
                                           "secret,id=k,data=a"))

    def test_refusals(self):
        img = self.path("a.raw")
        qil("create", "-q", img, "1M")
        for obj, msg in [
                ("secret,id=k,data=x,format=hex", "Invalid secret format"),
                ("secret,id=k", "exactly one of 'data' and 'file'"),
                ("secret,data=x", "Parameter 'id' is missing"),
                ("secret,id=k,data=x,file=/etc/hostname",
                 "exactly one of"),
                ("secret,id=k,file=" + self.path("none"),
                 "Unable to read secret file"),
                ("secret,id=k,data=!!!,format=base64", "not valid base64"),
                ("memory-backend-ram,id=m", "Invalid object type"),
                ("secret,id=k,file=/dev/null,bogus=y",
                 "Property 'secret.bogus'"),
                # qemu-img 7.2: the key is looked up first.
                ("secret,id=k,file=/dev/null,keyid=y",
                 "No secret with id 'y'"),
                ("secret,id=k,data=Z,format=base64", "not valid base64"),
                ("secret,id=k,prompt=maybe", "expects 'on' or 'off'"),
                ("secret,id=k,data=x,prompt=on", "cannot be combined")]:
            self.assertFails(["info", "--object", obj, img], msg)
        self.assertFails(["info", "--object", "secret,id=k,data=x",
                          "--object", "secret,id=k,data=y", img],
                         "Duplicate ID 'k'")


def pty_run(args, answer, timeout=60, enter=True):
    """Run args on a new pseudo-terminal; when the passphrase prompt shows,
    type answer (and Enter). Returns (exit status, everything the terminal
    showed)."""
    pid, master = pty.fork()
    if pid == 0:
        try:
            # A test runner may start us with SIGINT blocked (the mask
            # survives exec): the ^C test needs it delivered.
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
            os.execvp(args[0], args)
        finally:
            os._exit(127)
    shown, typed = b"", False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1)
            if not ready:
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError:         # EIO: the child closed the terminal
                break
            if not chunk:
                break
            shown += chunk
            # Type only once the prompt is up: the tool flushes pending
            # input (TCSAFLUSH) when it turns the echo off.
            if not typed and b"Enter passphrase" in shown:
                end = b"\n" if enter else b""
                os.write(master, answer.encode() + end)
                typed = True
    finally:
        os.close(master)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), shown.decode(errors="replace")


class SecretInput(TestCase):
    """The ways a passphrase reaches the tool without being on its command
    line: a pipe (file=/dev/stdin) and the terminal (prompt=on)."""

    def setUp(self):
        super().setUp()
        self.need_luks()
        self.luks, self.raw = self.make_luks("a.luks", size="1M")

    def compare_args(self, secret):
        return ["compare", "--object", secret, "--image-opts",
                f"driver=raw,file.filename={self.raw}",
                f"driver=luks,key-secret=k,file.filename={self.luks}"]

    def test_file_dev_stdin(self):
        args = [TOOL, *self.compare_args("secret,id=k,file=/dev/stdin")]
        proc = run(args, check=False, input=PASSPHRASE)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        proc = run(args, check=False, input=PASSPHRASE + "x")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("Invalid password", proc.stderr)
        self.assertNotIn(PASSPHRASE, proc.stderr + proc.stdout)

    def test_file_fifo(self):
        """A named pipe is no regular file: read to EOF all the same."""
        fifo = self.path("fifo")
        os.mkfifo(fifo)
        proc = subprocess.Popen(
            [TOOL, *self.compare_args(f"secret,id=k,file={fifo}")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        with open(fifo, "w") as f:
            f.write(PASSPHRASE)
        out, err = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 0, err)

    def test_prompt_on_terminal(self):
        rc, shown = pty_run([TOOL, *self.compare_args(
            "secret,id=k,prompt=on")], PASSPHRASE)
        self.assertIn("Enter passphrase for secret 'k'", shown)
        self.assertEqual(rc, 0, shown)
        # The terminal never showed what was typed (no echo).
        self.assertNotIn(PASSPHRASE, shown)

    def test_prompt_wrong_passphrase(self):
        rc, shown = pty_run([TOOL, *self.compare_args(
            "secret,id=k,prompt=on")], "not " + PASSPHRASE)
        self.assertEqual(rc, 2, shown)
        self.assertIn("Invalid password", shown)
        self.assertNotIn(PASSPHRASE, shown)

    def test_prompt_interrupted(self):
        # ^C at the prompt (the terminal sends SIGINT) ends it cleanly.
        rc, shown = pty_run([TOOL, *self.compare_args(
            "secret,id=k,prompt=on")], "\x03", enter=False)
        self.assertNotEqual(rc, 0, shown)
        self.assertIn("interrupted", shown)

    def test_prompt_without_terminal(self):
        # A new session has no controlling terminal: /dev/tty cannot open.
        proc = subprocess.run(
            [TOOL, *self.compare_args("secret,id=k,prompt=on")],
            capture_output=True, text=True, stdin=subprocess.DEVNULL,
            start_new_session=True)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("prompt=on needs a terminal", proc.stderr)
        self.assertIn("file=/dev/stdin", proc.stderr)


class NoSecretInMessages(TestCase):
    """Whatever goes wrong, stderr and stdout never show a passphrase."""

    SECRETS = ["Xyzzy0pass", "Plugh1word"]

    def assertHidden(self, proc):
        for s in self.SECRETS:
            self.assertNotIn(s, proc.stdout + proc.stderr)

    def test_bad_object_definitions(self):
        img = self.path("a.raw")
        qil("create", "-q", img, "1M")
        a, b = self.SECRETS
        for obj in [
                f"secret,id=s0,data={a},bogus=1",
                f"secret,id=s0,data={a},{b}",           # undoubled comma
                f"secret,id=s0,data={a},{b}=1",         # ... before an '='
                f"secret,id=s0,data={a},format=hex",
                f"secret,id=s0,data={a},file=/etc/hostname",
                f"secret,id=s0,data={a},prompt=on",
                f"secret,id=s0,data={a},prompt={b}",
                f"secret,id=s0,data={a}!{b},format=base64",
                f"secret,data={a}",
                f"secret,id=s0,data={a},=x",
                f"memory-backend-ram,id=m,data={a}",
                '{"qom-type":"secret","id":"s0","data":"' + a,
                '{"qom-type":"secret","id":"s0","data":"' + a + '",'
                '"x":{"y":"' + b + '"}}',
                '{"qom-type":"secret","data":"' + a + '"}']:
            proc = self.assertFails(["info", "--object", obj, img])
            self.assertHidden(proc)

    def test_duplicate_and_unused_secrets(self):
        img = self.path("a.raw")
        qil("create", "-q", img, "1M")
        a, b = self.SECRETS
        proc = self.assertFails(["info", "--object", f"secret,id=k,data={a}",
                                 "--object", f"secret,id=k,data={b}", img],
                                "Duplicate ID 'k'")
        self.assertHidden(proc)

    def test_wrong_passphrase_and_info(self):
        self.need_luks()
        luks, _ = self.make_luks("a.luks", size="1M")
        a, _ = self.SECRETS
        proc = self.assertFails(
            ["compare", "--object", f"secret,id=sec0,data={a}",
             "--image-opts", f"driver=raw,file.filename={luks}",
             f"driver=luks,key-secret=sec0,file.filename={luks}"],
            "Invalid password", rc=2)
        self.assertHidden(proc)
        # info (human and JSON) names the secret's id, never its value.
        for out in ["human", "json"]:
            proc = qil("info", f"--output={out}", "--object", SECRET,
                       "--image-opts",
                       f"driver=luks,key-secret=sec0,file.filename={luks}")
            self.assertNotIn(PASSPHRASE, proc.stdout + proc.stderr)


class InvalidBase64(TestCase):
    """format=base64 with a value that is not base64 is an error: never a
    GLib-CRITICAL, never an image locked with an empty passphrase."""

    INVALID = ["Z", "Zg", "Zg=", "Zm9vY", "====", "Z===", "Zg==Zg==",
               "Zg=a", "Zm9v!", "Zm 9v", "Zm-_"]

    def test_create_refused(self):
        self.need_luks()
        img = self.path("a.luks")
        for b64 in self.INVALID:
            with self.subTest(b64=b64):
                proc = self.assertFails(
                    ["create", "-f", "luks", "--object",
                     f"secret,id=k,data={b64},format=base64", "-o",
                     f"key-secret=k,iter-time={ITER_TIME}", img, "1M"],
                    "Secret 'k': data is not valid base64")
                self.assertNotIn("CRITICAL", proc.stderr)
                self.assertFalse(os.path.exists(img))

    def test_file_refused(self):
        img = self.path("a.raw")
        qil("create", "-q", img, "1M")
        keyfile = self.path("key.b64")
        with open(keyfile, "wb") as f:
            f.write(b"Zm9v\r\n")         # a CR is no base64 either
        self.assertFails(["info", "--object",
                          f"secret,id=k,file={keyfile},format=base64", img],
                         "not valid base64")

    def test_file_with_newlines_accepted(self):
        """What base64(1) writes (lines, a final newline) decodes, as in
        QEMU."""
        self.need_luks()
        luks, raw = self.make_luks("a.luks", size="1M")
        keyfile = self.path("key.b64")
        with open(keyfile, "wb") as f:
            f.write(base64.encodebytes(PASSPHRASE.encode()))
        qil("compare", "--object", f"secret,id=sec0,file={keyfile},"
            "format=base64", "--image-opts", f"driver=raw,file.filename={raw}",
            f"driver=luks,key-secret=sec0,file.filename={luks}")


class EmptyPassphrase(TestCase):
    """A new image or key slot never gets an empty passphrase; an existing
    slot with one still opens (cryptsetup makes them from an empty key
    file)."""

    EMPTY = ["secret,id=k,data=", "secret,id=k,file=/dev/null",
             "secret,id=k,data=,format=base64"]
    MESSAGE = "Secret 'k' (key-secret) is empty"

    def setUp(self):
        super().setUp()
        self.need_luks()

    def test_create_refused(self):
        img = self.path("a.luks")
        for obj in self.EMPTY:
            for version in ("1", "2"):
                with self.subTest(obj=obj, version=version):
                    self.assertFails(
                        ["create", "-f", "luks", "--object", obj, "-o",
                         f"key-secret=k,luks-version={version},"
                         f"iter-time={ITER_TIME}", img, "1M"], self.MESSAGE)
                    self.assertFalse(os.path.exists(img))

    def test_create_refused_leaves_existing_file(self):
        """A create refused for its passphrase leaves an existing file as
        it was (it would only be replaced by a complete image), and a new
        name gets nothing."""
        img, new = self.path("a.luks"), self.path("b.luks")
        random_file(img, 4096)
        before = file_bytes(img)
        args = ["create", "-f", "luks", "--object", "secret,id=k,data=",
                "-o", f"key-secret=k,iter-time={ITER_TIME}"]
        self.assertFails([*args, img, "1M"], self.MESSAGE)
        self.assertEqual(file_bytes(img), before)
        self.assertFails([*args, new, "1M"], self.MESSAGE)
        self.assertFalse(os.path.exists(new))

    def test_convert_refused(self):
        raw, luks = self.path("a.raw"), self.path("a.luks")
        random_file(raw, 1 << 20)
        for version in ("1", "2"):
            with self.subTest(version=version):
                self.assertFails(
                    ["convert", "--object", "secret,id=k,data=", "-O",
                     "luks", "-o", f"key-secret=k,luks-version={version},"
                     f"iter-time={ITER_TIME}", raw, luks], self.MESSAGE)
                self.assertFalse(os.path.exists(luks))

    def test_second_stdin_is_empty(self):
        """Two file=/dev/stdin: the second reads end of file."""
        img = self.path("a.luks")
        args = [TOOL, "create", "-q", "-f", "luks",
                "--object", "secret,id=a,file=/dev/stdin",
                "--object", "secret,id=k,file=/dev/stdin", "-o"]
        proc = run(args + [f"key-secret=k,iter-time={ITER_TIME}", img, "1M"],
                   check=False, input="pw")
        self.assertEqual(proc.returncode, 1, proc.stderr)
        self.assertIn(self.MESSAGE, proc.stderr)
        self.assertFalse(os.path.exists(img))
        # The first one got the passphrase: it does.
        proc = run(args + [f"key-secret=a,iter-time={ITER_TIME}", img, "1M"],
                   check=False, input="pw")
        self.assertEqual(proc.returncode, 0, proc.stderr)

    def active_slots(self, luks):
        data = self.info_json(luks)["format-specific"]["data"]
        return [s["active"] for s in data["slots"]]

    def test_amend_refused(self):
        for version in ("1", "2"):
            with self.subTest(version=version):
                luks, _ = self.make_luks(f"v{version}.luks", size="1M",
                                         opts=f"luks-version={version}")
                before = self.active_slots(luks)
                amend = ["amend", "--object", SECRET, "--object", None,
                         "--image-opts",
                         f"driver=luks,key-secret=sec0,file.filename={luks}",
                         "-o", f"state=active,new-secret=k,"
                         f"iter-time={ITER_TIME}"]
                for obj in self.EMPTY:
                    amend[4] = obj
                    self.assertFails(amend, "Secret 'k' (new-secret) is "
                                     "empty")
                    self.assertEqual(self.active_slots(luks), before)
                # A passphrase of one byte is a new slot.
                amend[4] = "secret,id=k,data=x"
                qil(*amend)
                self.assertEqual(self.active_slots(luks).count(True),
                                 before.count(True) + 1)

    def test_existing_empty_slot_opens(self):
        self.need_cryptsetup()
        empty = self.path("empty")
        open(empty, "wb").close()
        for version in ("luks1", "luks2"):
            with self.subTest(version=version):
                img = self.path(f"{version}.img")
                with open(img, "wb") as f:
                    f.truncate(16 << 20)
                run([CRYPTSETUP, "luksFormat", "-q", "--type", version,
                     "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000",
                     "--key-file", empty, img])
                for obj in self.EMPTY:
                    obj = obj.replace("id=k", "id=sec0")
                    qil("info", "--object", obj, "--image-opts",
                        f"driver=luks,key-secret=sec0,file.filename={img}")
                    out = self.path("out.raw")
                    qil("convert", "--object", obj, "--image-opts",
                        f"driver=luks,key-secret=sec0,file.filename={img}",
                        "-O", "raw", out)
                    os.unlink(out)
                self.assertFails(
                    ["convert", "--object", "secret,id=sec0,data=x",
                     "--image-opts",
                     f"driver=luks,key-secret=sec0,file.filename={img}",
                     "-O", "raw", self.path("out.raw")],
                    "Invalid password")


class AnyBytes(TestCase):
    """Passphrases, key-file paths, image file names and option values are
    bytes, taken as they are whatever the locale (as qemu-img and
    cryptsetup take them): UTF-8 ones and ones that are no UTF-8 at all."""

    PHRASES = ["pässwörd €".encode(), b"\xff\xfe", b"pw \xc3( \x80"]
    LOCALES = ["C", "C.UTF-8"]

    def setUp(self):
        super().setUp()
        self.need_luks()
        self.bdir = os.fsencode(self.dir)
        self.raw = self.path("src.raw")
        random_file(self.raw, 1 << 20)

    def bpath(self, name):
        return os.path.join(self.bdir, name)

    def ok(self, proc):
        self.assertEqual(proc.returncode, 0,
                         proc.stderr.decode(errors="replace"))
        return proc

    def open_args(self, tool, obj, img, out):
        return [tool, "convert", "--object", obj, "--image-opts",
                b"driver=luks,key-secret=k,file.filename=" + img, "-O",
                "raw", out]

    def test_passphrases_names_and_paths(self):
        for locale in self.LOCALES:
            for i, phrase in enumerate(self.PHRASES):
                with self.subTest(locale=locale, phrase=phrase):
                    self.check_one(locale, phrase,
                                   locale.encode() + b"%d" % i)

    def check_one(self, locale, phrase, tag):
        img = self.bpath(b"img-%s-\xe9\xff.luks" % tag)
        keyfile = self.bpath(b"key-%s-\xc3\xa9\xfe" % tag)
        out = self.bpath(b"out-%s-\xff.raw" % tag)
        with open(keyfile, "wb") as f:
            f.write(phrase)
        self.ok(run_bytes([TOOL, "convert", "--object",
                           b"secret,id=k,data=" + phrase, "-O", "luks", "-o",
                           f"key-secret=k,iter-time={ITER_TIME}", self.raw,
                           img], locale))
        # The image has the name asked for, byte for byte.
        self.assertTrue(os.path.exists(img))
        # The same bytes from a key file (a path of any bytes) open it...
        self.ok(run_bytes(self.open_args(TOOL, b"secret,id=k,file=" + keyfile,
                                         img, out), locale))
        self.assertEqual(file_bytes(out), file_bytes(self.raw))
        os.unlink(out)
        # ... one byte more does not: the passphrase is exactly those bytes.
        proc = run_bytes(self.open_args(
            TOOL, b"secret,id=k,data=" + phrase + b"x", img, out), locale)
        self.assertEqual(proc.returncode, 1)
        self.assertIn(b"Invalid password", proc.stderr)
        self.assertFalse(os.path.exists(out))
        # cryptsetup takes the same bytes; qemu-img too, but only UTF-8
        # ones (it refuses others: "Data from secret k is not valid UTF-8").
        if CRYPTSETUP:
            self.ok(run_bytes([CRYPTSETUP, "open", "--test-passphrase",
                               "--key-file", keyfile, img], locale))
        if QEMU_IMG and is_utf8(phrase):
            self.ok(run_bytes(self.open_args(
                QEMU_IMG, b"secret,id=k,data=" + phrase, img, out), locale))
            self.assertEqual(file_bytes(out), file_bytes(self.raw))

    def test_image_made_by_qemu_img(self):
        self.need_qemu_img()
        phrase = "caf\u00e9 \u20ac".encode()
        img = self.bpath(b"q-\xc3\xa9\xff.luks")
        proc = None
        for _ in range(QEMU_IMG_TRIES):  # calibration, see qemu_img()
            if os.path.exists(img):
                os.unlink(img)
            proc = run_bytes([QEMU_IMG, "convert", "-O", "luks", "--object",
                              b"secret,id=k,data=" + phrase, "-o",
                              f"key-secret=k,iter-time={ITER_TIME}",
                              self.raw, img], "C")
            if b"accurate CPU usage" not in proc.stderr:
                break
        self.ok(proc)
        for locale in self.LOCALES:
            out = self.bpath(b"out-%s.raw" % locale.encode())
            self.ok(run_bytes(self.open_args(
                TOOL, b"secret,id=k,data=" + phrase, img, out), locale))
            self.assertEqual(file_bytes(out), file_bytes(self.raw))

    def test_option_values(self):
        """A LUKS2 label and a secret id of non-ASCII bytes."""
        for locale in self.LOCALES:
            with self.subTest(locale=locale):
                img = self.bpath(b"l-%s.luks" % locale.encode())
                self.ok(run_bytes(
                    [TOOL, "create", "-q", "-f", "luks", "--object",
                     b"secret,id=s\xc3\xa9\xff,data=pw", "-o",
                     b"key-secret=s\xc3\xa9\xff,luks-version=2,"
                     b"label=disqu\xc3\xa9,iter-time=10", img, "1M"],
                    locale))
                info = json.loads(self.ok(run_bytes(
                    [TOOL, "info", "--output=json", img], locale)).stdout)
                self.assertEqual(info["format-specific"]["data"]["label"],
                                 "disqué")


def is_utf8(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def aes_cbc_encrypt(keyfile, iv, plain):
    """AES-256-CBC with PKCS#7 padding, as libvirt encrypts a secret: the
    openssl CLI, else our nettle helper (tests/cli/secret-encrypt.c)."""
    if OPENSSL:
        with open(keyfile, "rb") as f:
            key = f.read()
        proc = subprocess.run([OPENSSL, "enc", "-aes-256-cbc", "-K",
                               key.hex(), "-iv", iv.hex()], input=plain,
                              capture_output=True, check=True)
    else:
        proc = subprocess.run([SECRET_ENCRYPT, keyfile, iv.hex()],
                              input=plain, capture_output=True, check=True)
    return proc.stdout


class EncryptedSecrets(TestCase):
    """--object secret,id=ID,data=B64,keyid=MASTER,iv=B64,format=base64:
    the value is AES-256-CBC-encrypted under the 32-byte secret MASTER, as
    libvirt passes secrets to QEMU."""

    # Fixed keys and IV: the padding a wrong key yields is then known.
    KEY = bytes(range(32))
    WRONG_KEY = bytes(range(32, 64))
    IV = bytes(range(0xa0, 0xb0))
    PLAIN = b"libvirt's \xc3\xa9 passphrase"

    def setUp(self):
        super().setUp()
        if not OPENSSL and not SECRET_ENCRYPT:
            self.skipTest("neither openssl nor secret-encrypt")
        self.keyfile = self.path("master.key")
        with open(self.keyfile, "wb") as f:
            f.write(self.KEY)
        self.master = f"secret,id=m,file={self.keyfile}"

    def encrypted(self, plain=None, keyid="m", iv=None):
        """The definition of secret s0 encrypted under KEY; keyid and iv
        as given ("" leaves them out)."""
        ct = aes_cbc_encrypt(self.keyfile, self.IV,
                             self.PLAIN if plain is None else plain)
        iv = base64.b64encode(self.IV).decode() if iv is None else iv
        return (f"secret,id=s0,data={base64.b64encode(ct).decode()}"
                + (f",keyid={keyid}" if keyid else "")
                + (f",iv={iv}" if iv else "") + ",format=base64")

    def assertHidden(self, proc):
        for shown in (proc.stdout, proc.stderr):
            self.assertNotIn(self.PLAIN.decode(), shown)
            self.assertNotIn(base64.b64encode(self.KEY).decode(), shown)
        self.assertNotIn("CRITICAL", proc.stderr)

    def test_helper_agrees_with_openssl(self):
        """Both encryptions this test may use give the same bytes."""
        if not OPENSSL or not SECRET_ENCRYPT:
            self.skipTest("needs both openssl and secret-encrypt")
        for n in (0, 1, 15, 16, 17, 40):
            plain = bytes(range(n))
            helper = subprocess.run([SECRET_ENCRYPT, self.keyfile,
                                     self.IV.hex()], input=plain,
                                    capture_output=True, check=True).stdout
            self.assertEqual(helper, aes_cbc_encrypt(self.keyfile, self.IV,
                                                     plain))

    def test_create_and_open(self):
        """An image made with the encrypted secret opens with the plain
        passphrase (us, cryptsetup) and the encrypted one (us again)."""
        self.need_luks()
        img, keyfile = self.path("a.luks"), self.path("plain.key")
        with open(keyfile, "wb") as f:
            f.write(self.PLAIN)
        qil("create", "-q", "-f", "luks", "--object", self.master,
            "--object", self.encrypted(), "-o",
            f"key-secret=s0,iter-time={ITER_TIME}", img, "1M")
        for objs in ([f"secret,id=s0,file={keyfile}"],
                     [self.master, self.encrypted()]):
            args = [a for o in objs for a in ("--object", o)]
            qil("info", *args, "--image-opts",
                f"driver=luks,key-secret=s0,file.filename={img}")
        if CRYPTSETUP:
            run([CRYPTSETUP, "open", "--test-passphrase", "--key-file",
                 keyfile, img])

    def test_interop_qemu_img(self):
        """qemu-img and we take the same encrypted secret, on one image."""
        self.need_luks()
        self.need_qemu_img()
        raw, img = self.path("src.raw"), self.path("a.luks")
        random_file(raw, 1 << 20)
        secret = ["--object", self.master, "--object", self.encrypted()]
        opts = f"driver=luks,key-secret=s0,file.filename={img}"
        create = ["convert", *secret, "-O", "luks", "-o",
                  f"key-secret=s0,iter-time={ITER_TIME}", raw, img]
        for maker, reader in ((qemu_img, qil), (qil, qemu_img)):
            with self.subTest(maker=maker.__name__):
                for p in (img, self.path("out.raw")):
                    if os.path.exists(p):
                        os.unlink(p)
                maker(*create)
                reader("convert", *secret, "--image-opts", opts, "-O",
                       "raw", self.path("out.raw"))
                self.assertEqual(file_bytes(self.path("out.raw")),
                                 file_bytes(raw))

    def test_raw_ciphertext_in_file(self):
        """format=raw: the file holds the ciphertext's bytes."""
        self.need_luks()
        luks, _ = self.make_luks("a.luks", size="1M")
        ctfile = self.path("ct")
        with open(ctfile, "wb") as f:
            f.write(aes_cbc_encrypt(self.keyfile, self.IV,
                                    PASSPHRASE.encode()))
        iv = base64.b64encode(self.IV).decode()
        qil("info", "--object", self.master, "--object",
            f"secret,id=sec0,file={ctfile},keyid=m,iv={iv}", "--image-opts",
            f"driver=luks,key-secret=sec0,file.filename={luks}")

    def test_refusals(self):
        img = self.path("a.raw")
        qil("create", "-q", img, "1M")
        wrong = self.path("wrong.key")
        with open(wrong, "wb") as f:
            f.write(self.WRONG_KEY)
        nl = self.path("nl.key")
        with open(nl, "wb") as f:
            f.write(self.KEY + b"\n")
        ok = self.encrypted()
        # CBC: a wrong iv garbles the first block only, so the padding
        # must be in it (a short plaintext): 0x0e ^ 0x50 is no padding.
        bad_iv = base64.b64encode(self.IV[:15] + b"\xff").decode()
        for objs, msg in [
                ([self.master, self.encrypted(iv="")],
                 "IV is required to decrypt secret"),
                ([self.encrypted(keyid="")],
                 "'iv' is given without 'keyid'"),
                ([self.master, self.encrypted(keyid="nope")],
                 "No secret with id 'nope'"),
                ([ok, self.master], "No secret with id 'm'"),
                ([f"secret,id=m,file={nl}", ok],
                 "Key should be 32 bytes in length"),
                ([f"secret,id=m,file={wrong}", ok],
                 "its padding is wrong after decryption"),
                ([self.master, self.encrypted(plain=b"pw", iv=bad_iv)],
                 "its padding is wrong after decryption"),
                ([self.master, self.encrypted(iv="AAAA")],
                 "'iv' must be 16 bytes long, not 3"),
                ([self.master, self.encrypted(iv="AAA!")],
                 "'iv' is not valid base64"),
                ([self.master, "secret,id=s0,data=Zm9vYmFy,keyid=m,"
                  "iv=AAAAAAAAAAAAAAAAAAAAAA==,format=base64"],
                 "whole number of 16-byte AES blocks, and it has 6 bytes")]:
            with self.subTest(msg=msg):
                args = [a for o in objs for a in ("--object", o)]
                proc = self.assertFails(["info", *args, img], msg)
                self.assertHidden(proc)
        # The same definitions, right: accepted (the refusals are real).
        qil("info", "--object", self.master, "--object", ok, img)


if __name__ == "__main__":
    main()
