/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target: the option strings of the command line, parsed as
 * qemu-img-lite parses them (block/options.c):
 *
 *   --object secret,id=s0,data=...,format=base64   implied key "qom-type"
 *   --image-opts driver=luks,file.filename=x       implied "file.filename"
 *   -o key-secret=s0,size=1.5G,iter-time=10        no implied key
 *   json:{"driver":"luks","file":{"filename":"x"}}  a JSON file name
 *
 * The input is one option string (up to its first NUL; several -o strings
 * if it holds newlines, merged as repeated -o are). Besides not crashing,
 * the parser must keep its promises: what qemu_opts_to_string() prints
 * parses back to the same options, and a size it accepts is what the
 * digits (decimal, or hex after "0x") and suffix say.
 */
#include <stdlib.h>

#include "block/options.h"
#include "crypto/secret.h"
#include "fuzz-image.h"

/* Both tables hold the same keys with the same values. */
static bool opts_equal(GHashTable *a, GHashTable *b)
{
    GHashTableIter iter;
    gpointer key, value;

    if (g_hash_table_size(a) != g_hash_table_size(b)) {
        return false;
    }
    g_hash_table_iter_init(&iter, a);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        const char *other = g_hash_table_lookup(b, key);

        if (!other || strcmp(other, value) != 0) {
            return false;
        }
    }
    return true;
}

/* Printing then parsing again gives the same options. */
static void check_round_trip(GHashTable *opts)
{
    g_autofree char *str = qemu_opts_to_string(opts);
    g_autoptr(GHashTable) again = NULL;
    g_autoptr(Error) err = NULL;

    again = qemu_opts_parse(str, NULL, &err);
    if (!again || !opts_equal(opts, again)) {
        fuzz_fail("options do not survive printing: \"%s\"%s%s", str,
                err ? ": " : "", err ? error_get_pretty(err) : "");
    }
}

/* A size accepted without a fraction is digits << 10 * suffix. */
static void check_size(const char *str)
{
    static const char suffixes[] = "bkmgtpe";
    uint64_t size;
    const char *p = str;
    uint64_t whole = 0;
    unsigned shift = 0;

    if (qemu_strtosz(str, &size, NULL) < 0) {
        return;
    }
    if (str[0] == '0' && (str[1] == 'x' || str[1] == 'X')) {
        /* Hex: digits (b and e among them), then at most k/M/G/T/P. */
        p += 2;
        while (g_ascii_isxdigit(*p)) {
            whole = whole * 16 + g_ascii_xdigit_value(*p++);
        }
        g_assert(p != str + 2);
        if (*p) {
            const char *s = strchr("kmgtp", g_ascii_tolower(*p));

            g_assert(s && !p[1]);
            shift = 10 * (s - "kmgtp" + 1);
        }
        g_assert(size == whole << shift);
        return;
    }
    while (g_ascii_isdigit(*p)) {
        whole = whole * 10 + (*p++ - '0');
    }
    g_assert(p != str);
    if (*p == '.') {
        /* Decimal digits only; the fraction adds less than one unit. */
        const char *s;

        while (*++p && g_ascii_isdigit(*p)) {
        }
        if (*p) {
            s = strchr(suffixes, g_ascii_tolower(*p));
            g_assert(s && !p[1]);
            shift = 10 * (s - suffixes);
        }
        /* (at most one: 0.99999999999999999999 is 1.0 as a double) */
        g_assert(size >= whole << shift);
        g_assert(size - (whole << shift) <= (UINT64_C(1) << shift));
        return;
    }
    if (*p) {
        const char *s = strchr(suffixes, g_ascii_tolower(*p));

        g_assert(s && !p[1]);
        shift = 10 * (s - suffixes);
    }
    g_assert(size == whole << shift);
}

/* --object: what img_add_object() in qemu-img-lite/main.c does with it. */
static void fuzz_object(const char *str)
{
    g_autoptr(GHashTable) opts = NULL;
    g_autofree char *type = NULL, *id = NULL, *data = NULL;
    g_autofree char *format = NULL;
    QCryptoSecretFormat fmt = QCRYPTO_SECRET_FORMAT_RAW;
    g_autofree uint8_t *value = NULL;
    size_t len;

    opts = qemu_opts_parse(str, "qom-type", NULL);
    if (!opts) {
        return;
    }
    check_round_trip(opts);
    type = qemu_opt_take(opts, "qom-type");
    id = qemu_opt_take(opts, "id");
    data = qemu_opt_take(opts, "data");
    format = qemu_opt_take(opts, "format");
    /* file= is left alone: the fuzzer must not read the machine's files. */
    if (!type || strcmp(type, "secret") != 0 || !data) {
        return;
    }
    if (format && strcmp(format, "base64") == 0) {
        fmt = QCRYPTO_SECRET_FORMAT_BASE64;
    }
    if (qcrypto_secret_add(id, data, NULL, fmt, NULL) == 0 &&
        qcrypto_secret_lookup(id, &value, &len, NULL) == 0) {
        g_assert(fmt == QCRYPTO_SECRET_FORMAT_BASE64 ||
                 (len == strlen(data) && memcmp(value, data, len) == 0));
        qcrypto_secret_value_free(g_steal_pointer(&value), len);
    }
    qcrypto_secret_clear_all();
}

/* --image-opts: the node's options, its file child's under "file.". */
static void fuzz_image_opts(const char *str)
{
    g_autoptr(GHashTable) opts = NULL;
    g_autoptr(GHashTable) file = NULL;
    g_autofree char *driver = NULL, *first = NULL;
    uint64_t v;
    bool b;

    opts = qemu_opts_parse(str, "file.filename", NULL);
    if (!opts) {
        return;
    }
    check_round_trip(opts);
    driver = qemu_opt_take(opts, "driver");
    file = qemu_opts_extract_prefix(opts, "file");
    qemu_opt_take_bool(file, "locking", false, &b, NULL);
    qemu_opt_take_size(opts, "size", 0, &v, NULL);
    first = qemu_opts_first_key(opts);
    g_assert(!first == (g_hash_table_size(opts) == 0));
}

/* -o, once per line: create and amend options. */
static void fuzz_create_opts(const char *str)
{
    g_autoptr(GHashTable) opts = qemu_opts_new();
    g_auto(GStrv) lines = g_strsplit(str, "\n", 8);
    uint64_t v;
    bool b;

    for (char **l = lines; *l; l++) {
        if (qemu_opts_parse_into(opts, *l, NULL, NULL) < 0) {
            return;
        }
    }
    check_round_trip(opts);
    qemu_opt_take_size(opts, "size", 0, &v, NULL);
    qemu_opt_take_size(opts, "cluster_size", 0, &v, NULL);
    qemu_opt_take_uint(opts, "iter-time", 2000, &v, NULL);
    qemu_opt_take_uint(opts, "align-payload", 0, &v, NULL);
    qemu_opt_take_bool(opts, "detached-header", false, &b, NULL);
    g_free(qemu_opt_take(opts, "key-secret"));
}

/*
 * A "json:{...}" file name (with or without the "json:"): flattened
 * options, which must print and parse back like any others, and whose
 * keys are never empty.
 */
static void fuzz_json(const char *str)
{
    g_autoptr(GHashTable) opts = NULL;
    GHashTableIter iter;
    gpointer key;

    opts = qemu_opts_from_json(g_str_has_prefix(str, "json:") ? str + 5 : str,
                               NULL);
    if (!opts) {
        return;
    }
    g_hash_table_iter_init(&iter, opts);
    while (g_hash_table_iter_next(&iter, &key, NULL)) {
        g_assert(key != NULL);
    }
    check_round_trip(opts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autofree char *str = g_strndup((const char *)data, size);

    fuzz_init();

    check_size(str);
    fuzz_object(str);
    fuzz_image_opts(str);
    fuzz_create_opts(str);
    fuzz_json(str);
    return 0;
}
