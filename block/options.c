/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Options in QEMU's dotted form (see include/block/options.h).
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "block/options.h"

/*
 * Values may be passphrases (--object secret,data=...): wiped when freed.
 * Options are short, so the cost is nothing.
 */
static void opts_value_free(gpointer value)
{
    if (value) {
        explicit_bzero(value, strlen(value));
        g_free(value);
    }
}

GHashTable *qemu_opts_new(void)
{
    return g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                 opts_value_free);
}

GHashTable *qemu_opts_copy(GHashTable *opts)
{
    GHashTable *copy = qemu_opts_new();
    GHashTableIter iter;
    gpointer key, value;

    g_hash_table_iter_init(&iter, opts);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        g_hash_table_insert(copy, g_strdup(key), g_strdup(value));
    }
    return copy;
}

/*
 * Read one element up to an unescaped ',' (or the end), undoing ",,".
 * Returns the position after the separator.
 */
static const char *opts_next_element(const char *p, GString *out)
{
    g_string_truncate(out, 0);
    for (; *p; p++) {
        if (*p == ',') {
            if (p[1] != ',') {
                return p + 1;
            }
            p++;        /* ",," is one literal comma */
        }
        g_string_append_c(out, *p);
    }
    return p;
}

/* The parser's scratch copy of an element: it may be a passphrase. */
static void opts_elem_free(GString *elem)
{
    explicit_bzero(elem->str, elem->allocated_len);
    g_string_free(elem, TRUE);
}
typedef GString OptsElem;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(OptsElem, opts_elem_free)

int qemu_opts_parse_into(GHashTable *opts, const char *str,
                         const char *implied_key, Error **errp)
{
    /* Sized for the whole string, so it never grows (and leaves copies). */
    g_autoptr(OptsElem) elem = g_string_sized_new(strlen(str) + 1);
    const char *p = str;
    bool first = true;

    while (*p) {
        const char *eq;

        p = opts_next_element(p, elem);
        eq = strchr(elem->str, '=');
        if (!eq) {
            if (first && implied_key) {
                g_hash_table_insert(opts, g_strdup(implied_key),
                                    g_strdup(elem->str));
                first = false;
                continue;
            }
            /*
             * QEMU's short-form boolean: "lazy_refcounts" is
             * "lazy_refcounts=on" (libvirt sends -o compat=1.1,
             * lazy_refcounts). QEMU's "nofoo" for "foo=off" is not taken:
             * "nocow" is an option's real name.
             */
            if (!*elem->str || strchr(elem->str, ',')) {
                error_setg(errp, "Expected '=' after parameter '%s'",
                           elem->str);
                return -1;
            }
            g_hash_table_insert(opts, g_strdup(elem->str), g_strdup("on"));
            first = false;
            continue;
        }
        if (eq == elem->str) {
            error_setg(errp, "Invalid parameter '%s': empty name", elem->str);
            return -1;
        }
        /*
         * ",," is a literal comma for values ("file.filename=a,,b"): a
         * name holding one names no option, and could not be printed
         * back by qemu_opts_to_string() (",,," is ambiguous there).
         */
        if (memchr(elem->str, ',', eq - elem->str)) {
            error_setg(errp, "Invalid parameter '%s': a name cannot contain "
                       "a comma", elem->str);
            return -1;
        }
        g_hash_table_insert(opts, g_strndup(elem->str, eq - elem->str),
                            g_strdup(eq + 1));
        first = false;
    }
    return 0;
}

GHashTable *qemu_opts_parse(const char *str, const char *implied_key,
                            Error **errp)
{
    GHashTable *opts = qemu_opts_new();

    if (qemu_opts_parse_into(opts, str, implied_key, errp) < 0) {
        g_hash_table_unref(opts);
        return NULL;
    }
    return opts;
}

GHashTable *qemu_opts_extract_prefix(GHashTable *opts, const char *prefix)
{
    GHashTable *sub = qemu_opts_new();
    g_autofree char *dotted = g_strconcat(prefix, ".", NULL);
    size_t n = strlen(dotted);
    GHashTableIter iter;
    gpointer key, value;

    g_hash_table_iter_init(&iter, opts);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        if (g_str_has_prefix(key, dotted)) {
            g_hash_table_insert(sub, g_strdup((char *)key + n),
                                g_strdup(value));
            g_hash_table_iter_remove(&iter);
        }
    }
    return sub;
}

char *qemu_opt_take(GHashTable *opts, const char *key)
{
    gpointer orig_key, value;

    if (!g_hash_table_steal_extended(opts, key, &orig_key, &value)) {
        return NULL;
    }
    g_free(orig_key);
    return value;
}

int qemu_opt_take_bool(GHashTable *opts, const char *key, bool def,
                       bool *value, Error **errp)
{
    g_autofree char *str = qemu_opt_take(opts, key);

    if (!str) {
        *value = def;
        return 0;
    }
    if (g_str_equal(str, "on") || g_str_equal(str, "true") ||
        g_str_equal(str, "yes")) {
        *value = true;
    } else if (g_str_equal(str, "off") || g_str_equal(str, "false") ||
               g_str_equal(str, "no")) {
        *value = false;
    } else {
        error_setg(errp, "Parameter '%s' expects 'on' or 'off'", key);
        return -1;
    }
    return 0;
}

int qemu_strtou64_opt(const char *str, uint64_t *value)
{
    char *end;

    /* strtoull would take leading blanks and a sign ("-1" wraps around). */
    if (!g_ascii_isdigit(*str)) {
        return -1;
    }
    errno = 0;
    /* Base 0, as QEMU's number options: "0x10" is 16, "010" is 8. */
    *value = g_ascii_strtoull(str, &end, 0);
    return errno || *end ? -1 : 0;
}

int qemu_opt_take_uint(GHashTable *opts, const char *key, uint64_t def,
                       uint64_t *value, Error **errp)
{
    g_autofree char *str = qemu_opt_take(opts, key);

    if (!str) {
        *value = def;
        return 0;
    }
    if (qemu_strtou64_opt(str, value) < 0) {
        error_setg(errp, "Parameter '%s' expects a non-negative number",
                   key);
        return -1;
    }
    return 0;
}

int qemu_opt_take_size(GHashTable *opts, const char *key, uint64_t def,
                       uint64_t *value, Error **errp)
{
    g_autofree char *str = qemu_opt_take(opts, key);

    if (!str) {
        *value = def;
        return 0;
    }
    if (qemu_strtosz(str, value, NULL) < 0) {
        error_setg(errp, "Parameter '%s' expects a size (e.g. 512, 4k, "
                   "1.5G)", key);
        return -1;
    }
    return 0;
}

/* qsort hands pointers to the elements (char * here). */
static int compare_str_ptrs(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char *qemu_opts_first_key(GHashTable *opts)
{
    g_autofree gpointer *keys = NULL;
    guint n;

    keys = g_hash_table_get_keys_as_array(opts, &n);
    if (n == 0) {
        return NULL;
    }
    qsort(keys, n, sizeof(*keys), compare_str_ptrs);
    return g_strdup(keys[0]);
}

char *qemu_opts_to_string(GHashTable *opts)
{
    g_autofree gpointer *keys = NULL;
    GString *out = g_string_new(NULL);
    guint n;

    keys = g_hash_table_get_keys_as_array(opts, &n);
    qsort(keys, n, sizeof(*keys), compare_str_ptrs);
    for (guint i = 0; i < n; i++) {
        const char *v = g_hash_table_lookup(opts, keys[i]);

        g_string_append_printf(out, "%s%s=", i ? "," : "",
                               (char *)keys[i]);
        for (; *v; v++) {
            if (*v == ',') {
                g_string_append_c(out, ',');    /* escaped as ",," */
            }
            g_string_append_c(out, *v);
        }
    }
    return g_string_free(out, FALSE);
}

int qemu_strtosz(const char *str, uint64_t *size, Error **errp)
{
    static const char suffixes[] = "bkmgtpe";
    const char *p = str, *s;
    char *end;
    double frac = 0;
    guint64 whole;
    unsigned shift = 0;
    bool hex = false;

    if (!g_ascii_isdigit(*p)) {
        goto invalid;
    }
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        /*
         * Hexadecimal, as QEMU takes it: no fraction, and a suffix only
         * where it is not a hex digit (k, M, G, T, P: "0x1E" is 30 bytes).
         */
        if (!g_ascii_isxdigit(p[2])) {
            goto invalid;
        }
        const char *digits_end = p + 2;

        hex = true;
        while (g_ascii_isxdigit(*digits_end)) {
            digits_end++;
        }
        errno = 0;
        whole = g_ascii_strtoull(p + 2, &end, 16);
        /* strtoull takes a second "0x" ("0x0x10"): digits only. */
        if (end != digits_end) {
            goto invalid;
        }
    } else {
        errno = 0;
        whole = g_ascii_strtoull(p, &end, 10);
    }
    if (errno) {
        goto invalid;
    }
    p = end;
    if (*p == '.' && hex) {
        goto invalid;
    }
    if (*p == '.') {
        /*
         * "1.5G": the fraction is read as a double and scaled below. Only
         * decimal digits: strtod would also take an exponent ("1.5e30E"
         * overflows the conversion to an integer, undefined behaviour).
         */
        frac = g_ascii_strtod(p, &end);
        if (end == p + 1) {
            goto invalid;
        }
        for (const char *d = p + 1; d < end; d++) {
            if (!g_ascii_isdigit(*d)) {
                goto invalid;
            }
        }
        p = end;
    }
    if (*p) {
        s = strchr(suffixes, g_ascii_tolower(*p));
        if (!s || p[1]) {
            goto invalid;
        }
        shift = 10 * (s - suffixes);
    } else if (frac != 0) {
        /* A fraction of a byte means nothing: ask for a unit. */
        goto invalid;
    }
    if (shift && whole > (G_MAXUINT64 >> shift)) {
        goto invalid;
    }
    *size = (whole << shift) + (uint64_t)(frac * (double)(1ULL << shift));
    if (*size < (whole << shift)) {
        goto invalid;
    }
    return 0;

invalid:
    error_setg(errp, "Invalid size '%s': use a number with an optional "
               "suffix k, M, G, T, P or E", str);
    return -1;
}

bool qemu_strtosz_is_hex_with_suffix(const char *str)
{
    size_t n = strlen(str);

    return n > 2 && str[0] == '0' && (str[1] == 'x' || str[1] == 'X') &&
        !g_ascii_isxdigit(str[n - 1]);
}
