/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target: resume a LUKS2 in-place encryption (qcrypto_reencrypt_resume)
 * with the passphrase "fuzz" on an image in re-encryption state: loading
 * the state, the reencrypt key slot, the backup segments, the digest over
 * the re-encryption metadata, the active segment list, then the hot zones
 * and the final header.
 *
 * The input is the whole image file (header, data, moved copy): the seeds
 * (make-seeds-reencrypt.sh) are small images made by cryptsetup and by
 * qemu-img-lite, with a cheap KDF. The file lives in memory behind a
 * QCryptoReencryptIO; it may grow, but never past FUZZ_REENC_MAX_FILE, and
 * a read past its end fails as a short read of a real file would. The
 * hot zone is small so that the zone loop runs a few times, and the run is
 * stopped once after its first zone and resumed (our own mid-run state is
 * read back too). A run that says it finished must leave an image that
 * opens with the passphrase.
 *
 * A custom mutator aims half the mutations at the JSON text (below).
 *
 * As in fuzz-luks2-open, all-zero checksum fields are filled in, and inputs
 * asking for costly key slots are skipped (fuzz-luks2.h); the seeds'
 * qemu-img-lite key slots have a few thousand PBKDF2 iterations (its
 * smallest iter-time), so this target allows that many.
 */
#define FUZZ_LUKS2_MAX_ITERATIONS 10000
#include "fuzz-luks2.h"

#include "fuzz-reenc-file.h"

#define FUZZ_PASSPHRASE "fuzz"

/* libFuzzer's own mutator (weak: the replay build has none, nor calls it). */
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size)
    __attribute__((weak));
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
                               unsigned int seed);

/*
 * The JSON text is 2 to 4 % of an input (the rest is key material and
 * data): half the mutations go to the primary header copy's JSON text
 * alone, written to the secondary copy too (three times in four: a
 * changed primary alone is also worth a try), the layout kept.
 */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
                               unsigned int seed)
{
    uint64_t hdr = fuzz_luks2_hdr_size(data, size, 0);

    if (hdr && (seed & 1) && 2 * hdr <= size) {
        uint8_t *json = data + LUKS2_BIN_HDR_LEN;
        size_t area = hdr - LUKS2_BIN_HDR_LEN;
        size_t len = strnlen((const char *)json, area);
        size_t n = LLVMFuzzerMutate(json, len, area - 1);

        memset(json + n, 0, area - n);
        if ((seed & 6) && fuzz_luks2_hdr_size(data, size, hdr) == hdr) {
            memcpy(data + hdr + LUKS2_BIN_HDR_LEN, json, area);
        }
        return size;
    }
    return LLVMFuzzerMutate(data, size, max_size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const QCryptoBlockSecret secret = {
        (const uint8_t *)FUZZ_PASSPHRASE, strlen(FUZZ_PASSPHRASE)
    };
    FuzzFile f;
    QCryptoReencryptIO io;

    fuzz_init();
    if (!fuzz_luks2_costs_bounded(data, size)) {
        fuzz_debug("skipped: costly key slots", NULL);
        return -1;      /* not added to the corpus */
    }
    ff_init(&f, &io, data, size);
    fuzz_luks2_fix_checksums(f.data, f.len);

    ff_resume_twice(&f, &io, &secret, true);
    ff_free(&f);
    return 0;
}
