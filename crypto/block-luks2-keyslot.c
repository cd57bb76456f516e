/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LUKS2 key slots of type "luks2" and digests of type "pbkdf2" (LUKS2
 * spec, "keyslots" and "digests" objects).
 *
 * A key slot holds the volume key AF-split (LUKS1 spec 2.4) into
 * key_size * stripes bytes, encrypted with area.encryption under a key the
 * slot's KDF (PBKDF2, argon2i or argon2id) derives from the passphrase,
 * in 512-byte sectors numbered from the start of the area. The digest
 * (PBKDF2 of the volume key) tells a right key from a wrong one.
 *
 * Argon2 costs read from a header were bounded by the JSON validation;
 * here we also refuse memory costs above half of this machine's memory,
 * so that a header made elsewhere cannot push us into swap or the OOM
 * killer.
 */
#include <string.h>
#include <unistd.h>

#include <argon2.h>
#include <nettle/memops.h>

#include "blockpriv.h"
#include "crypto/afsplit.h"
#include "crypto/pbkdf.h"
#include "crypto/random.h"
#include "crypto/secure-mem.h"
#include "luks2priv.h"

/* Sectors of a key-slot area are 512 bytes (as LUKS1's key material). */
#define LUKS2_AREA_SECTOR 512
/* cryptsetup's salts are 32 bytes (LUKS2 spec, "keyslots" object, kdf). */
#define LUKS2_SALT_LEN 32

uint64_t qcrypto_luks2_memory_cap_kib(void)
{
    long pages = sysconf(_SC_PHYS_PAGES);
    long page_size = sysconf(_SC_PAGESIZE);

    if (pages <= 0 || page_size <= 0) {
        /* Unknown: fall back to cryptsetup's default cost, 1 GiB. */
        return 1024 * 1024;
    }
    return (uint64_t)pages * (uint64_t)page_size / 2 / 1024;
}

static int qcrypto_luks2_argon2(const QCryptoLUKS2KDF *kdf,
                                const QCryptoBlockSecret *secret, uint8_t *out,
                                size_t nout, Error **errp)
{
    uint64_t cap = qcrypto_luks2_memory_cap_kib();
    argon2_context ctx = {
        .out = out,
        .outlen = nout,
        /* libargon2 only reads the password without CLEAR flags. */
        .pwd = (uint8_t *)secret->data,
        .pwdlen = secret->len,
        .salt = (uint8_t *)kdf->salt,
        .saltlen = kdf->nsalt,
        .t_cost = kdf->time,
        .m_cost = kdf->memory,
        .lanes = kdf->parallel,
        .threads = kdf->parallel,
        .version = ARGON2_VERSION_13,       /* RFC 9106: version 0x13 */
        .flags = ARGON2_DEFAULT_FLAGS,
    };
    int rc;

    if (kdf->memory > cap) {
        error_setg(errp, "argon2 memory cost %" PRIu32 " KiB is more than "
                   "half of this machine's memory (%" PRIu64 " KiB)",
                   kdf->memory, cap);
        return -1;
    }
    rc = argon2_ctx(&ctx, kdf->type == QCRYPTO_BLOCK_KDF_ARGON2I ?
                    Argon2_i : Argon2_id);
    if (rc != ARGON2_OK) {
        error_setg(errp, "argon2 failed: %s", argon2_error_message(rc));
        return -1;
    }
    return 0;
}

int qcrypto_luks2_kdf_derive(const QCryptoLUKS2KDF *kdf,
                             const QCryptoBlockSecret *secret,
                             uint8_t *out, size_t nout, Error **errp)
{
    if (kdf->type == QCRYPTO_BLOCK_KDF_PBKDF2) {
        return qcrypto_pbkdf2(kdf->hash, secret->data, secret->len,
                              kdf->salt, kdf->nsalt, kdf->iterations,
                              out, nout, errp);
    }
    return qcrypto_luks2_argon2(kdf, secret, out, nout, errp);
}

int qcrypto_luks2_digest_verify(const QCryptoLUKS2Digest *d,
                                const uint8_t *key, size_t nkey,
                                Error **errp)
{
    uint8_t check[QCRYPTO_HASH_MAX_DIGEST_LEN];
    int eq;

    if (qcrypto_pbkdf2(d->hash, key, nkey, d->salt, d->nsalt, d->iterations,
                       check, d->ndigest, errp) < 0) {
        return -1;
    }
    /* Constant time: the comparison says nothing about where it differs. */
    eq = memeql_sec(check, d->digest, d->ndigest);
    explicit_bzero(check, sizeof(check));
    return eq ? 1 : 0;
}

static uint64_t qcrypto_luks2_af_bytes(size_t nkey, uint32_t stripes)
{
    return qcrypto_luks2_round_up((uint64_t)nkey * stripes, LUKS2_AREA_SECTOR);
}

uint64_t qcrypto_luks2_keyslot_area_size(size_t nkey, uint32_t stripes)
{
    return qcrypto_luks2_round_up((uint64_t)nkey * stripes,
                                  QCRYPTO_LUKS2_AREA_ALIGN);
}

/* En/decrypt the AF material of ks in place with the derived area key. */
static int qcrypto_luks2_area_crypt(const QCryptoLUKS2Keyslot *ks,
                                    const uint8_t *areakey, uint8_t *buf,
                                    size_t len, bool encrypt, Error **errp)
{
    g_autoptr(QCryptoSectorCipher) sc = NULL;
    QCryptoLUKS2Cipher c;

    if (qcrypto_luks2_cipher_parse(ks->area_encryption, ks->area_key_size,
                                   &c, errp) < 0) {
        return -1;
    }
    /* IVs count 512-byte sectors from the start of the area. */
    sc = qcrypto_sector_cipher_new(&c, areakey, ks->area_key_size,
                                   LUKS2_AREA_SECTOR, 0, 0, errp);
    if (!sc) {
        return -1;
    }
    return encrypt ?
        qcrypto_sector_cipher_encrypt(sc, 0, buf, len, errp) :
        qcrypto_sector_cipher_decrypt(sc, 0, buf, len, errp);
}

/* Whether a key slot's KDF cost is one we agree to compute. */
static bool qcrypto_luks2_keyslot_within_limit(const QCryptoBlock *block,
                                               const QCryptoLUKS2Keyslot *ks)
{
    return ks->kdf.type != QCRYPTO_BLOCK_KDF_PBKDF2 ||
        qcrypto_block_pbkdf2_within_limit(block, ks->kdf.iterations);
}

int qcrypto_luks2_keyslot_open(const QCryptoLUKS2Metadata *md,
                               const QCryptoLUKS2Keyslot *ks,
                               const QCryptoBlockSecret *secret,
                               QCryptoBlock *block,
                               QCryptoBlockReadFunc readfunc, void *opaque,
                               uint8_t *key, Error **errp)
{
    size_t afbytes = qcrypto_luks2_af_bytes(ks->key_size, ks->af_stripes);
    g_autoptr(QCryptoSecureBuf) areakey =
        qcrypto_secure_buf_new(ks->area_key_size);
    g_autoptr(QCryptoSecureBuf) material = qcrypto_secure_buf_new(afbytes);
    const QCryptoLUKS2Digest *d;
    int ret = -1;

    if (ks->digest < 0 || !md->digests[ks->digest]) {
        error_setg(errp, "LUKS2 key slot %d is bound to no digest", ks->id);
        goto out;
    }
    d = md->digests[ks->digest];
    /* Above the PBKDF2 limit: never computed (see crypto/blockpriv.h). */
    if (!qcrypto_luks2_keyslot_within_limit(block, ks)) {
        ret = 0;
        goto out;
    }
    if (!qcrypto_block_pbkdf2_within_limit(block, d->iterations)) {
        g_autofree char *what = g_strdup_printf("LUKS2 digest %d", d->id);

        qcrypto_block_digest_limit_error(block, what, d->iterations, errp);
        goto out;
    }
    if (readfunc(block, ks->area_offset, material->data, afbytes, opaque,
                 errp) < 0) {
        error_prepend(errp, "cannot read LUKS2 key slot %d: ", ks->id);
        goto out;
    }
    if (qcrypto_luks2_kdf_derive(&ks->kdf, secret, areakey->data,
                                 ks->area_key_size, errp) < 0 ||
        qcrypto_luks2_area_crypt(ks, areakey->data, material->data, afbytes,
                                 false, errp) < 0 ||
        qcrypto_afsplit_decode(ks->af_hash, ks->key_size, ks->af_stripes,
                               material->data, key, errp) < 0) {
        error_prepend(errp, "LUKS2 key slot %d: ", ks->id);
        goto out;
    }
    ret = qcrypto_luks2_digest_verify(d, key, ks->key_size, errp);

out:
    if (ret != 1) {
        explicit_bzero(key, ks->key_size);
    }
    return ret;
}

int qcrypto_luks2_unlock(const QCryptoLUKS2Metadata *md,
                         const QCryptoBlockSecret *secret,
                         QCryptoBlock *block, QCryptoBlockReadFunc readfunc,
                         void *opaque, QCryptoSecureBuf **key, int *slot,
                         Error **errp)
{
    int digest = qcrypto_luks2_segment_digest(md, 0);
    const QCryptoLUKS2Digest *d;
    uint32_t skipped = 0;

    if (digest < 0) {
        error_setg(errp, "LUKS2 image has no digest for segment 0: no key "
                   "slot can open it");
        return -1;
    }
    d = md->digests[digest];

    /*
     * High-priority slots first, then normal ones; "ignore" slots are
     * skipped, as cryptsetup does unless asked for one by number.
     */
    for (int prio = QCRYPTO_LUKS2_PRIORITY_HIGH;
         prio > QCRYPTO_LUKS2_PRIORITY_IGNORE; prio--) {
        for (int i = 0; i < QCRYPTO_LUKS2_KEYSLOTS_MAX; i++) {
            const QCryptoLUKS2Keyslot *ks = md->keyslots[i];
            g_autoptr(QCryptoSecureBuf) candidate = NULL;
            int r;

            if (!ks || ks->priority != prio || !(d->keyslots & (1u << i))) {
                continue;
            }
            if (!qcrypto_luks2_keyslot_within_limit(block, ks)) {
                skipped |= 1u << i;
                continue;
            }
            candidate = qcrypto_secure_buf_new(ks->key_size);
            r = qcrypto_luks2_keyslot_open(md, ks, secret, block, readfunc,
                                           opaque, candidate->data, errp);
            if (r < 0) {
                return -1;
            }
            if (r == 1) {
                *key = g_steal_pointer(&candidate);
                *slot = i;
                return 0;
            }
        }
    }
    qcrypto_block_unlock_error(block, skipped, errp);
    return -1;
}

int qcrypto_luks2_keyslot_find_area(const QCryptoLUKS2Metadata *md,
                                    uint64_t size, uint64_t *offset,
                                    Error **errp)
{
    uint64_t candidate = 2 * md->hdr_size;
    uint64_t end = qcrypto_luks2_keyslots_end(md);
    bool moved = true;

    /*
     * First fit: move the candidate past every area it meets until it
     * meets none (at most one pass per existing area).
     */
    while (moved) {
        moved = false;
        for (int i = 0; i < QCRYPTO_LUKS2_KEYSLOTS_MAX; i++) {
            const QCryptoLUKS2Keyslot *ks = md->keyslots[i];

            if (ks && candidate < ks->area_offset + ks->area_size &&
                ks->area_offset < candidate + size) {
                candidate = qcrypto_luks2_round_up(
                    ks->area_offset + ks->area_size,
                    QCRYPTO_LUKS2_AREA_ALIGN);
                moved = true;
            }
        }
    }
    if (candidate > end || size > end - candidate) {
        error_setg(errp, "no room for another LUKS2 key slot: the key-slot "
                   "area (%" PRIu64 " bytes) is full", md->keyslots_size);
        return -1;
    }
    *offset = candidate;
    return 0;
}

int qcrypto_luks2_keyslot_store(const QCryptoLUKS2Keyslot *ks,
                                const QCryptoBlockSecret *secret,
                                const uint8_t *key, size_t nkey,
                                QCryptoBlock *block,
                                QCryptoBlockWriteFunc writefunc,
                                void *opaque, Error **errp)
{
    size_t afbytes = qcrypto_luks2_af_bytes(nkey, ks->af_stripes);
    g_autoptr(QCryptoSecureBuf) areakey =
        qcrypto_secure_buf_new(ks->area_key_size);
    g_autoptr(QCryptoSecureBuf) material = qcrypto_secure_buf_new(afbytes);

    g_assert(nkey == ks->key_size && afbytes <= ks->area_size);
    if (qcrypto_afsplit_encode(ks->af_hash, nkey, ks->af_stripes, key,
                               material->data, errp) < 0 ||
        qcrypto_luks2_kdf_derive(&ks->kdf, secret, areakey->data,
                                 ks->area_key_size, errp) < 0 ||
        qcrypto_luks2_area_crypt(ks, areakey->data, material->data, afbytes,
                                 true, errp) < 0) {
        return -1;
    }
    if (writefunc(block, ks->area_offset, material->data, afbytes, opaque,
                  errp) < 0) {
        error_prepend(errp, "cannot write LUKS2 key slot %d: ", ks->id);
        return -1;
    }
    return 0;
}

int qcrypto_luks2_keyslot_wipe(const QCryptoLUKS2Keyslot *ks,
                               QCryptoBlock *block,
                               QCryptoBlockWriteFunc writefunc,
                               void *opaque, Error **errp)
{
    if (qcrypto_block_wipe_area(block, writefunc, opaque, ks->area_offset,
                                ks->area_size, errp) < 0) {
        error_prepend(errp, "cannot wipe LUKS2 key slot %d: ", ks->id);
        return -1;
    }
    return 0;
}

/* ---- calibration ---- */

/* cryptsetup's floor for PBKDF2 key slots (lib/utils_pbkdf.c). */
#define LUKS2_PBKDF2_MIN_ITERS 1000
/* cryptsetup's floors for argon2: 4 passes, 32 KiB (same file). */
#define LUKS2_ARGON2_MIN_TIME 4
/* cryptsetup's most lanes by default. */
#define LUKS2_ARGON2_DEFAULT_PARALLEL_MAX 4
/* Where the search starts: a run that takes a few ms anywhere. */
#define LUKS2_ARGON2_START_MEMORY_KIB (8 * 1024)

static int qcrypto_luks2_calibrate_pbkdf2(const QCryptoLUKS2KDFParams *p,
                                          size_t nkey, QCryptoLUKS2KDF *kdf,
                                          Error **errp)
{
    uint64_t iters;

    kdf->hash = p->hash;
    if (p->forced_iterations) {
        kdf->iterations = p->forced_iterations;
        return 0;
    }
    if (qcrypto_pbkdf2_iters_for_time(p->hash, nkey, p->iter_time_ms,
                                      &iters, errp) < 0) {
        return -1;
    }
    kdf->iterations = CLAMP(iters, LUKS2_PBKDF2_MIN_ITERS,
                            QCRYPTO_LUKS2_PBKDF2_ITERS_MAX);
    return 0;
}

/* Wall-clock milliseconds of one argon2 run with kdf's costs. */
static int qcrypto_luks2_argon2_measure(const QCryptoLUKS2KDF *kdf,
                                        size_t nkey, uint64_t *ms,
                                        Error **errp)
{
    static const uint8_t pass[] = "calibration";
    QCryptoBlockSecret secret = { pass, sizeof(pass) - 1 };
    g_autofree uint8_t *out = g_malloc(nkey);
    gint64 start = g_get_monotonic_time();

    if (qcrypto_luks2_argon2(kdf, &secret, out, nkey, errp) < 0) {
        return -1;
    }
    *ms = MAX(1, (g_get_monotonic_time() - start) / 1000);
    return 0;
}

/*
 * cryptsetup's approach: measure a run, then scale the costs by
 * target / measured. Growing, memory goes up first (it is what makes
 * argon2 expensive to attack), to the cap, and passes take up the rest;
 * shrinking, passes go down first, to 4, then memory. A few rounds settle
 * it, since the run time is close to linear in time x memory.
 */
static int qcrypto_luks2_calibrate_argon2(const QCryptoLUKS2KDFParams *p,
                                          size_t nkey, QCryptoLUKS2KDF *kdf,
                                          Error **errp)
{
    uint64_t max_mem = MIN(MIN((uint64_t)p->max_memory_kib,
                               qcrypto_luks2_memory_cap_kib()),
                           QCRYPTO_LUKS2_ARGON2_MEMORY_MAX_KIB);
    uint64_t min_mem = MAX(QCRYPTO_LUKS2_ARGON2_MEMORY_MIN_KIB,
                           8 * (uint64_t)kdf->parallel);
    uint64_t target = MAX(p->iter_time_ms, 1);
    uint64_t t = LUKS2_ARGON2_MIN_TIME;
    uint64_t m;

    if (max_mem < min_mem) {
        error_setg(errp, "argon2 memory limit %" PRIu64 " KiB is below the "
                   "minimum of %" PRIu64 " KiB", max_mem, min_mem);
        return -1;
    }
    if (p->forced_iterations) {
        kdf->time = p->forced_iterations;
        kdf->memory = max_mem;
        return 0;
    }
    m = CLAMP(LUKS2_ARGON2_START_MEMORY_KIB, min_mem, max_mem);

    for (int round = 0; round < 8; round++) {
        uint64_t ms, work, new_t, new_m;

        kdf->time = t;
        kdf->memory = m;
        if (qcrypto_luks2_argon2_measure(kdf, nkey, &ms, errp) < 0) {
            return -1;
        }
        /* Within 10% of the target: done. */
        if (ms * 10 >= target * 9 && ms * 10 <= target * 11) {
            break;
        }
        work = t * m * target / ms;         /* time x memory for target */
        if (ms < target) {
            new_m = MIN(work / t, max_mem);
            new_t = MAX(work / new_m, t);
        } else {
            new_t = MAX(work / m, LUKS2_ARGON2_MIN_TIME);
            new_m = CLAMP(work / new_t, min_mem, m);
        }
        new_t = MIN(new_t, QCRYPTO_LUKS2_ARGON2_WORK_MAX_KIB / new_m);
        if (new_t == t && new_m == m) {
            break;
        }
        t = new_t;
        m = new_m;
    }
    kdf->time = t;
    kdf->memory = m;
    return 0;
}

int qcrypto_luks2_kdf_calibrate(const QCryptoLUKS2KDFParams *params,
                                size_t nkey, QCryptoLUKS2KDF *kdf,
                                Error **errp)
{
    memset(kdf, 0, sizeof(*kdf));
    kdf->type = params->type;
    kdf->nsalt = LUKS2_SALT_LEN;
    if (qcrypto_random_bytes(kdf->salt, kdf->nsalt, errp) < 0) {
        return -1;
    }
    if (params->type == QCRYPTO_BLOCK_KDF_PBKDF2) {
        return qcrypto_luks2_calibrate_pbkdf2(params, nkey, kdf, errp);
    }
    kdf->parallel = params->parallel;
    if (!kdf->parallel) {
        kdf->parallel = MIN(LUKS2_ARGON2_DEFAULT_PARALLEL_MAX,
                            MAX(1, g_get_num_processors()));
    }
    if (kdf->parallel > QCRYPTO_LUKS2_ARGON2_PARALLEL_MAX) {
        error_setg(errp, "argon2 parallelism %" PRIu32 " is above %d",
                   kdf->parallel, QCRYPTO_LUKS2_ARGON2_PARALLEL_MAX);
        return -1;
    }
    return qcrypto_luks2_calibrate_argon2(params, nkey, kdf, errp);
}
