/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target: the LUKS1 header, parsed and validated (qcrypto_block_open
 * with QCRYPTO_BLOCK_OPEN_NO_IO: no secret, no key slot read).
 *
 * The input is the start of an image. It is opened three ways: with the
 * file size unknown (every rule but those against the size), the same as
 * a detached header, and with the input's length as the file size (the
 * key slot and payload checks against the end of the file). A header
 * that passes has its info read out, as `qemu-img-lite info` does.
 *
 * Then the header is converted to a detached LUKS2 header, as the
 * in-place decryption of a LUKS1 image does (qcrypto_luks2_from_luks1:
 * its JSON built from the LUKS1 fields, parsed back, both copies written).
 */
#include "fuzz-image.h"
#include "crypto/luks2priv.h"
#include "crypto/lukspriv.h"

#define FUZZ_LUKS1_FILE_SIZE (2 * 1024 * 1024 + 64 * 1024)

static void fuzz_open_header(const uint8_t *data, size_t size, bool strict,
                             unsigned flags, const char *what)
{
    FuzzImage img = { .data = data, .size = size, .strict = strict };
    QCryptoBlockOpenOptions opts = {
        .format = QCRYPTO_BLOCK_FORMAT_LUKS,
        .size = strict ? size : 0,
    };
    g_autoptr(Error) err = NULL;
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(QCryptoBlockInfo) info = NULL;

    block = qcrypto_block_open(&opts, fuzz_image_read, &img,
                               QCRYPTO_BLOCK_OPEN_NO_IO | flags, &err);
    /* Failure must come with a message, success without one. */
    g_assert(!block == !!err);
    fuzz_debug(what, err);
    if (!block) {
        g_assert(error_get_pretty(err)[0]);
        return;
    }
    info = qcrypto_block_get_info(block, NULL);
    g_assert(info);
    g_assert(qcrypto_block_get_sector_size(block) > 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_init();
    qcrypto_block_has_format(QCRYPTO_BLOCK_FORMAT_LUKS, data, size);
    fuzz_open_header(data, size, false, 0, "open");
    fuzz_open_header(data, size, false, QCRYPTO_BLOCK_OPEN_DETACHED,
                     "open detached");
    fuzz_open_header(data, size, true, 0, "open, file size known");
    if (size >= QCRYPTO_LUKS_HEADER_LEN) {
        /*
         * The key material (128 KiB a slot) lies past any input: the file
         * is the input then zeroes, big enough for QEMU's layout (payload
         * at 4040 sectors), small enough to stay fast.
         */
        FuzzImage img = { .data = data, .size = size, .strict = false };
        uint64_t file_size = MAX(size, FUZZ_LUKS1_FILE_SIZE);
        g_autoptr(Error) err = NULL;
        uint8_t *out = NULL;
        uint64_t out_len = 0;

        if (qcrypto_luks2_from_luks1(data, file_size, fuzz_image_read, &img,
                                     &out, &out_len, &err) == 0) {
            g_assert(!err && out && out_len > 0);
            g_free(out);
        } else {
            g_assert(err && error_get_pretty(err)[0]);
        }
        fuzz_debug("as LUKS2", err);
    }
    return 0;
}
