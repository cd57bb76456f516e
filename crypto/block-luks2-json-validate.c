/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LUKS2 JSON metadata (LUKS2 spec, "JSON area" and its objects), validated
 * as cryptsetup does (lib/luks2/luks2_json_metadata.c): every field's type
 * and range, 64-bit numbers as decimal strings, references between objects,
 * areas inside the key-slot area and apart from each other, and the
 * mandatory requirements. Each rule lives in a named luks2_json_validate_*
 * function, and each failure says which object and field is wrong. What
 * passes fills the structs of luks2priv.h.
 */
#include "block-luks2-json.h"

/*
 * json-glib parses recursively, without a depth limit: a JSON area of a
 * few MiB of '[' overflows the stack. cryptsetup's parser (json-c) stops
 * at 32 levels (JSON_TOKENER_DEFAULT_DEPTH), so nothing it accepts is
 * deeper; we refuse deeper documents before json-glib sees them.
 */
#define LUKS2_JSON_MAX_DEPTH 32

int luks2_json_validate_depth(const char *json, Error **errp)
{
    bool in_string = false;
    int depth = 0;

    for (const char *p = json; *p; p++) {
        if (in_string) {
            if (*p == '\\' && p[1]) {
                p++;
            } else if (*p == '"') {
                in_string = false;
            }
        } else if (*p == '"') {
            in_string = true;
        } else if (*p == '{' || *p == '[') {
            if (++depth > LUKS2_JSON_MAX_DEPTH) {
                error_setg(errp, "LUKS2 metadata is nested deeper than %d "
                           "levels", LUKS2_JSON_MAX_DEPTH);
                return -1;
            }
        } else if (*p == '}' || *p == ']') {
            depth--;
        }
    }
    return 0;
}

/* LUKS2 spec, JSON area: the five top-level objects. */
static int qcrypto_luks2_json_validate_top_level(JsonNode *root, Error **errp)
{
    static const char *const sections[] = {
        "keyslots", "tokens", "segments", "digests", "config",
    };
    JsonObject *obj;

    if (JSON_NODE_TYPE(root) != JSON_NODE_OBJECT) {
        error_setg(errp, "LUKS2 metadata is not a JSON object");
        return -1;
    }
    obj = json_node_get_object(root);
    for (size_t i = 0; i < G_N_ELEMENTS(sections); i++) {
        if (!luks2_json_get_object(obj, "metadata", sections[i], errp)) {
            return -1;
        }
    }
    return 0;
}

/*
 * LUKS2 spec, "config" object: requirements.mandatory lists features a reader
 * must understand. We understand none (they mark re-encryption in progress, or
 * hardware OPAL), so any entry refuses the image.
 */
static int qcrypto_luks2_json_validate_requirements(QCryptoLUKS2Metadata *md,
                                                    Error **errp)
{
    for (char **r = md->requirements; *r; r++) {
        if (g_str_has_prefix(*r, "online-reencrypt") ||
            g_str_has_prefix(*r, "offline-reencrypt")) {
            error_setg(errp, "LUKS2 image has an unfinished re-encryption "
                       "(mandatory requirement '%s'): finish it with "
                       "'qemu-img-lite reencrypt --resume-only' or "
                       "'cryptsetup reencrypt --resume-only' first", *r);
        } else {
            error_setg(errp, "LUKS2 image has an unknown mandatory "
                       "requirement '%s'", *r);
        }
        return -1;
    }
    return 0;
}

/* LUKS2 spec, "config" object: the config object. */
static int qcrypto_luks2_json_validate_config(QCryptoLUKS2Metadata *md,
                                              JsonObject *config, Error **errp)
{
    JsonObject *req;

    if (luks2_json_get_u64_string(config, "config", "json_size", &md->json_size,
                                  errp) < 0 ||
        luks2_json_get_u64_string(config, "config", "keyslots_size",
                                  &md->keyslots_size, errp) < 0) {
        return -1;
    }
    if (md->json_size != md->hdr_size - QCRYPTO_LUKS2_BIN_HDR_LEN) {
        error_setg(errp, "LUKS2 config: json_size %" PRIu64 " does not "
                   "match the header size %" PRIu64, md->json_size,
                   md->hdr_size);
        return -1;
    }
    /*
     * The key-slot area is 4 KiB aligned; bounding it also keeps
     * 2 * hdr_size + keyslots_size far from overflow.
     */
    if (md->keyslots_size % QCRYPTO_LUKS2_AREA_ALIGN ||
        md->keyslots_size > (UINT64_C(1) << 48)) {
        error_setg(errp, "LUKS2 config: keyslots_size %" PRIu64 " is not "
                   "a multiple of 4096 below 2^48", md->keyslots_size);
        return -1;
    }
    if (luks2_json_get_strv(config, "config", "flags", &md->config_flags,
                            errp) < 0) {
        return -1;
    }
    if (json_object_has_member(config, "requirements")) {
        req = luks2_json_get_object(config, "config", "requirements", errp);
        if (!req ||
            luks2_json_get_strv(req, "config requirements", "mandatory",
                                &md->requirements, errp) < 0) {
            return -1;
        }
    } else {
        md->requirements = g_new0(char *, 1);
    }
    return qcrypto_luks2_json_validate_requirements(md, errp);
}

/*
 * LUKS2 spec, "keyslots" object, kdf: a key slot's KDF, with our bounds on its
 * cost.
 */
static int qcrypto_luks2_json_validate_kdf(QCryptoLUKS2KDF *kdf,
                                           JsonObject *obj, const char *what,
                                           Error **errp)
{
    const char *type = luks2_json_get_string(obj, what, "type", errp);
    int t;

    if (!type) {
        return -1;
    }
    t = qcrypto_block_kdf_parse(type);
    /*
     * "argon2": how cryptsetup 2.0's development versions named argon2i;
     * cryptsetup's own test suite keeps such a header as its valid base
     * (luks2_valid_hdr).
     */
    if (g_str_equal(type, "argon2")) {
        t = QCRYPTO_BLOCK_KDF_ARGON2I;
    }
    if (t < 0) {
        error_setg(errp, "LUKS2 %s: unknown KDF '%s'", what, type);
        return -1;
    }
    kdf->type = t;
    if (luks2_json_get_base64(obj, what, "salt", kdf->salt, sizeof(kdf->salt),
                              &kdf->nsalt, errp) < 0) {
        return -1;
    }
    if (kdf->type == QCRYPTO_BLOCK_KDF_PBKDF2) {
        if (luks2_json_get_hash(obj, what, "hash", &kdf->hash, errp) < 0 ||
            /* Any cost is valid: unlocking applies the limit. */
            luks2_json_get_uint(obj, what, "iterations", 1, UINT32_MAX,
                                &kdf->iterations, errp) < 0) {
            return -1;
        }
        return 0;
    }

    /* argon2 (RFC 9106): the salt is at least 8 bytes (section 3.1). */
    if (kdf->nsalt < 8) {
        error_setg(errp, "LUKS2 %s: argon2 salt shorter than 8 bytes", what);
        return -1;
    }
    if (luks2_json_get_uint(obj, what, "time", 1, UINT32_MAX, &kdf->time,
                            errp) < 0 ||
        luks2_json_get_uint(obj, what, "cpus", 1,
                            QCRYPTO_LUKS2_ARGON2_PARALLEL_MAX,
                            &kdf->parallel, errp) < 0) {
        return -1;
    }
    if (luks2_json_get_uint(obj, what, "memory", 0, UINT32_MAX, &kdf->memory,
                            errp) < 0) {
        return -1;
    }
    if (kdf->memory > QCRYPTO_LUKS2_ARGON2_MEMORY_MAX_KIB) {
        error_setg(errp, "LUKS2 %s: argon2 memory cost %" PRIu32 " KiB is "
                   "above the 4 GiB limit", what, kdf->memory);
        return -1;
    }
    /* RFC 9106 section 3.1: at least 8 KiB per lane. */
    if (kdf->memory < 8 * kdf->parallel) {
        error_setg(errp, "LUKS2 %s: argon2 memory cost %" PRIu32 " KiB is "
                   "below 8 KiB per lane", what, kdf->memory);
        return -1;
    }
    if ((uint64_t)kdf->time * kdf->memory >
        QCRYPTO_LUKS2_ARGON2_WORK_MAX_KIB) {
        error_setg(errp, "LUKS2 %s: argon2 cost (time %" PRIu32 " x memory "
                   "%" PRIu32 " KiB) is unreasonably high", what, kdf->time,
                   kdf->memory);
        return -1;
    }
    return 0;
}

/* The bytes an AF-split key of nkey bytes x stripes occupies (whole
 * 512-byte sectors, as cryptsetup's AF_split_sectors()). */
static uint64_t qcrypto_luks2_json_af_bytes(uint64_t nkey, uint64_t stripes)
{
    return qcrypto_luks2_round_up(nkey * stripes, 512);
}

/*
 * LUKS2 spec, "keyslots" object: one key slot of type luks2 (af, area, kdf).
 */
static int qcrypto_luks2_json_validate_keyslot(QCryptoLUKS2Keyslot *ks,
                                               JsonObject *obj, Error **errp)
{
    g_autofree char *what = g_strdup_printf("key slot %d", ks->id);
    g_autofree char *what_af = g_strdup_printf("key slot %d af", ks->id);
    g_autofree char *what_area = g_strdup_printf("key slot %d area", ks->id);
    g_autofree char *what_kdf = g_strdup_printf("key slot %d kdf", ks->id);
    JsonObject *af, *area, *kdf;
    QCryptoLUKS2Cipher cipher;
    const char *s;
    uint32_t prio = QCRYPTO_LUKS2_PRIORITY_NORMAL;

    s = luks2_json_get_string(obj, what, "type", errp);
    if (!s) {
        return -1;
    }
    if (!g_str_equal(s, "luks2")) {
        error_setg(errp, "LUKS2 %s: unsupported type '%s'", what, s);
        return -1;
    }
    /*
     * Volume keys: cryptsetup's limit is 512 bytes (LUKS2 spec, "keyslots"
     * object).
     */
    if (luks2_json_get_uint(obj, what, "key_size", 1, 512, &ks->key_size,
                            errp) < 0) {
        return -1;
    }
    if (json_object_has_member(obj, "priority") &&
        luks2_json_get_uint(obj, what, "priority",
                            QCRYPTO_LUKS2_PRIORITY_IGNORE,
                            QCRYPTO_LUKS2_PRIORITY_HIGH, &prio, errp) < 0) {
        return -1;
    }
    ks->priority = prio;

    af = luks2_json_get_object(obj, what, "af", errp);
    if (!af || !(s = luks2_json_get_string(af, what_af, "type", errp))) {
        return -1;
    }
    if (!g_str_equal(s, "luks1")) {
        error_setg(errp, "LUKS2 %s: unsupported AF type '%s'", what, s);
        return -1;
    }
    if (luks2_json_get_hash(af, what_af, "hash", &ks->af_hash, errp) < 0 ||
        luks2_json_get_uint(af, what_af, "stripes", 1,
                            QCRYPTO_LUKS2_AF_STRIPES_MAX, &ks->af_stripes,
                            errp) < 0) {
        return -1;
    }

    area = luks2_json_get_object(obj, what, "area", errp);
    if (!area || !(s = luks2_json_get_string(area, what_area, "type", errp))) {
        return -1;
    }
    if (!g_str_equal(s, "raw")) {
        error_setg(errp, "LUKS2 %s: unsupported area type '%s'", what, s);
        return -1;
    }
    if (luks2_json_get_u64_string(area, what_area, "offset", &ks->area_offset,
                                  errp) < 0 ||
        luks2_json_get_u64_string(area, what_area, "size", &ks->area_size,
                                  errp) < 0 ||
        luks2_json_get_uint(area, what_area, "key_size", 1, 512,
                            &ks->area_key_size, errp) < 0 ||
        !(s = luks2_json_get_string(area, what_area, "encryption", errp))) {
        return -1;
    }
    ks->area_encryption = g_strdup(s);
    if (qcrypto_luks2_cipher_parse(s, ks->area_key_size, &cipher,
                                   errp) < 0) {
        error_prepend(errp, "LUKS2 %s: ", what_area);
        return -1;
    }
    if (ks->area_size <
        qcrypto_luks2_json_af_bytes(ks->key_size, ks->af_stripes)) {
        error_setg(errp, "LUKS2 %s: size %" PRIu64 " is too small for %"
                   PRIu32 " stripes of a %" PRIu32 "-byte key", what_area,
                   ks->area_size, ks->af_stripes, ks->key_size);
        return -1;
    }

    kdf = luks2_json_get_object(obj, what, "kdf", errp);
    return kdf ? qcrypto_luks2_json_validate_kdf(&ks->kdf, kdf, what_kdf, errp)
               : -1;
}

static int qcrypto_luks2_json_validate_keyslots(QCryptoLUKS2Metadata *md,
                                                JsonObject *keyslots,
                                                Error **errp)
{
    g_autoptr(GList) members = json_object_get_members(keyslots);

    for (GList *l = members; l; l = l->next) {
        JsonNode *node = json_object_get_member(keyslots, l->data);
        QCryptoLUKS2Keyslot *ks;
        int id = luks2_json_parse_id(l->data, QCRYPTO_LUKS2_KEYSLOTS_MAX,
                                     "keyslots", errp);

        if (id < 0) {
            return -1;
        }
        if (JSON_NODE_TYPE(node) != JSON_NODE_OBJECT) {
            error_setg(errp, "LUKS2 key slot %d is not an object", id);
            return -1;
        }
        ks = md->keyslots[id] = g_new0(QCryptoLUKS2Keyslot, 1);
        ks->id = id;
        ks->digest = -1;
        if (qcrypto_luks2_json_validate_keyslot(ks, json_node_get_object(node),
                                                errp) < 0) {
            return -1;
        }
    }
    return 0;
}

/*
 * LUKS2 spec, "config" object (keyslots_size): every key-slot area lies in the
 * key-slot area, which starts after both header copies and is keyslots_size
 * long, and no two overlap.
 */
static int qcrypto_luks2_json_validate_keyslot_areas(QCryptoLUKS2Metadata *md,
                                                     Error **errp)
{
    uint64_t start = 2 * md->hdr_size;
    uint64_t end = qcrypto_luks2_keyslots_end(md);

    for (int i = 0; i < QCRYPTO_LUKS2_KEYSLOTS_MAX; i++) {
        const QCryptoLUKS2Keyslot *a = md->keyslots[i];

        if (!a) {
            continue;
        }
        if (a->area_offset < start || a->area_size > end ||
            a->area_offset > end - a->area_size) {
            error_setg(errp, "LUKS2 key slot %d: area %" PRIu64 "+%" PRIu64
                       " is outside the key-slot area %" PRIu64 "..%"
                       PRIu64, i, a->area_offset, a->area_size, start, end);
            return -1;
        }
        for (int j = 0; j < i; j++) {
            const QCryptoLUKS2Keyslot *b = md->keyslots[j];

            if (b && a->area_offset < b->area_offset + b->area_size &&
                b->area_offset < a->area_offset + a->area_size) {
                error_setg(errp, "LUKS2 key slots %d and %d: areas overlap",
                           j, i);
                return -1;
            }
        }
    }
    return 0;
}

/* LUKS2 spec, "segments" object: a segment of type crypt. */
static int qcrypto_luks2_json_validate_segment(QCryptoLUKS2Metadata *md,
                                               QCryptoLUKS2Segment *seg,
                                               JsonObject *obj, Error **errp)
{
    g_autofree char *what = g_strdup_printf("segment %d", seg->id);
    g_auto(GStrv) flags = NULL;
    const char *s;

    s = luks2_json_get_string(obj, what, "type", errp);
    if (!s) {
        return -1;
    }
    if (!g_str_equal(s, "crypt")) {
        error_setg(errp, "LUKS2 %s: unsupported type '%s'", what, s);
        return -1;
    }
    if (json_object_has_member(obj, "integrity")) {
        error_setg(errp, "LUKS2 %s: authenticated encryption "
                   "(dm-integrity) is not supported", what);
        return -1;
    }
    /* LUKS2 spec, "segments" object: 512, 1024, 2048 or 4096-byte sectors. */
    if (luks2_json_get_uint(obj, what, "sector_size", 512, 4096,
                            &seg->sector_size, errp) < 0) {
        return -1;
    }
    if (seg->sector_size & (seg->sector_size - 1)) {
        error_setg(errp, "LUKS2 %s: sector_size %" PRIu32 " is not a power "
                   "of two", what, seg->sector_size);
        return -1;
    }
    if (luks2_json_get_u64_string(obj, what, "offset", &seg->offset,
                                  errp) < 0 ||
        luks2_json_get_u64_string(obj, what, "iv_tweak", &seg->iv_tweak,
                                  errp) < 0 ||
        luks2_json_get_strv(obj, what, "flags", &flags, errp) < 0 ||
        !(s = luks2_json_get_string(obj, what, "encryption", errp))) {
        return -1;
    }
    seg->encryption = g_strdup(s);

    s = luks2_json_get_string(obj, what, "size", errp);
    if (!s) {
        return -1;
    }
    seg->size_dynamic = g_str_equal(s, "dynamic");
    if (!seg->size_dynamic &&
        luks2_json_get_u64_string(obj, what, "size", &seg->size, errp) < 0) {
        return -1;
    }

    if (seg->offset % seg->sector_size ||
        (!seg->size_dynamic && seg->size % seg->sector_size)) {
        error_setg(errp, "LUKS2 %s: offset %" PRIu64 " or size is not a "
                   "multiple of the %" PRIu32 "-byte sector", what,
                   seg->offset, seg->sector_size);
        return -1;
    }
    if (seg->offset > (UINT64_C(1) << 62) ||
        (!seg->size_dynamic && seg->size > (UINT64_C(1) << 62))) {
        error_setg(errp, "LUKS2 %s: offset or size is beyond 2^62", what);
        return -1;
    }
    /* Offset 0: a detached header, the payload has the file to itself. */
    if (seg->offset && seg->offset < qcrypto_luks2_keyslots_end(md)) {
        error_setg(errp, "LUKS2 %s: offset %" PRIu64 " lies inside the "
                   "header and key-slot area (which ends at %" PRIu64 ")",
                   what, seg->offset, qcrypto_luks2_keyslots_end(md));
        return -1;
    }
    /*
     * The IV counts 512-byte units; we hand the cipher whole sectors, so
     * the tweak has to be a whole number of them.
     */
    if (seg->iv_tweak % (seg->sector_size / 512)) {
        error_setg(errp, "LUKS2 %s: iv_tweak %" PRIu64 " is not a whole "
                   "number of %" PRIu32 "-byte sectors", what,
                   seg->iv_tweak, seg->sector_size);
        return -1;
    }
    return 0;
}

static int qcrypto_luks2_json_validate_segments(QCryptoLUKS2Metadata *md,
                                                JsonObject *segments,
                                                Error **errp)
{
    g_autoptr(GList) members = json_object_get_members(segments);

    for (GList *l = members; l; l = l->next) {
        JsonNode *node = json_object_get_member(segments, l->data);
        QCryptoLUKS2Segment *seg;
        int id = luks2_json_parse_id(l->data, QCRYPTO_LUKS2_SEGMENTS_MAX,
                                     "segments", errp);

        if (id < 0) {
            return -1;
        }
        if (JSON_NODE_TYPE(node) != JSON_NODE_OBJECT) {
            error_setg(errp, "LUKS2 segment %d is not an object", id);
            return -1;
        }
        seg = md->segments[id] = g_new0(QCryptoLUKS2Segment, 1);
        seg->id = id;
        seg->digest = -1;
        if (qcrypto_luks2_json_validate_segment(
                md, seg, json_node_get_object(node), errp) < 0) {
            return -1;
        }
    }

    /* Segments do not overlap; only the last may run to the end. */
    for (int i = 0; i < QCRYPTO_LUKS2_SEGMENTS_MAX; i++) {
        const QCryptoLUKS2Segment *a = md->segments[i];

        for (int j = 0; a && j < QCRYPTO_LUKS2_SEGMENTS_MAX; j++) {
            const QCryptoLUKS2Segment *b = md->segments[j];

            if (j == i || !b || b->offset < a->offset) {
                continue;
            }
            if (a->size_dynamic || a->offset + a->size > b->offset) {
                error_setg(errp, "LUKS2 segments %d and %d overlap", i, j);
                return -1;
            }
        }
    }
    return 0;
}

/* LUKS2 spec, "digests" object: digests of type pbkdf2, and what they bind. */
static int qcrypto_luks2_json_validate_digest(QCryptoLUKS2Metadata *md,
                                              QCryptoLUKS2Digest *d,
                                              JsonObject *obj, Error **errp)
{
    g_autofree char *what = g_strdup_printf("digest %d", d->id);
    const char *s = luks2_json_get_string(obj, what, "type", errp);

    if (!s) {
        return -1;
    }
    if (!g_str_equal(s, "pbkdf2")) {
        error_setg(errp, "LUKS2 %s: unsupported type '%s'", what, s);
        return -1;
    }
    if (luks2_json_get_id_array(obj, what, "keyslots",
                                QCRYPTO_LUKS2_KEYSLOTS_MAX,
                                (void *const *)md->keyslots, &d->keyslots,
                                errp) < 0 ||
        luks2_json_get_id_array(obj, what, "segments",
                                QCRYPTO_LUKS2_SEGMENTS_MAX,
                                (void *const *)md->segments, &d->segments,
                                errp) < 0 ||
        luks2_json_get_hash(obj, what, "hash", &d->hash, errp) < 0 ||
        luks2_json_get_uint(obj, what, "iterations", 1, UINT32_MAX,
                            &d->iterations, errp) < 0 ||
        luks2_json_get_base64(obj, what, "salt", d->salt, sizeof(d->salt),
                              &d->nsalt, errp) < 0 ||
        luks2_json_get_base64(obj, what, "digest", d->digest, sizeof(d->digest),
                              &d->ndigest, errp) < 0) {
        return -1;
    }

    /* A key slot or segment has one digest at most (cryptsetup's rule). */
    for (int i = 0; i < QCRYPTO_LUKS2_KEYSLOTS_MAX; i++) {
        if (d->keyslots & (1u << i)) {
            if (md->keyslots[i]->digest >= 0) {
                error_setg(errp, "LUKS2 key slot %d is bound to digests %d "
                           "and %d", i, md->keyslots[i]->digest, d->id);
                return -1;
            }
            md->keyslots[i]->digest = d->id;
        }
    }
    for (int i = 0; i < QCRYPTO_LUKS2_SEGMENTS_MAX; i++) {
        if (d->segments & (1u << i)) {
            if (md->segments[i]->digest >= 0) {
                error_setg(errp, "LUKS2 segment %d is bound to digests %d "
                           "and %d", i, md->segments[i]->digest, d->id);
                return -1;
            }
            md->segments[i]->digest = d->id;
        }
    }
    return 0;
}

static int qcrypto_luks2_json_validate_digests(QCryptoLUKS2Metadata *md,
                                               JsonObject *digests,
                                               Error **errp)
{
    g_autoptr(GList) members = json_object_get_members(digests);

    for (GList *l = members; l; l = l->next) {
        JsonNode *node = json_object_get_member(digests, l->data);
        QCryptoLUKS2Digest *d;
        int id = luks2_json_parse_id(l->data, QCRYPTO_LUKS2_DIGESTS_MAX,
                                     "digests", errp);

        if (id < 0) {
            return -1;
        }
        if (JSON_NODE_TYPE(node) != JSON_NODE_OBJECT) {
            error_setg(errp, "LUKS2 digest %d is not an object", id);
            return -1;
        }
        d = md->digests[id] = g_new0(QCryptoLUKS2Digest, 1);
        d->id = id;
        if (qcrypto_luks2_json_validate_digest(
                md, d, json_node_get_object(node), errp) < 0) {
            return -1;
        }
    }
    return 0;
}

/*
 * A segment's cipher has to take the key its key slots hold: the volume
 * key of every slot bound to the segment's digest.
 */
static int qcrypto_luks2_json_validate_segment_ciphers(
    QCryptoLUKS2Metadata *md, Error **errp)
{
    for (int i = 0; i < QCRYPTO_LUKS2_SEGMENTS_MAX; i++) {
        const QCryptoLUKS2Segment *seg = md->segments[i];
        const QCryptoLUKS2Digest *d;

        if (!seg || seg->digest < 0) {
            continue;
        }
        d = md->digests[seg->digest];
        for (int k = 0; k < QCRYPTO_LUKS2_KEYSLOTS_MAX; k++) {
            QCryptoLUKS2Cipher c;

            if (!(d->keyslots & (1u << k))) {
                continue;
            }
            if (qcrypto_luks2_cipher_parse(seg->encryption,
                                           md->keyslots[k]->key_size, &c,
                                           errp) < 0) {
                error_prepend(errp, "LUKS2 segment %d (key of key slot %d): ",
                              i, k);
                return -1;
            }
        }
    }
    return 0;
}

/*
 * LUKS2 spec, "tokens" object: tokens are for external tools; we check only
 * what every token has (a type and the key slots it serves) and keep the rest.
 */
static int qcrypto_luks2_json_validate_tokens(QCryptoLUKS2Metadata *md,
                                              JsonObject *tokens, Error **errp)
{
    g_autoptr(GList) members = json_object_get_members(tokens);

    for (GList *l = members; l; l = l->next) {
        JsonNode *node = json_object_get_member(tokens, l->data);
        g_autofree char *what = NULL;
        QCryptoLUKS2Token *t;
        const char *type;
        int id = luks2_json_parse_id(l->data, QCRYPTO_LUKS2_TOKENS_MAX,
                                     "tokens", errp);

        if (id < 0) {
            return -1;
        }
        if (JSON_NODE_TYPE(node) != JSON_NODE_OBJECT) {
            error_setg(errp, "LUKS2 token %d is not an object", id);
            return -1;
        }
        what = g_strdup_printf("token %d", id);
        t = md->tokens[id] = g_new0(QCryptoLUKS2Token, 1);
        t->id = id;
        type = luks2_json_get_string(json_node_get_object(node), what, "type",
                                     errp);
        if (!type ||
            luks2_json_get_id_array(json_node_get_object(node), what,
                                    "keyslots", QCRYPTO_LUKS2_KEYSLOTS_MAX,
                                    (void *const *)md->keyslots, &t->keyslots,
                                    errp) < 0) {
            return -1;
        }
        t->type = g_strdup(type);
        if (!g_str_equal(type, QCRYPTO_LUKS2_TOKEN_DATA_SIZE)) {
            continue;
        }
        if (luks2_json_get_u64_string(json_node_get_object(node), what,
                                      "size", &t->data_size, errp) < 0) {
            return -1;
        }
        if (!t->data_size || t->data_size % 512 ||
            t->data_size > (UINT64_C(1) << 62)) {
            error_setg(errp, "LUKS2 token %d (%s): the size %" PRIu64
                       " is not a positive multiple of 512", id, type,
                       t->data_size);
            return -1;
        }
    }
    return 0;
}

/* Fill md's structs from md->root, validating everything. */
int luks2_json_validate(QCryptoLUKS2Metadata *md, Error **errp)
{
    JsonObject *root;

    if (qcrypto_luks2_json_validate_top_level(md->root, errp) < 0) {
        return -1;
    }
    root = json_node_get_object(md->root);
    /* config first: the requirements and the area bounds gate the rest. */
    if (qcrypto_luks2_json_validate_config(
            md, json_object_get_object_member(root, "config"), errp) < 0 ||
        qcrypto_luks2_json_validate_keyslots(
            md, json_object_get_object_member(root, "keyslots"), errp) < 0 ||
        qcrypto_luks2_json_validate_keyslot_areas(md, errp) < 0 ||
        qcrypto_luks2_json_validate_segments(
            md, json_object_get_object_member(root, "segments"), errp) < 0 ||
        qcrypto_luks2_json_validate_digests(
            md, json_object_get_object_member(root, "digests"), errp) < 0 ||
        qcrypto_luks2_json_validate_segment_ciphers(md, errp) < 0 ||
        qcrypto_luks2_json_validate_tokens(
            md, json_object_get_object_member(root, "tokens"), errp) < 0) {
        return -1;
    }
    return 0;
}
