"""--object secret,...: data, base64, file (any bytes), file=/dev/stdin,
prompt=on, refusals, and no secret in any message."""
import base64
import os
import pty
import select
import signal
import subprocess
import time

from qiltest import (ITER_TIME, PASSPHRASE, SECRET, TOOL, TestCase,
                     file_bytes, main, qil, random_file, run)


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
                ("secret,id=k,file=/dev/null,keyid=y",
                 "Property 'secret.keyid'"),
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
                f"memory-backend-ram,id=m,data={a}"]:
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


if __name__ == "__main__":
    main()
