/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A new volume key for a LUKS2 image, in place, with cryptsetup 2.6's
 * re-encryption metadata (reencrypt key slot mode "reencrypt", direction
 * "forward"; lib/luks2/luks2_reencrypt.c). docs/reencrypt.md, section "New
 * volume key", tells the whole story; what every mode shares is in
 * block-luks2-reencrypt-util.c.
 *
 * Terms: D is the data offset (the old and the new segment both start
 * there), V the data bytes (the file length - D). Logical byte x lives at
 * D + x before and after; its IV counts 512-byte units from x = 0.
 *
 * The active segments between hot zones, as cryptsetup writes them:
 *
 *   at init        [old crypt D, dynamic]
 *   a bytes done   [new crypt D, a][old crypt D + a, dynamic]
 *   zone [a, a+h)  [new D, a][new D + a, h, in-reencryption][old D + a + h]
 *   all done       [new crypt D, dynamic]
 *
 * plus "backup-previous" (the old segment) and "backup-final" (the new).
 * The old key's digest covers the old segments and backup-previous, the
 * new key's the new ones and backup-final; the zone belongs to both.
 *
 * One hot zone: its old ciphertext is read; the resilience data goes to
 * the reencrypt key slot's area and is synced (checksum: one hash per
 * block of that ciphertext; journal: the ciphertext itself); the zone is
 * marked in the metadata, synced; re-encrypted, written, synced; recorded
 * as done, synced. A crash inside a zone is repaired from the resilience
 * data: with checksums, a block whose hash still matches is old (and is
 * re-encrypted), any other is new already; with the journal, the whole
 * zone is done again from the copy. Resilience "none" writes nothing but
 * the metadata after each zone, without syncs: a crash inside a zone loses
 * that zone, and is refused.
 */
#include <stdlib.h>
#include <string.h>

#include "crypto/pbkdf.h"
#include "crypto/random.h"
#include "crypto/reencryptpriv.h"
#include "block-luks2-json.h"

/* cryptsetup 2.6's LUKS2_REENCRYPT_REQ_VERSION for a new volume key */
#define REKEY_REQ_VERSION 2
#define REKEY_REQUIREMENT "online-reencrypt-v2"
/* New key slots as block-luks2.c makes them (cryptsetup's defaults). */
#define REKEY_STRIPES 4000
#define REKEY_ITER_TIME_MS 2000
#define REKEY_MEMORY_KIB (1024 * 1024)
/*
 * Our default hot zone for checksum and none: a few large zones, a few
 * syncs. (cryptsetup: up to 1 GiB, or a quarter of the RAM, with
 * checksums; 20 MiB with none.) The journal's zone is its area.
 */
#define REKEY_HOTZONE_DEFAULT (64ull << 20)
/*
 * cryptsetup's checksum block: the largest of both sector sizes and the
 * device block (4 KiB for a file): reencrypt_get_alignment().
 */
#define REKEY_CSUM_BLOCK 4096
#define REKEY_CSUM_BLOCK_MAX (1u << 20)

static const char *const rekey_resilience_names[] = {
    [QCRYPTO_REENCRYPT_RESILIENCE_CHECKSUM] = "checksum",
    [QCRYPTO_REENCRYPT_RESILIENCE_JOURNAL] = "journal",
    [QCRYPTO_REENCRYPT_RESILIENCE_NONE] = "none",
};

typedef struct Rekey {
    Reenc *r;                   /* r->size is V, r->block the old key */
    QCryptoBlock *newblock;     /* the new key */
    int digest_old;
    uint64_t offset;            /* D */
    QCryptoReencryptResilience res;
    QCryptoHashAlgo csum_hash;
    size_t csum_len;
    uint32_t csum_block;
    uint64_t area_offset, area_size;
    uint32_t align;             /* zones start and end on this */
} Rekey;

/* ---- metadata ---- */

/* A segment like tmpl, for logical [x, x + size) (size 0: "dynamic"). */
static JsonObject *rekey_seg(Rekey *k, JsonObject *tmpl, uint64_t x,
                             uint64_t size, const char *flag)
{
    return reenc_crypt_seg(tmpl, k->offset + x, x, size, flag);
}

static JsonObject *rekey_digest(JsonNode *root, int id)
{
    g_autofree char *s = g_strdup_printf("%d", id);

    return json_object_get_object_member(reenc_section(root, "digests"), s);
}

/*
 * The metadata with [0, pos) under the new key, the zone [pos, pos + zone)
 * in re-encryption, the rest under the old key.
 */
static JsonNode *rekey_state_root(Rekey *k, uint64_t pos, uint64_t zone)
{
    Reenc *r = k->r;
    JsonNode *root = reenc_deep_copy(r->root);
    JsonObject *segs = json_object_new();
    int old_ids[3], new_ids[3], nold = 0, nnew = 0, id = 0;

#define ADD(o) do { g_autofree char *key_ = g_strdup_printf("%d", id++); \
        json_object_set_object_member(segs, key_, (o)); } while (0)
    if (pos) {
        new_ids[nnew++] = id;
        /* all done: "dynamic" again, as cryptsetup writes it */
        ADD(rekey_seg(k, r->final, 0, pos == r->size ? 0 : pos, NULL));
    }
    if (zone) {
        new_ids[nnew++] = old_ids[nold++] = id;
        ADD(rekey_seg(k, r->final, pos, zone, "in-reencryption"));
    }
    if (pos + zone < r->size) {
        old_ids[nold++] = id;
        ADD(rekey_seg(k, r->prev, pos + zone, 0, NULL));
    }
    old_ids[nold++] = id;
    ADD(reenc_seg_copy(r->prev, "backup-previous"));
    new_ids[nnew++] = id;
    ADD(reenc_seg_copy(r->final, "backup-final"));
#undef ADD
    json_object_set_object_member(json_node_get_object(root), "segments",
                                  segs);
    json_object_set_array_member(rekey_digest(root, k->digest_old),
                                 "segments", reenc_id_array(old_ids, nold));
    json_object_set_array_member(rekey_digest(root, r->digest_new),
                                 "segments", reenc_id_array(new_ids, nnew));
    return root;
}

/* Drop id from the id array o[key] (if there). */
static void rekey_array_drop(JsonObject *o, const char *key, int id)
{
    JsonArray *a, *kept;

    if (!o || !json_object_has_member(o, key) ||
        !JSON_NODE_HOLDS_ARRAY(json_object_get_member(o, key))) {
        return;
    }
    a = json_object_get_array_member(o, key);
    kept = json_array_new();
    for (guint i = 0; i < json_array_get_length(a); i++) {
        JsonNode *n = json_array_get_element(a, i);

        if (json_node_get_value_type(n) != G_TYPE_STRING ||
            atoi(json_node_get_string(n)) != id) {
            json_array_add_element(kept, json_node_copy(n));
        }
    }
    json_object_set_array_member(o, key, kept);
}

/* A key-slot area to overwrite once it is unreferenced. */
typedef struct RekeyArea {
    uint64_t offset, size;
} RekeyArea;

static void rekey_note_area(JsonObject *keyslots, const char *id,
                            GArray *areas)
{
    JsonObject *ks = luks2_json_get_object(keyslots, "keyslots", id, NULL);
    JsonObject *a = ks ? luks2_json_get_object(ks, "keyslot", "area", NULL)
                       : NULL;
    RekeyArea ra;

    if (a && reenc_get_u64(a, "area", "offset", &ra.offset, NULL) == 0 &&
        reenc_get_u64(a, "area", "size", &ra.size, NULL) == 0) {
        g_array_append_val(areas, ra);
    }
}

/*
 * The metadata when done: backup-final as segment 0; the old key's key
 * slots and digest, the reencrypt key slot, its digest and the
 * requirement gone. The areas to wipe afterwards go to areas.
 */
static JsonNode *rekey_final_root(Rekey *k, GArray *areas)
{
    Reenc *r = k->r;
    JsonNode *root = reenc_deep_copy(r->root);
    JsonObject *keyslots = reenc_section(root, "keyslots");
    JsonObject *digests = reenc_section(root, "digests");
    JsonObject *tokens = reenc_section(root, "tokens");
    JsonObject *segs = json_object_new();
    JsonObject *dg_old = rekey_digest(root, k->digest_old);
    g_autoptr(GList) members = json_object_get_members(keyslots);
    g_autoptr(GList) token_ids = tokens ? json_object_get_members(tokens)
                                        : NULL;
    g_autofree char *dr = g_strdup_printf("%d", r->digest_reenc);
    g_autofree char *dold = g_strdup_printf("%d", k->digest_old);
    int zero = 0;

    for (GList *l = members; l; l = l->next) {
        int id = atoi(l->data);

        if (!reenc_id_array_has(dg_old, "keyslots", id) &&
            id != r->ks_id) {
            continue;
        }
        rekey_note_area(keyslots, l->data, areas);
        json_object_remove_member(keyslots, l->data);
        for (GList *t = token_ids; t; t = t->next) {
            JsonNode *n = json_object_get_member(tokens, t->data);

            if (JSON_NODE_HOLDS_OBJECT(n)) {
                rekey_array_drop(json_node_get_object(n), "keyslots", id);
            }
        }
    }
    json_object_remove_member(digests, dr);
    json_object_remove_member(digests, dold);
    json_object_set_object_member(segs, "0", reenc_seg_copy(r->final, NULL));
    json_object_set_object_member(json_node_get_object(root), "segments",
                                  segs);
    json_object_set_array_member(rekey_digest(root, r->digest_new),
                                 "segments", reenc_id_array(&zero, 1));
    json_object_remove_member(reenc_section(root, "config"), "requirements");
    return root;
}

/*
 * The metadata as a plain LUKS2 image of one segment (seg) bound to
 * digest, for unlocking its key with the ordinary LUKS2 code.
 */
static JsonNode *rekey_view_root(Rekey *k, JsonObject *seg, int digest)
{
    Reenc *r = k->r;
    JsonNode *root = reenc_deep_copy(r->root);
    JsonObject *digests = reenc_section(root, "digests");
    JsonObject *segs = json_object_new();
    g_autofree char *ks = g_strdup_printf("%d", r->ks_id);
    g_autofree char *dr = g_strdup_printf("%d", r->digest_reenc);
    g_autoptr(GList) members = NULL;
    int zero = 0;

    json_object_remove_member(reenc_section(root, "keyslots"), ks);
    json_object_remove_member(digests, dr);
    json_object_remove_member(reenc_section(root, "config"), "requirements");
    json_object_set_object_member(segs, "0", reenc_seg_copy(seg, NULL));
    json_object_set_object_member(json_node_get_object(root), "segments",
                                  segs);
    members = json_object_get_members(digests);
    for (GList *l = members; l; l = l->next) {
        JsonNode *n = json_object_get_member(digests, l->data);

        /* not validated yet: the parser of the view refuses the rest */
        if (JSON_NODE_HOLDS_OBJECT(n)) {
            json_object_set_array_member(
                json_node_get_object(n), "segments",
                reenc_id_array(&zero, atoi(l->data) == digest));
        }
    }
    return root;
}

/* ---- I/O ---- */

/* Write root as both header copies; synced unless resilience is none. */
static int rekey_write_root(Rekey *k, JsonNode *root, Error **errp)
{
    Reenc *r = k->r;
    g_autofree char *json = NULL;

    if (k->res != QCRYPTO_REENCRYPT_RESILIENCE_NONE) {
        return reenc_write_root(r, root, errp);
    }
    json = reenc_json_text(root);
    return qcrypto_luks2_header_write(r->hdr, json, r->block,
                                      reenc_block_write, NULL, (void *)r->io,
                                      errp);
}

/* The hash of every csum_block bytes of buf into sums. */
static int rekey_checksums(Rekey *k, const uint8_t *buf, uint64_t len,
                           uint8_t *sums, Error **errp)
{
    g_autoptr(QCryptoHash) h = qcrypto_hash_new(k->csum_hash, errp);

    if (!h) {
        return -1;
    }
    for (uint64_t i = 0; i < len / k->csum_block; i++) {
        qcrypto_hash_update(h, buf + i * k->csum_block, k->csum_block);
        qcrypto_hash_finalize(h, sums + i * k->csum_len);
    }
    return 0;
}

/* The most bytes one zone may have: what its resilience data can cover. */
static uint64_t rekey_zone_capacity(Rekey *k)
{
    switch (k->res) {
    case QCRYPTO_REENCRYPT_RESILIENCE_CHECKSUM:
        return k->area_size / k->csum_len * k->csum_block;
    case QCRYPTO_REENCRYPT_RESILIENCE_JOURNAL:
        return k->area_size - k->area_size % k->align;
    default:
        return REENC_MAX_BYTES;
    }
}

/* Store the resilience data of the zone whose old ciphertext is buf. */
static int rekey_protect(Rekey *k, const uint8_t *buf, uint64_t len,
                         Error **errp)
{
    const QCryptoReencryptIO *io = k->r->io;
    g_autofree uint8_t *sums = NULL;
    size_t nsums;

    if (k->res == QCRYPTO_REENCRYPT_RESILIENCE_JOURNAL) {
        if (io->write(io->opaque, k->area_offset, buf, len, errp) < 0) {
            return -1;
        }
    } else {
        nsums = len / k->csum_block * k->csum_len;
        sums = g_malloc(nsums);
        if (rekey_checksums(k, buf, len, sums, errp) < 0 ||
            io->write(io->opaque, k->area_offset, sums, nsums, errp) < 0) {
            return -1;
        }
    }
    return io->sync(io->opaque, errp);
}

/* Old ciphertext of logical [pos, pos + len) in buf to new, in place. */
static int rekey_crypt(Rekey *k, uint64_t pos, uint8_t *buf, uint64_t len,
                       Error **errp)
{
    if (qcrypto_block_decrypt(k->r->block, pos, buf, len, errp) < 0 ||
        qcrypto_block_encrypt(k->newblock, pos, buf, len, errp) < 0) {
        return -1;
    }
    return 0;
}

/*
 * Re-encrypt logical [pos, pos + len), all of it under the old key, and
 * record it done, except for the last zone: the final metadata follows it
 * directly (rekey_finish()), never the "all done" state in between, which
 * cryptsetup 2.6.1 would resume by re-encrypting the whole image a second
 * time, with the wrong key (docs/reencrypt.md).
 */
static int rekey_zone(Rekey *k, uint64_t pos, uint64_t len, uint8_t *buf,
                      Error **errp)
{
    const QCryptoReencryptIO *io = k->r->io;
    bool safe = k->res != QCRYPTO_REENCRYPT_RESILIENCE_NONE;
    g_autoptr(JsonNode) during = rekey_state_root(k, pos, len);
    g_autoptr(JsonNode) after = rekey_state_root(k, pos + len, 0);

    if (io->read(io->opaque, k->offset + pos, buf, len, errp) < 0) {
        return -1;
    }
    /* The resilience data durable before the metadata that uses it. */
    if (safe && (rekey_protect(k, buf, len, errp) < 0 ||
                 reenc_write_root(k->r, during, errp) < 0)) {
        return -1;
    }
    if (rekey_crypt(k, pos, buf, len, errp) < 0 ||
        io->write(io->opaque, k->offset + pos, buf, len, errp) < 0 ||
        (safe && io->sync(io->opaque, errp) < 0)) {
        return -1;
    }
    return pos + len < k->r->size ? rekey_write_root(k, after, errp) : 0;
}

/*
 * A checksum block [pos, pos + csum_block) whose hash is not the old
 * ciphertext's must be the new ciphertext, whole: taken back to the old
 * key (the sector ciphers are deterministic), it must give the hash
 * stored for it. A block written in part (a torn write: half new, half
 * old) gives neither; it is refused, before anything is written, rather
 * than left as wrong data.
 */
static int rekey_check_new(Rekey *k, uint64_t pos, const uint8_t *block,
                           const uint8_t *old_sum, Error **errp)
{
    uint8_t *tmp = reenc_zone_buf_new(k->csum_block);
    g_autofree uint8_t *sum = g_malloc(k->csum_len);
    int ret = -1;

    memcpy(tmp, block, k->csum_block);
    if (qcrypto_block_decrypt(k->newblock, pos, tmp, k->csum_block,
                              errp) < 0 ||
        qcrypto_block_encrypt(k->r->block, pos, tmp, k->csum_block,
                              errp) < 0 ||
        rekey_checksums(k, tmp, k->csum_block, sum, errp) < 0) {
        goto out;
    }
    if (memcmp(sum, old_sum, k->csum_len)) {
        error_setg(errp, "LUKS2 re-encryption: bytes %" PRIu64 "..%" PRIu64
                   " of the data are neither the old ciphertext nor the "
                   "new one (a write cut short inside a block?); refusing "
                   "to resume rather than write wrong data",
                   pos, pos + k->csum_block);
        goto out;
    }
    ret = 0;
out:
    reenc_zone_buf_free(tmp, k->csum_block);
    return ret;
}

/*
 * A zone cut short by a crash: [pos, pos + len) holds old and new blocks.
 * Finish it from the resilience data and record it done.
 */
static int rekey_recover(Rekey *k, uint64_t pos, uint64_t len, uint8_t *buf,
                         Error **errp)
{
    const QCryptoReencryptIO *io = k->r->io;
    g_autoptr(JsonNode) after = rekey_state_root(k, pos + len, 0);
    g_autofree uint8_t *sums = NULL, *got = NULL;
    size_t nsums;

    switch (k->res) {
    case QCRYPTO_REENCRYPT_RESILIENCE_JOURNAL:
        /* The journal holds the zone's old ciphertext: do it all again. */
        if (io->read(io->opaque, k->area_offset, buf, len, errp) < 0 ||
            rekey_crypt(k, pos, buf, len, errp) < 0) {
            return -1;
        }
        break;
    case QCRYPTO_REENCRYPT_RESILIENCE_CHECKSUM:
        nsums = len / k->csum_block * k->csum_len;
        sums = g_malloc(nsums);
        got = g_malloc(nsums);
        if (io->read(io->opaque, k->area_offset, sums, nsums, errp) < 0 ||
            io->read(io->opaque, k->offset + pos, buf, len, errp) < 0 ||
            rekey_checksums(k, buf, len, got, errp) < 0) {
            return -1;
        }
        for (uint64_t i = 0; i < len / k->csum_block; i++) {
            uint64_t b = i * k->csum_block;

            /* Still the old ciphertext: re-encrypt; else it must be new. */
            if (!memcmp(got + i * k->csum_len, sums + i * k->csum_len,
                        k->csum_len)) {
                if (rekey_crypt(k, pos + b, buf + b, k->csum_block,
                                errp) < 0) {
                    return -1;
                }
            } else if (rekey_check_new(k, pos + b, buf + b,
                                       sums + i * k->csum_len, errp) < 0) {
                return -1;
            }
        }
        break;
    default:
        error_setg(errp, "LUKS2 re-encryption was interrupted inside a hot "
                   "zone (bytes %" PRIu64 "..%" PRIu64 " of the data) with "
                   "resilience 'none': that zone cannot be recovered",
                   pos, pos + len);
        return -1;
    }
    if (io->write(io->opaque, k->offset + pos, buf, len, errp) < 0 ||
        io->sync(io->opaque, errp) < 0) {
        return -1;
    }
    /* The last zone: the final metadata comes next (see rekey_zone()). */
    return pos + len < k->r->size ? rekey_write_root(k, after, errp) : 0;
}

/* ---- reading the state ---- */

static bool rekey_same_cipher(JsonObject *a, JsonObject *b)
{
    return g_str_equal(
        json_object_get_string_member_with_default(a, "encryption", "a"),
        json_object_get_string_member_with_default(b, "encryption", "b")) &&
        json_object_get_int_member_with_default(a, "sector_size", 0) ==
        json_object_get_int_member_with_default(b, "sector_size", 1);
}

/* A backup segment that must be "crypt" at D, dynamic, iv_tweak 0. */
static int rekey_check_backup(Rekey *k, JsonObject *seg, const char *what,
                              Error **errp)
{
    uint64_t off, tweak;
    uint32_t ss;

    if (!g_str_equal(json_object_get_string_member_with_default(
                         seg, "type", ""), "crypt") ||
        !g_str_equal(json_object_get_string_member_with_default(
                         seg, "size", ""), "dynamic") ||
        reenc_get_u64(seg, what, "offset", &off, errp) < 0 ||
        reenc_get_u64(seg, what, "iv_tweak", &tweak, errp) < 0 ||
        luks2_json_get_uint(seg, what, "sector_size", 512, 4096, &ss,
                            errp) < 0 ||
        !luks2_json_get_string(seg, what, "encryption", errp)) {
        if (errp && !*errp) {
            error_setg(errp, "LUKS2 %s is not a crypt segment of dynamic "
                       "size", what);
        }
        return -1;
    }
    if (off != k->offset || tweak != 0 || (ss & (ss - 1))) {
        error_setg(errp, "LUKS2 %s (offset %" PRIu64 ", iv_tweak %" PRIu64
                   ", sector size %" PRIu32 ") does not fit a new volume "
                   "key in place", what, off, tweak, ss);
        return -1;
    }
    k->align = MAX(k->align, ss);
    return 0;
}

/* The digest whose key is, or was, bound to segment id (a backup). */
static int rekey_digest_of(JsonObject *digests, const char *key, int id)
{
    g_autoptr(GList) members = json_object_get_members(digests);

    for (GList *l = members; l; l = l->next) {
        JsonNode *n = json_object_get_member(digests, l->data);

        if (JSON_NODE_HOLDS_OBJECT(n) &&
            reenc_id_array_has(json_node_get_object(n), key, id)) {
            return atoi(l->data);
        }
    }
    return -1;
}

/* The reencrypt key slot's area: inside the key-slot area, alone there. */
static int rekey_check_area(Rekey *k, Error **errp)
{
    Reenc *r = k->r;
    JsonObject *top = json_node_get_object(r->root);
    JsonObject *config = reenc_section(r->root, "config");
    JsonObject *keyslots = json_object_get_object_member(top, "keyslots");
    g_autoptr(GList) members = json_object_get_members(keyslots);
    uint64_t ks_size;

    if (reenc_get_u64(config, "config", "keyslots_size", &ks_size,
                      errp) < 0) {
        return -1;
    }
    if (k->area_offset < 2 * r->hdr->bin.hdr_size || !k->area_size ||
        ks_size > REENC_MAX_BYTES || k->area_size > ks_size ||
        k->area_offset > 2 * r->hdr->bin.hdr_size + ks_size - k->area_size ||
        k->area_offset % QCRYPTO_LUKS2_AREA_ALIGN) {
        goto bad;
    }
    for (GList *l = members; l; l = l->next) {
        JsonObject *ks, *a;
        uint64_t off, size;

        if (atoi(l->data) == r->ks_id) {
            continue;
        }
        /* not yet validated (the LUKS2 parser runs at unlock): checked */
        ks = luks2_json_get_object(keyslots, "keyslots", l->data, errp);
        a = ks ? luks2_json_get_object(ks, "keyslot", "area", errp) : NULL;
        if (!a ||
            reenc_get_u64(a, "keyslot area", "offset", &off, errp) < 0 ||
            reenc_get_u64(a, "keyslot area", "size", &size, errp) < 0) {
            return -1;
        }
        if (off < k->area_offset + k->area_size &&
            k->area_offset < off + size) {
            goto bad;
        }
    }
    return 0;
bad:
    error_setg(errp, "LUKS2 reencrypt key slot area (offset %" PRIu64
               ", %" PRIu64 " bytes) is not a free part of the key-slot "
               "area", k->area_offset, k->area_size);
    return -1;
}

/* The re-encryption parameters of r->root: what cryptsetup checks too. */
static int rekey_parse(Rekey *k, JsonObject *ks, Error **errp)
{
    Reenc *r = k->r;
    const QCryptoReencryptIO *io = r->io;
    JsonObject *segs, *digests, *area;
    const char *dir, *atype;
    int prev_id = -1, final_id = -1;
    int64_t flen;

    if (r->version != REKEY_REQ_VERSION) {
        error_setg(errp, "LUKS2 re-encryption with requirement "
                   "online-reencrypt-v%d is not supported for a new volume "
                   "key (only '" REKEY_REQUIREMENT "')", r->version);
        return -1;
    }
    if (reenc_slot_lookup(r->root, ks, &segs, &digests, &area, &dir, &atype,
                          errp) < 0) {
        return -1;
    }
    k->res = G_N_ELEMENTS(rekey_resilience_names);
    for (size_t i = 0; i < G_N_ELEMENTS(rekey_resilience_names); i++) {
        if (g_str_equal(atype, rekey_resilience_names[i])) {
            k->res = i;
        }
    }
    if (!g_str_equal(dir, "forward") ||
        k->res == G_N_ELEMENTS(rekey_resilience_names)) {
        error_setg(errp, "LUKS2 re-encryption with direction '%s' and "
                   "resilience '%s' is not supported for a new volume key "
                   "(only forward, with checksum, journal or none): finish "
                   "it with cryptsetup reencrypt --resume-only", dir, atype);
        return -1;
    }
    if (reenc_get_u64(area, "reencrypt keyslot area", "offset",
                      &k->area_offset, errp) < 0 ||
        reenc_get_u64(area, "reencrypt keyslot area", "size", &k->area_size,
                      errp) < 0) {
        return -1;
    }
    if (k->res == QCRYPTO_REENCRYPT_RESILIENCE_CHECKSUM &&
        (luks2_json_get_hash(area, "reencrypt keyslot area", "hash",
                             &k->csum_hash, errp) < 0 ||
         luks2_json_get_uint(area, "reencrypt keyslot area", "sector_size",
                             512, REKEY_CSUM_BLOCK_MAX, &k->csum_block,
                             errp) < 0)) {
        return -1;
    }
    r->prev = reenc_find_backup(segs, "backup-previous", &prev_id);
    r->final = reenc_find_backup(segs, "backup-final", &final_id);
    r->moved = reenc_find_backup(segs, "backup-moved-segment", NULL);
    if (!r->prev || !r->final || r->moved) {
        error_setg(errp, "LUKS2 re-encryption backup segments are not those "
                   "of a new volume key (backup-previous and backup-final, "
                   "no moved segment)");
        return -1;
    }
    if (reenc_get_u64(r->prev, "backup-previous segment", "offset",
                      &k->offset, errp) < 0) {
        return -1;
    }
    flen = io->length(io->opaque, errp);
    if (flen < 0) {
        return -1;
    }
    if (!k->offset || k->offset % QCRYPTO_LUKS2_AREA_ALIGN ||
        k->offset >= (uint64_t)flen || k->offset > REENC_MAX_BYTES) {
        error_setg(errp, "LUKS2 data offset %" PRIu64 " does not fit a file "
                   "of %" PRId64 " bytes", k->offset, flen);
        return -1;
    }
    r->size = flen - k->offset;
    k->align = 512;
    if (rekey_check_backup(k, r->prev, "backup-previous segment",
                           errp) < 0 ||
        rekey_check_backup(k, r->final, "backup-final segment", errp) < 0 ||
        rekey_check_area(k, errp) < 0) {
        return -1;
    }
    if (k->res == QCRYPTO_REENCRYPT_RESILIENCE_CHECKSUM) {
        k->csum_len = qcrypto_hash_digest_len(k->csum_hash);
        if ((k->csum_block & (k->csum_block - 1)) ||
            k->csum_block % k->align || k->area_size < k->csum_len) {
            error_setg(errp, "LUKS2 re-encryption checksum block of %" PRIu32
                       " bytes does not fit sectors of %" PRIu32 " bytes "
                       "or the area", k->csum_block, k->align);
            return -1;
        }
        k->align = k->csum_block;
    }
    if (r->size % k->align) {
        error_setg(errp, "LUKS2 data size %" PRIu64 " is not a multiple of "
                   "the re-encryption block of %" PRIu32 " bytes", r->size,
                   k->align);
        return -1;
    }
    k->digest_old = rekey_digest_of(digests, "segments", prev_id);
    r->digest_new = rekey_digest_of(digests, "segments", final_id);
    r->digest_reenc = rekey_digest_of(digests, "keyslots", r->ks_id);
    if (k->digest_old < 0 || r->digest_new < 0 || r->digest_reenc < 0 ||
        k->digest_old == r->digest_new ||
        r->digest_reenc == k->digest_old ||
        r->digest_reenc == r->digest_new) {
        error_setg(errp, "LUKS2 re-encryption digests are missing");
        return -1;
    }
    return 0;
}

/*
 * Where the active segments say we are: [0, *pos) under the new key,
 * *zone bytes after it in re-encryption (0: none), the rest old.
 */
static int rekey_position(Rekey *k, uint64_t *pos, uint64_t *zone,
                          Error **errp)
{
    Reenc *r = k->r;
    JsonObject *segs = reenc_section(r->root, "segments");
    JsonObject *dg_old = rekey_digest(r->root, k->digest_old);
    JsonObject *dg_new = rekey_digest(r->root, r->digest_new);
    enum { START, NEW, ZONE, OLD } stage = START;
    uint64_t x = 0;

    *pos = *zone = 0;
    for (int id = 0; id < QCRYPTO_LUKS2_SEGMENTS_MAX; id++) {
        g_autofree char *key = g_strdup_printf("%d", id);
        JsonNode *n = json_object_get_member(segs, key);
        JsonObject *s;
        bool in_old, in_new, dynamic;
        uint64_t off, tweak, size;

        if (!n) {
            break;
        }
        s = JSON_NODE_HOLDS_OBJECT(n) ? json_node_get_object(n) : NULL;
        if (!s || reenc_seg_has_flag(s, "backup-previous") ||
            reenc_seg_has_flag(s, "backup-final")) {
            break;
        }
        in_old = reenc_id_array_has(dg_old, "segments", id);
        in_new = reenc_id_array_has(dg_new, "segments", id);
        dynamic = g_str_equal(json_object_get_string_member_with_default(
                                  s, "size", ""), "dynamic");
        if (!g_str_equal(json_object_get_string_member_with_default(
                             s, "type", ""), "crypt")) {
            goto bad;
        }
        /* these set errp themselves: not "bad" (one error only) */
        if (reenc_get_u64(s, "segment", "offset", &off, errp) < 0 ||
            reenc_get_u64(s, "segment", "iv_tweak", &tweak, errp) < 0) {
            return -1;
        }
        if (dynamic) {
            size = r->size - x;
        } else if (reenc_get_u64(s, "segment", "size", &size, errp) < 0) {
            return -1;
        }
        if (off != k->offset + x || tweak != x / 512 || !size ||
            size > r->size - x || size % k->align) {
            goto bad;
        }
        if (reenc_seg_has_flag(s, "in-reencryption")) {
            if (stage > NEW || !in_old || !in_new || dynamic ||
                !rekey_same_cipher(s, r->final)) {
                goto bad;
            }
            *pos = x;
            *zone = size;
            stage = ZONE;
        } else if (in_new && !in_old) {
            /* "dynamic" only when it is all there is (all done) */
            if (stage != START || (dynamic && x) ||
                !rekey_same_cipher(s, r->final)) {
                goto bad;
            }
            *pos = x + size;
            stage = NEW;
        } else if (in_old && !in_new) {
            if (stage == OLD || size != r->size - x ||
                !rekey_same_cipher(s, r->prev)) {
                goto bad;
            }
            stage = OLD;
        } else {
            goto bad;
        }
        x += size;
    }
    if (stage == START || x != r->size) {
        goto bad;
    }
    return 0;
bad:
    error_setg(errp, "LUKS2 re-encryption segments do not describe a new "
               "volume key in progress");
    return -1;
}

/*
 * Unlock the key of segment seg (bound to digest) with secret and set up
 * block's payload cipher with it; *key keeps a copy.
 */
static int rekey_unlock(Rekey *k, JsonObject *seg, int digest,
                        const QCryptoBlockSecret *secret, QCryptoBlock *block,
                        QCryptoSecureBuf **key, Error **errp)
{
    Reenc *r = k->r;
    g_autoptr(JsonNode) view = rekey_view_root(k, seg, digest);
    g_autofree char *json = reenc_json_text(view);
    g_autoptr(QCryptoLUKS2Metadata) md = NULL;
    const QCryptoLUKS2Segment *s;
    QCryptoLUKS2Cipher c;
    int slot, found;

    md = qcrypto_luks2_metadata_parse(json, r->hdr->bin.hdr_size, errp);
    if (!md) {
        return -1;
    }
    /* A key the init of this process unlocked, if it matches: no KDF. */
    found = r->keys && md->segments[0]->digest >= 0 ?
        reenc_keys_find(r->keys, md->digests[md->segments[0]->digest], key,
                        errp) : 0;
    if (found < 0 ||
        (!found && qcrypto_luks2_unlock(md, secret, block, reenc_block_read,
                                        (void *)r->io, key, &slot,
                                        errp) < 0)) {
        return -1;
    }
    s = md->segments[0];
    if (qcrypto_luks2_cipher_parse(s->encryption, (*key)->len, &c,
                                   errp) < 0) {
        return -1;
    }
    block->payload_offset = k->offset;
    block->sector_size = s->sector_size;
    block->ivgen_sector_shift = __builtin_ctzll(s->sector_size / 512);
    block->iv_sector_offset = 0;
    return qcrypto_block_init_cipher(block, &c, (*key)->data, (*key)->len,
                                     errp);
}

/*
 * Done: write the final metadata, then overwrite what it no longer
 * references (the old key's key slots, the resilience data).
 */
static int rekey_finish(Rekey *k, Error **errp)
{
    Reenc *r = k->r;
    const QCryptoReencryptIO *io = r->io;
    g_autoptr(GArray) areas = g_array_new(false, false, sizeof(RekeyArea));
    g_autoptr(JsonNode) fin = rekey_final_root(k, areas);
    g_autofree uint8_t *noise = g_malloc(1 << 20);

    if (reenc_write_root(r, fin, errp) < 0) {
        return -1;
    }
    for (guint i = 0; i < areas->len; i++) {
        RekeyArea *a = &g_array_index(areas, RekeyArea, i);

        for (uint64_t o = 0; o < a->size; o += 1 << 20) {
            size_t n = MIN(1 << 20, a->size - o);

            if (qcrypto_random_bytes(noise, n, errp) < 0 ||
                io->write(io->opaque, a->offset + o, noise, n, errp) < 0) {
                return -1;
            }
        }
    }
    return io->sync(io->opaque, errp);
}

/* ---- the mode, for the loop of block-luks2-reencrypt-engine.c ---- */

typedef struct RekeyRun {
    Rekey k;
    uint64_t pos;               /* [0, pos) has the new key */
    uint64_t zone;              /* [pos, pos + zone) cut short by a crash */
} RekeyRun;

static int rekey_start(ReencRun *run, JsonObject *ks,
                       const QCryptoBlockSecret *secret, uint64_t hotzone,
                       Error **errp)
{
    Reenc *r = run->r;
    RekeyRun *rr = run->state = g_new0(RekeyRun, 1);
    Rekey *k = &rr->k;
    g_autoptr(QCryptoSecureBuf) old_key = NULL, new_key = NULL;
    uint64_t cap;

    k->r = r;
    k->newblock = qcrypto_block_new(QCRYPTO_BLOCK_FORMAT_LUKS, NULL);
    if (rekey_parse(k, ks, errp) < 0 ||
        rekey_position(k, &rr->pos, &rr->zone, errp) < 0) {
        return -1;
    }
    if (rr->pos == r->size) {
        /*
         * All data is under the new key: only the final metadata is left.
         * cryptsetup's finish destroys the old key's slots one by one
         * (each a metadata write, the area wiped first) before the write
         * that drops the requirement, so a kill there leaves an image
         * whose old key no slot opens, which cryptsetup 2.6 cannot finish.
         * Neither needs the old key: the new one is checked against its
         * own digest. The re-encryption digest, which covers both keys,
         * cannot be checked, so the metadata is unauthenticated here; that
         * is safe because nothing but the final metadata is written (no
         * data is read, decrypted or moved, the areas wiped are key-slot
         * areas the parser bounds): no more than anyone who can write the
         * header could write as a plain LUKS2 header.
         */
        return rekey_unlock(k, r->final, r->digest_new, secret, k->newblock,
                            &new_key, errp);
    }
    if (rekey_unlock(k, r->prev, k->digest_old, secret, r->block, &old_key,
                     errp) < 0 ||
        rekey_unlock(k, r->final, r->digest_new, secret, k->newblock,
                     &new_key, errp) < 0 ||
        reenc_digest_check(r, old_key->data, old_key->len, new_key->data,
                           new_key->len, errp) < 0) {
        return -1;
    }
    cap = rekey_zone_capacity(k);
    if (rr->zone > cap) {
        error_setg(errp, "LUKS2 hot zone of %" PRIu64 " bytes is larger "
                   "than its resilience data can cover (%" PRIu64 " bytes)",
                   rr->zone, cap);
        return -1;
    }
    hotzone = reenc_hotzone_size(hotzone, REKEY_HOTZONE_DEFAULT,
                                 MIN(cap, r->size), k->align, errp);
    if (!hotzone) {
        return -1;
    }
    run->hotzone = hotzone;
    run->bufsize = MAX(hotzone, rr->zone);
    return 0;
}

/* A zone cut short: repaired from its resilience data. */
static int rekey_recover_run(ReencRun *run, Error **errp)
{
    RekeyRun *rr = run->state;

    if (rr->zone &&
        rekey_recover(&rr->k, rr->pos, rr->zone, run->buf, errp) < 0) {
        return -1;
    }
    rr->pos += rr->zone;
    return 0;
}

/* Forwards, from the start. */
static bool rekey_next(ReencRun *run, uint64_t *off, uint64_t *len)
{
    RekeyRun *rr = run->state;

    if (rr->pos >= run->r->size) {
        return false;
    }
    *off = rr->pos;
    *len = MIN(run->hotzone, run->r->size - rr->pos);
    return true;
}

static int rekey_zone_run(ReencRun *run, uint64_t off, uint64_t len,
                          Error **errp)
{
    RekeyRun *rr = run->state;

    if (rekey_zone(&rr->k, off, len, run->buf, errp) < 0) {
        return -1;
    }
    rr->pos = off + len;
    return 0;
}

static uint64_t rekey_done(ReencRun *run)
{
    RekeyRun *rr = run->state;

    return rr->pos;
}

/* The last state before the final one, as cryptsetup leaves it. */
static int rekey_stop_before_finish(ReencRun *run, Error **errp)
{
    RekeyRun *rr = run->state;
    g_autoptr(JsonNode) done = rekey_state_root(&rr->k, run->r->size, 0);

    return reenc_write_root(run->r, done, errp);
}

static int rekey_finish_run(ReencRun *run, Error **errp)
{
    RekeyRun *rr = run->state;

    return rekey_finish(&rr->k, errp);
}

static void rekey_clear(ReencRun *run)
{
    RekeyRun *rr = run->state;

    qcrypto_block_free(rr->k.newblock);
}

/* Online: [0, done) under the new key, the rest under the old. */
static int rekey_online_crypt(ReencRun *run, uint64_t done, bool encrypt,
                              uint64_t off, uint8_t *buf, size_t len,
                              Error **errp)
{
    RekeyRun *rr = run->state;
    size_t n = off < done ? MIN(len, done - off) : 0;
    int (*fn)(QCryptoBlock *, uint64_t, uint8_t *, size_t, Error **) =
        encrypt ? qcrypto_block_encrypt : qcrypto_block_decrypt;

    if (n && fn(rr->k.newblock, off, buf, n, errp) < 0) {
        return -1;
    }
    return len > n ? fn(run->r->block, off + n, buf + n, len - n, errp) : 0;
}

static uint64_t rekey_data_offset(ReencRun *run)
{
    RekeyRun *rr = run->state;

    return rr->k.offset;
}

static uint32_t rekey_sector_size(ReencRun *run)
{
    RekeyRun *rr = run->state;

    return MAX(run->r->block->sector_size, rr->k.newblock->sector_size);
}

const ReencMode reenc_mode_rekey = {
    .name = "reencrypt",
    .start = rekey_start,
    .recover = rekey_recover_run,
    .next = rekey_next,
    .zone = rekey_zone_run,
    .done = rekey_done,
    .stop_before_finish = rekey_stop_before_finish,
    .finish = rekey_finish_run,
    .clear = rekey_clear,
    .crypt = rekey_online_crypt,
    .data_offset = rekey_data_offset,
    .sector_size = rekey_sector_size,
};

/* ---- init ---- */

/* A key slot of the old key to re-wrap, and the secret that opens it. */
typedef struct RekeySlot {
    int id;
    const QCryptoBlockSecret *secret;
} RekeySlot;

/*
 * The old volume key, opened with every slot that gets a new one
 * (slots[], *nslots): all of the key's slots, or options->keyslot.
 */
static int rekey_open_slots(Rekey *k, const QCryptoLUKS2Metadata *md,
                            const QCryptoReencryptRekeyOptions *o,
                            int digest, RekeySlot *slots, int *nslots,
                            QCryptoSecureBuf **key, Error **errp)
{
    Reenc *r = k->r;
    size_t nbound = 0;

    *nslots = 0;
    for (int i = 0; i < QCRYPTO_LUKS2_KEYSLOTS_MAX; i++) {
        const QCryptoLUKS2Keyslot *ks = md->keyslots[i];
        const QCryptoBlockSecret *secret = &o->create.secret;
        g_autoptr(QCryptoSecureBuf) cand = NULL;
        int rc;

        if (!ks || ks->digest != digest) {
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
        cand = qcrypto_secure_buf_new(ks->key_size);
        rc = qcrypto_luks2_keyslot_open(md, ks, secret, r->block,
                                        reenc_block_read, (void *)r->io,
                                        cand->data, errp);
        if (rc < 0) {
            return -1;
        }
        if (rc == 0) {
            reenc_slot_not_opened(errp, "LUKS2", i, o->nslot_secrets != 0);
            return -1;
        }
        if (!*key) {
            *key = g_steal_pointer(&cand);
        }
        slots[(*nslots)++] = (RekeySlot) { .id = i, .secret = secret };
    }
    if (o->nslot_secrets && o->nslot_secrets != nbound) {
        error_setg(errp, "slot-secrets lists %zu secrets for %zu key slots",
                   o->nslot_secrets, nbound);
        return -1;
    }
    if (!*nslots) {
        error_setg(errp, o->keyslot >= 0 ?
                   "LUKS2 key slot %d is not a key slot of the volume key" :
                   "LUKS2 image has no key slot for its volume key",
                   o->keyslot);
        return -1;
    }
    return 0;
}

static int rekey_first_free(JsonObject *o, int max)
{
    for (int i = 0; i < max; i++) {
        g_autofree char *s = g_strdup_printf("%d", i);

        if (!json_object_has_member(o, s)) {
            return i;
        }
    }
    return -1;
}

/* Add a digest of key (hash and iterations of old) to md; its id. */
static int rekey_add_digest(QCryptoLUKS2Metadata *md,
                            const QCryptoLUKS2Digest *old,
                            const uint8_t *key, size_t nkey, Error **errp)
{
    JsonObject *digests = json_object_get_object_member(
        json_node_get_object(md->root), "digests");
    int id = rekey_first_free(digests, QCRYPTO_LUKS2_DIGESTS_MAX);
    uint8_t salt[REENC_DIGEST_SALT_LEN], dig[QCRYPTO_HASH_MAX_DIGEST_LEN];
    size_t ndig = qcrypto_hash_digest_len(old->hash);
    g_autofree char *name = g_strdup_printf("%d", id);
    JsonObject *dg;

    if (id < 0) {
        error_setg(errp, "LUKS2 image has no free digest");
        return -1;
    }
    if (qcrypto_random_bytes(salt, sizeof(salt), errp) < 0 ||
        qcrypto_pbkdf2(old->hash, key, nkey, salt, sizeof(salt),
                       old->iterations, dig, ndig, errp) < 0) {
        return -1;
    }
    dg = reenc_pbkdf2_digest(qcrypto_hash_algo_name(old->hash),
                             old->iterations, salt, sizeof(salt), dig, ndig,
                             json_array_new(), json_array_new());
    json_object_set_object_member(digests, name, dg);
    return qcrypto_luks2_metadata_reload(md, errp) < 0 ? -1 : id;
}

/* A new key slot of key under the secret of old slot from, bound to digest. */
static int rekey_add_keyslot(Rekey *k, QCryptoLUKS2Metadata *md,
                             const QCryptoReencryptRekeyOptions *o,
                             const RekeySlot *from, int digest,
                             const char *cipher, const uint8_t *key,
                             size_t nkey, Error **errp)
{
    Reenc *r = k->r;
    const QCryptoLUKS2Keyslot *old = md->keyslots[from->id];
    const QCryptoBlockCreateOptions *c = &o->create;
    JsonObject *keyslots = json_object_get_object_member(
        json_node_get_object(md->root), "keyslots");
    QCryptoLUKS2KDFParams params = {
        .type = c->has_kdf ? c->kdf : old->kdf.type,
        .hash = c->hash_alg,
        .iter_time_ms = c->has_iter_time ? c->iter_time : REKEY_ITER_TIME_MS,
        .max_memory_kib = c->kdf_memory ? c->kdf_memory : REKEY_MEMORY_KIB,
        .parallel = c->kdf_parallel,
    };
    QCryptoLUKS2Keyslot ks = {
        .id = rekey_first_free(keyslots, QCRYPTO_LUKS2_KEYSLOTS_MAX),
        .key_size = nkey,
        .priority = old->priority,
        .af_hash = c->hash_alg,
        .af_stripes = REKEY_STRIPES,
        .area_encryption = (char *)cipher,
        .area_key_size = nkey,
        .digest = digest,
    };

    if (ks.id < 0) {
        error_setg(errp, "All LUKS2 key slots are in use: a new volume key "
                   "needs one free slot per key slot it re-wraps");
        return -1;
    }
    ks.area_size = qcrypto_luks2_keyslot_area_size(nkey, ks.af_stripes);
    if (qcrypto_luks2_keyslot_find_area(md, ks.area_size, &ks.area_offset,
                                        errp) < 0 ||
        qcrypto_luks2_kdf_calibrate(&params, ks.area_key_size, &ks.kdf,
                                    errp) < 0 ||
        qcrypto_luks2_keyslot_store(&ks, from->secret, key, nkey, r->block,
                                    reenc_block_write, (void *)r->io,
                                    errp) < 0) {
        return -1;
    }
    qcrypto_luks2_metadata_set_keyslot(md, &ks);
    return qcrypto_luks2_metadata_reload(md, errp);
}

static int rekey_cmp_area(const void *a, const void *b)
{
    const RekeyArea *x = a, *y = b;

    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* The largest free part of the key-slot area (cryptsetup's max gap). */
static void rekey_max_gap(const QCryptoLUKS2Metadata *md, uint64_t *offset,
                          uint64_t *size)
{
    RekeyArea used[QCRYPTO_LUKS2_KEYSLOTS_MAX];
    uint64_t at = 2 * md->hdr_size, end = qcrypto_luks2_keyslots_end(md);
    int n = 0;

    for (int i = 0; i < QCRYPTO_LUKS2_KEYSLOTS_MAX; i++) {
        if (md->keyslots[i]) {
            used[n++] = (RekeyArea) { md->keyslots[i]->area_offset,
                                      md->keyslots[i]->area_size };
        }
    }
    qsort(used, n, sizeof(used[0]), rekey_cmp_area);
    *offset = *size = 0;
    for (int i = 0; i <= n; i++) {
        uint64_t stop = i < n ? used[i].offset : end;

        if (stop > at && stop - at > *size) {
            *offset = at;
            *size = stop - at;
        }
        if (i < n) {
            at = MAX(at, qcrypto_luks2_round_up(used[i].offset +
                                                used[i].size,
                                                QCRYPTO_LUKS2_AREA_ALIGN));
        }
    }
}

/* The new segment's cipher string and key size, and its sector size. */
static int rekey_new_cipher(const QCryptoReencryptRekeyOptions *o,
                            const QCryptoLUKS2Segment *old, size_t old_nkey,
                            char **spec, size_t *nkey, uint32_t *ss,
                            Error **errp)
{
    QCryptoLUKS2Cipher c = {
        .alg = o->create.cipher_alg, .mode = o->create.cipher_mode,
        .ivgen = o->create.ivgen_alg,
        .ivgen_hash = o->create.has_ivgen_hash_alg ?
            o->create.ivgen_hash_alg : QCRYPTO_HASH_ALGO_SHA256,
    };

    if (o->has_cipher) {
        *spec = qcrypto_luks2_cipher_format(&c);
        *nkey = qcrypto_luks2_cipher_key_len(&c);
    } else {
        *spec = g_strdup(old->encryption);
        *nkey = old_nkey;
    }
    *ss = o->create.sector_size ? o->create.sector_size : old->sector_size;
    if (*ss < 512 || *ss > 4096 || (*ss & (*ss - 1))) {
        error_setg(errp, "Option 'sector-size' %" PRIu32 " is not 512, "
                   "1024, 2048 or 4096", *ss);
        return -1;
    }
    /* Refuse what we could not open (e.g. ECB's missing IV). */
    return qcrypto_luks2_cipher_parse(*spec, *nkey, &c, errp);
}

/*
 * Everything the run needs in r->root: the new key's digest and key slots
 * are in md already; add the backup segments, the reencrypt key slot over
 * the largest free part of the key-slot area, the requirement and the
 * digest over it all.
 */
static int rekey_init_metadata(Rekey *k, QCryptoLUKS2Metadata *md,
                               const char *cipher, uint32_t ss,
                               const uint8_t *old_key, size_t nold,
                               const uint8_t *new_key, size_t nnew,
                               Error **errp)
{
    Reenc *r = k->r;
    g_autofree char *json = qcrypto_luks2_metadata_to_json(md);
    const QCryptoLUKS2Digest *dold = md->digests[k->digest_old];
    JsonObject *segs, *area, *reqo, *dg;
    JsonArray *mand;
    g_autofree char *dname = NULL;
    uint8_t salt[REENC_DIGEST_SALT_LEN], dig[32];
    int zero = 0;

    r->root = json_from_string(json, NULL);
    if (!r->root) {
        error_setg(errp, "LUKS2 metadata cannot be read back");
        return -1;
    }
    segs = reenc_section(r->root, "segments");
    r->prev = reenc_seg_copy(json_object_get_object_member(segs, "0"),
                             "backup-previous");
    r->final = json_object_new();
    json_object_set_string_member(r->final, "type", "crypt");
    reenc_set_u64(r->final, "offset", k->offset);
    json_object_set_string_member(r->final, "size", "dynamic");
    reenc_set_u64(r->final, "iv_tweak", 0);
    json_object_set_string_member(r->final, "encryption", cipher);
    json_object_set_int_member(r->final, "sector_size", ss);
    json_object_set_array_member(r->final, "flags", json_array_new());
    json_array_add_string_element(
        json_object_get_array_member(r->final, "flags"), "backup-final");
    json_object_set_object_member(segs, "1", r->prev);
    json_object_set_object_member(segs, "2", r->final);
    {
        int old_ids[2] = { 0, 1 }, new_id = 2;

        json_object_set_array_member(rekey_digest(r->root, k->digest_old),
                                     "segments", reenc_id_array(old_ids, 2));
        json_object_set_array_member(rekey_digest(r->root, r->digest_new),
                                     "segments", reenc_id_array(&new_id, 1));
    }

    r->ks_id = rekey_first_free(reenc_section(r->root, "keyslots"),
                                QCRYPTO_LUKS2_KEYSLOTS_MAX);
    if (r->ks_id < 0) {
        error_setg(errp, "No LUKS2 key slot is left for the re-encryption "
                   "key slot");
        return -1;
    }
    area = json_object_new();
    reenc_set_u64(area, "offset", k->area_offset);
    reenc_set_u64(area, "size", k->area_size);
    json_object_set_string_member(area, "type",
                                  rekey_resilience_names[k->res]);
    if (k->res == QCRYPTO_REENCRYPT_RESILIENCE_CHECKSUM) {
        json_object_set_string_member(area, "hash",
                                      qcrypto_hash_algo_name(k->csum_hash));
        json_object_set_int_member(area, "sector_size", k->csum_block);
    }
    reenc_add_keyslot(r, reenc_section(r->root, "keyslots"), area,
                      reenc_mode_rekey.name,
                      "forward");

    reqo = json_object_new();
    mand = json_array_new();
    json_array_add_string_element(mand, REKEY_REQUIREMENT);
    json_object_set_array_member(reqo, "mandatory", mand);
    json_object_set_object_member(reenc_section(r->root, "config"),
                                  "requirements", reqo);

    r->digest_reenc = rekey_first_free(reenc_section(r->root, "digests"),
                                       QCRYPTO_LUKS2_DIGESTS_MAX);
    if (r->digest_reenc < 0) {
        error_setg(errp, "LUKS2 image has no free digest");
        return -1;
    }
    if (qcrypto_random_bytes(salt, sizeof(salt), errp) < 0 ||
        reenc_digest_compute(r, QCRYPTO_HASH_ALGO_SHA256, dold->iterations,
                             salt, sizeof(salt), old_key, nold, new_key,
                             nnew, dig, sizeof(dig), errp) < 0) {
        return -1;
    }
    dg = reenc_pbkdf2_digest("sha256", dold->iterations, salt, sizeof(salt),
                             dig, sizeof(dig), reenc_id_array(&r->ks_id, 1),
                             reenc_id_array(&zero, 0));
    dname = g_strdup_printf("%d", r->digest_reenc);
    json_object_set_object_member(reenc_section(r->root, "digests"), dname,
                                  dg);
    return 0;
}

int qcrypto_reencrypt_rekey_init(const QCryptoReencryptRekeyOptions *options,
                                 const QCryptoReencryptIO *io, Error **errp)
{
    Reenc r = { 0 };
    Rekey k = { .r = &r, .res = options->resilience };
    g_autoptr(QCryptoLUKS2Metadata) md = NULL;
    g_autoptr(QCryptoSecureBuf) old_key = NULL, new_key = NULL;
    g_autofree char *cipher = NULL;
    RekeySlot slots[QCRYPTO_LUKS2_KEYSLOTS_MAX];
    const QCryptoLUKS2Segment *seg;
    size_t nkey;
    uint32_t ss;
    int64_t flen;
    int nslots, ret = -1;

    r.version = REKEY_REQ_VERSION;
    /* LUKS1: its own metadata (block-luks1-reencrypt.c) */
    if (reenc_luks1_busy(io, errp)) {
        return -1;
    }
    if (reenc_luks1_image(io)) {
        return reenc_luks1_rekey_init(options, io, errp);
    }
    if (reenc_load(&r, io, errp) < 0) {
        goto out;
    }
    md = qcrypto_luks2_metadata_parse(r.hdr->json, r.hdr->bin.hdr_size, errp);
    if (!md) {
        goto out;
    }
    seg = md->segments[0];
    for (int i = 1; i < QCRYPTO_LUKS2_SEGMENTS_MAX; i++) {
        if (md->segments[i]) {
            seg = NULL;
        }
    }
    if (!seg || !seg->size_dynamic || seg->iv_tweak || !seg->offset ||
        seg->digest < 0) {
        error_setg(errp, "A new volume key in place needs a LUKS2 image of "
                   "one data segment in the file, to its end");
        goto out;
    }
    k.offset = seg->offset;
    k.digest_old = seg->digest;
    flen = io->length(io->opaque, errp);
    if (flen < 0) {
        goto out;
    }
    if ((uint64_t)flen <= k.offset) {
        error_setg(errp, "The LUKS2 image holds no data to re-encrypt");
        goto out;
    }
    r.size = flen - k.offset;
    if (rekey_open_slots(&k, md, options, k.digest_old, slots, &nslots,
                         &old_key, errp) < 0 ||
        rekey_new_cipher(options, seg, old_key->len, &cipher, &nkey, &ss,
                         errp) < 0) {
        goto out;
    }
    k.align = MAX(ss, seg->sector_size);
    if (r.size % k.align) {
        error_setg(errp, "The data size %" PRIu64 " is not a multiple of "
                   "the sector size %" PRIu32, r.size, k.align);
        goto out;
    }
    new_key = qcrypto_secure_buf_new(nkey);
    if (qcrypto_random_bytes(new_key->data, nkey, errp) < 0) {
        goto out;
    }
    r.digest_new = rekey_add_digest(md, md->digests[k.digest_old],
                                    new_key->data, nkey, errp);
    if (r.digest_new < 0) {
        goto out;
    }
    for (int i = 0; i < nslots; i++) {
        if (rekey_add_keyslot(&k, md, options, &slots[i], r.digest_new,
                              cipher, new_key->data, nkey, errp) < 0) {
            goto out;
        }
    }
    rekey_max_gap(md, &k.area_offset, &k.area_size);
    k.csum_hash = QCRYPTO_HASH_ALGO_SHA256;
    k.csum_len = qcrypto_hash_digest_len(k.csum_hash);
    k.csum_block = r.size % REKEY_CSUM_BLOCK ? k.align
                                             : MAX(k.align, REKEY_CSUM_BLOCK);
    if (k.res == QCRYPTO_REENCRYPT_RESILIENCE_CHECKSUM) {
        k.align = k.csum_block;
    }
    if (rekey_zone_capacity(&k) < k.align) {
        error_setg(errp, "No room in the LUKS2 key-slot area for the "
                   "re-encryption's resilience data");
        goto out;
    }
    if (rekey_init_metadata(&k, md, cipher, ss, old_key->data, old_key->len,
                            new_key->data, nkey, errp) < 0) {
        goto out;
    }
    /* The new key slots durable before the header that names them. */
    if (io->sync(io->opaque, errp) < 0 ||
        reenc_write_root(&r, r.root, errp) < 0) {
        goto out;
    }
    reenc_keys_add(options->keys, old_key->data, old_key->len);
    reenc_keys_add(options->keys, new_key->data, nkey);
    ret = 0;
out:
    reenc_clear(&r);
    return ret;
}
