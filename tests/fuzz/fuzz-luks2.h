/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What the LUKS2 fuzz targets share: checksums put right, and key slot
 * costs bounded, before the input is opened.
 *
 * Checksums: a mutated JSON area would almost never carry a matching
 * SHA-256, and the fuzzer would never get past the checksum. So, as
 * cryptsetup's own LUKS2 fuzzers do, the harness computes it, but only
 * for a header copy whose checksum field is all zero (the seeds are
 * written so): a non-zero field is left as it is, so checksum mismatches
 * are fuzzed too.
 *
 * Costs: the format accepts key slots that take a minute (2^27 PBKDF2
 * iterations, 4 GiB of argon2 memory): valid but slow, not a bug. The
 * open target skips inputs whose JSON asks for more than a little.
 */
#ifndef FUZZ_LUKS2_H
#define FUZZ_LUKS2_H

#include <json-glib/json-glib.h>

#include "crypto/hash.h"
#include "fuzz-image.h"

/* LUKS2 spec, binary header: the fields we touch, and the header sizes. */
#define LUKS2_BIN_HDR_LEN 4096
#define LUKS2_OFF_HDR_SIZE 8
#define LUKS2_OFF_CHECKSUM_ALG 72
#define LUKS2_CHECKSUM_ALG_LEN 32
#define LUKS2_OFF_CSUM 448
#define LUKS2_CSUM_LEN 64
#define LUKS2_HDR_SIZE_MIN (16 * 1024)
#define LUKS2_HDR_SIZE_MAX (4 * 1024 * 1024)

/* Where a header copy may start: 0, and every allowed size (secondary). */
#define FUZZ_LUKS2_FOREACH_COPY(off)                                    \
    for (uint64_t off = 0; off <= LUKS2_HDR_SIZE_MAX;                   \
         off = off ? off * 2 : LUKS2_HDR_SIZE_MIN)

static inline uint64_t fuzz_luks2_hdr_size(const uint8_t *buf, size_t size,
                                           uint64_t off)
{
    uint64_t hdr_size;

    if (off + LUKS2_BIN_HDR_LEN > size) {
        return 0;
    }
    hdr_size = (uint64_t)fuzz_get_be32(buf, size, off + LUKS2_OFF_HDR_SIZE)
        << 32 | fuzz_get_be32(buf, size, off + LUKS2_OFF_HDR_SIZE + 4);
    if (hdr_size < LUKS2_HDR_SIZE_MIN || hdr_size > LUKS2_HDR_SIZE_MAX ||
        (hdr_size & (hdr_size - 1))) {
        return 0;
    }
    return hdr_size;
}

/* Fill the all-zero checksum fields of the copies in buf (see above). */
static inline void fuzz_luks2_fix_checksums(uint8_t *buf, size_t size)
{
    static const uint8_t zeros[LUKS2_CSUM_LEN];

    FUZZ_LUKS2_FOREACH_COPY(off) {
        uint64_t hdr_size = fuzz_luks2_hdr_size(buf, size, off);
        uint8_t *csum = buf + off + LUKS2_OFF_CSUM;
        g_autofree char *alg = NULL;
        g_autoptr(QCryptoHash) hash = NULL;
        uint8_t digest[QCRYPTO_HASH_MAX_DIGEST_LEN];
        size_t have;
        int h;

        if (!hdr_size || memcmp(csum, zeros, LUKS2_CSUM_LEN) != 0) {
            continue;
        }
        alg = g_strndup((const char *)buf + off + LUKS2_OFF_CHECKSUM_ALG,
                        LUKS2_CHECKSUM_ALG_LEN);
        h = qcrypto_hash_algo_parse(alg);
        if (h < 0 || !qcrypto_hash_supports(h) ||
            qcrypto_hash_digest_len(h) > LUKS2_CSUM_LEN) {
            continue;
        }
        /* The copy as the format reads it: a short input reads zeros. */
        hash = qcrypto_hash_new(h, NULL);
        have = MIN(hdr_size, size - off);
        qcrypto_hash_update(hash, buf + off, have);
        for (size_t n = have; n < hdr_size; n += sizeof(zeros)) {
            qcrypto_hash_update(hash, zeros, MIN(sizeof(zeros),
                                                 hdr_size - n));
        }
        qcrypto_hash_finalize(hash, digest);
        memcpy(csum, digest, qcrypto_hash_digest_len(h));
    }
}

/* The largest costs an opened input may ask for. */
#ifndef FUZZ_LUKS2_MAX_ITERATIONS      /* a target may allow more */
#define FUZZ_LUKS2_MAX_ITERATIONS 1000  /* PBKDF2, key slots and digests */
#endif
#define FUZZ_LUKS2_MAX_TIME 8           /* argon2 passes */
#define FUZZ_LUKS2_MAX_MEMORY 1024      /* argon2 KiB */
#define FUZZ_LUKS2_MAX_CPUS 4           /* argon2 lanes (threads) */
#define FUZZ_LUKS2_MAX_STRIPES 4000     /* AF stripes */
#define FUZZ_LUKS2_MAX_KEY_SIZE 128     /* bytes, so AF <= 512 KiB */

static bool fuzz_luks2_member_bounded(const char *name, JsonNode *node)
{
    static const struct {
        const char *name;
        gint64 max;
    } bounds[] = {
        { "iterations", FUZZ_LUKS2_MAX_ITERATIONS },
        { "time", FUZZ_LUKS2_MAX_TIME },
        { "memory", FUZZ_LUKS2_MAX_MEMORY },
        { "cpus", FUZZ_LUKS2_MAX_CPUS },
        { "stripes", FUZZ_LUKS2_MAX_STRIPES },
        { "key_size", FUZZ_LUKS2_MAX_KEY_SIZE },
    };

    for (size_t i = 0; i < G_N_ELEMENTS(bounds); i++) {
        if (strcmp(name, bounds[i].name) == 0 &&
            JSON_NODE_TYPE(node) == JSON_NODE_VALUE &&
            json_node_get_value_type(node) == G_TYPE_INT64 &&
            json_node_get_int(node) > bounds[i].max) {
            return false;
        }
    }
    return true;
}

static bool fuzz_luks2_node_bounded(JsonNode *node)
{
    if (JSON_NODE_TYPE(node) == JSON_NODE_OBJECT) {
        JsonObject *obj = json_node_get_object(node);
        g_autoptr(GList) members = json_object_get_members(obj);

        for (GList *l = members; l; l = l->next) {
            JsonNode *child = json_object_get_member(obj, l->data);

            if (!fuzz_luks2_member_bounded(l->data, child) ||
                !fuzz_luks2_node_bounded(child)) {
                return false;
            }
        }
    } else if (JSON_NODE_TYPE(node) == JSON_NODE_ARRAY) {
        JsonArray *arr = json_node_get_array(node);

        for (guint i = 0; i < json_array_get_length(arr); i++) {
            if (!fuzz_luks2_node_bounded(json_array_get_element(arr, i))) {
                return false;
            }
        }
    }
    return true;
}

/*
 * Deeper than the format accepts (32 levels): it is refused before
 * parsing, and json-glib's recursion must not be run on it here either.
 */
static bool fuzz_luks2_json_too_deep(const char *json)
{
    int depth = 0;

    for (const char *p = json; *p; p++) {
        if (*p == '{' || *p == '[') {
            if (++depth > 32) {
                return true;
            }
        } else if (*p == '}' || *p == ']') {
            depth--;
        }
    }
    return false;
}

/*
 * Whether the primary JSON's segment 0 starts at offset 0: a detached
 * header, to be opened as one.
 */
static inline bool fuzz_luks2_detached(const uint8_t *buf, size_t size)
{
    uint64_t hdr_size = fuzz_luks2_hdr_size(buf, size, 0);
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autofree char *json = NULL;
    JsonNode *node;
    const char *path[] = { "segments", "0", "offset" };

    if (!hdr_size || size <= LUKS2_BIN_HDR_LEN) {
        return false;
    }
    json = g_strndup((const char *)buf + LUKS2_BIN_HDR_LEN,
                     MIN(hdr_size, size) - LUKS2_BIN_HDR_LEN);
    if (fuzz_luks2_json_too_deep(json) ||
        !json_parser_load_from_data(parser, json, -1, NULL)) {
        return false;
    }
    node = json_parser_get_root(parser);
    for (size_t i = 0; i < G_N_ELEMENTS(path); i++) {
        if (!node || JSON_NODE_TYPE(node) != JSON_NODE_OBJECT) {
            return false;
        }
        node = json_object_get_member(json_node_get_object(node), path[i]);
    }
    return node && JSON_NODE_TYPE(node) == JSON_NODE_VALUE &&
        json_node_get_value_type(node) == G_TYPE_STRING &&
        strcmp(json_node_get_string(node), "0") == 0;
}

/* Whether every JSON area that could be read asks for little work. */
static inline bool fuzz_luks2_costs_bounded(const uint8_t *buf, size_t size)
{
    FUZZ_LUKS2_FOREACH_COPY(off) {
        uint64_t hdr_size = fuzz_luks2_hdr_size(buf, size, off);
        g_autoptr(JsonParser) parser = NULL;
        g_autofree char *json = NULL;

        if (!hdr_size || off + LUKS2_BIN_HDR_LEN >= size) {
            continue;
        }
        json = g_strndup((const char *)buf + off + LUKS2_BIN_HDR_LEN,
                         MIN(hdr_size - LUKS2_BIN_HDR_LEN,
                             size - off - LUKS2_BIN_HDR_LEN));
        /* (the depth count ignores strings: it may only err on "deep") */
        if (fuzz_luks2_json_too_deep(json)) {
            return false;
        }
        parser = json_parser_new();
        if (json_parser_load_from_data(parser, json, -1, NULL) &&
            json_parser_get_root(parser) &&
            !fuzz_luks2_node_bounded(json_parser_get_root(parser))) {
            return false;
        }
    }
    return true;
}

#endif
