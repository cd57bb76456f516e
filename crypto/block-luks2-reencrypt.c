/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LUKS2 in-place encryption with cryptsetup's re-encryption metadata
 * (cryptsetup 2.6, lib/luks2/luks2_reencrypt*.c; docs/reencrypt.md has the
 * whole story). Only "encrypt" with "datashift" resilience, backward, is
 * done here.
 *
 * Terms: S is the data shift (the final payload offset), V the data bytes
 * (the size of the "backup-previous" segment). Logical offset x of the data
 * is, before encryption, at physical x for x >= M and at moved + x for
 * x < M, where the first M = min(S, V) bytes were copied to "moved" at
 * init; after encryption it is at S + x. Hot zones run from the end
 * backwards and are never longer than S, so a zone's writes never touch
 * its own source nor any data not yet encrypted: a zone cut short by a
 * crash is simply done again (that is the datashift resilience).
 *
 * The on-disk state between zones is nothing but the segment list:
 *   [moved linear][linear M..lin][crypt in-reencryption][crypt done]
 *   + backup-previous, backup-final, backup-moved-segment
 * as cryptsetup writes it, so either tool can pick up where the other
 * stopped.
 */
#include <stdlib.h>
#include <string.h>

#include "crypto/pbkdf.h"
#include "crypto/random.h"
#include "crypto/reencryptpriv.h"
#include "block-luks2-json.h"

/* cryptsetup's LUKS2_REENCRYPT_REQ_VERSION for encryption and rotation. */
#define REENC_REQ_VERSION 2
#define REENC_REQUIREMENT "online-reencrypt-v2"

/* A piece of the final crypt segment: logical [x, x + size). */
static JsonObject *crypt_seg(Reenc *r, uint64_t x, uint64_t size,
                             const char *flag)
{
    return reenc_crypt_seg(r->final, r->shift + x, x, size, flag);
}

/* The re-encryption parameters of r->root: what cryptsetup checks too. */
static int reenc_parse(Reenc *r, JsonObject *ks, Error **errp)
{
    JsonObject *segs, *digests, *area;
    g_autoptr(GList) members = NULL;
    const char *dir, *atype;
    int final_id = -1;

    if (r->version != REENC_REQ_VERSION) {
        error_setg(errp, "LUKS2 encryption with requirement "
                   "online-reencrypt-v%d is not supported (only '"
                   REENC_REQUIREMENT "')", r->version);
        return -1;
    }
    if (reenc_slot_lookup(r->root, ks, &segs, &digests, &area, &dir, &atype,
                          errp) < 0) {
        return -1;
    }
    if (!g_str_equal(dir, "backward") || !g_str_equal(atype, "datashift")) {
        error_setg(errp, "LUKS2 encryption with direction '%s' and "
                   "resilience '%s' is not supported (only backward, "
                   "datashift)", dir, atype);
        return -1;
    }
    if (reenc_get_u64(area, "reencrypt keyslot area", "shift_size", &r->shift,
                errp) < 0) {
        return -1;
    }
    r->prev = reenc_find_backup(segs, "backup-previous", NULL);
    r->final = reenc_find_backup(segs, "backup-final", &final_id);
    r->moved = reenc_find_backup(segs, "backup-moved-segment", NULL);
    if (!r->prev || !r->final || !r->moved) {
        error_setg(errp, "LUKS2 re-encryption backup segments are missing");
        return -1;
    }
    if (final_id < 0) {
        error_setg(errp, "LUKS2 re-encryption: the backup-final segment's "
                   "id is not a number from 0 to %d",
                   QCRYPTO_LUKS2_SEGMENTS_MAX - 1);
        return -1;
    }
    {
        uint64_t off, fo;
        const char *ft = reenc_get_str(r->final, "type", "");
        const char *fs = reenc_get_str(r->final, "size", "");

        if (reenc_get_u64(r->prev, "backup-previous segment", "size", &r->size,
                    errp) < 0 ||
            reenc_get_u64(r->prev, "backup-previous segment", "offset", &off,
                    errp) < 0 ||
            reenc_get_u64(r->final, "backup-final segment", "offset", &fo,
                    errp) < 0 ||
            reenc_get_u64(r->moved, "backup-moved-segment", "offset",
                    &r->moved_offset, errp) < 0 ||
            reenc_get_u64(r->moved, "backup-moved-segment", "size",
                    &r->moved_size, errp) < 0) {
            return -1;
        }
        /* Bounds first: no sum below may wrap (hostile numbers). */
        if (r->size > REENC_MAX_BYTES || r->shift > REENC_MAX_BYTES ||
            r->moved_offset > REENC_MAX_BYTES ||
            r->moved_size > REENC_MAX_BYTES ||
            off != 0 || !g_str_equal(ft, "crypt") || fo != r->shift ||
            !g_str_equal(fs, "dynamic") || r->shift == 0 ||
            r->shift % QCRYPTO_LUKS2_AREA_ALIGN ||
            r->moved_size != MIN(r->shift, r->size) ||
            r->moved_offset < r->shift + r->size ||
            !g_str_equal(reenc_get_str(r->prev, "type", ""), "linear")) {
            error_setg(errp, "LUKS2 re-encryption segments are "
                       "inconsistent with a data shift of %" PRIu64
                       " bytes", r->shift);
            return -1;
        }
    }
    r->digest_new = r->digest_reenc = -1;
    members = json_object_get_members(digests);
    for (GList *l = members; l; l = l->next) {
        JsonNode *n = json_object_get_member(digests, l->data);
        int id;

        if (!JSON_NODE_HOLDS_OBJECT(n)) {
            continue;
        }
        /* strict: the id is printed again to find the digest ("01") */
        id = luks2_json_parse_id(l->data, QCRYPTO_LUKS2_DIGESTS_MAX,
                                 "digest", errp);
        if (id < 0) {
            return -1;
        }
        if (reenc_id_array_has(json_node_get_object(n), "segments", final_id)) {
            r->digest_new = id;
        }
        if (reenc_id_array_has(json_node_get_object(n), "keyslots", r->ks_id)) {
            r->digest_reenc = id;
        }
    }
    if (r->digest_new < 0 || r->digest_reenc < 0 ||
        r->digest_new == r->digest_reenc) {
        error_setg(errp, "LUKS2 re-encryption digests are missing");
        return -1;
    }
    return 0;
}

/*
 * The metadata as it will be when done: the reencrypt key slot, its digest
 * and the requirement gone, backup-final as segment 0.
 */
static JsonNode *reenc_final_root(Reenc *r, bool keep_size_token)
{
    JsonNode *root = reenc_deep_copy(r->root);
    JsonObject *segs = json_object_new();
    JsonObject *config = reenc_section(root, "config");
    JsonObject *dg;
    g_autofree char *ks = g_strdup_printf("%d", r->ks_id);
    g_autofree char *dr = g_strdup_printf("%d", r->digest_reenc);
    g_autofree char *dn = g_strdup_printf("%d", r->digest_new);
    int zero = 0;

    json_object_remove_member(reenc_section(root, "keyslots"), ks);
    json_object_remove_member(reenc_section(root, "digests"), dr);
    json_object_set_object_member(segs, "0", reenc_seg_copy(r->final, NULL));
    json_object_set_object_member(json_node_get_object(root), "segments",
                                  segs);
    dg = json_object_get_object_member(reenc_section(root, "digests"), dn);
    json_object_set_array_member(dg, "segments", reenc_id_array(&zero, 1));
    json_object_remove_member(config, "requirements");
    /*
     * The file is cut to S + V before this is written: size and end agree.
     * Not a block device (or a reduced file cut short of nothing): there
     * the "dynamic" segment runs on past V, and the token keeps saying V.
     */
    if (!keep_size_token) {
        reenc_drop_size_token(root);
    }
    return root;
}

/*
 * The metadata with lin bytes still linear (plain text), then a zone of
 * zone bytes in re-encryption, the rest encrypted.
 */
static JsonNode *reenc_state_root(Reenc *r, uint64_t lin, uint64_t zone)
{
    JsonNode *root = reenc_deep_copy(r->root);
    JsonObject *segs = json_object_new();
    JsonObject *dg;
    g_autofree char *dn = g_strdup_printf("%d", r->digest_new);
    int crypt_ids[3], ncrypt = 0, id = 0;
    uint64_t done = r->size - lin - zone;

#define ADD(o) do { g_autofree char *k = g_strdup_printf("%d", id++); \
        json_object_set_object_member(segs, k, (o)); } while (0)
    if (lin) {
        ADD(reenc_linear_seg(r->moved_offset, MIN(lin, r->moved_size)));
    }
    if (lin > r->moved_size) {
        ADD(reenc_linear_seg(r->moved_size, lin - r->moved_size));
    }
    if (zone) {
        crypt_ids[ncrypt++] = id;
        ADD(crypt_seg(r, lin, zone, "in-reencryption"));
    }
    if (done) {
        JsonObject *seg = crypt_seg(r, lin + zone, done, NULL);

        /*
         * All done: "dynamic", as cryptsetup writes its last state before
         * the final one (it cannot load a fixed size there).
         */
        if (!lin && !zone) {
            json_object_set_string_member(seg, "size", "dynamic");
        }
        crypt_ids[ncrypt++] = id;
        ADD(seg);
    }
    ADD(reenc_seg_copy(r->prev, "backup-previous"));
    crypt_ids[ncrypt++] = id;
    ADD(reenc_seg_copy(r->final, "backup-final"));
    ADD(reenc_seg_copy(r->moved, "backup-moved-segment"));
#undef ADD
    json_object_set_object_member(json_node_get_object(root), "segments",
                                  segs);
    dg = json_object_get_object_member(reenc_section(root, "digests"), dn);
    json_object_set_array_member(dg, "segments", reenc_id_array(crypt_ids, ncrypt));
    return root;
}


/* ---- encrypt: init ---- */

typedef struct MemHeader {
    uint8_t *buf;
    uint64_t len;
} MemHeader;

static int mem_init(QCryptoBlock *block, uint64_t headerlen, void *opaque,
                    Error **errp)
{
    MemHeader *m = opaque;

    m->buf = g_malloc0(headerlen);
    m->len = headerlen;
    return 0;
}

static int mem_write(QCryptoBlock *block, uint64_t offset, const uint8_t *buf,
                     size_t len, void *opaque, Error **errp)
{
    MemHeader *m = opaque;

    g_assert(offset + len <= m->len);
    memcpy(m->buf + offset, buf, len);
    return 0;
}

static int mem_read(QCryptoBlock *block, uint64_t offset, uint8_t *buf,
                    size_t len, void *opaque, Error **errp)
{
    MemHeader *m = opaque;

    if (offset + len > m->len) {
        error_setg(errp, "read beyond the header");
        return -1;
    }
    memcpy(buf, m->buf + offset, len);
    return 0;
}

/*
 * Undo an init that stopped before its first header was durable: the
 * start of the data back from the copy (a failed header write may have
 * reached the disk in part), the file back to its size. Best effort: the
 * error that got us here is the one reported.
 */
static void reenc_init_rollback(Reenc *r, uint64_t len, uint64_t touched)
{
    const QCryptoReencryptIO *io = r->io;
    Error *local = NULL;

    if ((touched && reenc_io_copy(io, r->moved_offset, 0,
                                  MIN(touched, r->moved_size), &local) < 0) ||
        io->truncate(io->opaque, len, &local) < 0 ||
        io->sync(io->opaque, &local) < 0) {
        error_free(local);
    }
}

/*
 * Put the first state on the disk (docs/reencrypt.md, "Crash safety"):
 * nothing of the data is overwritten before everything a resume needs is
 * durable elsewhere. First the moved copy of the start of the data and
 * the whole header image (both header copies and the key-slot area) at
 * staging = V + 2 S, beyond everything, synced; then the secondary header
 * and the primary, each synced; then the key-slot area; the staging room
 * is given back last. A failure before the secondary header is durable
 * restores the raw image; any later one leaves a header whose resume
 * (ours) takes the key-slot area from the staging copy when it is not
 * whole.
 */
static int reenc_init_write(Reenc *r, const MemHeader *m, uint64_t len,
                            Error **errp)
{
    const QCryptoReencryptIO *io = r->io;
    uint64_t hs = r->hdr->bin.hdr_size;
    /*
     * A file that grows: staging past everything, given back at the end.
     * A reduced one (the room is there already, 2 S past the data): the
     * S bytes before the copy, which the last zones overwrite.
     */
    bool reduced = len >= r->moved_offset + r->shift;
    uint64_t staging = reduced ? r->size : r->moved_offset + r->shift;

    g_assert(m->len == r->shift && 2 * hs <= m->len);
    if ((!reduced && io->truncate(io->opaque, staging + r->shift,
                                  errp) < 0) ||
        reenc_io_copy(io, 0, r->moved_offset, r->moved_size, errp) < 0 ||
        io->write(io->opaque, staging, m->buf, m->len, errp) < 0 ||
        io->sync(io->opaque, errp) < 0) {
        reenc_init_rollback(r, len, 0);
        error_prepend(errp, "The raw image is left as it was: ");
        return -1;
    }
    if (io->write(io->opaque, hs, m->buf + hs, hs, errp) < 0 ||
        io->sync(io->opaque, errp) < 0) {
        reenc_init_rollback(r, len, 2 * hs);
        error_prepend(errp, "The raw image is left as it was: ");
        return -1;
    }
    if (io->write(io->opaque, 0, m->buf, hs, errp) < 0 ||
        io->sync(io->opaque, errp) < 0 ||
        io->write(io->opaque, 2 * hs, m->buf + 2 * hs, m->len - 2 * hs,
                  errp) < 0 ||
        io->sync(io->opaque, errp) < 0 ||
        (!reduced && (io->truncate(io->opaque, staging, errp) < 0 ||
                      io->sync(io->opaque, errp) < 0))) {
        return -1;
    }
    return 0;
}


/* Add the reencrypt key slot, backup segments, digest and requirement. */
static int reenc_init_metadata(Reenc *r, uint64_t keyslots_end,
                               Error **errp)
{
    JsonObject *keyslots = reenc_section(r->root, "keyslots");
    JsonObject *segs = reenc_section(r->root, "segments");
    JsonObject *digests = reenc_section(r->root, "digests");
    JsonNode *cn = json_object_get_member(json_node_get_object(r->root),
                                          "config");
    JsonObject *config = cn && JSON_NODE_HOLDS_OBJECT(cn) ?
        json_node_get_object(cn) : NULL;
    JsonObject *area, *dg, *reqo, *newsegs;
    JsonArray *mand;
    uint64_t area_off = 0, iters;
    g_autoptr(GList) members = json_object_get_members(keyslots);
    g_autofree char *dname = NULL;
    uint8_t salt[REENC_DIGEST_SALT_LEN], dig[32];
    int zero = 0;

    /* The first free id and the end of the used key-slot area. */
    r->ks_id = 0;
    for (GList *l = members; l; l = l->next) {
        JsonObject *o = json_object_get_object_member(keyslots, l->data);
        JsonObject *a = json_object_get_object_member(o, "area");
        uint64_t off, size;

        r->ks_id = MAX(r->ks_id, atoi(l->data) + 1);
        if (reenc_get_u64(a, "keyslot area", "offset", &off, errp) < 0 ||
            reenc_get_u64(a, "keyslot area", "size", &size, errp) < 0) {
            return -1;
        }
        area_off = MAX(area_off, off + size);
    }
    area_off = qcrypto_luks2_round_up(area_off, QCRYPTO_LUKS2_AREA_ALIGN);
    if (area_off + REENC_AREA_SIZE > keyslots_end) {
        error_setg(errp, "No room in the LUKS2 key-slot area for the "
                   "re-encryption key slot");
        return -1;
    }
    area = json_object_new();
    reenc_set_u64(area, "offset", area_off);
    reenc_set_u64(area, "size", REENC_AREA_SIZE);
    json_object_set_string_member(area, "type", "datashift");
    reenc_set_u64(area, "shift_size", r->shift);
    reenc_add_keyslot(r, keyslots, area, reenc_mode_encrypt.name,
                      "backward");

    /* The backups; the active list is written by reenc_state_root(). */
    r->final = reenc_seg_copy(json_object_get_object_member(segs, "0"),
                        "backup-final");
    newsegs = json_object_new();
    json_object_set_object_member(newsegs, "0", reenc_linear_seg(0, r->size));
    json_object_set_object_member(newsegs, "1", r->final);
    json_object_set_object_member(newsegs, "2",
                                  reenc_linear_seg(r->moved_offset,
                                             r->moved_size));
    r->prev = json_object_get_object_member(newsegs, "0");
    r->moved = json_object_get_object_member(newsegs, "2");
    json_object_set_array_member(r->prev, "flags", json_array_new());
    json_array_add_string_element(
        json_object_get_array_member(r->prev, "flags"), "backup-previous");
    json_object_set_array_member(r->moved, "flags", json_array_new());
    json_array_add_string_element(
        json_object_get_array_member(r->moved, "flags"),
        "backup-moved-segment");
    json_object_set_object_member(json_node_get_object(r->root), "segments",
                                  newsegs);

    r->digest_new = 0;
    dg = json_object_get_object_member(digests, "0");
    json_object_set_array_member(dg, "segments", reenc_id_array(&zero, 0));
    iters = json_object_get_int_member(dg, "iterations");

    reqo = json_object_new();
    mand = json_array_new();
    json_array_add_string_element(mand, REENC_REQUIREMENT);
    json_object_set_array_member(reqo, "mandatory", mand);
    json_object_set_object_member(config, "requirements", reqo);

    /* The digest that binds it all to the volume key. */
    r->digest_reenc = 1;
    while (json_object_has_member(digests,
                                  dname = g_strdup_printf("%d",
                                                          r->digest_reenc))) {
        g_free(dname);
        r->digest_reenc++;
    }
    if (qcrypto_random_bytes(salt, sizeof(salt), errp) < 0 ||
        reenc_digest_compute(r, QCRYPTO_HASH_ALGO_SHA256, iters, salt,
                             sizeof(salt), NULL, 0, r->block->master_key,
                             r->block->master_key_len, dig, sizeof(dig),
                             errp) < 0) {
        return -1;
    }
    dg = reenc_pbkdf2_digest("sha256", iters, salt, sizeof(salt), dig,
                             sizeof(dig), reenc_id_array(&r->ks_id, 1),
                             json_array_new());
    json_object_set_object_member(digests, dname, dg);
    return reenc_add_size_token(r->root, r->size, errp);
}

int qcrypto_reencrypt_encrypt_init(const QCryptoBlockCreateOptions *options,
                                   const QCryptoReencryptIO *io,
                                   Error **errp)
{
    return qcrypto_reencrypt_encrypt_init_keys(options, NULL, io, errp);
}

int qcrypto_reencrypt_encrypt_init_keys(
    const QCryptoBlockCreateOptions *options, QCryptoReencryptKeys *keys,
    const QCryptoReencryptIO *io, Error **errp)
{
    QCryptoBlockCreateOptions opts = *options;
    MemHeader m = { 0 };
    g_autoptr(QCryptoLUKS2Metadata) md = NULL;
    g_autofree char *json = NULL;
    Reenc r = { .io = io, .version = REENC_REQ_VERSION };
    int64_t len = io->length(io->opaque, errp);
    uint64_t sector, data;
    int ret = -1;

    if (len < 0) {
        return -1;
    }
    if (len == 0 || len % 512) {
        error_setg(errp, "The image size (%" PRId64 " bytes) is not a "
                   "positive multiple of 512", len);
        return -1;
    }
    if (opts.detached_header) {
        error_setg(errp, "In-place encryption keeps the header in the image: "
                   "detached-header is not supported");
        return -1;
    }
    /* The data: the whole file, or (reduced) the first size bytes. */
    data = options->size ? options->size : (uint64_t)len;
    if (data > (uint64_t)len || !data || data % 512) {
        error_setg(errp, "The data size %" PRIu64 " is not a positive "
                   "multiple of 512 within the image (%" PRId64 " bytes)",
                   data, len);
        return -1;
    }
    opts.luks_version = 2;
    opts.size = data;
    sector = qcrypto_block_create_sector_size(&opts);
    if (data % sector) {
        error_setg(errp, "The data size (%" PRIu64 " bytes) is not a "
                   "multiple of the sector size %" PRIu64, data, sector);
        return -1;
    }
    r.block = qcrypto_block_create(&opts, mem_init, mem_write, &m, errp);
    if (!r.block) {
        goto out;
    }
    r.hdr = qcrypto_luks2_header_read(r.block, mem_read, &m, NULL, errp);
    if (!r.hdr) {
        goto out;
    }
    md = qcrypto_luks2_metadata_parse(r.hdr->json, r.hdr->bin.hdr_size, errp);
    if (!md) {
        goto out;
    }
    r.root = json_from_string(r.hdr->json, NULL);
    r.shift = m.len;
    r.size = data;
    r.moved_size = MIN(r.shift, r.size);
    /*
     * The file grows by 2 S: cryptsetup's layout for a device reduced by
     * 2 S (its --reduce-device-size must be at least twice the offset),
     * so that the zone next to the copy never overwrites it. The last S
     * are given back when done. Reduced (data < len), that room must be
     * there already, and nothing grows.
     */
    r.moved_offset = data + r.shift;
    if (data < (uint64_t)len && (uint64_t)len - data < 2 * r.shift) {
        error_setg(errp, "The room after the data (%" PRIu64 " bytes) must "
                   "be at least twice the data offset (%" PRIu64 " bytes)",
                   (uint64_t)len - data, r.shift);
        goto out;
    }
    if (!r.root ||
        reenc_init_metadata(&r, qcrypto_luks2_keyslots_end(md), errp) < 0) {
        goto out;
    }
    {
        g_autoptr(JsonNode) state = reenc_state_root(&r, r.size, 0);

        json = reenc_json_text(state);
    }
    /* Both header copies of the first state in the image in memory. */
    if (qcrypto_luks2_header_write(r.hdr, json, r.block, mem_write, NULL, &m,
                                   errp) < 0) {
        goto out;
    }
    if (reenc_init_write(&r, &m, len, errp) < 0) {
        goto out;
    }
    /* The new volume key for the resume of this process: no KDF there. */
    if (r.block->has_master_key) {
        reenc_keys_add(keys, r.block->master_key, r.block->master_key_len);
    }
    ret = 0;
out:
    if (m.buf) {
        explicit_bzero(m.buf, m.len);
        g_free(m.buf);
    }
    reenc_clear(&r);
    return ret;
}

/* ---- resume ---- */

/* Unlock the final key, check the digest, set up the payload cipher. */
static int reenc_unlock(Reenc *r, const QCryptoBlockSecret *secret,
                        Error **errp)
{
    g_autoptr(JsonNode) fin = reenc_final_root(r, false);
    g_autofree char *json = reenc_json_text(fin);
    g_autoptr(QCryptoLUKS2Metadata) md = NULL;
    g_autoptr(QCryptoSecureBuf) key = NULL;
    const QCryptoLUKS2Segment *seg;
    QCryptoLUKS2Cipher c;
    int slot, found;

    md = qcrypto_luks2_metadata_parse(json, r->hdr->bin.hdr_size, errp);
    if (!md) {
        return -1;
    }
    /* The key the init of this process made, if it matches: no KDF. */
    found = r->keys && md->segments[0]->digest >= 0 ?
        reenc_keys_find(r->keys, md->digests[md->segments[0]->digest], &key,
                        errp) : 0;
    if (found < 0 ||
        (!found && qcrypto_luks2_unlock(md, secret, r->block,
                                        reenc_block_read, (void *)r->io,
                                        &key, &slot, errp) < 0) ||
        reenc_digest_check(r, NULL, 0, key->data, key->len, errp) < 0) {
        return -1;
    }
    seg = md->segments[0];
    if (qcrypto_luks2_cipher_parse(seg->encryption, key->len, &c, errp) < 0) {
        return -1;
    }
    r->block->payload_offset = r->shift;
    r->block->sector_size = seg->sector_size;
    r->block->ivgen_sector_shift = __builtin_ctzll(seg->sector_size / 512);
    r->block->iv_sector_offset = 0;
    if (r->size % seg->sector_size) {
        error_setg(errp, "LUKS2 re-encryption: data size %" PRIu64 " is not "
                   "a multiple of the sector size %" PRIu32, r->size,
                   seg->sector_size);
        return -1;
    }
    return qcrypto_block_init_cipher(r->block, &c, key->data, key->len, errp);
}

/* Where the active segments say we are: lin plain bytes, zone in work. */
static int reenc_position(Reenc *r, uint64_t *lin, uint64_t *zone,
                          Error **errp)
{
    JsonObject *segs = reenc_section(r->root, "segments");
    uint64_t done = 0, expect_crypt = UINT64_MAX;

    *lin = *zone = 0;
    for (int id = 0; id < QCRYPTO_LUKS2_SEGMENTS_MAX; id++) {
        g_autofree char *k = g_strdup_printf("%d", id);
        JsonObject *s;
        const char *type;
        uint64_t off, size;

        if (!json_object_has_member(segs, k)) {
            break;
        }
        if (!JSON_NODE_HOLDS_OBJECT(json_object_get_member(segs, k))) {
            error_setg(errp, "LUKS2 segment %s is not an object", k);
            return -1;
        }
        s = json_object_get_object_member(segs, k);
        if (reenc_seg_has_flag(s, "backup-previous") ||
            reenc_seg_has_flag(s, "backup-final") ||
            reenc_seg_has_flag(s, "backup-moved-segment")) {
            break;
        }
        type = reenc_get_str(s, "type", "");
        if (reenc_get_u64(s, "segment", "offset", &off, errp) < 0) {
            return -1;
        }
        /*
         * cryptsetup writes the encrypted part as "dynamic" once it
         * reaches the end of the device (its last state before the final
         * one): whatever is left.
         */
        if (g_str_equal(type, "crypt") &&
            g_str_equal(reenc_get_str(s, "size", ""), "dynamic")) {
            size = r->size - MIN(r->size, *lin + *zone + done);
        } else if (reenc_get_u64(s, "segment", "size", &size, errp) < 0) {
            return -1;
        }
        /* No sum below may wrap (hostile sizes): none is above V */
        if (size > r->size) {
            goto bad;
        }
        if (g_str_equal(type, "linear") && !*zone && !done) {
            /* physical = logical, or the moved copy */
            if (off != (*lin < r->moved_size ? r->moved_offset + *lin
                                              : *lin)) {
                goto bad;
            }
            *lin += size;
        } else if (g_str_equal(type, "crypt")) {
            if (off != r->shift + *lin + *zone + done) {
                goto bad;
            }
            if (reenc_seg_has_flag(s, "in-reencryption")) {
                if (*zone || done) {
                    goto bad;
                }
                *zone = size;
            } else {
                done += size;
            }
            expect_crypt = 0;
        } else {
            goto bad;
        }
    }
    (void)expect_crypt;
    if (*lin + *zone + done != r->size || *zone > r->shift) {
        goto bad;
    }
    return 0;
bad:
    error_setg(errp, "LUKS2 re-encryption segments do not describe a "
               "backward encryption with data shift in progress");
    return -1;
}

/* Encrypt logical [a, a + len) from its old place to its new one. */
static int reenc_zone(Reenc *r, uint64_t a, uint64_t len, uint8_t *buf,
                      Error **errp)
{
    const QCryptoReencryptIO *io = r->io;
    /* The part in the moved copy (a zone read back may span its end) */
    uint64_t moved = a < r->moved_size ? MIN(len, r->moved_size - a) : 0;
    g_autoptr(JsonNode) during = reenc_state_root(r, a, len);
    g_autoptr(JsonNode) after = reenc_state_root(r, a, 0);

    /* The zone is marked before a byte of it moves, durable (see top). */
    if (reenc_write_root(r, during, errp) < 0 ||
        (moved && io->read(io->opaque, r->moved_offset + a, buf, moved,
                           errp) < 0) ||
        (len > moved && io->read(io->opaque, a + moved, buf + moved,
                                 len - moved, errp) < 0) ||
        qcrypto_block_encrypt(r->block, a, buf, len, errp) < 0 ||
        io->write(io->opaque, r->shift + a, buf, len, errp) < 0 ||
        io->sync(io->opaque, errp) < 0) {
        return -1;
    }
    return reenc_write_root(r, after, errp);
}

/*
 * Wipe the moved copy (plain text, no longer needed once the last zone is
 * recorded), write the final metadata, give the room back. The wipe comes
 * first so that no crash leaves plain text behind a finished header.
 */
static int reenc_finish(Reenc *r, Error **errp)
{
    const QCryptoReencryptIO *io = r->io;
    g_autoptr(JsonNode) fin = NULL;
    g_autofree uint8_t *zero = g_malloc0(1 << 20);
    int64_t len = io->length(io->opaque, errp);
    uint64_t end;

    if (len < 0) {
        return -1;
    }
    end = MIN((uint64_t)len, r->moved_offset + r->moved_size);
    for (uint64_t o = r->moved_offset; o < end; o += 1 << 20) {
        if (io->write(io->opaque, o, zero, MIN(1 << 20, end - o),
                      errp) < 0) {
            return -1;
        }
    }
    if (io->sync(io->opaque, errp) < 0) {
        return -1;
    }
    /*
     * The room given back before the final header: a failure in between
     * leaves the state "all done", which the resume finishes (the copy is
     * no longer needed), never a finished image of the wrong size.
     */
    if (io->truncate && (uint64_t)len > r->shift + r->size &&
        (io->truncate(io->opaque, r->shift + r->size, errp) < 0 ||
         io->sync(io->opaque, errp) < 0)) {
        return -1;
    }
    /* A block device keeps its length (its truncate does nothing). */
    len = io->length(io->opaque, errp);
    if (len < 0) {
        return -1;
    }
    fin = reenc_final_root(r, (uint64_t)len > r->shift + r->size);
    return reenc_write_root(r, fin, errp);
}

/*
 * The key-slot area of an init cut short after its headers (see
 * reenc_init_write()): taken again from the staging copy at V + 2 S, if
 * the file still has one of this very header (its UUID), and the staging
 * room given back. Only while nothing is encrypted: no zone runs before
 * the staging is gone (the init or this gave it back).
 */
static int reenc_restore_keyslots(Reenc *r, int64_t flen, Error **errp)
{
    static const uint8_t magic[6] = { 'L', 'U', 'K', 'S', 0xba, 0xbe };
    const QCryptoReencryptIO *io = r->io;
    /* Past the end (a grown file), or before the copy (a reduced one). */
    const uint64_t places[] = { r->moved_offset + r->shift, r->size };
    uint64_t hs = r->hdr->bin.hdr_size;
    g_autofree uint8_t *buf = NULL;
    /* LUKS2 on-disk format, section 2.1: uuid at byte 168, 40 bytes. */
    uint8_t bin[208];
    uint64_t staging = 0;
    bool found = false;

    if (2 * hs > r->shift) {
        return 0;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(places) && !found; i++) {
        staging = places[i];
        if ((uint64_t)flen < staging + r->shift) {
            continue;
        }
        if (io->read(io->opaque, staging, bin, sizeof(bin), errp) < 0) {
            return -1;
        }
        found = !memcmp(bin, magic, sizeof(magic)) &&
                !memcmp(bin + 168, r->hdr->bin.uuid, 40);
    }
    if (!found) {
        return 0;
    }
    buf = g_malloc(r->shift - 2 * hs);
    if (io->read(io->opaque, staging + 2 * hs, buf, r->shift - 2 * hs,
                 errp) < 0 ||
        io->write(io->opaque, 2 * hs, buf, r->shift - 2 * hs, errp) < 0 ||
        io->sync(io->opaque, errp) < 0 ||
        /* The room past the copy given back; a reduced file keeps it. */
        (staging > r->moved_offset &&
         (io->truncate(io->opaque, staging, errp) < 0 ||
          io->sync(io->opaque, errp) < 0))) {
        explicit_bzero(buf, r->shift - 2 * hs);
        return -1;
    }
    explicit_bzero(buf, r->shift - 2 * hs);
    return 0;
}

/* ---- the mode, for the loop of block-luks2-reencrypt-engine.c ---- */

typedef struct Enc {
    uint64_t lin;               /* [0, lin) still plain */
    uint64_t zone;              /* [lin, lin + zone) cut short by a crash */
} Enc;

static int enc_start(ReencRun *run, JsonObject *ks,
                     const QCryptoBlockSecret *secret, uint64_t hotzone,
                     Error **errp)
{
    Reenc *r = run->r;
    const QCryptoReencryptIO *io = r->io;
    Enc *e = run->state = g_new0(Enc, 1);
    int64_t flen;

    if (reenc_parse(r, ks, errp) < 0 ||
        reenc_position(r, &e->lin, &e->zone, errp) < 0) {
        return -1;
    }
    flen = io->length(io->opaque, errp);
    if (flen < 0 ||
        (e->lin == r->size && !e->zone && io->truncate &&
         reenc_restore_keyslots(r, flen, errp) < 0) ||
        reenc_unlock(r, secret, errp) < 0) {
        return -1;
    }
    /* All done (the final header was not written): the copy is not needed */
    if ((e->lin || e->zone) &&
        r->moved_offset + r->moved_size > (uint64_t)flen) {
        error_setg(errp, "The moved data lies beyond the end of the file: "
                   "was it truncated?");
        return -1;
    }
    hotzone = reenc_hotzone_size(hotzone, r->shift, r->shift,
                                 r->block->sector_size, errp);
    if (!hotzone) {
        return -1;
    }
    if (e->lin % r->block->sector_size || e->zone % r->block->sector_size) {
        error_setg(errp, "LUKS2 re-encryption segments are not aligned to "
                   "the %" PRIu64 "-byte sectors", r->block->sector_size);
        return -1;
    }
    run->hotzone = hotzone;
    /* A zone is at most the hot zone, a cut one, or the moved copy. */
    run->bufsize = MAX(MAX(hotzone, e->zone), r->moved_size);
    return 0;
}

/* A zone cut short: its source is intact, do it again. */
static int enc_recover(ReencRun *run, Error **errp)
{
    Enc *e = run->state;

    return e->zone ? reenc_zone(run->r, e->lin, e->zone, run->buf, errp) : 0;
}

/* Backwards, from the end of the plain text. */
static bool enc_next(ReencRun *run, uint64_t *off, uint64_t *len)
{
    Enc *e = run->state;
    uint64_t moved = run->r->moved_size;
    uint64_t floor = e->lin > moved ? moved : 0;

    if (!e->lin) {
        return false;
    }
    /*
     * Never across the end of the moved copy, and the copy in one zone
     * whatever the hot-zone size: cryptsetup cannot load a state with less
     * than a whole data shift of plain text left.
     */
    *len = floor ? MIN(run->hotzone, e->lin - floor) : e->lin;
    *off = e->lin - *len;
    return true;
}

static int enc_zone(ReencRun *run, uint64_t off, uint64_t len, Error **errp)
{
    Enc *e = run->state;

    if (reenc_zone(run->r, off, len, run->buf, errp) < 0) {
        return -1;
    }
    e->lin = off;
    return 0;
}

static uint64_t enc_done(ReencRun *run)
{
    Enc *e = run->state;

    return run->r->size - e->lin;
}

/* The last state before the final one: every zone's metadata is written. */
static int enc_stop_before_finish(ReencRun *run, Error **errp)
{
    return 0;
}

static int enc_finish(ReencRun *run, Error **errp)
{
    return reenc_finish(run->r, errp);
}

const ReencMode reenc_mode_encrypt = {
    .name = "encrypt",
    .start = enc_start,
    .recover = enc_recover,
    .next = enc_next,
    .zone = enc_zone,
    .done = enc_done,
    .stop_before_finish = enc_stop_before_finish,
    .finish = enc_finish,
};
