/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target: the LUKS2 headers, both binary copies and the JSON
 * metadata, parsed and validated (qcrypto_block_open with
 * QCRYPTO_BLOCK_OPEN_NO_IO: no secret, no key slot read).
 *
 * The input is either the start of an image, both header copies (seeds
 * are the first 2 x 16 KiB of small images), or, when it does not start
 * with the LUKS magic, JSON metadata alone: the harness wraps it into a
 * pair of 16 KiB headers, so that mutations land in the JSON rather than
 * in 12 KiB of padding. All-zero checksum fields are filled in (fuzz-
 * luks2.h says why). The image is opened with the file size unknown, as
 * a detached header, and with the input's length as the file size; a
 * header that passes has its info read out.
 */
#include "fuzz-luks2.h"

#define LUKS2_OFF_VERSION 6
#define LUKS2_OFF_SEQID 16
#define LUKS2_OFF_HDR_OFFSET 256
#define FUZZ_HDR_SIZE LUKS2_HDR_SIZE_MIN

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8) {
        p[i] = v;
    }
}

/* Both copies of a 16 KiB header around json (cut to fit its area). */
static uint8_t *fuzz_wrap_json(const uint8_t *json, size_t len,
                               size_t *size)
{
    uint8_t *buf = g_malloc0(2 * FUZZ_HDR_SIZE);

    len = MIN(len, FUZZ_HDR_SIZE - LUKS2_BIN_HDR_LEN - 1);
    for (int copy = 0; copy < 2; copy++) {
        uint8_t *hdr = buf + copy * FUZZ_HDR_SIZE;

        /* LUKS2 spec, binary header: the magics of the two copies. */
        memcpy(hdr, copy ? "SKUL\xba\xbe" : "LUKS\xba\xbe", 6);
        hdr[LUKS2_OFF_VERSION + 1] = 2;
        put_be64(hdr + LUKS2_OFF_HDR_SIZE, FUZZ_HDR_SIZE);
        put_be64(hdr + LUKS2_OFF_SEQID, 1);
        strcpy((char *)hdr + LUKS2_OFF_CHECKSUM_ALG, "sha256");
        put_be64(hdr + LUKS2_OFF_HDR_OFFSET, copy * FUZZ_HDR_SIZE);
        memcpy(hdr + LUKS2_BIN_HDR_LEN, json, len);
    }
    *size = 2 * FUZZ_HDR_SIZE;
    return buf;
}

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
    g_autofree uint8_t *buf = NULL;

    fuzz_init();

    if (size >= 6 && memcmp(data, "LUKS\xba\xbe", 6) == 0) {
        buf = fuzz_memdup(data, size);
    } else {
        buf = fuzz_wrap_json(data, size, &size);
    }
    fuzz_luks2_fix_checksums(buf, size);
    qcrypto_block_has_format(QCRYPTO_BLOCK_FORMAT_LUKS, buf, size);
    fuzz_open_header(buf, size, false, 0, "open");
    fuzz_open_header(buf, size, false, QCRYPTO_BLOCK_OPEN_DETACHED,
                     "open detached");
    fuzz_open_header(buf, size, true, 0, "open, file size known");
    return 0;
}
