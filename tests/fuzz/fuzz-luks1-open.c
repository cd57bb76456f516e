/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target: a full LUKS1 open with the passphrase "fuzz", so the key
 * slot code (PBKDF2, key material decryption, the AF merge, the master
 * key digest) runs on whatever sizes and offsets the header claims; then
 * a little payload is decrypted and encrypted.
 *
 * The input is an image truncated after its key material (the tail reads
 * as zeros, see fuzz-image.h); the file size is not passed, so a header
 * that passes validation reaches the key slots even when the input is
 * short. The seeds (make-seeds.sh) are images with a handful of PBKDF2
 * iterations.
 */
#include "fuzz-image.h"

#define FUZZ_PASSPHRASE "fuzz"

/*
 * The format accepts up to 2^27 iterations per slot and for the digest,
 * about a minute each: a valid but slow input, not a bug. Inputs asking
 * for more than this anywhere are skipped, so that every run stays fast
 * (the header target covers the iteration checks themselves).
 */
#define FUZZ_MAX_ITERS 64

/* The LUKS1 spec's header offsets (figures 1 and 2) of the counts. */
#define LUKS1_PAYLOAD_OFFSET_OFFSET 104
#define LUKS1_MK_DIGEST_ITER_OFFSET 164
#define LUKS1_KEY_SLOTS_OFFSET 208
#define LUKS1_KEY_SLOT_LEN 48
#define LUKS1_KEY_SLOT_ITER_OFFSET 4
#define LUKS1_NUM_KEY_SLOTS 8

static bool fuzz_iterations_bounded(const uint8_t *data, size_t size)
{
    if (fuzz_get_be32(data, size, LUKS1_MK_DIGEST_ITER_OFFSET) >
        FUZZ_MAX_ITERS) {
        return false;
    }
    for (int i = 0; i < LUKS1_NUM_KEY_SLOTS; i++) {
        size_t off = LUKS1_KEY_SLOTS_OFFSET + i * LUKS1_KEY_SLOT_LEN +
            LUKS1_KEY_SLOT_ITER_OFFSET;

        if (fuzz_get_be32(data, size, off) > FUZZ_MAX_ITERS) {
            return false;
        }
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FuzzImage img = { .data = data, .size = size };
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

    if (!fuzz_iterations_bounded(data, size)) {
        fuzz_debug("skipped: too many iterations", NULL);
        return -1;      /* not added to the corpus */
    }
    /* A payload offset of 0 marks a detached header: open it as one. */
    if (fuzz_get_be32(data, size, LUKS1_PAYLOAD_OFFSET_OFFSET) == 0) {
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
