/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Options in QEMU's dotted form: "driver=luks,key-secret=s0,file.filename=x".
 *
 * A set of options is a GHashTable of strings (key -> value), the flat
 * counterpart of QEMU's QDict: "file.filename" is a key like any other,
 * and a node hands the keys under "file." to its child node. Drivers take
 * (remove) the options they understand; whatever is left at the end was
 * not understood by anyone, and is an error.
 */
#ifndef BLOCK_OPTIONS_H
#define BLOCK_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "qemu/error.h"

/* An empty option set (keys and values are owned strings). */
GHashTable *qemu_opts_new(void);
GHashTable *qemu_opts_copy(GHashTable *opts);

/*
 * Add the options of str ("a=1,b=x,,y": ",," is a literal comma, as in
 * QEMU's option syntax) to opts; a key given twice keeps the last value.
 * If implied_key is set, a first element without '=' is its value
 * ("secret,id=s0" with implied key "qom-type").
 */
int qemu_opts_parse_into(GHashTable *opts, const char *str,
                         const char *implied_key, Error **errp);
GHashTable *qemu_opts_parse(const char *str, const char *implied_key,
                            Error **errp);

/*
 * Move every "prefix.key" of opts into a new set as "key". "prefix=value"
 * itself, if present, is left in opts.
 */
GHashTable *qemu_opts_extract_prefix(GHashTable *opts, const char *prefix);

/* Remove key and return its value (caller frees), or NULL if absent. */
char *qemu_opt_take(GHashTable *opts, const char *key);

/* Take key as a boolean (on/off, true/false, yes/no), def if absent. */
int qemu_opt_take_bool(GHashTable *opts, const char *key, bool def,
                       bool *value, Error **errp);
/*
 * A number option's value as QEMU reads it: decimal, "0x" hex or "0"
 * octal, nothing else (no sign, no blanks, no suffix).
 */
int qemu_strtou64_opt(const char *str, uint64_t *value);
/* Take key as a non-negative number (qemu_strtou64_opt()), def if absent. */
int qemu_opt_take_uint(GHashTable *opts, const char *key, uint64_t def,
                       uint64_t *value, Error **errp);
/* Take key as a size ("512", "4k", "1.5G"), def if absent. */
int qemu_opt_take_size(GHashTable *opts, const char *key, uint64_t def,
                       uint64_t *value, Error **errp);

/* The keys left in opts, sorted; NULL if none (for "unknown option"). */
char *qemu_opts_first_key(GHashTable *opts);

/*
 * Parse a size with an optional suffix: k/K, M, G, T, P, E (powers of
 * 1024), b/B (bytes); a fraction is allowed with a suffix ("1.5G").
 * "0x" starts a hexadecimal number, as in QEMU: no fraction, and b and e
 * are digits there ("0x1E" is 30), so only k, M, G, T, P are suffixes.
 */
int qemu_strtosz(const char *str, uint64_t *size, Error **errp);

/* "Formatting" and --image-opts style: "a=1,b=x,,y" (sorted keys). */
char *qemu_opts_to_string(GHashTable *opts);

/*
 * The options of a "json:{...}" file name (the JSON after "json:"),
 * flattened: nested objects become dotted keys ("file.filename"),
 * integers decimal strings, booleans "on"/"off"; null members are left
 * out (block/options-json.c).
 */
GHashTable *qemu_opts_from_json(const char *json, Error **errp);
/*
 * The other way: flat options as a JSON object (without "json:"), which
 * qemu_opts_from_json() reads back into the same options. Values are
 * JSON strings; an object of members "0".."n-1" is written as an array.
 */
char *qemu_opts_to_json(GHashTable *opts);

/* str is hexadecimal with a suffix ("0x100k"): QEMU warns it is deprecated. */
bool qemu_strtosz_is_hex_with_suffix(const char *str);

#endif
