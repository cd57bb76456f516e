/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target: resume a new volume key of a LUKS1 image
 * (qcrypto_reencrypt_resume, crypto/block-luks1-reencrypt.c) with the
 * passphrase "fuzz": the run's mark in sector 0, the pointer at byte 640,
 * the two record copies (each with an old and a final LUKS1 header), the
 * checksum regions, the recovery of the zone in progress, the zones, the
 * commit and the wipe.
 *
 * The input is the whole image file in memory (fuzz-reenc-file.h). The
 * seeds (make-seeds-luks1-reencrypt.sh) are small LUKS1 images of
 * qemu-img-lite, qemu-img and cryptsetup stopped by qemu-img-lite at
 * --init-only or killed in a resume, with a cheap KDF. The run is
 * stopped once after its first zone and resumed; a run that says it
 * finished must leave an image that opens with the passphrase.
 *
 * The pointer and the records are under SHA-256 digests, which a mutation
 * breaks: as the LUKS2 targets do with their checksums, all-zero digest
 * fields are filled in (the seeds have them zeroed), so that mutated
 * metadata reaches the checks behind the digests. Inputs whose headers
 * (the one in sector 0 and the two in each record) ask for costly PBKDF2
 * are skipped.
 */
#include "crypto/hash.h"
#include "fuzz-reenc-file.h"

#define FUZZ_PASSPHRASE "fuzz"
#define FUZZ_MAX_ITERS 10000

/* The LUKS1 spec's offsets of the PBKDF2 counts (figures 1 and 2). */
#define LUKS1_HDR_LEN 592
#define LUKS1_MK_DIGEST_ITER_OFFSET 164
#define LUKS1_KEY_SLOTS_OFFSET 208
#define LUKS1_KEY_SLOT_LEN 48
#define LUKS1_NUM_KEY_SLOTS 8

/* The run's metadata (docs/reencrypt.md, "LUKS1"). */
#define RUN_MAGIC "LUKS\xde\x71"
#define PTR_OFFSET 640
#define PTR_DIGESTED 48
#define PTR_LEN 64
#define REC_LEN 4096
#define REC_REGION 12
#define REC_ZONE 40
#define REC_CSUM_DIGEST 64
#define REC_OLD_HDR 96
#define REC_NEW_HDR (REC_OLD_HDR + LUKS1_HDR_LEN)
#define REC_DIGEST (REC_NEW_HDR + LUKS1_HDR_LEN)
#define UNIT 512
#define CSUM 16

static uint64_t get_be64(const uint8_t *p)
{
    return (uint64_t)fuzz_get_be32(p, 8, 0) << 32 | fuzz_get_be32(p, 8, 4);
}

static bool all_zero(const uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (p[i]) {
            return false;
        }
    }
    return true;
}

static void sha256(const uint8_t *buf, size_t len, uint8_t *out, size_t n)
{
    uint8_t d[32];

    qcrypto_hash_bytes(QCRYPTO_HASH_ALGO_SHA256, buf, len, d, &error_abort);
    memcpy(out, d, n);
}

/* The LUKS1 header at hdr asks for no more than FUZZ_MAX_ITERS anywhere. */
static bool hdr_cheap(const uint8_t *hdr)
{
    if (fuzz_get_be32(hdr, LUKS1_HDR_LEN, LUKS1_MK_DIGEST_ITER_OFFSET) >
        FUZZ_MAX_ITERS) {
        return false;
    }
    for (int i = 0; i < LUKS1_NUM_KEY_SLOTS; i++) {
        if (fuzz_get_be32(hdr, LUKS1_HDR_LEN, LUKS1_KEY_SLOTS_OFFSET +
                          i * LUKS1_KEY_SLOT_LEN + 4) > FUZZ_MAX_ITERS) {
            return false;
        }
    }
    return true;
}

/*
 * Fill in the all-zero digests of the pointer and of each record (its
 * zone's checksums first); false if a header asks for costly PBKDF2.
 */
static bool fuzz_fix(uint8_t *d, size_t len)
{
    uint8_t *ptr = d + PTR_OFFSET;
    uint64_t area, region_len;

    if (len >= LUKS1_HDR_LEN && !hdr_cheap(d)) {
        return false;
    }
    if (len < PTR_OFFSET + PTR_LEN) {
        return true;
    }
    if (all_zero(ptr + PTR_DIGESTED, PTR_LEN - PTR_DIGESTED)) {
        sha256(ptr, PTR_DIGESTED, ptr + PTR_DIGESTED, PTR_LEN - PTR_DIGESTED);
    }
    area = get_be64(ptr + 16);
    region_len = get_be64(ptr + 24);
    for (int c = 0; c < 2; c++) {
        uint64_t off = area + c * REC_LEN;
        uint8_t *rec;
        uint64_t zone, roff, n;

        if (area > len || off > len || len - off < REC_LEN) {
            continue;
        }
        rec = d + off;
        if (!hdr_cheap(rec + REC_OLD_HDR) || !hdr_cheap(rec + REC_NEW_HDR)) {
            return false;
        }
        zone = get_be64(rec + REC_ZONE);
        roff = area + 2 * REC_LEN +
            fuzz_get_be32(rec, REC_LEN, REC_REGION) * region_len;
        n = zone / UNIT * CSUM;
        if (zone && all_zero(rec + REC_CSUM_DIGEST, 32) && n <= region_len &&
            roff <= len && n <= len - roff) {
            sha256(d + roff, n, rec + REC_CSUM_DIGEST, 32);
        }
        if (all_zero(rec + REC_DIGEST, 32)) {
            sha256(rec, REC_DIGEST, rec + REC_DIGEST, 32);
        }
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const QCryptoBlockSecret secret = {
        (const uint8_t *)FUZZ_PASSPHRASE, strlen(FUZZ_PASSPHRASE)
    };
    FuzzFile f;
    QCryptoReencryptIO io;
    /*
     * A run in progress: one that ends has opened both headers' keys.
     * (A whole LUKS1 image with a record left only has its wipe
     * finished: its key slots are whatever the input says.)
     */
    bool marked = size >= 6 && !memcmp(data, RUN_MAGIC, 6);

    fuzz_init();
    ff_init(&f, &io, data, size);
    if (!fuzz_fix(f.data, f.len)) {
        fuzz_debug("skipped: costly key slots", NULL);
        ff_free(&f);
        return -1;      /* not added to the corpus */
    }

    ff_resume_twice(&f, &io, &secret, marked);
    ff_free(&f);
    return 0;
}
