/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LUKS2 binary headers (LUKS2 spec, "binary header"): two copies, each a
 * 4096-byte binary header followed by the JSON area, checksummed as a whole.
 *
 * The primary copy sits at 0, the secondary at hdr_size. A copy is valid
 * when its magic, version, size, offset and checksum are right and its
 * JSON area holds a NUL. Of two valid copies the one with the higher seqid
 * wins (an interrupted rewrite leaves the older one behind); a damaged
 * primary is replaced by the secondary, and the caller gets a warning to
 * show, since a library does not print.
 */
#include <string.h>

#include "blockpriv.h"
#include "crypto/hash.h"
#include "luks2priv.h"
#include "qemu/bswap.h"

/*
 * LUKS2 spec, binary header table: magics of the primary and secondary copies.
 */
static const uint8_t luks2_magic_primary[QCRYPTO_LUKS2_MAGIC_LEN] = {
    'L', 'U', 'K', 'S', 0xba, 0xbe,
};
static const uint8_t luks2_magic_secondary[QCRYPTO_LUKS2_MAGIC_LEN] = {
    'S', 'K', 'U', 'L', 0xba, 0xbe,
};

/* LUKS2 spec, binary header table: field offsets in the binary header. */
enum {
    LUKS2_OFF_MAGIC = 0,
    LUKS2_OFF_VERSION = 6,
    LUKS2_OFF_HDR_SIZE = 8,
    LUKS2_OFF_SEQID = 16,
    LUKS2_OFF_LABEL = 24,
    LUKS2_OFF_CHECKSUM_ALG = 72,
    LUKS2_OFF_SALT = 104,
    LUKS2_OFF_UUID = 168,
    LUKS2_OFF_SUBSYSTEM = 208,
    LUKS2_OFF_HDR_OFFSET = 256,
    LUKS2_OFF_CSUM = 448,
};

/* The copies' order in our arrays. */
enum { LUKS2_PRIMARY, LUKS2_SECONDARY, LUKS2_NCOPIES };

static const char *const luks2_copy_name[LUKS2_NCOPIES] = {
    "primary", "secondary",
};

bool qcrypto_luks2_hdr_size_valid(uint64_t size)
{
    /* LUKS2 spec, binary header: a power of two from 16 KiB to 4 MiB. */
    return size >= QCRYPTO_LUKS2_HDR_SIZE_MIN &&
        size <= QCRYPTO_LUKS2_HDR_SIZE_MAX && (size & (size - 1)) == 0;
}

bool qcrypto_luks2_has_format(const uint8_t *buf, size_t len)
{
    return len >= LUKS2_OFF_VERSION + 2 &&
        memcmp(buf, luks2_magic_primary, QCRYPTO_LUKS2_MAGIC_LEN) == 0 &&
        lduw_be_p(buf + LUKS2_OFF_VERSION) == QCRYPTO_LUKS2_VERSION;
}

bool qcrypto_luks2_probe(QCryptoBlock *block, QCryptoBlockReadFunc readfunc,
                         void *opaque)
{
    uint8_t buf[LUKS2_OFF_VERSION + 2];

    if (readfunc(block, 0, buf, sizeof(buf), opaque, NULL) < 0) {
        return false;
    }
    if (qcrypto_luks2_has_format(buf, sizeof(buf))) {
        return true;
    }
    /* LUKS1 has the same magic: its version says so. */
    if (memcmp(buf, luks2_magic_primary, QCRYPTO_LUKS2_MAGIC_LEN) == 0 &&
        lduw_be_p(buf + LUKS2_OFF_VERSION) == 1) {
        return false;
    }
    /* A damaged primary: a LUKS2 secondary at one of the sizes. */
    for (uint64_t off = QCRYPTO_LUKS2_HDR_SIZE_MIN;
         off <= QCRYPTO_LUKS2_HDR_SIZE_MAX; off *= 2) {
        if (readfunc(block, off, buf, sizeof(buf), opaque, NULL) == 0 &&
            memcmp(buf, luks2_magic_secondary,
                   QCRYPTO_LUKS2_MAGIC_LEN) == 0 &&
            lduw_be_p(buf + LUKS2_OFF_VERSION) == QCRYPTO_LUKS2_VERSION) {
            return true;
        }
    }
    return false;
}

static void qcrypto_luks2_bin_header_decode(const uint8_t *buf,
                                            QCryptoLUKS2BinHeader *bin)
{
    bin->version = lduw_be_p(buf + LUKS2_OFF_VERSION);
    bin->hdr_size = ldq_be_p(buf + LUKS2_OFF_HDR_SIZE);
    bin->seqid = ldq_be_p(buf + LUKS2_OFF_SEQID);
    memcpy(bin->label, buf + LUKS2_OFF_LABEL, sizeof(bin->label));
    memcpy(bin->checksum_alg, buf + LUKS2_OFF_CHECKSUM_ALG,
           sizeof(bin->checksum_alg));
    memcpy(bin->salt, buf + LUKS2_OFF_SALT, sizeof(bin->salt));
    memcpy(bin->uuid, buf + LUKS2_OFF_UUID, sizeof(bin->uuid));
    memcpy(bin->subsystem, buf + LUKS2_OFF_SUBSYSTEM,
           sizeof(bin->subsystem));
    bin->hdr_offset = ldq_be_p(buf + LUKS2_OFF_HDR_OFFSET);
    memcpy(bin->csum, buf + LUKS2_OFF_CSUM, sizeof(bin->csum));
}

/* Everything but the checksum, which is computed over the result. */
static void qcrypto_luks2_bin_header_encode(const QCryptoLUKS2BinHeader *bin,
                                            int copy, uint8_t *buf)
{
    memset(buf, 0, QCRYPTO_LUKS2_BIN_HDR_LEN);
    memcpy(buf + LUKS2_OFF_MAGIC, copy == LUKS2_PRIMARY ?
           luks2_magic_primary : luks2_magic_secondary,
           QCRYPTO_LUKS2_MAGIC_LEN);
    stw_be_p(buf + LUKS2_OFF_VERSION, bin->version);
    stq_be_p(buf + LUKS2_OFF_HDR_SIZE, bin->hdr_size);
    stq_be_p(buf + LUKS2_OFF_SEQID, bin->seqid);
    memcpy(buf + LUKS2_OFF_LABEL, bin->label, sizeof(bin->label));
    memcpy(buf + LUKS2_OFF_CHECKSUM_ALG, bin->checksum_alg,
           sizeof(bin->checksum_alg));
    memcpy(buf + LUKS2_OFF_SALT, bin->salt, sizeof(bin->salt));
    memcpy(buf + LUKS2_OFF_UUID, bin->uuid, sizeof(bin->uuid));
    memcpy(buf + LUKS2_OFF_SUBSYSTEM, bin->subsystem,
           sizeof(bin->subsystem));
    stq_be_p(buf + LUKS2_OFF_HDR_OFFSET, bin->hdr_offset);
}

/*
 * LUKS2 spec, binary header: the checksum covers the whole header copy (binary
 * part and JSON area) with the checksum field itself zeroed.
 */
static int qcrypto_luks2_checksum(QCryptoHashAlgo alg, const uint8_t *hdr,
                                  size_t hdr_size, uint8_t *out, Error **errp)
{
    static const uint8_t zeroes[QCRYPTO_LUKS2_CHECKSUM_LEN];
    g_autoptr(QCryptoHash) h = qcrypto_hash_new(alg, errp);

    if (!h) {
        return -1;
    }
    memset(out, 0, QCRYPTO_LUKS2_CHECKSUM_LEN);
    qcrypto_hash_update(h, hdr, LUKS2_OFF_CSUM);
    qcrypto_hash_update(h, zeroes, sizeof(zeroes));
    qcrypto_hash_update(h, hdr + LUKS2_OFF_CSUM + QCRYPTO_LUKS2_CHECKSUM_LEN,
                        hdr_size - LUKS2_OFF_CSUM -
                        QCRYPTO_LUKS2_CHECKSUM_LEN);
    qcrypto_hash_finalize(h, out);
    return 0;
}

static bool qcrypto_luks2_field_is_string(const char *s, size_t len)
{
    return memchr(s, '\0', len) != NULL;
}

/*
 * The checks on the fixed part of one copy that need no more than its
 * first 4096 bytes: magic, version, size, where it says it lives, and NUL
 * termination of its strings.
 */
static int qcrypto_luks2_validate_bin_header(const QCryptoLUKS2BinHeader *bin,
                                             const uint8_t *buf, int copy,
                                             uint64_t offset, Error **errp)
{
    const uint8_t *magic = copy == LUKS2_PRIMARY ?
        luks2_magic_primary : luks2_magic_secondary;

    if (memcmp(buf, magic, QCRYPTO_LUKS2_MAGIC_LEN) != 0) {
        error_setg(errp, "no LUKS2 magic");
        return -1;
    }
    if (bin->version != QCRYPTO_LUKS2_VERSION) {
        error_setg(errp, "version %u is not 2", bin->version);
        return -1;
    }
    if (!qcrypto_luks2_hdr_size_valid(bin->hdr_size)) {
        error_setg(errp, "header size %" PRIu64 " is not a power of two "
                   "from 16 KiB to 4 MiB", bin->hdr_size);
        return -1;
    }
    if (bin->hdr_offset != offset) {
        error_setg(errp, "header offset %" PRIu64 " does not match its "
                   "location %" PRIu64, bin->hdr_offset, offset);
        return -1;
    }
    /* The secondary sits right after a primary of the same size. */
    if (copy == LUKS2_SECONDARY && bin->hdr_size != offset) {
        error_setg(errp, "header size %" PRIu64 " does not match its "
                   "offset %" PRIu64, bin->hdr_size, offset);
        return -1;
    }
    if (!qcrypto_luks2_field_is_string(bin->label, sizeof(bin->label)) ||
        !qcrypto_luks2_field_is_string(bin->subsystem,
                                       sizeof(bin->subsystem)) ||
        !qcrypto_luks2_field_is_string(bin->uuid, sizeof(bin->uuid)) ||
        !qcrypto_luks2_field_is_string(bin->checksum_alg,
                                       sizeof(bin->checksum_alg))) {
        error_setg(errp, "a text field is not NUL-terminated");
        return -1;
    }
    return 0;
}

/* The whole copy: its checksum, and a NUL inside the JSON area. */
static int qcrypto_luks2_validate_header_area(const QCryptoLUKS2BinHeader *bin,
                                              const uint8_t *area,
                                              Error **errp)
{
    uint8_t csum[QCRYPTO_LUKS2_CHECKSUM_LEN];
    int alg = qcrypto_hash_algo_parse(bin->checksum_alg);
    size_t json_len = bin->hdr_size - QCRYPTO_LUKS2_BIN_HDR_LEN;

    if (alg < 0 || !qcrypto_hash_supports(alg)) {
        error_setg(errp, "unsupported checksum algorithm '%s'",
                   bin->checksum_alg);
        return -1;
    }
    if (qcrypto_luks2_checksum(alg, area, bin->hdr_size, csum, errp) < 0) {
        return -1;
    }
    if (memcmp(csum, bin->csum, sizeof(csum)) != 0) {
        error_setg(errp, "checksum mismatch");
        return -1;
    }
    if (!memchr(area + QCRYPTO_LUKS2_BIN_HDR_LEN, '\0', json_len)) {
        error_setg(errp, "JSON area is not NUL-terminated");
        return -1;
    }
    return 0;
}

/*
 * Read and check the copy at offset. Returns the whole copy (hdr_size
 * bytes) and its decoded fields, or NULL with errp.
 */
static uint8_t *qcrypto_luks2_read_copy(
    QCryptoBlock *block, QCryptoBlockReadFunc readfunc, void *opaque, int copy,
    uint64_t offset, QCryptoLUKS2BinHeader *bin, Error **errp)
{
    g_autofree uint8_t *buf = g_malloc(QCRYPTO_LUKS2_BIN_HDR_LEN);
    uint8_t *area;

    if (readfunc(block, offset, buf, QCRYPTO_LUKS2_BIN_HDR_LEN, opaque,
                 errp) < 0) {
        return NULL;
    }
    qcrypto_luks2_bin_header_decode(buf, bin);
    if (qcrypto_luks2_validate_bin_header(bin, buf, copy, offset, errp) < 0) {
        return NULL;
    }
    area = g_malloc(bin->hdr_size);
    memcpy(area, buf, QCRYPTO_LUKS2_BIN_HDR_LEN);
    if (readfunc(block, offset + QCRYPTO_LUKS2_BIN_HDR_LEN,
                 area + QCRYPTO_LUKS2_BIN_HDR_LEN,
                 bin->hdr_size - QCRYPTO_LUKS2_BIN_HDR_LEN, opaque,
                 errp) < 0 ||
        qcrypto_luks2_validate_header_area(bin, area, errp) < 0) {
        g_free(area);
        return NULL;
    }
    return area;
}

/*
 * The secondary is at the primary's hdr_size. When the primary is too
 * damaged to say, try every allowed size, as cryptsetup does.
 */
static uint8_t *qcrypto_luks2_find_secondary(QCryptoBlock *block,
                                             QCryptoBlockReadFunc readfunc,
                                             void *opaque, uint64_t hint,
                                             QCryptoLUKS2BinHeader *bin,
                                             Error **errp)
{
    Error *first_err = NULL;
    uint8_t *area;

    if (qcrypto_luks2_hdr_size_valid(hint)) {
        return qcrypto_luks2_read_copy(block, readfunc, opaque,
                                       LUKS2_SECONDARY, hint, bin, errp);
    }
    for (uint64_t off = QCRYPTO_LUKS2_HDR_SIZE_MIN;
         off <= QCRYPTO_LUKS2_HDR_SIZE_MAX; off *= 2) {
        Error *err = NULL;

        area = qcrypto_luks2_read_copy(block, readfunc, opaque,
                                       LUKS2_SECONDARY, off, bin, &err);
        if (area) {
            error_free(first_err);
            return area;
        }
        if (!first_err) {
            first_err = err;
        } else {
            error_free(err);
        }
    }
    error_propagate(errp, first_err);
    return NULL;
}

/* One copy as read: its fields, its bytes (NULL if invalid), why not. */
typedef struct LUKS2Copy {
    QCryptoLUKS2BinHeader bin;
    uint8_t *area;
    Error *err;
} LUKS2Copy;

static void qcrypto_luks2_choose_warning(const LUKS2Copy *c, int use,
                                         char **warning)
{
    int other = !use;

    if (!c[other].area) {
        *warning = g_strdup_printf(
            "LUKS2 %s header is damaged (%s); using the %s header. "
            "Rewriting the header (e.g. by amend) repairs it.",
            luks2_copy_name[other], error_get_pretty(c[other].err),
            luks2_copy_name[use]);
    } else if (c[other].bin.seqid != c[use].bin.seqid) {
        *warning = g_strdup_printf(
            "LUKS2 %s header is older (seqid %" PRIu64 ") than the %s "
            "header (seqid %" PRIu64 "); using the %s header.",
            luks2_copy_name[other], c[other].bin.seqid,
            luks2_copy_name[use], c[use].bin.seqid, luks2_copy_name[use]);
    }
}

QCryptoLUKS2Header *qcrypto_luks2_header_read(QCryptoBlock *block,
                                              QCryptoBlockReadFunc readfunc,
                                              void *opaque, char **warning,
                                              Error **errp)
{
    LUKS2Copy c[LUKS2_NCOPIES] = { 0 };
    QCryptoLUKS2Header *hdr = NULL;
    int use;

    if (warning) {
        *warning = NULL;
    }
    c[LUKS2_PRIMARY].area =
        qcrypto_luks2_read_copy(block, readfunc, opaque, LUKS2_PRIMARY, 0,
                                &c[LUKS2_PRIMARY].bin, &c[LUKS2_PRIMARY].err);
    /* Even a primary wiped to zeroes may have a good secondary. */
    c[LUKS2_SECONDARY].area = qcrypto_luks2_find_secondary(
        block, readfunc, opaque,
        c[LUKS2_PRIMARY].area ? c[LUKS2_PRIMARY].bin.hdr_size : 0,
        &c[LUKS2_SECONDARY].bin, &c[LUKS2_SECONDARY].err);

    if (!c[LUKS2_PRIMARY].area && !c[LUKS2_SECONDARY].area) {
        error_setg(errp, "No valid LUKS2 header: primary: %s; secondary: %s",
                   error_get_pretty(c[LUKS2_PRIMARY].err),
                   error_get_pretty(c[LUKS2_SECONDARY].err));
        goto out;
    }

    if (!c[LUKS2_SECONDARY].area) {
        use = LUKS2_PRIMARY;
    } else if (!c[LUKS2_PRIMARY].area) {
        use = LUKS2_SECONDARY;
    } else {
        use = c[LUKS2_SECONDARY].bin.seqid > c[LUKS2_PRIMARY].bin.seqid ?
            LUKS2_SECONDARY : LUKS2_PRIMARY;
    }
    if (warning) {
        qcrypto_luks2_choose_warning(c, use, warning);
    }

    hdr = g_new0(QCryptoLUKS2Header, 1);
    hdr->bin = c[use].bin;
    /* Keep each copy's salt; a damaged copy gets the other's. */
    for (int i = 0; i < LUKS2_NCOPIES; i++) {
        memcpy(i == LUKS2_PRIMARY ? hdr->salt_primary : hdr->salt_secondary,
               c[i].area ? c[i].bin.salt : c[use].bin.salt,
               QCRYPTO_LUKS2_SALT_LEN);
    }
    hdr->json = g_strdup((char *)c[use].area + QCRYPTO_LUKS2_BIN_HDR_LEN);

out:
    for (int i = 0; i < LUKS2_NCOPIES; i++) {
        g_free(c[i].area);
        error_free(c[i].err);
    }
    return hdr;
}

int qcrypto_luks2_header_write(QCryptoLUKS2Header *hdr, const char *json,
                               QCryptoBlock *block,
                               QCryptoBlockWriteFunc writefunc,
                               QCryptoBlockFlushFunc flushfunc,
                               void *opaque, Error **errp)
{
    uint64_t hdr_size = hdr->bin.hdr_size;
    size_t json_len = strlen(json);
    g_autofree uint8_t *area = NULL;
    int alg;

    g_assert(qcrypto_luks2_hdr_size_valid(hdr_size));
    if (json_len >= hdr_size - QCRYPTO_LUKS2_BIN_HDR_LEN) {
        error_setg(errp, "LUKS2 metadata (%zu bytes) does not fit the "
                   "%" PRIu64 "-byte JSON area", json_len,
                   hdr_size - QCRYPTO_LUKS2_BIN_HDR_LEN);
        return -1;
    }
    alg = qcrypto_hash_algo_parse(hdr->bin.checksum_alg);
    if (alg < 0) {
        error_setg(errp, "unsupported checksum algorithm '%s'",
                   hdr->bin.checksum_alg);
        return -1;
    }

    area = g_malloc0(hdr_size);
    memcpy(area + QCRYPTO_LUKS2_BIN_HDR_LEN, json, json_len);
    /* What the new header names (key material) is on disk before it. */
    if (qcrypto_block_flush(block, flushfunc, opaque, errp) < 0) {
        error_prepend(errp, "cannot write the LUKS2 header: ");
        return -1;
    }

    for (int copy = LUKS2_PRIMARY; copy < LUKS2_NCOPIES; copy++) {
        QCryptoLUKS2BinHeader bin = hdr->bin;

        bin.seqid = hdr->bin.seqid + 1;
        bin.hdr_offset = copy == LUKS2_PRIMARY ? 0 : hdr_size;
        memcpy(bin.salt, copy == LUKS2_PRIMARY ? hdr->salt_primary :
               hdr->salt_secondary, sizeof(bin.salt));
        qcrypto_luks2_bin_header_encode(&bin, copy, area);
        if (qcrypto_luks2_checksum(alg, area, hdr_size, area + LUKS2_OFF_CSUM,
                                   errp) < 0) {
            return -1;
        }
        /* Never both copies pending: one is always whole on disk. */
        if (writefunc(block, bin.hdr_offset, area, hdr_size, opaque,
                      errp) < 0 ||
            qcrypto_block_flush(block, flushfunc, opaque, errp) < 0) {
            error_prepend(errp, "cannot write the LUKS2 %s header: ",
                          luks2_copy_name[copy]);
            return -1;
        }
    }
    hdr->bin.seqid++;
    return 0;
}

void qcrypto_luks2_header_free(QCryptoLUKS2Header *hdr)
{
    if (!hdr) {
        return;
    }
    g_free(hdr->json);
    g_free(hdr);
}
