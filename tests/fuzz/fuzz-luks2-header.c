/*
 * Fuzz target: the LUKS2 headers, both binary copies and the JSON
 * metadata, parsed and validated (qcrypto_block_open with
 * QCRYPTO_BLOCK_OPEN_NO_IO: no secret, no key slot read).
 *
 * The input is the start of an image: both header copies (seeds are the
 * first 2 x 16 KiB of small images). All-zero checksum fields are filled
 * in first (fuzz-luks2.h says why). The image is opened with the file
 * size unknown, as a detached header, and with the input's length as the
 * file size; a header that passes has its info read out.
 */
#include "fuzz-luks2.h"

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
    const char *warning;

    block = qcrypto_block_open(&opts, fuzz_image_read, &img,
                               QCRYPTO_BLOCK_OPEN_NO_IO | flags, &err);
    g_assert(!block == !!err);
    fuzz_debug(what, err);
    if (!block) {
        g_assert(error_get_pretty(err)[0]);
        return;
    }
    warning = qcrypto_block_get_warning(block);
    g_assert(!warning || warning[0]);
    info = qcrypto_block_get_info(block, NULL);
    g_assert(info);
    g_assert(qcrypto_block_get_sector_size(block) > 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autofree uint8_t *buf = fuzz_memdup(data, size);

    fuzz_init();

    fuzz_luks2_fix_checksums(buf, size);
    qcrypto_block_has_format(QCRYPTO_BLOCK_FORMAT_LUKS, buf, size);
    fuzz_open_header(buf, size, false, 0, "open");
    fuzz_open_header(buf, size, false, QCRYPTO_BLOCK_OPEN_DETACHED,
                     "open detached");
    fuzz_open_header(buf, size, true, 0, "open, file size known");
    return 0;
}
