/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LUKS2 JSON metadata: typed field access (LUKS2 spec, "JSON area"). Each
 * reader takes one member of a JSON object, checks its JSON type and its
 * range or syntax (64-bit numbers as decimal strings, base64, hash names,
 * object ids), and on failure says which object and field is wrong; the
 * rules of block-luks2-json-validate.c are written with them.
 */
#include <string.h>

#include "block-luks2-json.h"

static JsonNode *qcrypto_luks2_json_get(JsonObject *obj, const char *what,
                                        const char *key, JsonNodeType type,
                                        Error **errp)
{
    static const char *const type_names[] = {
        [JSON_NODE_OBJECT] = "an object", [JSON_NODE_ARRAY] = "an array",
        [JSON_NODE_VALUE] = "a value", [JSON_NODE_NULL] = "null",
    };
    JsonNode *node = json_object_get_member(obj, key);

    if (!node) {
        error_setg(errp, "LUKS2 %s: missing '%s'", what, key);
        return NULL;
    }
    if (JSON_NODE_TYPE(node) != type) {
        error_setg(errp, "LUKS2 %s: '%s' is not %s", what, key,
                   type_names[type]);
        return NULL;
    }
    return node;
}

JsonObject *luks2_json_get_object(JsonObject *obj, const char *what,
                                  const char *key, Error **errp)
{
    JsonNode *node =
        qcrypto_luks2_json_get(obj, what, key, JSON_NODE_OBJECT, errp);

    return node ? json_node_get_object(node) : NULL;
}

const char *luks2_json_get_string(JsonObject *obj, const char *what,
                                  const char *key, Error **errp)
{
    JsonNode *node =
        qcrypto_luks2_json_get(obj, what, key, JSON_NODE_VALUE, errp);

    if (!node) {
        return NULL;
    }
    if (json_node_get_value_type(node) != G_TYPE_STRING) {
        error_setg(errp, "LUKS2 %s: '%s' is not a string", what, key);
        return NULL;
    }
    return json_node_get_string(node);
}

/*
 * LUKS2 spec, JSON area: 64-bit numbers are decimal strings (JSON numbers lose
 * precision above 2^53). Only digits; no sign, no space, no overflow.
 */
int luks2_json_get_u64_string(JsonObject *obj, const char *what,
                              const char *key, uint64_t *out, Error **errp)
{
    const char *s = luks2_json_get_string(obj, what, key, errp);
    uint64_t v = 0;

    if (!s) {
        return -1;
    }
    if (!*s) {
        error_setg(errp, "LUKS2 %s: '%s' is an empty string", what, key);
        return -1;
    }
    for (const char *p = s; *p; p++) {
        if (!g_ascii_isdigit(*p)) {
            error_setg(errp, "LUKS2 %s: '%s' (\"%.32s\") is not an unsigned "
                       "decimal number", what, key, s);
            return -1;
        }
        if (v > (UINT64_MAX - (*p - '0')) / 10) {
            error_setg(errp, "LUKS2 %s: '%s' (\"%.32s\") overflows 64 bits",
                       what, key, s);
            return -1;
        }
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return 0;
}

/* A JSON integer (not a string, not a float) within [min, max]. */
int luks2_json_get_uint(JsonObject *obj, const char *what, const char *key,
                        uint64_t min, uint64_t max, uint32_t *out,
                        Error **errp)
{
    JsonNode *node =
        qcrypto_luks2_json_get(obj, what, key, JSON_NODE_VALUE, errp);
    gint64 v;

    if (!node) {
        return -1;
    }
    if (json_node_get_value_type(node) != G_TYPE_INT64) {
        error_setg(errp, "LUKS2 %s: '%s' is not an integer", what, key);
        return -1;
    }
    v = json_node_get_int(node);
    if (v < 0 || (uint64_t)v < min || (uint64_t)v > max) {
        error_setg(errp, "LUKS2 %s: '%s' is %" G_GINT64_FORMAT ", outside "
                   "%" PRIu64 "..%" PRIu64, what, key, v, min, max);
        return -1;
    }
    g_assert(max <= UINT32_MAX);
    *out = v;
    return 0;
}

static bool qcrypto_luks2_json_base64_valid(const char *s)
{
    size_t len = strlen(s);
    size_t pad = 0;

    if (len % 4) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '=') {
            pad++;
        } else if (pad || !(g_ascii_isalnum(s[i]) || s[i] == '+' ||
                            s[i] == '/')) {
            return false;
        }
    }
    return pad <= 2;
}

/* Base64 of 1..max bytes. */
int luks2_json_get_base64(JsonObject *obj, const char *what,
                          const char *key, uint8_t *out, size_t max,
                          size_t *nout, Error **errp)
{
    const char *s = luks2_json_get_string(obj, what, key, errp);
    g_autofree guchar *bytes = NULL;
    gsize n;

    if (!s) {
        return -1;
    }
    /* g_base64_decode() skips bad characters silently: check first. */
    if (!qcrypto_luks2_json_base64_valid(s)) {
        error_setg(errp, "LUKS2 %s: '%s' is not base64", what, key);
        return -1;
    }
    if (strlen(s) / 4 * 3 > max + 2) {
        error_setg(errp, "LUKS2 %s: '%s' is longer than %zu bytes",
                   what, key, max);
        return -1;
    }
    bytes = g_base64_decode(s, &n);
    if (n == 0 || n > max) {
        error_setg(errp, "LUKS2 %s: '%s' has %zu bytes, not 1..%zu",
                   what, key, (size_t)n, max);
        return -1;
    }
    memcpy(out, bytes, n);
    *nout = n;
    return 0;
}

int luks2_json_get_hash(JsonObject *obj, const char *what, const char *key,
                        QCryptoHashAlgo *out, Error **errp)
{
    const char *s = luks2_json_get_string(obj, what, key, errp);
    int alg;

    if (!s) {
        return -1;
    }
    alg = qcrypto_hash_algo_parse(s);
    if (alg < 0 || !qcrypto_hash_supports(alg)) {
        error_setg(errp, "LUKS2 %s: unsupported hash '%s'", what, s);
        return -1;
    }
    *out = alg;
    return 0;
}

/* Object ids are canonical decimal strings "0".."max-1". */
int luks2_json_parse_id(const char *s, int max, const char *what,
                        Error **errp)
{
    int v = 0;

    if (!*s || (s[0] == '0' && s[1]) || strlen(s) > 3) {
        goto bad;
    }
    for (const char *p = s; *p; p++) {
        if (!g_ascii_isdigit(*p)) {
            goto bad;
        }
        v = v * 10 + (*p - '0');
    }
    if (v >= max) {
        goto bad;
    }
    return v;

bad:
    error_setg(errp, "LUKS2 %s: id \"%.16s\" is not a number from 0 to %d",
               what, s, max - 1);
    return -1;
}

/* An array of id strings, each naming an existing object. */
int luks2_json_get_id_array(JsonObject *obj, const char *what,
                            const char *key, int max, void *const *exist,
                            uint32_t *bitmap, Error **errp)
{
    JsonNode *node =
        qcrypto_luks2_json_get(obj, what, key, JSON_NODE_ARRAY, errp);
    JsonArray *arr;

    if (!node) {
        return -1;
    }
    arr = json_node_get_array(node);
    *bitmap = 0;
    for (guint i = 0; i < json_array_get_length(arr); i++) {
        JsonNode *el = json_array_get_element(arr, i);
        int id;

        if (JSON_NODE_TYPE(el) != JSON_NODE_VALUE ||
            json_node_get_value_type(el) != G_TYPE_STRING) {
            error_setg(errp, "LUKS2 %s: '%s' holds a non-string", what, key);
            return -1;
        }
        id = luks2_json_parse_id(json_node_get_string(el), max, what, errp);
        if (id < 0) {
            return -1;
        }
        if (!exist[id]) {
            error_setg(errp, "LUKS2 %s: '%s' names %d, which does not exist",
                       what, key, id);
            return -1;
        }
        *bitmap |= 1u << id;
    }
    return 0;
}

/* An optional array of strings, as a strv. */
int luks2_json_get_strv(JsonObject *obj, const char *what, const char *key,
                        char ***out, Error **errp)
{
    JsonNode *node = json_object_get_member(obj, key);
    g_autoptr(GPtrArray) v = g_ptr_array_new_with_free_func(g_free);
    JsonArray *arr;

    if (node) {
        node = qcrypto_luks2_json_get(obj, what, key, JSON_NODE_ARRAY, errp);
        if (!node) {
            return -1;
        }
        arr = json_node_get_array(node);
        for (guint i = 0; i < json_array_get_length(arr); i++) {
            JsonNode *el = json_array_get_element(arr, i);

            if (JSON_NODE_TYPE(el) != JSON_NODE_VALUE ||
                json_node_get_value_type(el) != G_TYPE_STRING) {
                error_setg(errp, "LUKS2 %s: '%s' holds a non-string",
                           what, key);
                return -1;
            }
            g_ptr_array_add(v, g_strdup(json_node_get_string(el)));
        }
    }
    g_ptr_array_add(v, NULL);
    *out = (char **)g_ptr_array_free(g_steal_pointer(&v), FALSE);
    return 0;
}
