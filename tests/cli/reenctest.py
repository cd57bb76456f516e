# SPDX-License-Identifier: GPL-2.0-or-later
"""What the in-place re-encryption tests share (test_reencrypt*.py): the
LUKS2 JSON read and rewritten by hand, and a test case with a seeded RNG,
a key file holding the passphrase, and a SIGKILL at a random moment."""

import base64
import hashlib
import json
import os
import random
import re
import struct
import subprocess
import sys
import time

from qiltest import CRYPTSETUP, PASSPHRASE, TestCase, run


def image_opts(img):
    return f"driver=luks,key-secret=sec0,file.filename={img}"


def header_json(path):
    """The metadata of the LUKS2 header at the start of path."""
    with open(path, "rb") as f:
        hdr_size = struct.unpack(">Q", f.read(16)[8:16])[0]
        f.seek(4096)
        return json.loads(f.read(hdr_size - 4096).split(b"\0")[0])


def rewrite_json(path, edit):
    """Apply edit(metadata) to both LUKS2 header copies, checksums right."""
    with open(path, "r+b") as f:
        hdr_size = struct.unpack(">Q", f.read(16)[8:16])[0]
        for off in (0, hdr_size):
            f.seek(off)
            area = bytearray(f.read(hdr_size))
            md = json.loads(area[4096:].split(b"\0")[0])
            edit(md)
            text = json.dumps(md, separators=(",", ":")).encode()
            area[4096:] = text + bytes(hdr_size - 4096 - len(text))
            area[0x1C0:0x200] = bytes(64)
            area[0x1C0:0x1E0] = hashlib.sha256(area).digest()
            f.seek(off)
            f.write(area)


def reenc_slot(md):
    return [k for k in md["keyslots"].values() if k["type"] == "reencrypt"][0]


# Metadata edits every mode must refuse (rewrite_json(path, edit)).
def unknown_version(md):
    md["config"]["requirements"]["mandatory"] = ["online-reencrypt-v9"]


def wrong_reenc_digest(md):
    """One bit of the digest of the reencrypt key slot's parameters."""
    d = [d for d in md["digests"].values() if not d["segments"]][0]
    raw = bytearray(base64.b64decode(d["digest"]))
    raw[0] ^= 1
    d["digest"] = base64.b64encode(bytes(raw)).decode()


class ReencTestCase(TestCase):
    """The seed is printed by failing asserts that pass it on."""

    @classmethod
    def setUpClass(cls):
        # QIL_TEST_SEED=N picks the same kill moments again (the timing of
        # the machine still varies); the seed goes to stderr, which meson
        # shows for a failed test.
        env = os.environ.get("QIL_TEST_SEED")
        cls.seed = int(env) if env else int.from_bytes(os.urandom(4),
                                                       "little")
        cls.rng = random.Random(cls.seed)
        print(f"{cls.__name__}: QIL_TEST_SEED={cls.seed}", file=sys.stderr)

    def setUp(self):
        super().setUp()
        # cryptsetup killed mid-encryption leaves LUKS2-temp-UUID.new in
        # its working directory: the test's own, not the build tree.
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(self.path(""))
        self.keyfile = self.path("key")
        with open(self.keyfile, "w") as f:
            f.write(PASSPHRASE)

    def volume_key(self, img, keyfile=None):
        """The volume key, as cryptsetup luksDump --dump-volume-key says."""
        out = run([CRYPTSETUP, "luksDump", "--dump-volume-key",
                   "--batch-mode", "--key-file", keyfile or self.keyfile,
                   img]).stdout
        return bytes.fromhex("".join(re.search(
            r"MK dump:\s*((?:[0-9a-f ]+\n\s*)+)", out).group(1).split()))

    def kill_at_random(self, args, limit):
        """Start args, SIGKILL it within limit seconds; its exit status."""
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        time.sleep(self.rng.uniform(0, limit))
        proc.kill()
        return proc.wait()
