/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A new volume key for a LUKS1 image in place (QEMU's layout and
 * cryptsetup's), crash-safe and resumable: one more mode of the one
 * resume loop (block-luks2-reencrypt-engine.c). docs/reencrypt.md,
 * "LUKS1".
 *
 * LUKS1 has no field that says an image is being re-encrypted, and
 * cryptsetup 2.6's own LUKS1 re-encryption keeps its state in files of
 * the directory it ran in (LUKS-<uuid>.log, .org, .new) and needs
 * device-mapper. This one keeps its state in the image:
 *
 *  - sector 0's magic becomes L1R_MAGIC for the run, so that no tool
 *    opens the image as LUKS1 while its sectors are part old key, part
 *    new (the rest of the old header stays as it was);
 *  - a pointer at L1R_PTR_OFFSET (bytes no LUKS1 layout uses: the header
 *    is 592 bytes, key material starts at sector 2 or later) names the
 *    metadata area: a free key-slot area holding two copies of a 4 KiB
 *    record (the valid one with the higher sequence number counts) and
 *    two checksum regions;
 *  - the record holds the old header and the final one (new cipher, new
 *    key digest, and the kept key slots' new key material, which init
 *    wrote into free slot areas: each kept slot keeps its number and
 *    swaps its area with a free slot), the data size, how far the run
 *    is, and the zone in progress with the digest of its checksums;
 *  - per 512-byte sector of a zone (a LUKS1 sector; a write does not tear
 *    inside one), 16 bytes of SHA-256 of its old ciphertext: after a
 *    crash, a sector of that zone that hashes to it is old (redone); one
 *    that does once decrypted with the new key and encrypted with the old
 *    is new (kept); one that is neither stops the resume, nothing is
 *    guessed. (Hashing the new ciphertext too cost 2x the time: SHA-256
 *    was more than half of a run's CPU.)
 *
 * A zone: its checksums into the region the current record does not use,
 * the next record into the copy that is not current, sync; the data,
 * sync. The end: the final header's second sector, sync; its first (the
 * commit: the LUKS magic back), sync; then the old key material, the
 * metadata area and the pointer wiped (a resume after a crash there wipes
 * them again).
 */
#include <string.h>

#include <nettle/memops.h>

#include "crypto/lukspriv.h"
#include "crypto/pbkdf.h"
#include "crypto/random.h"
#include "crypto/reencryptpriv.h"
#include "qemu/bswap.h"

#define L1R_MAGIC "LUKS\xde\x71"    /* sector 0's magic during a run */
#define L1R_CRYPTSETUP_MAGIC "LUKS\xde\xad" /* cryptsetup's, during its */
#define L1R_VERSION 1

/* The pointer: magic, version, area, region length, nonce, digest. */
#define L1R_PTR_OFFSET 640
#define L1R_PTR_MAGIC "QILL1PTR"
#define L1R_PTR_LEN 64
#define L1R_PTR_DIGESTED 48

/* The record, in the metadata area's first 4 KiB and its second. */
#define L1R_REC_MAGIC "QILL1REC"
#define L1R_REC_LEN 4096
#define L1R_NONCE_LEN 16
#define R_VERSION 8
#define R_REGION 12
#define R_SEQ 16
#define R_SIZE 24
#define R_DONE 32
#define R_ZONE 40
#define R_NONCE 48
#define R_CSUM_DIGEST 64
#define R_OLD_HDR 96
#define R_NEW_HDR (R_OLD_HDR + QCRYPTO_LUKS_HEADER_LEN)
#define R_DIGEST (R_NEW_HDR + QCRYPTO_LUKS_HEADER_LEN)
#define R_END (R_DIGEST + 32)

/* Checksums: per 512-byte unit, 16 bytes of SHA-256 of the old. */
#define L1R_UNIT QCRYPTO_LUKS_SECTOR_SIZE
#define L1R_CSUM 16
#define L1R_REGION_ALIGN 4096

G_STATIC_ASSERT(R_END <= L1R_REC_LEN);

typedef struct L1RRecord {
    uint32_t region;            /* the checksum region of the zone */
    uint64_t seq;
    uint64_t size;              /* V: payload bytes */
    uint64_t done;              /* [0, done) is under the new key */
    uint64_t zone;              /* [done, done + zone): in progress */
    uint8_t nonce[L1R_NONCE_LEN];
    uint8_t csum_digest[32];
    uint8_t old_hdr[QCRYPTO_LUKS_HEADER_LEN];
    uint8_t new_hdr[QCRYPTO_LUKS_HEADER_LEN];
} L1RRecord;

typedef struct L1RPointer {
    uint64_t area;
    uint64_t region_len;
    uint8_t nonce[L1R_NONCE_LEN];
} L1RPointer;

/* A run's state (ReencRun.state). */
typedef struct L1R {
    L1RPointer ptr;
    L1RRecord rec;
    QCryptoLUKSHeader old, new;
    QCryptoLUKSCipherSpec old_spec, new_spec;
    uint64_t payload;           /* bytes */
    uint64_t pos;               /* [0, pos) is under the new key */
    QCryptoSectorCipher *old_sc, *new_sc;
    /* One thread at a time uses a sector cipher: the run's and online's. */
    GMutex sc_lock;
    uint8_t *csums;             /* one region */
} L1R;

static uint64_t l1r_cap(uint64_t region_len)
{
    return region_len / L1R_CSUM * L1R_UNIT;
}

static void l1r_sha256(const void *buf, size_t len, uint8_t *out)
{
    /* SHA-256 is always there (nettle): no error to give. */
    qcrypto_hash_bytes(QCRYPTO_HASH_ALGO_SHA256, buf, len, out,
                       &error_abort);
}

static void l1r_ptr_encode(const L1RPointer *p, uint8_t *buf)
{
    uint8_t d[32];

    memset(buf, 0, L1R_PTR_LEN);
    memcpy(buf, L1R_PTR_MAGIC, 8);
    stl_be_p(buf + 8, L1R_VERSION);
    stq_be_p(buf + 16, p->area);
    stq_be_p(buf + 24, p->region_len);
    memcpy(buf + 32, p->nonce, L1R_NONCE_LEN);
    l1r_sha256(buf, L1R_PTR_DIGESTED, d);
    memcpy(buf + L1R_PTR_DIGESTED, d, L1R_PTR_LEN - L1R_PTR_DIGESTED);
}

static bool l1r_ptr_decode(const uint8_t *buf, L1RPointer *p)
{
    uint8_t d[32];

    l1r_sha256(buf, L1R_PTR_DIGESTED, d);
    if (memcmp(buf, L1R_PTR_MAGIC, 8) || ldl_be_p(buf + 8) != L1R_VERSION ||
        memcmp(buf + L1R_PTR_DIGESTED, d, L1R_PTR_LEN - L1R_PTR_DIGESTED)) {
        return false;
    }
    p->area = ldq_be_p(buf + 16);
    p->region_len = ldq_be_p(buf + 24);
    memcpy(p->nonce, buf + 32, L1R_NONCE_LEN);
    return true;
}

static void l1r_rec_encode(const L1RRecord *r, uint8_t *buf)
{
    memset(buf, 0, L1R_REC_LEN);
    memcpy(buf, L1R_REC_MAGIC, 8);
    stl_be_p(buf + R_VERSION, L1R_VERSION);
    stl_be_p(buf + R_REGION, r->region);
    stq_be_p(buf + R_SEQ, r->seq);
    stq_be_p(buf + R_SIZE, r->size);
    stq_be_p(buf + R_DONE, r->done);
    stq_be_p(buf + R_ZONE, r->zone);
    memcpy(buf + R_NONCE, r->nonce, L1R_NONCE_LEN);
    memcpy(buf + R_CSUM_DIGEST, r->csum_digest, 32);
    memcpy(buf + R_OLD_HDR, r->old_hdr, QCRYPTO_LUKS_HEADER_LEN);
    memcpy(buf + R_NEW_HDR, r->new_hdr, QCRYPTO_LUKS_HEADER_LEN);
    l1r_sha256(buf, R_DIGEST, buf + R_DIGEST);
}

static bool l1r_rec_decode(const uint8_t *buf, L1RRecord *r)
{
    uint8_t d[32];

    l1r_sha256(buf, R_DIGEST, d);
    if (memcmp(buf, L1R_REC_MAGIC, 8) ||
        ldl_be_p(buf + R_VERSION) != L1R_VERSION ||
        memcmp(buf + R_DIGEST, d, 32)) {
        return false;
    }
    r->region = ldl_be_p(buf + R_REGION);
    r->seq = ldq_be_p(buf + R_SEQ);
    r->size = ldq_be_p(buf + R_SIZE);
    r->done = ldq_be_p(buf + R_DONE);
    r->zone = ldq_be_p(buf + R_ZONE);
    memcpy(r->nonce, buf + R_NONCE, L1R_NONCE_LEN);
    memcpy(r->csum_digest, buf + R_CSUM_DIGEST, 32);
    memcpy(r->old_hdr, buf + R_OLD_HDR, QCRYPTO_LUKS_HEADER_LEN);
    memcpy(r->new_hdr, buf + R_NEW_HDR, QCRYPTO_LUKS_HEADER_LEN);
    return true;
}

/* The metadata area's bytes: two record copies and two regions. */
static uint64_t l1r_area_len(const L1RPointer *p)
{
    return 2 * L1R_REC_LEN + 2 * p->region_len;
}

static uint64_t l1r_region_off(const L1RPointer *p, uint32_t region)
{
    return p->area + 2 * L1R_REC_LEN + region * p->region_len;
}

/* Bytes from slot i's key material to the next slot's, or the payload. */
static uint64_t l1r_slot_gap(const QCryptoLUKSHeader *h, int i)
{
    uint64_t start = (uint64_t)h->slots[i].key_offset * L1R_UNIT;
    uint64_t end = (uint64_t)h->payload_offset * L1R_UNIT;

    for (int j = 0; j < QCRYPTO_LUKS_NUM_KEY_SLOTS; j++) {
        uint64_t o = (uint64_t)h->slots[j].key_offset * L1R_UNIT;

        if (o > start && o < end) {
            end = o;
        }
    }
    return end > start ? end - start : 0;
}

static bool l1r_active(const QCryptoLUKSHeader *h, int i)
{
    return h->slots[i].active == QCRYPTO_LUKS_KEY_SLOT_ACTIVE;
}

/* [off, off + len) meets the key material of an active slot of h. */
static bool l1r_meets_active(const QCryptoLUKSHeader *h, uint64_t off,
                             uint64_t len)
{
    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        uint64_t s = (uint64_t)h->slots[i].key_offset * L1R_UNIT;
        uint64_t n = qcrypto_luks_key_material_len(h->key_bytes,
                                                   h->slots[i].stripes);

        if (l1r_active(h, i) && off < s + n && s < off + len) {
            return true;
        }
    }
    return false;
}

/*
 * The metadata area: the longest run of free key-slot areas next to each
 * other in the file (no active slot's key material between them) that
 * leaves nspare free slots outside it. Its offset into *area, its length
 * returned (0: none); the spares, in slot order, into spares[].
 */
static uint64_t l1r_meta_run(const QCryptoLUKSHeader *h, int nspare,
                             int *spares, uint64_t *area)
{
    int order[QCRYPTO_LUKS_NUM_KEY_SLOTS], nfree = 0;
    int best_a = -1, best_b = -1;
    uint64_t best = 0;

    /* The slots by key-material offset (insertion sort of 8). */
    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        int j = i;

        while (j > 0 && h->slots[order[j - 1]].key_offset >
               h->slots[i].key_offset) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
        nfree += !l1r_active(h, i);
    }
    for (int a = 0; a < QCRYPTO_LUKS_NUM_KEY_SLOTS; a++) {
        for (int b = a; b < QCRYPTO_LUKS_NUM_KEY_SLOTS &&
             !l1r_active(h, order[b]); b++) {
            uint64_t start = (uint64_t)h->slots[order[a]].key_offset *
                L1R_UNIT;
            uint64_t end = (uint64_t)h->slots[order[b]].key_offset *
                L1R_UNIT + l1r_slot_gap(h, order[b]);

            if (nfree - (b - a + 1) >= nspare && end - start > best) {
                best = end - start;
                best_a = a;
                best_b = b;
            }
        }
    }
    for (int i = 0, k = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS && k < nspare;
         i++) {
        bool in_run = false;

        for (int p = best_a; p >= 0 && p <= best_b; p++) {
            in_run |= order[p] == i;
        }
        if (!l1r_active(h, i) && !in_run) {
            spares[k++] = i;
        }
    }
    *area = best ? (uint64_t)h->slots[order[best_a]].key_offset * L1R_UNIT
                 : 0;
    return best;
}

/* A header copy of the record, decoded and validated. */
static int l1r_header(const uint8_t *raw, uint64_t flen,
                      QCryptoLUKSHeader *h, QCryptoLUKSCipherSpec *spec,
                      Error **errp)
{
    qcrypto_luks_header_decode(raw, h);
    if (memcmp(h->magic, QCRYPTO_LUKS_MAGIC, QCRYPTO_LUKS_MAGIC_LEN) ||
        h->version != QCRYPTO_LUKS_VERSION) {
        error_setg(errp, "LUKS1 re-encryption metadata holds no LUKS1 "
                   "header");
        return -1;
    }
    return qcrypto_luks_header_validate(h, flen, false, spec, errp);
}

typedef enum L1RState {
    L1R_NONE,           /* not a LUKS1 image */
    L1R_LUKS1,          /* LUKS1, not being re-encrypted */
    L1R_RUNNING,        /* ours, being re-encrypted */
    L1R_CRYPTSETUP,     /* cryptsetup's, being re-encrypted */
} L1RState;

static L1RState l1r_state(const QCryptoReencryptIO *io)
{
    uint8_t head[8];

    if (io->hdr_read ||
        io->read(io->opaque, 0, head, sizeof(head), NULL) < 0 ||
        head[6] != 0 || head[7] != QCRYPTO_LUKS_VERSION) {
        return L1R_NONE;
    }
    if (!memcmp(head, QCRYPTO_LUKS_MAGIC, 6)) {
        return L1R_LUKS1;
    }
    if (!memcmp(head, L1R_MAGIC, 6)) {
        return L1R_RUNNING;
    }
    if (!memcmp(head, L1R_CRYPTSETUP_MAGIC, 6)) {
        return L1R_CRYPTSETUP;
    }
    return L1R_NONE;
}

bool reenc_luks1_image(const QCryptoReencryptIO *io)
{
    return l1r_state(io) != L1R_NONE;
}

bool reenc_luks1_running(const QCryptoReencryptIO *io)
{
    L1RState s = l1r_state(io);

    return s == L1R_RUNNING || s == L1R_CRYPTSETUP;
}

/* cryptsetup 2.6's LUKS1 run: its state is in files beside it, not here */
static void l1r_cryptsetup_error(Error **errp)
{
    error_setg(errp, "cryptsetup's LUKS1 re-encryption of this image was "
               "interrupted (its header is marked LUKS\\xde\\xad): finish "
               "it with 'cryptsetup reencrypt' in the directory that holds "
               "its LUKS-<UUID>.log, .org and .new files (it needs "
               "device-mapper); its log does not say which data is under "
               "which key, so it is not resumed here");
}

bool reenc_luks1_busy(const QCryptoReencryptIO *io, Error **errp)
{
    switch (l1r_state(io)) {
    case L1R_RUNNING:
        error_setg(errp, "The image is already being re-encrypted: finish "
                   "with --resume-only");
        return true;
    case L1R_CRYPTSETUP:
        l1r_cryptsetup_error(errp);
        return true;
    default:
        return false;
    }
}

QCryptoReencryptKind qcrypto_reencrypt_unfinished_kind(
    const QCryptoReencryptIO *io)
{
    switch (l1r_state(io)) {
    case L1R_RUNNING:
        return QCRYPTO_REENCRYPT_KIND_LUKS1;
    case L1R_CRYPTSETUP:
        return QCRYPTO_REENCRYPT_KIND_LUKS1_CRYPTSETUP;
    default:
        return qcrypto_reencrypt_unfinished(io) ?
            QCRYPTO_REENCRYPT_KIND_LUKS2 : QCRYPTO_REENCRYPT_KIND_NONE;
    }
}

/*
 * Read the pointer, the record (the valid copy of the higher sequence
 * number whose zone checksums are whole) and both header copies into l,
 * everything checked against the file: 0, or -1 and errp.
 */
static int l1r_load(L1R *l, const QCryptoReencryptIO *io, Error **errp)
{
    uint8_t buf[L1R_REC_LEN];
    L1RRecord cand[2];
    bool ok[2] = { false, false };
    int64_t flen;
    uint64_t cap, end;
    int best = -1;

    flen = io->length(io->opaque, errp);
    if (flen < 0) {
        return -1;
    }
    if (io->read(io->opaque, L1R_PTR_OFFSET, buf, L1R_PTR_LEN, errp) < 0) {
        return -1;
    }
    if (!l1r_ptr_decode(buf, &l->ptr)) {
        error_setg(errp, "The LUKS1 re-encryption metadata is missing or "
                   "damaged (no valid pointer at byte %d)", L1R_PTR_OFFSET);
        return -1;
    }
    cap = l1r_cap(l->ptr.region_len);
    if (l->ptr.area < 2 * L1R_UNIT || l->ptr.area % L1R_UNIT ||
        l->ptr.region_len % L1R_REGION_ALIGN || !cap ||
        l->ptr.region_len > REENC_MAX_BYTES || l->ptr.area > REENC_MAX_BYTES ||
        l->ptr.area + l1r_area_len(&l->ptr) > (uint64_t)flen) {
        error_setg(errp, "The LUKS1 re-encryption metadata area (%" PRIu64
                   ", regions of %" PRIu64 " bytes) is not valid",
                   l->ptr.area, l->ptr.region_len);
        return -1;
    }
    for (int c = 0; c < 2; c++) {
        L1RRecord *r = &cand[c];

        if (io->read(io->opaque, l->ptr.area + c * L1R_REC_LEN, buf,
                     L1R_REC_LEN, errp) < 0) {
            return -1;
        }
        if (!l1r_rec_decode(buf, r) ||
            memcmp(r->nonce, l->ptr.nonce, L1R_NONCE_LEN) ||
            r->region > 1 || !r->size || r->size % L1R_UNIT ||
            r->size > REENC_MAX_BYTES || r->done > r->size ||
            r->done % L1R_UNIT || r->zone % L1R_UNIT || r->zone > cap ||
            r->zone > r->size - r->done) {
            continue;
        }
        if (r->zone) {
            uint64_t n = r->zone / L1R_UNIT * L1R_CSUM;
            g_autofree uint8_t *cs = g_malloc(n);
            uint8_t d[32];

            if (io->read(io->opaque, l1r_region_off(&l->ptr, r->region), cs,
                         n, errp) < 0) {
                return -1;
            }
            l1r_sha256(cs, n, d);
            /* The record was synced with its checksums: both, or neither. */
            if (memcmp(d, r->csum_digest, 32)) {
                continue;
            }
        }
        ok[c] = true;
    }
    for (int c = 0; c < 2; c++) {
        if (ok[c] && (best < 0 || cand[c].seq > cand[best].seq)) {
            best = c;
        }
    }
    if (best < 0) {
        error_setg(errp, "The LUKS1 re-encryption metadata is damaged: "
                   "neither copy of its record is valid");
        return -1;
    }
    l->rec = cand[best];
    if (l1r_header(l->rec.old_hdr, flen, &l->old, &l->old_spec, errp) < 0 ||
        l1r_header(l->rec.new_hdr, flen, &l->new, &l->new_spec, errp) < 0) {
        error_prepend(errp, "LUKS1 re-encryption metadata: ");
        return -1;
    }
    l->payload = (uint64_t)l->old.payload_offset * L1R_UNIT;
    end = l->ptr.area + l1r_area_len(&l->ptr);
    if (l->new.payload_offset != l->old.payload_offset ||
        memcmp(l->old.uuid, l->new.uuid, QCRYPTO_LUKS_UUID_LEN) ||
        end > l->payload || l->payload + l->rec.size > (uint64_t)flen ||
        l1r_meets_active(&l->old, l->ptr.area, end - l->ptr.area) ||
        l1r_meets_active(&l->new, l->ptr.area, end - l->ptr.area)) {
        error_setg(errp, "The LUKS1 re-encryption metadata does not fit "
                   "the image");
        return -1;
    }
    return 0;
}

/* A kept key that matches h's master key digest, into mk: true. */
static bool l1r_keys_find(const QCryptoReencryptKeys *keys,
                          const QCryptoLUKSHeader *h,
                          const QCryptoLUKSCipherSpec *spec, uint8_t *mk)
{
    for (int i = 0; keys && i < REENC_KEYS_MAX; i++) {
        QCryptoSecureBuf *k = keys->key[i];
        uint8_t d[QCRYPTO_LUKS_DIGEST_LEN];

        if (!k || k->len != h->key_bytes ||
            qcrypto_pbkdf2(spec->hash_alg, k->data, k->len,
                           h->mk_digest_salt, QCRYPTO_LUKS_SALT_LEN,
                           h->mk_digest_iter, d, sizeof(d), NULL) < 0) {
            continue;
        }
        if (memeql_sec(d, h->mk_digest, sizeof(d))) {
            memcpy(mk, k->data, k->len);
            return true;
        }
    }
    return false;
}

/* The master key of h: a kept one, else a slot the secret opens. */
static QCryptoSectorCipher *l1r_cipher(Reenc *r, const QCryptoLUKSHeader *h,
                                       const QCryptoLUKSCipherSpec *spec,
                                       const QCryptoBlockSecret *secret,
                                       const char *which, Error **errp)
{
    g_autoptr(QCryptoSecureBuf) mk = qcrypto_secure_buf_new(h->key_bytes);
    g_autoptr(QCryptoBlock) probe =
        qcrypto_block_new(QCRYPTO_BLOCK_FORMAT_LUKS, NULL);
    QCryptoSectorCipherSpec sspec = qcrypto_luks_sector_spec(spec);

    if (!l1r_keys_find(r->keys, h, spec, mk->data) &&
        qcrypto_luks_keyslot_open(probe, h, spec, -1, secret,
                                  reenc_block_read, (void *)r->io, mk->data,
                                  errp) < 0) {
        error_prepend(errp, "The %s key: ", which);
        return NULL;
    }
    return qcrypto_sector_cipher_new(&sspec, mk->data, mk->len, L1R_UNIT, 0,
                                     0, errp);
}

static int l1r_write_rec(const QCryptoReencryptIO *io, const L1R *l,
                         Error **errp)
{
    uint8_t buf[L1R_REC_LEN];

    l1r_rec_encode(&l->rec, buf);
    return io->write(io->opaque, l->ptr.area + (l->rec.seq % 2) * L1R_REC_LEN,
                     buf, sizeof(buf), errp);
}

/* ---- The mode ---- */

static int l1r_start(ReencRun *run, JsonObject *ks,
                     const QCryptoBlockSecret *secret, uint64_t hotzone,
                     Error **errp)
{
    Reenc *r = run->r;
    L1R *l = g_new0(L1R, 1);
    uint64_t cap;

    g_mutex_init(&l->sc_lock);
    run->state = l;
    if (l1r_load(l, r->io, errp) < 0) {
        return -1;
    }
    r->size = l->rec.size;
    l->old_sc = l1r_cipher(r, &l->old, &l->old_spec, secret, "old", errp);
    if (!l->old_sc) {
        return -1;
    }
    l->new_sc = l1r_cipher(r, &l->new, &l->new_spec, secret, "new", errp);
    if (!l->new_sc) {
        return -1;
    }
    cap = l1r_cap(l->ptr.region_len);
    run->hotzone = reenc_hotzone_size(hotzone, cap, cap, L1R_UNIT, errp);
    if (!run->hotzone) {
        return -1;
    }
    run->bufsize = MAX(run->hotzone, l->rec.zone);
    l->csums = g_malloc(l->ptr.region_len);
    l->pos = l->rec.done;
    return 0;
}

static void l1r_unit_hash(const uint8_t *unit, uint8_t *out)
{
    uint8_t d[32];

    l1r_sha256(unit, L1R_UNIT, d);
    memcpy(out, d, L1R_CSUM);
}

/* The sectors [off, off + len) with sc, under the lock. */
static int l1r_crypt_with(L1R *l, QCryptoSectorCipher *sc, bool encrypt,
                          uint64_t off, uint8_t *buf, size_t len,
                          Error **errp)
{
    int ret;

    g_mutex_lock(&l->sc_lock);
    ret = encrypt ?
        qcrypto_sector_cipher_encrypt(sc, off / L1R_UNIT, buf, len, errp) :
        qcrypto_sector_cipher_decrypt(sc, off / L1R_UNIT, buf, len, errp);
    g_mutex_unlock(&l->sc_lock);
    return ret;
}

/*
 * The zone a crash cut short: each sector is old ciphertext (redone),
 * new (kept), or neither (refused: what it held is not known).
 */
static int l1r_recover(ReencRun *run, Error **errp)
{
    const QCryptoReencryptIO *io = run->r->io;
    L1R *l = run->state;
    uint64_t off = l->rec.done, len = l->rec.zone;
    bool redone = false;

    if (!len) {
        return 0;
    }
    if (io->read(io->opaque, l1r_region_off(&l->ptr, l->rec.region),
                 l->csums, len / L1R_UNIT * L1R_CSUM, errp) < 0 ||
        io->read(io->opaque, l->payload + off, run->buf, len, errp) < 0) {
        return -1;
    }
    for (uint64_t u = 0; u < len / L1R_UNIT; u++) {
        uint8_t *unit = run->buf + u * L1R_UNIT;
        const uint8_t *want = l->csums + u * L1R_CSUM;
        uint64_t sector = off / L1R_UNIT + u;
        uint8_t h[L1R_CSUM], trial[L1R_UNIT];

        l1r_unit_hash(unit, h);
        if (memcmp(h, want, L1R_CSUM)) {
            /* New ciphertext, if the old one is what it comes back to. */
            memcpy(trial, unit, L1R_UNIT);
            if (qcrypto_sector_cipher_decrypt(l->new_sc, sector, trial,
                                              L1R_UNIT, errp) < 0 ||
                qcrypto_sector_cipher_encrypt(l->old_sc, sector, trial,
                                              L1R_UNIT, errp) < 0) {
                return -1;
            }
            l1r_unit_hash(trial, h);
            explicit_bzero(trial, sizeof(trial));
            if (!memcmp(h, want, L1R_CSUM)) {
                continue;
            }
            error_setg(errp, "LUKS1 re-encryption: the sector at payload "
                       "offset %" PRIu64 " holds neither its old nor its new "
                       "ciphertext (damaged, or written in part): not "
                       "resumed", sector * L1R_UNIT);
            return -1;
        }
        if (qcrypto_sector_cipher_decrypt(l->old_sc, sector, unit, L1R_UNIT,
                                          errp) < 0 ||
            qcrypto_sector_cipher_encrypt(l->new_sc, sector, unit, L1R_UNIT,
                                          errp) < 0) {
            return -1;
        }
        redone = true;
    }
    if (redone &&
        (io->write(io->opaque, l->payload + off, run->buf, len, errp) < 0 ||
         io->sync(io->opaque, errp) < 0)) {
        return -1;
    }
    l->pos = off + len;
    return 0;
}

static bool l1r_next(ReencRun *run, uint64_t *off, uint64_t *len)
{
    L1R *l = run->state;

    if (l->pos >= l->rec.size) {
        return false;
    }
    *off = l->pos;
    *len = MIN(run->hotzone, l->rec.size - l->pos);
    return true;
}

static int l1r_zone(ReencRun *run, uint64_t off, uint64_t len, Error **errp)
{
    const QCryptoReencryptIO *io = run->r->io;
    L1R *l = run->state;
    uint64_t n = len / L1R_UNIT;

    if (io->read(io->opaque, l->payload + off, run->buf, len, errp) < 0) {
        return -1;
    }
    for (uint64_t u = 0; u < n; u++) {
        l1r_unit_hash(run->buf + u * L1R_UNIT, l->csums + u * L1R_CSUM);
    }
    if (l1r_crypt_with(l, l->old_sc, false, off, run->buf, len, errp) < 0 ||
        l1r_crypt_with(l, l->new_sc, true, off, run->buf, len, errp) < 0) {
        return -1;
    }
    /* The other region and the other copy: the current ones stay whole. */
    l->rec.region ^= 1;
    l->rec.seq++;
    l->rec.done = off;
    l->rec.zone = len;
    l1r_sha256(l->csums, n * L1R_CSUM, l->rec.csum_digest);
    if (io->write(io->opaque, l1r_region_off(&l->ptr, l->rec.region),
                  l->csums, n * L1R_CSUM, errp) < 0 ||
        l1r_write_rec(io, l, errp) < 0 ||
        io->sync(io->opaque, errp) < 0 ||
        io->write(io->opaque, l->payload + off, run->buf, len, errp) < 0 ||
        io->sync(io->opaque, errp) < 0) {
        return -1;
    }
    l->pos = off + len;
    return 0;
}

static uint64_t l1r_done(ReencRun *run)
{
    return ((L1R *)run->state)->pos;
}

static int l1r_zero(const QCryptoReencryptIO *io, uint64_t off, uint64_t len,
                    Error **errp)
{
    g_autofree uint8_t *z = g_malloc0(MIN(len, 1 << 20));

    while (len) {
        uint64_t n = MIN(len, 1 << 20);

        if (io->write(io->opaque, off, z, n, errp) < 0) {
            return -1;
        }
        off += n;
        len -= n;
    }
    return 0;
}

/*
 * After the commit: the old key material (slot areas the final header
 * does not use), the metadata area and the pointer, zeroed and synced.
 */
static int l1r_wipe(const QCryptoReencryptIO *io, const L1R *l, Error **errp)
{
    uint8_t ptr[L1R_PTR_LEN] = { 0 };

    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        uint64_t s = (uint64_t)l->old.slots[i].key_offset * L1R_UNIT;
        uint64_t n = qcrypto_luks_key_material_len(l->old.key_bytes,
                                                   l->old.slots[i].stripes);

        if (l1r_active(&l->old, i) && !l1r_meets_active(&l->new, s, n) &&
            l1r_zero(io, s, n, errp) < 0) {
            return -1;
        }
    }
    if (l1r_zero(io, l->ptr.area, l1r_area_len(&l->ptr), errp) < 0 ||
        io->sync(io->opaque, errp) < 0 ||
        io->write(io->opaque, L1R_PTR_OFFSET, ptr, sizeof(ptr), errp) < 0 ||
        io->sync(io->opaque, errp) < 0) {
        error_prepend(errp, "Wiping the old key material: ");
        return -1;
    }
    return 0;
}

/*
 * The final header: its second sector first (nobody reads it during the
 * run: the record holds both headers), then its first, with the LUKS
 * magic back: the commit. Then the wipe.
 */
static int l1r_finish(ReencRun *run, Error **errp)
{
    const QCryptoReencryptIO *io = run->r->io;
    L1R *l = run->state;
    const uint8_t *h = l->rec.new_hdr;

    if (io->write(io->opaque, L1R_UNIT, h + L1R_UNIT,
                  QCRYPTO_LUKS_HEADER_LEN - L1R_UNIT, errp) < 0 ||
        io->sync(io->opaque, errp) < 0 ||
        io->write(io->opaque, 0, h, L1R_UNIT, errp) < 0 ||
        io->sync(io->opaque, errp) < 0) {
        error_prepend(errp, "Writing the final LUKS1 header: ");
        return -1;
    }
    return l1r_wipe(io, l, errp);
}

static void l1r_clear(ReencRun *run)
{
    L1R *l = run->state;

    qcrypto_sector_cipher_free(l->old_sc);
    qcrypto_sector_cipher_free(l->new_sc);
    g_free(l->csums);
    g_mutex_clear(&l->sc_lock);
    explicit_bzero(l, sizeof(*l));
}

/* Online: [0, done) under the new key, the rest under the old. */
static int l1r_crypt(ReencRun *run, uint64_t done, bool encrypt,
                     uint64_t off, uint8_t *buf, size_t len, Error **errp)
{
    L1R *l = run->state;
    size_t n = off < done ? MIN(len, done - off) : 0;

    if (n && l1r_crypt_with(l, l->new_sc, encrypt, off, buf, n, errp) < 0) {
        return -1;
    }
    return len > n ? l1r_crypt_with(l, l->old_sc, encrypt, off + n, buf + n,
                                    len - n, errp) : 0;
}

static uint64_t l1r_data_offset(ReencRun *run)
{
    return ((L1R *)run->state)->payload;
}

static uint32_t l1r_sector_size(ReencRun *run)
{
    return L1R_UNIT;
}

const ReencMode reenc_mode_luks1 = {
    .name = "luks1-reencrypt",
    .start = l1r_start,
    .recover = l1r_recover,
    .next = l1r_next,
    .zone = l1r_zone,
    .done = l1r_done,
    .finish = l1r_finish,
    .clear = l1r_clear,
    .crypt = l1r_crypt,
    .data_offset = l1r_data_offset,
    .sector_size = l1r_sector_size,
};

/*
 * A LUKS1 image that is not (or no longer) being re-encrypted: if a run of
 * ours committed its final header and a crash came before its wipe ended,
 * finish the wipe: 1. Nothing of the kind: 0. -1 on an I/O error.
 */
static int l1r_finish_wipe(const QCryptoReencryptIO *io, Error **errp)
{
    uint8_t disk[QCRYPTO_LUKS_HEADER_LEN];
    L1R l = { 0 };
    int ret = 0;

    if (io->read(io->opaque, 0, disk, sizeof(disk), errp) < 0) {
        return -1;
    }
    if (l1r_load(&l, io, NULL) == 0 &&
        !memcmp(disk, l.rec.new_hdr, sizeof(disk))) {
        ret = l1r_wipe(io, &l, errp) < 0 ? -1 : 1;
    }
    explicit_bzero(&l, sizeof(l));
    return ret;
}

int reenc_luks1_find(const QCryptoReencryptIO *io, Error **errp)
{
    int ret;

    switch (l1r_state(io)) {
    case L1R_RUNNING:
        return 1;
    case L1R_CRYPTSETUP:
        l1r_cryptsetup_error(errp);
        return -1;
    case L1R_LUKS1:
        ret = l1r_finish_wipe(io, errp);
        if (ret != 0) {
            return ret < 0 ? -1 : 0;
        }
        error_setg(errp, "The image is not being re-encrypted");
        return -1;
    default:
        g_assert_not_reached();
    }
}

/* ---- init ---- */

typedef struct L1RSlot {
    int id;
    const QCryptoBlockSecret *secret;
} L1RSlot;

/* The slots to keep and the old master key (from the first), as LUKS2. */
static int l1r_open_slots(const QCryptoReencryptRekeyOptions *o,
                          QCryptoBlock *probe, const QCryptoLUKSHeader *h,
                          const QCryptoLUKSCipherSpec *spec,
                          const QCryptoReencryptIO *io, L1RSlot *slots,
                          int *nslots, uint8_t *mk, Error **errp)
{
    size_t nbound = 0;
    g_autoptr(QCryptoSecureBuf) cand = qcrypto_secure_buf_new(h->key_bytes);

    *nslots = 0;
    if (o->keyslot >= QCRYPTO_LUKS_NUM_KEY_SLOTS) {
        error_setg(errp, "Option 'keyslot' %d is not a LUKS1 key slot "
                   "(0..7)", o->keyslot);
        return -1;
    }
    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        const QCryptoBlockSecret *secret = &o->create.secret;
        int rc;

        if (!l1r_active(h, i)) {
            continue;
        }
        if (o->nslot_secrets) {
            if (nbound >= o->nslot_secrets) {
                nbound++;
                continue;
            }
            secret = &o->slot_secrets[nbound];
        }
        nbound++;
        if (o->keyslot >= 0 && i != o->keyslot) {
            continue;
        }
        rc = qcrypto_luks_keyslot_open(probe, h, spec, i, secret,
                                       reenc_block_read, (void *)io,
                                       cand->data, errp);
        if (rc < 0) {
            return -1;
        }
        if (rc == 0) {
            reenc_slot_not_opened(errp, "LUKS1", i, o->nslot_secrets != 0);
            return -1;
        }
        if (!*nslots) {
            memcpy(mk, cand->data, h->key_bytes);
        }
        slots[(*nslots)++] = (L1RSlot) { .id = i, .secret = secret };
    }
    if (o->nslot_secrets && o->nslot_secrets != nbound) {
        error_setg(errp, "slot-secrets lists %zu secrets for %zu key slots",
                   o->nslot_secrets, nbound);
        return -1;
    }
    if (!*nslots) {
        error_setg(errp, o->keyslot >= 0 ?
                   "LUKS1 key slot %d is not active" :
                   "LUKS1 image has no active key slot", o->keyslot);
        return -1;
    }
    return 0;
}

/* What a LUKS1 image cannot take: said before anything is written. */
static int l1r_check_options(const QCryptoReencryptRekeyOptions *o,
                             Error **errp)
{
    if (o->resilience != QCRYPTO_REENCRYPT_RESILIENCE_CHECKSUM) {
        error_setg(errp, "A LUKS1 image's new volume key is protected by "
                   "checksums only: --resilience journal and none are for "
                   "LUKS2");
        return -1;
    }
    if (o->create.sector_size && o->create.sector_size != L1R_UNIT) {
        error_setg(errp, "LUKS1 sectors are 512 bytes: sector-size %" PRIu32
                   " needs LUKS2", o->create.sector_size);
        return -1;
    }
    if (o->create.has_kdf && o->create.kdf != QCRYPTO_BLOCK_KDF_PBKDF2) {
        error_setg(errp, "LUKS1 key slots are PBKDF2 only, not %s",
                   qcrypto_block_kdf_name(o->create.kdf));
        return -1;
    }
    return 0;
}

int reenc_luks1_rekey_init(const QCryptoReencryptRekeyOptions *o,
                           const QCryptoReencryptIO *io, Error **errp)
{
    g_autoptr(QCryptoBlock) probe =
        qcrypto_block_new(QCRYPTO_BLOCK_FORMAT_LUKS, NULL);
    g_autoptr(QCryptoSecureBuf) old_mk = NULL, new_mk = NULL;
    uint8_t raw[QCRYPTO_LUKS_HEADER_LEN], sector0[L1R_UNIT];
    uint8_t ptrbuf[L1R_PTR_LEN], rec0[L1R_REC_LEN] = { 0 };
    L1R l = { 0 };
    L1RSlot slots[QCRYPTO_LUKS_NUM_KEY_SLOTS];
    int nslots, nfree = 0, spares[QCRYPTO_LUKS_NUM_KEY_SLOTS];
    uint64_t best;
    int64_t flen;
    int ret = -1;

    if (l1r_check_options(o, errp) < 0) {
        return -1;
    }
    flen = io->length(io->opaque, errp);
    if (flen < 0 || io->read(io->opaque, 0, raw, sizeof(raw), errp) < 0) {
        return -1;
    }
    qcrypto_luks_header_decode(raw, &l.old);
    if (qcrypto_luks_header_validate(&l.old, flen, false, &l.old_spec,
                                     errp) < 0) {
        return -1;
    }
    l.payload = (uint64_t)l.old.payload_offset * L1R_UNIT;
    if ((uint64_t)flen <= l.payload || ((uint64_t)flen - l.payload) %
        L1R_UNIT) {
        error_setg(errp, "The LUKS1 image's data (%" PRId64 " bytes after "
                   "the header) is empty or not whole sectors",
                   flen - (int64_t)MIN((uint64_t)flen, l.payload));
        return -1;
    }
    old_mk = qcrypto_secure_buf_new(l.old.key_bytes);
    if (l1r_open_slots(o, probe, &l.old, &l.old_spec, io, slots, &nslots,
                       old_mk->data, errp) < 0) {
        return -1;
    }

    /* The final header: the new cipher (if asked), key and digest. */
    l.new = l.old;
    l.new_spec = l.old_spec;
    if (o->has_cipher) {
        QCryptoLUKSCipherSpec spec;

        qcrypto_luks_create_spec(&o->create, &spec);
        spec.hash_alg = l.old_spec.hash_alg;
        if (qcrypto_luks_cipher_spec_format(&spec, &l.new, errp) < 0) {
            return -1;
        }
        if (l.new.key_bytes > l.old.key_bytes) {
            error_setg(errp, "The new cipher's key (%" PRIu32 " bytes) is "
                       "longer than the old one's (%" PRIu32 "): its key "
                       "slots would not fit the LUKS1 key-slot areas",
                       l.new.key_bytes, l.old.key_bytes);
            return -1;
        }
    }
    new_mk = qcrypto_secure_buf_new(l.new.key_bytes);
    if (qcrypto_random_bytes(new_mk->data, new_mk->len, errp) < 0 ||
        qcrypto_random_bytes(l.new.mk_digest_salt, QCRYPTO_LUKS_SALT_LEN,
                             errp) < 0) {
        return -1;
    }

    /*
     * Free slots: nslots of them (spares) take the kept slots' new key
     * material (each kept slot swaps its area with one, so its number
     * stays); the longest run of the others holds the metadata.
     */
    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        nfree += !l1r_active(&l.old, i);
    }
    if (nfree < nslots + 1) {
        error_setg(errp, "A new volume key for %d LUKS1 key slot(s) needs "
                   "%d free key slot(s), and %d are free: remove a key slot "
                   "(amend) or keep one with keyslot=N", nslots, nslots + 1,
                   nfree);
        return -1;
    }
    best = l1r_meta_run(&l.old, nslots, spares, &l.ptr.area);
    l.ptr.region_len = best > 2 * L1R_REC_LEN ?
        (best - 2 * L1R_REC_LEN) / 2 / L1R_REGION_ALIGN * L1R_REGION_ALIGN : 0;
    if (!l.ptr.region_len) {
        error_setg(errp, "The free LUKS1 key-slot areas are too small for "
                   "the re-encryption metadata");
        return -1;
    }
    for (int i = 0; i < QCRYPTO_LUKS_NUM_KEY_SLOTS; i++) {
        if (l1r_active(&l.old, i)) {
            l.new.slots[i].active = QCRYPTO_LUKS_KEY_SLOT_DISABLED;
            l.new.slots[i].iterations = 0;
            memset(l.new.slots[i].salt, 0, QCRYPTO_LUKS_SALT_LEN);
        }
    }
    for (int k = 0; k < nslots; k++) {
        int id = slots[k].id;

        l.new.slots[id].key_offset = l.old.slots[spares[k]].key_offset;
        l.new.slots[spares[k]].key_offset = l.old.slots[id].key_offset;
    }
    if (qcrypto_pbkdf2(l.old_spec.hash_alg, new_mk->data, new_mk->len,
                       l.new.mk_digest_salt, QCRYPTO_LUKS_SALT_LEN,
                       l.new.mk_digest_iter, l.new.mk_digest,
                       QCRYPTO_LUKS_DIGEST_LEN, errp) < 0 ||
        qcrypto_luks_header_validate(&l.new, flen, false, &l.new_spec,
                                     errp) < 0) {
        return -1;
    }
    /* The new key material, into the free areas (the old header is whole) */
    for (int k = 0; k < nslots; k++) {
        if (qcrypto_luks_keyslot_store(probe, &l.new, &l.new_spec,
                                       slots[k].id, slots[k].secret,
                                       new_mk->data,
                                       o->create.has_iter_time ?
                                       o->create.iter_time : 0,
                                       reenc_block_write, (void *)io,
                                       errp) < 0) {
            return -1;
        }
    }

    /* The record and the pointer, synced; then the mark: the run is on. */
    l.rec = (L1RRecord) {
        .region = 1, .seq = 1, .size = flen - l.payload,
    };
    if (qcrypto_random_bytes(l.ptr.nonce, L1R_NONCE_LEN, errp) < 0) {
        return -1;
    }
    memcpy(l.rec.nonce, l.ptr.nonce, L1R_NONCE_LEN);
    memcpy(l.rec.old_hdr, raw, sizeof(raw));
    qcrypto_luks_header_encode(&l.new, l.rec.new_hdr);
    l1r_ptr_encode(&l.ptr, ptrbuf);
    memcpy(sector0, raw, sizeof(sector0));
    memcpy(sector0, L1R_MAGIC, QCRYPTO_LUKS_MAGIC_LEN);
    if (io->write(io->opaque, l.ptr.area, rec0, sizeof(rec0), errp) < 0 ||
        l1r_write_rec(io, &l, errp) < 0 ||
        io->write(io->opaque, L1R_PTR_OFFSET, ptrbuf, sizeof(ptrbuf),
                  errp) < 0 ||
        io->sync(io->opaque, errp) < 0 ||
        io->write(io->opaque, 0, sector0, sizeof(sector0), errp) < 0 ||
        io->sync(io->opaque, errp) < 0) {
        goto out;
    }
    reenc_keys_add(o->keys, old_mk->data, old_mk->len);
    reenc_keys_add(o->keys, new_mk->data, new_mk->len);
    ret = 0;
out:
    explicit_bzero(&l, sizeof(l));
    return ret;
}
