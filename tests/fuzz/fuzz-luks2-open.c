/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target: a full LUKS2 open with the passphrase "fuzz": the KDF
 * (PBKDF2, argon2i, argon2id), the key slot area decryption, the AF merge
 * and the digest run on whatever the JSON metadata claims; then a little
 * payload is decrypted and encrypted.
 *
 * The input is an image truncated after its key slot areas (the tail
 * reads as zeros; the file size is not passed). All-zero checksum fields
 * are filled in, and inputs asking for costly key slots are skipped
 * (fuzz-luks2.h).
 */
#include "fuzz-luks2.h"

#define FUZZ_PASSPHRASE "fuzz"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autofree uint8_t *buf = NULL;
    FuzzImage img = { .size = size };
    QCryptoBlockOpenOptions opts = {
        .format = QCRYPTO_BLOCK_FORMAT_LUKS,
        .secret = { (const uint8_t *)FUZZ_PASSPHRASE,
                    strlen(FUZZ_PASSPHRASE) },
    };
    g_autoptr(Error) err = NULL;
    g_autoptr(QCryptoBlock) block = NULL;
    g_autoptr(QCryptoBlockInfo) info = NULL;
    unsigned flags = 0;

    fuzz_init();

    if (!fuzz_luks2_costs_bounded(data, size)) {
        fuzz_debug("skipped: costly key slots", NULL);
        return -1;      /* not added to the corpus */
    }
    buf = fuzz_memdup(data, size);
    fuzz_luks2_fix_checksums(buf, size);
    img.data = buf;
    /* As make-seed-luks2 --detached makes them (payload in another file) */
    if (fuzz_luks2_detached(buf, size)) {
        flags |= QCRYPTO_BLOCK_OPEN_DETACHED;
    }
    block = qcrypto_block_open(&opts, fuzz_image_read, &img, flags, &err);
    g_assert(!block == !!err);
    fuzz_debug("open", err);
    if (!block) {
        return 0;
    }
    info = qcrypto_block_get_info(block, NULL);
    g_assert(info);
    fuzz_payload(block);
    return 0;
}
