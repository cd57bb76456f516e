#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""meson install into a scratch DESTDIR (issue 26, "installed like a real
tool"): the programs run from the installed tree, qemu-nbd-lite finds its
plugin where it was installed, the manual pages render with man (or are
man source at least), and bash completion completes commands, options and
-o names from the installed binary."""
import os
import shutil
import subprocess

from qiltest import TestCase, main, run

BUILD = os.environ.get("QIL_BUILD_ROOT", "")
MESON = shutil.which("meson")


class Install(TestCase):
    def setUp(self):
        super().setUp()
        if not BUILD or not MESON:
            self.skipTest("needs meson and the build directory")
        self.dest = self.path("dest")
        run([MESON, "install", "--no-rebuild", "--quiet", "-C", BUILD,
             "--destdir", self.dest])
        intro = run([MESON, "introspect", "--buildoptions", BUILD]).stdout
        import json
        opts = {o["name"]: o["value"] for o in json.loads(intro)}
        self.prefix = self.dest + opts["prefix"]
        self.bindir = os.path.join(self.prefix, opts["bindir"])
        self.libdir = os.path.join(self.prefix, opts["libdir"])
        self.mandir = os.path.join(self.prefix, opts["mandir"])
        self.datadir = os.path.join(self.prefix, opts["datadir"])

    def test_programs_and_demo_job(self):
        qil = os.path.join(self.bindir, "qemu-img-lite")
        self.assertIn("qemu-img-lite version",
                      run([qil, "--version"]).stdout)
        # The demo's job from the installed binary: raw -> LUKS -> raw.
        raw, luks, back = (self.path(n) for n in ("a.raw", "a.luks",
                                                  "b.raw"))
        with open(raw, "wb") as f:
            f.write(os.urandom(1 << 20))
        sec = "secret,id=s0,data=pw"
        run([qil, "convert", "--object", sec, "-O", "luks", "-o",
             "key-secret=s0,iter-time=10", raw, luks])
        run([qil, "convert", "--object", sec, "--image-opts",
             f"driver=luks,key-secret=s0,file.filename={luks}", "-O", "raw",
             back])
        self.assertIn("identical", run([qil, "compare", raw, back]).stdout)
        nbd = os.path.join(self.bindir, "qemu-nbd-lite")
        if os.path.exists(nbd):
            plugin = os.path.join(self.libdir, "qemu-img-lite",
                                  "nbdkit-qil-plugin.so")
            self.assertTrue(os.path.exists(plugin), plugin)
            self.assertIn("Usage: qemu-nbd-lite", run([nbd, "--help"]).stdout)

    def test_man_pages(self):
        pages = [os.path.join(self.mandir, "man1", "qemu-img-lite.1"),
                 os.path.join(self.mandir, "man8", "qemu-nbd-lite.8")]
        if not os.path.exists(pages[0]):
            self.skipTest("built without pandoc (scripts/install-deps.sh "
                          "installs it): no manual pages")
        for page in pages:
            with open(page) as f:
                text = f.read()
            self.assertIn(".TH", text)
            self.assertIn(".SH Synopsis", text)
            man = shutil.which("man")
            if man:
                out = run([man, "-l", page],
                          check=False).stdout
                self.assertIn("Synopsis", out)

    def complete(self, line, prog="qemu-img-lite"):
        """What bash completion offers for line (the word being typed is
        its last, possibly empty)."""
        comp = os.path.join(self.datadir, "bash-completion", "completions",
                            prog)
        words = line.split(" ")
        script = (f"source {comp}\n"
                  f"COMP_WORDS=({' '.join(repr(w) for w in words)})\n"
                  f"COMP_CWORD={len(words) - 1}\n"
                  f"_{prog.replace('-', '_')}\n"
                  'printf "%s\\n" "${COMPREPLY[@]}"\n')
        env = dict(os.environ, PATH=self.bindir + ":" + os.environ["PATH"])
        return subprocess.run(["bash", "-c", script], env=env, text=True,
                              capture_output=True).stdout.split()

    def test_bash_completion(self):
        self.assertIn("convert", self.complete("qemu-img-lite con"))
        self.assertIn("--target-image-opts",
                      self.complete("qemu-img-lite convert --target"))
        self.assertIn("luks", self.complete("qemu-img-lite create -f l"))
        opts = self.complete("qemu-img-lite create -f qcow2 -o l")
        self.assertIn("lazy_refcounts=", opts)
        self.assertIn("encrypt.format=,cluster_size=",
                      self.complete("qemu-img-lite create -f qcow2 -o "
                                    "encrypt.format=,cl"))
        self.assertIn("--export-name", self.complete(
            "qemu-nbd-lite --exp", "qemu-nbd-lite"))


if __name__ == "__main__":
    main()
