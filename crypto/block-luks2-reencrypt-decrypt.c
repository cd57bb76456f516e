/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LUKS2 in-place decryption with cryptsetup 2.6's metadata ("reencrypt
 * --decrypt" with a detached header: requirement online-reencrypt-v3, key
 * slot area "datashift-checksum", direction forward). docs/reencrypt.md
 * tells the whole story; what every mode shares is in
 * block-luks2-reencrypt-util.c.
 *
 * Terms: S is the payload offset of the encrypted image (the data shift),
 * V the data bytes (the data file's length less S, as cryptsetup counts
 * it), M = min(S, V) the moved segment. The plain text of logical x ends
 * at physical x, where the header was: the header first moves to its own
 * file (io->hdr_*). At init the ciphertext of [0, M) is copied to the
 * start of the data file; then zones [a, a + h) with a >= M, h <= S, run
 * forward: read at S + a, decrypted, written at a. A zone never
 * overwrites its own source nor any ciphertext not yet decrypted, so a
 * zone cut short is done again (datashift resilience). Last, the moved
 * segment [0, M) is decrypted in place: before it is touched, a hash of
 * each of its blocks (ciphertext) goes to the reencrypt key slot's area,
 * so that after a crash a block whose hash still matches is decrypted and
 * one that does not is already plain text (checksum resilience; we also
 * check that such a block encrypts back to the stored hash, so a damaged
 * checksum is refused instead of leaving ciphertext behind).
 *
 * The active segments between zones, as cryptsetup writes them:
 *   [crypt 0..M (moved)][linear M..a][linear a..a+h in-reencryption]
 *   [crypt S+a+h.. dynamic]            forward zones
 *   [linear 0..M in-reencryption][linear M.. dynamic]   the moved zone
 * plus backup-moved-segment (crypt 0, M), backup-previous (crypt S,
 * dynamic) and backup-final (linear 0, dynamic).
 */
#include <stdlib.h>
#include <string.h>

#include "crypto/random.h"
#include "crypto/luks2priv.h"
#include "lukspriv.h"
#include "crypto/reencryptpriv.h"
#include "block-luks2-json.h"

/* cryptsetup's LUKS2_DECRYPT_DATASHIFT_REQ_VERSION */
#define DEC_REQ_VERSION 3
#define DEC_REQUIREMENT "online-reencrypt-v3"
/* The checksum block cryptsetup uses on files (their block size). */
#define DEC_CSUM_BLOCK 4096
#define DEC_CSUM_HASH QCRYPTO_HASH_ALGO_SHA256

typedef struct Dec {
    Reenc *r;                   /* shift S, size V, moved_size M, backups */
    int digest_old;             /* the digest of the old (only) key */
    uint64_t area_offset, area_size;    /* the checksums, in the header */
    uint32_t csum_block;
    QCryptoHashAlgo csum_hash;
    size_t csum_len;            /* one hash */
} Dec;

/* ---- the segment lists ---- */

static JsonObject *plain_seg(uint64_t x, uint64_t size, const char *flag)
{
    JsonObject *o = reenc_linear_seg(x, size);

    if (!size) {
        json_object_set_string_member(o, "size", "dynamic");
    }
    if (flag) {
        JsonArray *a = json_array_new();

        json_array_add_string_element(a, flag);
        json_object_set_array_member(o, "flags", a);
    }
    return o;
}

/*
 * The metadata with [0, c) plain (but [0, M) still the moved ciphertext
 * unless moved_zone), a zone [c, c + h) in work, the rest ciphertext.
 * moved_zone: the moved segment [0, M) is the zone (c = V, h = 0).
 */
static JsonNode *dec_state_root(Dec *d, uint64_t c, uint64_t h,
                                bool moved_zone)
{
    Reenc *r = d->r;
    JsonNode *root = reenc_deep_copy(r->root);
    JsonObject *segs = json_object_new();
    JsonObject *dg;
    g_autofree char *dn = g_strdup_printf("%d", d->digest_old);
    int crypt_ids[4], ncrypt = 0, id = 0;
    uint64_t m = r->moved_size, v = r->size;

#define ADD(o) do { g_autofree char *k = g_strdup_printf("%d", id++); \
        json_object_set_object_member(segs, k, (o)); } while (0)
    if (moved_zone) {
        ADD(plain_seg(0, m, "in-reencryption"));
        if (v > m) {
            ADD(plain_seg(m, 0, NULL));
        }
    } else {
        crypt_ids[ncrypt++] = id;
        ADD(reenc_crypt_seg(r->prev, 0, 0, m, NULL));
        if (c > m) {
            /* fixed while something follows, else to the end */
            ADD(plain_seg(m, (h || c < v) ? c - m : 0, NULL));
        }
        if (h) {
            ADD(plain_seg(c, h, "in-reencryption"));
        }
        if (c + h < v) {
            crypt_ids[ncrypt++] = id;
            ADD(reenc_crypt_seg(r->prev, r->shift + c + h, c + h, 0, NULL));
        }
    }
    crypt_ids[ncrypt++] = id;
    ADD(reenc_seg_copy(r->moved, "backup-moved-segment"));
    crypt_ids[ncrypt++] = id;
    ADD(reenc_seg_copy(r->prev, "backup-previous"));
    ADD(reenc_seg_copy(r->final, "backup-final"));
#undef ADD
    json_object_set_object_member(json_node_get_object(root), "segments",
                                  segs);
    dg = json_object_get_object_member(reenc_section(root, "digests"), dn);
    json_object_set_array_member(dg, "segments",
                                 reenc_id_array(crypt_ids, ncrypt));
    return root;
}

/*
 * The metadata without the re-encryption state: key slot, its digest,
 * requirement gone; segments as given (taken), the old key's digest bound
 * to seg_digest (-1: none).
 */
static JsonNode *dec_plain_root(Dec *d, JsonObject *segs, int seg_digest)
{
    JsonNode *root = reenc_deep_copy(d->r->root);
    g_autofree char *ks = g_strdup_printf("%d", d->r->ks_id);
    g_autofree char *dr = g_strdup_printf("%d", d->r->digest_reenc);
    g_autofree char *dn = g_strdup_printf("%d", d->digest_old);
    JsonObject *dg;

    json_object_remove_member(reenc_section(root, "keyslots"), ks);
    json_object_remove_member(reenc_section(root, "digests"), dr);
    json_object_set_object_member(json_node_get_object(root), "segments",
                                  segs);
    dg = json_object_get_object_member(reenc_section(root, "digests"), dn);
    json_object_set_array_member(dg, "segments",
                                 reenc_id_array(&seg_digest,
                                                seg_digest >= 0));
    json_object_remove_member(reenc_section(root, "config"),
                              "requirements");
    return root;
}

/* ---- parsing the state ---- */

static const char *seg_type(JsonObject *s)
{
    return json_object_get_string_member_with_default(s, "type", "");
}

static bool seg_is_dynamic(JsonObject *s)
{
    return json_object_has_member(s, "size") &&
        json_node_get_value_type(json_object_get_member(s, "size")) ==
            G_TYPE_STRING &&
        g_str_equal(json_object_get_string_member(s, "size"), "dynamic");
}

/* A crypt segment like backup-previous at physical off, logical x. */
static bool seg_is_old(Dec *d, JsonObject *s, uint64_t off, uint64_t x)
{
    uint64_t o, iv;

    return g_str_equal(seg_type(s), "crypt") &&
        reenc_get_u64(s, "segment", "offset", &o, NULL) == 0 && o == off &&
        reenc_get_u64(s, "segment", "iv_tweak", &iv, NULL) == 0 &&
        iv == x / 512 &&
        g_str_equal(json_object_get_string_member_with_default(
                        s, "encryption", ""),
                    json_object_get_string_member_with_default(
                        d->r->prev, "encryption", "")) &&
        json_object_get_int_member_with_default(s, "sector_size", 0) ==
            json_object_get_int_member_with_default(d->r->prev,
                                                    "sector_size", -1);
}

/* The reencrypt key slot and backups: what cryptsetup checks too. */
static int dec_parse(Dec *d, JsonObject *ks, Error **errp)
{
    Reenc *r = d->r;
    JsonObject *segs, *digests, *area;
    g_autoptr(GList) members = NULL;
    const char *dir, *atype;
    int prev_id = -1;
    uint64_t off, fo, mo, iv, kend;
    uint32_t block;
    int64_t flen;

    if (r->version != DEC_REQ_VERSION) {
        error_setg(errp, "LUKS2 decryption with requirement "
                   "online-reencrypt-v%d is not supported (only '"
                   DEC_REQUIREMENT "')", r->version);
        return -1;
    }
    if (reenc_slot_lookup(r->root, ks, &segs, &digests, &area, &dir, &atype,
                          errp) < 0) {
        return -1;
    }
    if (!g_str_equal(dir, "forward") ||
        !g_str_equal(atype, "datashift-checksum")) {
        error_setg(errp, "LUKS2 decryption with direction '%s' and "
                   "resilience '%s' is not supported (only forward, "
                   "datashift-checksum, as cryptsetup 2.6 writes it)",
                   dir, atype);
        return -1;
    }
    if (reenc_get_u64(area, "reencrypt keyslot area", "shift_size",
                      &r->shift, errp) < 0 ||
        reenc_get_u64(area, "reencrypt keyslot area", "offset",
                      &d->area_offset, errp) < 0 ||
        reenc_get_u64(area, "reencrypt keyslot area", "size",
                      &d->area_size, errp) < 0 ||
        luks2_json_get_hash(area, "reencrypt keyslot area", "hash",
                            &d->csum_hash, errp) < 0 ||
        luks2_json_get_uint(area, "reencrypt keyslot area", "sector_size",
                            512, 1 << 20, &block, errp) < 0 ||
        reenc_get_u64(reenc_section(r->root, "config"), "config",
                      "keyslots_size", &kend, errp) < 0) {
        return -1;
    }
    d->csum_block = block;
    d->csum_len = qcrypto_hash_digest_len(d->csum_hash);
    kend += 2 * r->hdr->bin.hdr_size;
    if (block & (block - 1) || d->area_offset < 2 * r->hdr->bin.hdr_size ||
        d->area_size > REENC_MAX_BYTES || d->area_offset > kend ||
        d->area_size > kend - d->area_offset) {
        error_setg(errp, "LUKS2 reencrypt key slot area is invalid");
        return -1;
    }
    r->prev = reenc_find_backup(segs, "backup-previous", &prev_id);
    r->final = reenc_find_backup(segs, "backup-final", NULL);
    r->moved = reenc_find_backup(segs, "backup-moved-segment", NULL);
    if (!r->prev || !r->final || !r->moved) {
        error_setg(errp, "LUKS2 re-encryption backup segments are missing");
        return -1;
    }
    flen = r->io->length(r->io->opaque, errp);
    if (flen < 0) {
        return -1;
    }
    if (reenc_get_u64(r->prev, "backup-previous", "offset", &off,
                      errp) < 0 ||
        reenc_get_u64(r->prev, "backup-previous", "iv_tweak", &iv,
                      errp) < 0 ||
        reenc_get_u64(r->final, "backup-final", "offset", &fo, errp) < 0 ||
        reenc_get_u64(r->moved, "backup-moved-segment", "offset", &mo,
                      errp) < 0 ||
        reenc_get_u64(r->moved, "backup-moved-segment", "size",
                      &r->moved_size, errp) < 0) {
        return -1;
    }
    /* Bounds first: no sum below may wrap (hostile numbers). */
    if (r->shift == 0 || r->shift > REENC_MAX_BYTES ||
        r->shift % QCRYPTO_LUKS2_AREA_ALIGN) {
        goto bad;
    }
    r->size = (uint64_t)flen > r->shift ? flen - r->shift : 0;
    if (off != r->shift || iv != 0 || !seg_is_dynamic(r->prev) ||
        fo != 0 || !g_str_equal(seg_type(r->final), "linear") ||
        !seg_is_dynamic(r->final) || mo != 0 ||
        !seg_is_old(d, r->moved, 0, 0) ||
        r->size == 0 || r->moved_size != MIN(r->shift, r->size) ||
        r->moved_size % block ||
        r->moved_size / block * d->csum_len > d->area_size) {
        goto bad;
    }
    d->digest_old = r->digest_reenc = -1;
    members = json_object_get_members(digests);
    for (GList *l = members; l; l = l->next) {
        JsonNode *n = json_object_get_member(digests, l->data);

        if (!JSON_NODE_HOLDS_OBJECT(n)) {
            continue;
        }
        if (reenc_id_array_has(json_node_get_object(n), "segments",
                               prev_id)) {
            d->digest_old = atoi(l->data);
        }
        if (reenc_id_array_has(json_node_get_object(n), "keyslots",
                               r->ks_id)) {
            r->digest_reenc = atoi(l->data);
        }
    }
    if (d->digest_old < 0 || r->digest_reenc < 0 ||
        d->digest_old == r->digest_reenc) {
        error_setg(errp, "LUKS2 re-encryption digests are missing");
        return -1;
    }
    return 0;
bad:
    error_setg(errp, "LUKS2 decryption segments are inconsistent with a "
               "data shift of %" PRIu64 " bytes and a data file of %" PRId64
               " bytes", r->shift, flen);
    return -1;
}

typedef struct DecPos {
    uint64_t c;                 /* [M, c) plain */
    uint64_t h;                 /* [c, c + h) in work */
    bool moved_zone;            /* [0, M) in work */
    bool done;                  /* all plain */
} DecPos;

/* Where the active segments say we are. */
static int dec_position(Dec *d, DecPos *p, Error **errp)
{
    JsonObject *segs = reenc_section(d->r->root, "segments");
    JsonObject *s[QCRYPTO_LUKS2_SEGMENTS_MAX];
    uint64_t m = d->r->moved_size, v = d->r->size, off, size;
    int n = 0, i = 0;

    memset(p, 0, sizeof(*p));
    for (; n < QCRYPTO_LUKS2_SEGMENTS_MAX; n++) {
        g_autofree char *k = g_strdup_printf("%d", n);
        JsonNode *node = json_object_get_member(segs, k);

        if (!node || !JSON_NODE_HOLDS_OBJECT(node)) {
            break;
        }
        s[n] = json_node_get_object(node);
        if (reenc_seg_has_flag(s[n], "backup-previous") ||
            reenc_seg_has_flag(s[n], "backup-final") ||
            reenc_seg_has_flag(s[n], "backup-moved-segment")) {
            break;
        }
        if (reenc_get_u64(s[n], "segment", "offset", &off, errp) < 0) {
            return -1;
        }
    }
#define SIZE(seg) (seg_is_dynamic(seg) ? 0 : \
        (reenc_get_u64(seg, "segment", "size", &size, NULL) < 0 || !size ? \
         UINT64_MAX : size))
#define OFF(seg) (reenc_get_u64(seg, "segment", "offset", &off, NULL), off)
    if (n == 0) {
        goto bad;
    }
    if (g_str_equal(seg_type(s[0]), "linear")) {
        /* the moved zone, or all done */
        if (OFF(s[0]) != 0) {
            goto bad;
        }
        if (n == 1 && seg_is_dynamic(s[0]) &&
            !reenc_seg_has_flag(s[0], "in-reencryption")) {
            p->done = true;
            return 0;
        }
        if (!reenc_seg_has_flag(s[0], "in-reencryption") ||
            SIZE(s[0]) != m ||
            (v > m ? n != 2 || !g_str_equal(seg_type(s[1]), "linear") ||
                     OFF(s[1]) != m || SIZE(s[1]) != 0 ||
                     reenc_seg_has_flag(s[1], "in-reencryption")
                   : n != 1)) {
            goto bad;
        }
        p->moved_zone = true;
        p->c = v;
        return 0;
    }
    /* [moved crypt][linear M..c]?[linear c..c+h in-reenc]?[crypt rest]? */
    if (!seg_is_old(d, s[i], 0, 0) || SIZE(s[i]) != m) {
        goto bad;
    }
    i++;
    p->c = m;
    if (i < n && g_str_equal(seg_type(s[i]), "linear") &&
        !reenc_seg_has_flag(s[i], "in-reencryption")) {
        size = SIZE(s[i]);
        if (OFF(s[i]) != m || size == UINT64_MAX || size > v - m) {
            goto bad;
        }
        p->c = size ? m + size : v;
        i++;
    }
    if (i < n && g_str_equal(seg_type(s[i]), "linear")) {
        size = SIZE(s[i]);
        if (OFF(s[i]) != p->c || size == 0 || size == UINT64_MAX ||
            size > d->r->shift || size > v - p->c) {
            goto bad;
        }
        p->h = size;
        i++;
    }
    if (i < n) {
        if (!seg_is_old(d, s[i], d->r->shift + p->c + p->h, p->c + p->h) ||
            !seg_is_dynamic(s[i]) || p->c + p->h >= v) {
            goto bad;
        }
        i++;
    } else if (p->c + p->h != v) {
        goto bad;
    }
    if (i != n) {
        goto bad;
    }
    return 0;
#undef SIZE
#undef OFF
bad:
    error_setg(errp, "LUKS2 re-encryption segments do not describe a "
               "forward decryption with data shift in progress");
    return -1;
}

/* ---- the key ---- */

/* Unlock the old key, check the digest, set up the cipher for the data. */
static int dec_unlock(Dec *d, const QCryptoBlockSecret *secret,
                      Error **errp)
{
    Reenc *r = d->r;
    JsonObject *segs = json_object_new();
    g_autoptr(JsonNode) plain = NULL;
    g_autofree char *json = NULL;
    g_autoptr(QCryptoLUKS2Metadata) md = NULL;
    g_autoptr(QCryptoSecureBuf) key = NULL;
    const QCryptoLUKS2Segment *seg;
    QCryptoLUKS2Cipher c;
    int slot;

    json_object_set_object_member(segs, "0", reenc_seg_copy(r->prev, NULL));
    plain = dec_plain_root(d, segs, 0);
    json = reenc_json_text(plain);
    md = qcrypto_luks2_metadata_parse(json, r->hdr->bin.hdr_size, errp);
    if (!md || qcrypto_luks2_unlock(md, secret, r->block, reenc_block_read,
                                    (void *)r->io, &key, &slot, errp) < 0 ||
        reenc_digest_check(r, key->data, key->len, NULL, 0, errp) < 0) {
        return -1;
    }
    seg = md->segments[0];
    if (qcrypto_luks2_cipher_parse(seg->encryption, key->len, &c, errp) < 0) {
        return -1;
    }
    if (r->size % seg->sector_size || r->moved_size % seg->sector_size) {
        error_setg(errp, "LUKS2 decryption: data size %" PRIu64 " is not "
                   "a multiple of the sector size %" PRIu32, r->size,
                   seg->sector_size);
        return -1;
    }
    r->block->payload_offset = r->shift;
    r->block->sector_size = seg->sector_size;
    r->block->ivgen_sector_shift = __builtin_ctzll(seg->sector_size / 512);
    r->block->iv_sector_offset = 0;
    return qcrypto_block_init_cipher(r->block, &c, key->data, key->len, errp);
}

/* ---- the zones ---- */

static int data_sync(const QCryptoReencryptIO *io, Error **errp)
{
    return io->sync(io->opaque, errp);
}

/* Decrypt logical [a, a + h) from S + a to a (a >= M, h <= S). */
static int dec_zone(Dec *d, uint64_t a, uint64_t h, uint8_t *buf,
                    Error **errp)
{
    Reenc *r = d->r;
    const QCryptoReencryptIO *io = r->io;
    g_autoptr(JsonNode) during = dec_state_root(d, a, h, false);
    g_autoptr(JsonNode) after = dec_state_root(d, a + h, 0, false);

    if (reenc_write_root(r, during, errp) < 0 ||
        io->read(io->opaque, r->shift + a, buf, h, errp) < 0 ||
        qcrypto_block_decrypt(r->block, a, buf, h, errp) < 0 ||
        io->write(io->opaque, a, buf, h, errp) < 0 ||
        data_sync(io, errp) < 0) {
        return -1;
    }
    return reenc_write_root(r, after, errp);
}

static void csum_block(Dec *d, const uint8_t *data, uint8_t *out)
{
    /* cannot fail: the algorithm was checked when the state was read */
    qcrypto_hash_bytes(d->csum_hash, data, d->csum_block, out, NULL);
}

/*
 * The moved segment [0, M), in place: checksums of its ciphertext blocks
 * first (durable), then the metadata, then the data.
 */
static int dec_moved_zone(Dec *d, uint8_t *buf, Error **errp)
{
    Reenc *r = d->r;
    const QCryptoReencryptIO *io = r->io;
    uint64_t m = r->moved_size, n = m / d->csum_block;
    g_autofree uint8_t *sums = g_malloc(n * d->csum_len);
    g_autoptr(JsonNode) during = dec_state_root(d, r->size, 0, true);

    if (io->read(io->opaque, 0, buf, m, errp) < 0) {
        return -1;
    }
    for (uint64_t i = 0; i < n; i++) {
        csum_block(d, buf + i * d->csum_block, sums + i * d->csum_len);
    }
    if (reenc_block_write(r->block, d->area_offset, sums, n * d->csum_len,
                          (void *)io, errp) < 0 ||
        reenc_hdr_sync(io, errp) < 0 ||
        reenc_write_root(r, during, errp) < 0) {
        return -1;
    }
    /* For tests only: stop with the moved zone marked, nothing written. */
    if (io->stop_at == QCRYPTO_REENCRYPT_STOP_IN_MOVED_ZONE) {
        return 1;
    }
    if (qcrypto_block_decrypt(r->block, 0, buf, m, errp) < 0 ||
        io->write(io->opaque, 0, buf, m, errp) < 0 ||
        data_sync(io, errp) < 0) {
        return -1;
    }
    return 0;
}

/*
 * The moved zone was cut short: each block whose hash still matches is
 * ciphertext (decrypt it); any other must be its plain text, which we
 * check by encrypting it back. A block that is neither means a damaged
 * checksum or damaged data: refuse before writing anything.
 */
static int dec_moved_recover(Dec *d, uint8_t *buf, Error **errp)
{
    Reenc *r = d->r;
    const QCryptoReencryptIO *io = r->io;
    uint64_t m = r->moved_size, n = m / d->csum_block, bs = d->csum_block;
    g_autofree uint8_t *sums = g_malloc(n * d->csum_len);
    g_autofree uint8_t *tmp = g_malloc(bs);
    g_autofree bool *cipher = g_new0(bool, n);
    uint8_t got[QCRYPTO_HASH_MAX_DIGEST_LEN];

    if (reenc_block_read(r->block, d->area_offset, sums, n * d->csum_len,
                         (void *)io, errp) < 0 ||
        io->read(io->opaque, 0, buf, m, errp) < 0) {
        return -1;
    }
    for (uint64_t i = 0; i < n; i++) {
        csum_block(d, buf + i * bs, got);
        if (!memcmp(got, sums + i * d->csum_len, d->csum_len)) {
            cipher[i] = true;
            continue;
        }
        memcpy(tmp, buf + i * bs, bs);
        if (qcrypto_block_encrypt(r->block, i * bs, tmp, bs, errp) < 0) {
            return -1;
        }
        csum_block(d, tmp, got);
        if (memcmp(got, sums + i * d->csum_len, d->csum_len)) {
            explicit_bzero(tmp, bs);
            error_setg(errp, "LUKS2 decryption: the hot zone checksum of "
                       "block %" PRIu64 " matches neither its ciphertext "
                       "nor its plain text: the checksums or the data are "
                       "damaged; refusing to touch the data", i);
            return -1;
        }
    }
    explicit_bzero(tmp, bs);
    for (uint64_t i = 0; i < n; i++) {
        if (cipher[i] && (qcrypto_block_decrypt(r->block, i * bs,
                                                buf + i * bs, bs,
                                                errp) < 0 ||
                          io->write(io->opaque, i * bs, buf + i * bs, bs,
                                    errp) < 0)) {
            return -1;
        }
    }
    return data_sync(io, errp);
}

/*
 * All plain: the final metadata (our own: one linear segment of the data
 * size, so that a crash before the truncation still knows it), then the
 * data file cut to V. The caller removes the header file.
 */
static int dec_finish(Dec *d, Error **errp)
{
    Reenc *r = d->r;
    JsonObject *segs = json_object_new();
    g_autoptr(JsonNode) fin = NULL;

    json_object_set_object_member(segs, "0", reenc_linear_seg(0, r->size));
    fin = dec_plain_root(d, segs, -1);
    if (reenc_write_root(r, fin, errp) < 0 ||
        r->io->truncate(r->io->opaque, r->size, errp) < 0) {
        return -1;
    }
    return data_sync(r->io, errp);
}

/* ---- the mode, for the loop of block-luks2-reencrypt-engine.c ---- */

typedef struct DecRun {
    Dec d;
    DecPos p;
    bool moved_done;            /* the moved zone is plain text too */
} DecRun;

static int dec_start(ReencRun *run, JsonObject *ks,
                     const QCryptoBlockSecret *secret, uint64_t hotzone,
                     Error **errp)
{
    Reenc *r = run->r;
    DecRun *dr = run->state = g_new0(DecRun, 1);

    dr->d.r = r;
    if (!r->io->hdr_read) {
        error_setg(errp, "LUKS2 decryption keeps the header in its own "
                   "file: give its name (--header)");
        return -1;
    }
    if (dec_parse(&dr->d, ks, errp) < 0 ||
        dec_position(&dr->d, &dr->p, errp) < 0 ||
        dec_unlock(&dr->d, secret, errp) < 0) {
        return -1;
    }
    hotzone = reenc_hotzone_size(hotzone, r->shift, r->shift,
                                 r->block->sector_size, errp);
    if (!hotzone) {
        return -1;
    }
    run->hotzone = hotzone;
    run->bufsize = MAX(MAX(hotzone, dr->p.h), r->moved_size);
    dr->moved_done = dr->p.done || dr->p.moved_zone;
    return 0;
}

/*
 * The moved zone cut short: repaired block by block from its checksums;
 * a forward zone cut short: done again (its source is intact).
 */
static int dec_recover(ReencRun *run, Error **errp)
{
    DecRun *dr = run->state;

    if (dr->p.moved_zone) {
        return dec_moved_recover(&dr->d, run->buf, errp);
    }
    if (!dr->p.done && dr->p.h &&
        dec_zone(&dr->d, dr->p.c, dr->p.h, run->buf, errp) < 0) {
        return -1;
    }
    dr->p.c += dr->p.h;
    return 0;
}

/* Forwards from M to the end, then the moved zone [0, M) (len 0 here). */
static bool dec_next(ReencRun *run, uint64_t *off, uint64_t *len)
{
    DecRun *dr = run->state;

    if (dr->moved_done) {
        return false;
    }
    if (dr->p.c < run->r->size) {
        *off = dr->p.c;
        *len = MIN(run->hotzone, run->r->size - dr->p.c);
    } else {
        *off = 0;
        *len = 0;
    }
    return true;
}

static int dec_zone_run(ReencRun *run, uint64_t off, uint64_t len,
                        Error **errp)
{
    DecRun *dr = run->state;
    int ret;

    if (!len) {
        ret = dec_moved_zone(&dr->d, run->buf, errp);
        dr->moved_done = ret == 0;
        return ret;
    }
    if (dec_zone(&dr->d, off, len, run->buf, errp) < 0) {
        return -1;
    }
    dr->p.c = off + len;
    return 0;
}

static uint64_t dec_done(ReencRun *run)
{
    DecRun *dr = run->state;

    return dr->p.c - run->r->moved_size;
}

static int dec_finish_run(ReencRun *run, Error **errp)
{
    DecRun *dr = run->state;

    return dec_finish(&dr->d, errp);
}

const ReencMode reenc_mode_decrypt = {
    .name = "decrypt",
    .start = dec_start,
    .recover = dec_recover,
    .next = dec_next,
    .zone = dec_zone_run,
    .done = dec_done,
    .finish = dec_finish_run,
};

/* ---- init ---- */

/* The I/O of io, but with the header read from the data file. */
static QCryptoReencryptIO io_header_in_data(const QCryptoReencryptIO *io)
{
    QCryptoReencryptIO in_data = *io;

    in_data.hdr_read = NULL;
    in_data.hdr_write = NULL;
    in_data.hdr_sync = NULL;
    return in_data;
}

/*
 * The image's one crypt segment (offset S, to the end, no IV tweak) and
 * its digest: what a LUKS2 image we can decrypt looks like.
 */
static int dec_check_plain(const QCryptoLUKS2Metadata *md, Error **errp)
{
    const QCryptoLUKS2Segment *seg = md->segments[0];

    for (int i = 1; i < QCRYPTO_LUKS2_SEGMENTS_MAX; i++) {
        if (md->segments[i]) {
            seg = NULL;
        }
    }
    if (!seg || !seg->size_dynamic || seg->iv_tweak || seg->offset == 0 ||
        seg->offset % QCRYPTO_LUKS2_AREA_ALIGN ||
        qcrypto_luks2_segment_digest(md, 0) < 0) {
        error_setg(errp, "Only a LUKS2 image with one encrypted segment "
                   "from its payload offset to the end can be decrypted "
                   "in place");
        return -1;
    }
    return 0;
}

/* The reencrypt key slot: datashift-checksum over the free key-slot area. */
static int dec_init_keyslot(Dec *d, const QCryptoLUKS2Metadata *md,
                            Error **errp)
{
    Reenc *r = d->r;
    JsonObject *area;
    uint64_t area_off = 2 * md->hdr_size;
    uint64_t end = qcrypto_luks2_keyslots_end(md);

    r->ks_id = -1;
    for (int i = 0; i < QCRYPTO_LUKS2_KEYSLOTS_MAX; i++) {
        const QCryptoLUKS2Keyslot *k = md->keyslots[i];

        if (!k && r->ks_id < 0) {
            r->ks_id = i;
        }
        if (k) {
            area_off = MAX(area_off, k->area_offset + k->area_size);
        }
    }
    area_off = qcrypto_luks2_round_up(area_off, QCRYPTO_LUKS2_AREA_ALIGN);
    d->csum_block = r->moved_size % DEC_CSUM_BLOCK ? 512 : DEC_CSUM_BLOCK;
    d->csum_hash = DEC_CSUM_HASH;
    d->csum_len = qcrypto_hash_digest_len(d->csum_hash);
    d->area_offset = area_off;
    d->area_size = end > area_off ? end - area_off : 0;
    if (r->ks_id < 0 ||
        d->area_size < r->moved_size / d->csum_block * d->csum_len) {
        error_setg(errp, "No room in the LUKS2 key-slot area for the "
                   "decryption's checksums (%" PRIu64 " bytes needed)",
                   r->moved_size / d->csum_block * d->csum_len);
        return -1;
    }
    /* member order as cryptsetup writes it */
    area = json_object_new();
    reenc_set_u64(area, "offset", d->area_offset);
    reenc_set_u64(area, "size", d->area_size);
    json_object_set_string_member(area, "type", "datashift-checksum");
    json_object_set_string_member(area, "hash",
                                  qcrypto_hash_algo_name(d->csum_hash));
    json_object_set_int_member(area, "sector_size", d->csum_block);
    reenc_set_u64(area, "shift_size", r->shift);
    reenc_add_keyslot(r, reenc_section(r->root, "keyslots"), area,
                      reenc_mode_decrypt.name,
                      "forward");
    return 0;
}

/*
 * Backups, requirement and the digest over it all (the reencrypt key
 * slot must be in r->root already).
 */
static int dec_init_metadata(Dec *d, const QCryptoLUKS2Metadata *md,
                             const uint8_t *key, size_t nkey, Error **errp)
{
    Reenc *r = d->r;
    JsonObject *top = json_node_get_object(r->root);
    JsonObject *digests = reenc_section(r->root, "digests");
    JsonObject *seg0 = json_object_get_object_member(
        reenc_section(r->root, "segments"), "0");
    JsonObject *segs = json_object_new(), *reqo = json_object_new(), *dg;
    JsonArray *mand = json_array_new();
    g_autofree char *dname = NULL;
    uint8_t salt[REENC_DIGEST_SALT_LEN], dig[32];
    uint64_t iters;
    int ret;

    d->digest_old = qcrypto_luks2_segment_digest(md, 0);
    json_object_set_object_member(segs, "0",
                                  reenc_seg_copy(seg0, "backup-moved-segment"));
    json_object_set_object_member(segs, "1",
                                  reenc_seg_copy(seg0, "backup-previous"));
    json_object_set_object_member(segs, "2",
                                  plain_seg(0, 0, "backup-final"));
    r->moved = json_object_get_object_member(segs, "0");
    reenc_set_u64(r->moved, "offset", 0);
    reenc_set_u64(r->moved, "size", r->moved_size);
    r->prev = json_object_get_object_member(segs, "1");
    r->final = json_object_get_object_member(segs, "2");
    json_object_set_object_member(top, "segments", segs);

    json_array_add_string_element(mand, DEC_REQUIREMENT);
    json_object_set_array_member(reqo, "mandatory", mand);
    json_object_set_object_member(reenc_section(r->root, "config"),
                                  "requirements", reqo);

    dname = g_strdup_printf("%d", d->digest_old);
    iters = json_object_get_int_member(
        json_object_get_object_member(digests, dname), "iterations");
    g_free(dname);
    for (r->digest_reenc = 0;; r->digest_reenc++) {
        dname = g_strdup_printf("%d", r->digest_reenc);
        if (!json_object_has_member(digests, dname)) {
            break;
        }
        g_free(dname);
    }
    r->version = DEC_REQ_VERSION;
    ret = qcrypto_random_bytes(salt, sizeof(salt), errp);
    if (ret == 0) {
        ret = reenc_digest_compute(r, QCRYPTO_HASH_ALGO_SHA256, iters, salt,
                                   sizeof(salt), key, nkey, NULL, 0, dig,
                                   sizeof(dig), errp);
    }
    if (ret < 0) {
        return -1;
    }
    dg = reenc_pbkdf2_digest("sha256", iters, salt, sizeof(salt), dig,
                             sizeof(dig), reenc_id_array(&r->ks_id, 1),
                             json_array_new());
    json_object_set_object_member(digests, dname, dg);
    return 0;
}

/* Copy the header area of the data file to the (empty) header file. */
static int dec_copy_header(const QCryptoReencryptIO *io, uint64_t len,
                           Error **errp)
{
    const size_t chunk = 1 << 20;
    g_autofree uint8_t *buf = g_malloc(chunk);

    for (uint64_t done = 0; done < len; done += chunk) {
        size_t n = MIN(chunk, len - done);

        if (io->read(io->opaque, done, buf, n, errp) < 0 ||
            io->hdr_write(io->opaque, done, buf, n, errp) < 0) {
            return -1;
        }
    }
    return io->hdr_sync(io->opaque, errp);
}

/*
 * Load the header (from the data file, or its own file) and unlock it:
 * md and key are the caller's.
 */
static int dec_load_plain(Reenc *r, const QCryptoReencryptIO *io,
                          const QCryptoBlockSecret *secret,
                          QCryptoLUKS2Metadata **md, QCryptoSecureBuf **key,
                          Error **errp)
{
    int slot;

    if (reenc_load(r, io, errp) < 0) {
        return -1;
    }
    *md = qcrypto_luks2_metadata_parse(r->hdr->json, r->hdr->bin.hdr_size,
                                       errp);
    if (!*md || dec_check_plain(*md, errp) < 0 ||
        qcrypto_luks2_unlock(*md, secret, r->block, reenc_block_read,
                             (void *)r->io, key, &slot, errp) < 0) {
        return -1;
    }
    return 0;
}

/*
 * A LUKS1 image: its header converted to LUKS2 (as cryptsetup convert
 * --type luks2 does) straight into the header file. Being detached, the
 * converted header needs no room in the image, so QEMU's LUKS1 layout
 * (key slots packed up to a payload at 4040 sectors), which cryptsetup
 * convert refuses, converts too. The passphrase is checked on the result
 * before anything is written to the image.
 */
static int dec_export_luks1(const uint8_t *phdr,
                            const QCryptoBlockSecret *secret,
                            const QCryptoReencryptIO *io,
                            const QCryptoReencryptIO *in_data, Error **errp)
{
    Reenc r = { 0 };
    g_autoptr(QCryptoLUKS2Metadata) md = NULL;
    g_autoptr(QCryptoSecureBuf) key = NULL;
    uint8_t *buf = NULL;
    uint64_t len = 0;
    int64_t flen = io->length(io->opaque, errp);
    int ret = -1;

    if (flen < 0 ||
        qcrypto_luks2_from_luks1(phdr, flen, reenc_block_read,
                                 (void *)in_data, &buf, &len, errp) < 0) {
        return -1;
    }
    if (io->hdr_write(io->opaque, 0, buf, len, errp) == 0 &&
        io->hdr_sync(io->opaque, errp) == 0 &&
        dec_load_plain(&r, io, secret, &md, &key, errp) == 0) {
        ret = 0;
    }
    /* key slot material: not a secret alone, wiped all the same */
    explicit_bzero(buf, len);
    g_free(buf);
    reenc_clear(&r);
    return ret;
}

int qcrypto_reencrypt_decrypt_export_header(const QCryptoBlockSecret *secret,
                                            const QCryptoReencryptIO *io,
                                            Error **errp)
{
    QCryptoReencryptIO in_data = io_header_in_data(io);
    Reenc r = { 0 };
    g_autoptr(QCryptoLUKS2Metadata) md = NULL;
    g_autoptr(QCryptoSecureBuf) key = NULL;
    uint8_t phdr[QCRYPTO_LUKS_HEADER_LEN];
    int ret = -1;

    if (!io->hdr_read || !io->hdr_write || !io->hdr_sync) {
        error_setg(errp, "In-place decryption needs a file for the header");
        return -1;
    }
    if (in_data.read(in_data.opaque, 0, phdr, sizeof(phdr), errp) < 0) {
        return -1;
    }
    if (!memcmp(phdr, QCRYPTO_LUKS_MAGIC, QCRYPTO_LUKS_MAGIC_LEN) &&
        phdr[QCRYPTO_LUKS_MAGIC_LEN] == 0 &&
        phdr[QCRYPTO_LUKS_MAGIC_LEN + 1] == 1) {
        return dec_export_luks1(phdr, secret, io, &in_data, errp);
    }
    /* the passphrase is checked before anything is written */
    if (dec_load_plain(&r, &in_data, secret, &md, &key, errp) == 0 &&
        dec_copy_header(io, qcrypto_luks2_keyslots_end(md), errp) == 0) {
        ret = 0;
    }
    reenc_clear(&r);
    return ret;
}

int qcrypto_reencrypt_decrypt_init(const QCryptoBlockSecret *secret,
                                   const QCryptoReencryptIO *io,
                                   Error **errp)
{
    Reenc r = { 0 };
    Dec d = { .r = &r };
    g_autoptr(QCryptoLUKS2Metadata) md = NULL;
    g_autoptr(QCryptoSecureBuf) key = NULL;
    g_autoptr(JsonNode) state = NULL;
    const QCryptoLUKS2Segment *seg;
    int64_t flen = io->length(io->opaque, errp);
    int ret = -1;

    if (flen < 0) {
        return -1;
    }
    if (!io->hdr_read || !io->hdr_write || !io->hdr_sync) {
        error_setg(errp, "In-place decryption needs a file for the header");
        return -1;
    }
    if (dec_load_plain(&r, io, secret, &md, &key, errp) < 0) {
        goto out;
    }
    seg = md->segments[0];
    r.shift = seg->offset;
    if ((uint64_t)flen <= r.shift || (flen - r.shift) % seg->sector_size) {
        error_setg(errp, "The data file (%" PRId64 " bytes) holds no whole "
                   "sectors of %" PRIu32 " bytes after the payload offset "
                   "%" PRIu64, flen, seg->sector_size, r.shift);
        goto out;
    }
    r.size = flen - r.shift;
    /* An encryption of ours that cryptsetup finished: the data ends first. */
    if (qcrypto_luks2_data_size(md, seg)) {
        r.size = MIN(r.size, qcrypto_luks2_data_size(md, seg));
    }
    r.moved_size = MIN(r.shift, r.size);
    /*
     * The size in the header file too: if cryptsetup finishes this run,
     * its last segment is "dynamic" over a file S bytes too long, and
     * --resume-only cuts it to this (DONE_UNSIZED below).
     */
    if (dec_init_keyslot(&d, md, errp) < 0 ||
        dec_init_metadata(&d, md, key->data, key->len, errp) < 0 ||
        reenc_add_size_token(r.root, r.size, errp) < 0) {
        goto out;
    }
    state = dec_state_root(&d, r.moved_size, 0, false);
    /*
     * Only the start of the data file is written, from past S: the source
     * stays intact, so a crash before the metadata below is durable leaves
     * the plain header in its file and this can be done again.
     */
    if (reenc_io_copy(io, r.shift, 0, r.moved_size, errp) < 0 ||
        io->sync(io->opaque, errp) < 0 ||
        reenc_write_root(&r, state, errp) < 0) {
        goto out;
    }
    ret = 0;
out:
    reenc_clear(&r);
    return ret;
}

/* ---- what the header file holds ---- */

int qcrypto_reencrypt_decrypt_state(const QCryptoReencryptIO *io,
                                    QCryptoReencryptDecryptState *state,
                                    uint64_t *size, Error **errp)
{
    Reenc r = { 0 };
    JsonObject *config, *segs, *s0;
    Error *local = NULL;

    *state = QCRYPTO_REENCRYPT_DECRYPT_NONE;
    *size = 0;
    if (reenc_load(&r, io, &local) < 0) {
        /* not a LUKS2 header: the caller says what it expected */
        error_free(local);
        reenc_clear(&r);
        return 0;
    }
    config = reenc_section(r.root, "config");
    segs = reenc_section(r.root, "segments");
    if (!config || !segs) {
        reenc_clear(&r);
        return 0;
    }
    s0 = json_object_has_member(segs, "1") ? NULL
        : json_object_get_object_member(segs, "0");
    if (json_object_has_member(config, "requirements")) {
        *state = QCRYPTO_REENCRYPT_DECRYPT_RUNNING;
    } else if (s0 && g_str_equal(seg_type(s0), "linear")) {
        if (seg_is_dynamic(s0)) {
            /* cryptsetup's finish; our token says where the data ends */
            *size = reenc_size_token(r.root);
            *state = *size ? QCRYPTO_REENCRYPT_DECRYPT_DONE
                           : QCRYPTO_REENCRYPT_DECRYPT_DONE_UNSIZED;
        } else if (reenc_get_u64(s0, "segment", "size", size, errp) == 0) {
            *state = QCRYPTO_REENCRYPT_DECRYPT_DONE;
        } else {
            reenc_clear(&r);
            return -1;
        }
    } else if (s0 && g_str_equal(seg_type(s0), "crypt")) {
        uint64_t ks_size;

        *state = QCRYPTO_REENCRYPT_DECRYPT_PLAIN;
        /* A whole export holds the key-slot areas: where they end. */
        if (reenc_get_u64(config, "config", "keyslots_size", &ks_size,
                          NULL) == 0 && ks_size <= REENC_MAX_BYTES) {
            *size = 2 * r.hdr->bin.hdr_size + ks_size;
        }
    }
    reenc_clear(&r);
    return 0;
}
