/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LUKS2 JSON metadata, private to the block-luks2-json*.c files (the rest
 * of crypto/ uses luks2priv.h):
 *
 *   block-luks2-json.c           parse the text, reload after an edit,
 *                                serialise, free
 *   block-luks2-json-field.c     typed field access
 *   block-luks2-json-validate.c  the LUKS2 rules, one function per object
 *   block-luks2-json-edit.c      key slots added and removed
 */
#ifndef QCRYPTO_BLOCK_LUKS2_JSON_H
#define QCRYPTO_BLOCK_LUKS2_JSON_H

#include "luks2priv.h"

/*
 * ---- typed field access (block-luks2-json-field.c) ----
 *
 * Each reads obj[key]; what names the object for the error message
 * ("LUKS2 <what>: ...").
 */

JsonObject *luks2_json_get_object(JsonObject *obj, const char *what,
                                  const char *key, Error **errp);
const char *luks2_json_get_string(JsonObject *obj, const char *what,
                                  const char *key, Error **errp);
/* A 64-bit number written as a decimal string. */
int luks2_json_get_u64_string(JsonObject *obj, const char *what,
                              const char *key, uint64_t *out,
                              Error **errp);
/* A JSON integer within [min, max]; max is at most UINT32_MAX. */
int luks2_json_get_uint(JsonObject *obj, const char *what,
                        const char *key, uint64_t min, uint64_t max,
                        uint32_t *out, Error **errp);
/* Base64 of 1..max bytes, decoded into out (*nout bytes). */
int luks2_json_get_base64(JsonObject *obj, const char *what,
                          const char *key, uint8_t *out, size_t max,
                          size_t *nout, Error **errp);
/* The name of a hash algorithm we support. */
int luks2_json_get_hash(JsonObject *obj, const char *what,
                        const char *key, QCryptoHashAlgo *out,
                        Error **errp);
/* An object id "0".."max-1": the id, or -1 and errp. */
int luks2_json_parse_id(const char *s, int max, const char *what,
                        Error **errp);
/*
 * An array of ids, each naming an existing object (exist[id] not NULL),
 * as a bitmap.
 */
int luks2_json_get_id_array(JsonObject *obj, const char *what,
                            const char *key, int max,
                            void *const *exist, uint32_t *bitmap,
                            Error **errp);
/* An optional array of strings, as a NULL-terminated strv (empty if absent). */
int luks2_json_get_strv(JsonObject *obj, const char *what,
                        const char *key, char ***out, Error **errp);

/* ---- validation (block-luks2-json-validate.c) ---- */

/* Refuse JSON text nested too deep for json-glib's recursive parser. */
int luks2_json_validate_depth(const char *json, Error **errp);

/*
 * Validate md->root and fill md's structs from it. On failure the structs
 * may be filled in part: the caller clears them.
 */
int luks2_json_validate(QCryptoLUKS2Metadata *md, Error **errp);

#endif
