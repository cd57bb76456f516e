"""--object secret,...: data, base64, file (any bytes), and refusals."""
import base64
import os

from qiltest import ITER_TIME, TestCase, file_bytes, main, qil, random_file


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
                ("secret,id=k,data=x,keyid=y", "Property 'secret.keyid'")]:
            self.assertFails(["info", "--object", obj, img], msg)
        self.assertFails(["info", "--object", "secret,id=k,data=x",
                          "--object", "secret,id=k,data=y", img],
                         "Duplicate ID 'k'")


if __name__ == "__main__":
    main()
