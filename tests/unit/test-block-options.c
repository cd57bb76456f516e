/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Options in QEMU's dotted form (block/options.c): the syntax of
 * "driver=luks,key-secret=s0,file.filename=x" as QEMU's option parser
 * reads it (",," is a literal comma), children's options under their
 * prefix, and sizes with suffixes as qemu-img takes them.
 */
#include <string.h>

#include "block/options.h"

static GHashTable *parse_ok(const char *str, const char *implied)
{
    Error *err = NULL;
    GHashTable *o = qemu_opts_parse(str, implied, &err);

    if (err) {
        g_test_message("%s: %s", str, error_get_pretty(err));
    }
    g_assert_null(err);
    g_assert_nonnull(o);
    return o;
}

static void parse_fails(const char *str, const char *implied,
                        const char *msg)
{
    Error *err = NULL;

    g_assert_null(qemu_opts_parse(str, implied, &err));
    g_assert_nonnull(err);
    g_assert_nonnull(strstr(error_get_pretty(err), msg));
    error_free(err);
}

static void test_parse_dotted(void)
{
    g_autoptr(GHashTable) o = parse_ok(
        "driver=luks,key-secret=s0,file.filename=/tmp/x.img,"
        "header.filename=h", NULL);

    g_assert_cmpuint(g_hash_table_size(o), ==, 4);
    g_assert_cmpstr(g_hash_table_lookup(o, "driver"), ==, "luks");
    g_assert_cmpstr(g_hash_table_lookup(o, "key-secret"), ==, "s0");
    g_assert_cmpstr(g_hash_table_lookup(o, "file.filename"), ==,
                    "/tmp/x.img");
    g_assert_cmpstr(g_hash_table_lookup(o, "header.filename"), ==, "h");
}

static void test_parse_comma_escape(void)
{
    g_autoptr(GHashTable) o = parse_ok("data=a,,b,,,,c,id=x,empty=", NULL);

    /* ",," is one comma; ",,,," two */
    g_assert_cmpstr(g_hash_table_lookup(o, "data"), ==, "a,b,,c");
    g_assert_cmpstr(g_hash_table_lookup(o, "id"), ==, "x");
    g_assert_cmpstr(g_hash_table_lookup(o, "empty"), ==, "");
}

static void test_parse_implied_key(void)
{
    g_autoptr(GHashTable) o = parse_ok("secret,id=s0,data=x", "qom-type");
    g_autoptr(GHashTable) p = parse_ok("/a/file.img,driver=raw",
                                       "file.filename");

    g_assert_cmpstr(g_hash_table_lookup(o, "qom-type"), ==, "secret");
    g_assert_cmpstr(g_hash_table_lookup(p, "file.filename"), ==,
                    "/a/file.img");
    g_autoptr(GHashTable) f = parse_ok("compat=1.1,lazy_refcounts", NULL);
    g_autoptr(GHashTable) g = parse_ok("secret,id=s0,flag", "qom-type");

    /* Only the first element gives the implied key a value; others alone
     * are QEMU's short-form booleans (libvirt's "lazy_refcounts"). */
    g_assert_cmpstr(g_hash_table_lookup(f, "lazy_refcounts"), ==, "on");
    g_assert_cmpstr(g_hash_table_lookup(g, "flag"), ==, "on");
    g_assert_cmpstr(g_hash_table_lookup(g, "qom-type"), ==, "secret");
    parse_fails("=x", NULL, "empty name");
}

static void test_parse_last_wins(void)
{
    g_autoptr(GHashTable) o = parse_ok("a=1,b=2,a=3", NULL);
    Error *err = NULL;

    g_assert_cmpstr(g_hash_table_lookup(o, "a"), ==, "3");
    /* a second string (another -o) adds to the same set */
    g_assert_cmpint(qemu_opts_parse_into(o, "b=4,c=5", NULL, &err), ==, 0);
    g_assert_cmpstr(g_hash_table_lookup(o, "b"), ==, "4");
    g_assert_cmpstr(g_hash_table_lookup(o, "c"), ==, "5");
}

static void test_extract_prefix(void)
{
    g_autoptr(GHashTable) o = parse_ok(
        "driver=luks,file.filename=x,file.driver=file,fileish=1,"
        "header.filename=h,file=keep", NULL);
    g_autoptr(GHashTable) file = qemu_opts_extract_prefix(o, "file");

    g_assert_cmpuint(g_hash_table_size(file), ==, 2);
    g_assert_cmpstr(g_hash_table_lookup(file, "filename"), ==, "x");
    g_assert_cmpstr(g_hash_table_lookup(file, "driver"), ==, "file");
    /* what is not under "file." stays */
    g_assert_cmpuint(g_hash_table_size(o), ==, 4);
    g_assert_true(g_hash_table_contains(o, "fileish"));
    g_assert_true(g_hash_table_contains(o, "file"));
    g_assert_true(g_hash_table_contains(o, "header.filename"));
}

static void test_take(void)
{
    g_autoptr(GHashTable) o = parse_ok(
        "b1=on,b2=off,b3=true,b4=no,bad=maybe,n=42,neg=-1,hex=0x10,"
        "oct=010,badoct=08,s=1.5k", NULL);
    g_autofree char *first = NULL;
    Error *err = NULL;
    uint64_t n;
    bool b;

    g_assert_cmpint(qemu_opt_take_bool(o, "b1", false, &b, &err), ==, 0);
    g_assert_true(b);
    g_assert_cmpint(qemu_opt_take_bool(o, "b2", true, &b, &err), ==, 0);
    g_assert_false(b);
    g_assert_cmpint(qemu_opt_take_bool(o, "b3", false, &b, &err), ==, 0);
    g_assert_true(b);
    g_assert_cmpint(qemu_opt_take_bool(o, "b4", true, &b, &err), ==, 0);
    g_assert_false(b);
    g_assert_cmpint(qemu_opt_take_bool(o, "absent", true, &b, &err), ==, 0);
    g_assert_true(b);
    g_assert_cmpint(qemu_opt_take_bool(o, "bad", true, &b, &err), ==, -1);
    error_free_or_abort(&err);

    g_assert_cmpint(qemu_opt_take_uint(o, "n", 0, &n, &err), ==, 0);
    g_assert_cmpuint(n, ==, 42);
    g_assert_cmpint(qemu_opt_take_uint(o, "neg", 0, &n, &err), ==, -1);
    error_free_or_abort(&err);
    /* base 0, as QEMU's number options */
    g_assert_cmpint(qemu_opt_take_uint(o, "hex", 0, &n, &err), ==, 0);
    g_assert_cmpuint(n, ==, 16);
    g_assert_cmpint(qemu_opt_take_uint(o, "oct", 0, &n, &err), ==, 0);
    g_assert_cmpuint(n, ==, 8);
    g_assert_cmpint(qemu_opt_take_uint(o, "badoct", 0, &n, &err), ==, -1);
    error_free_or_abort(&err);
    g_assert_cmpint(qemu_opt_take_size(o, "s", 0, &n, &err), ==, 0);
    g_assert_cmpuint(n, ==, 1536);

    /* everything taken: nothing left to call unknown */
    first = qemu_opts_first_key(o);
    g_assert_null(first);
}

static void test_first_key_sorted(void)
{
    g_autoptr(GHashTable) o = parse_ok("zeta=1,alpha=2,mid=3", NULL);
    g_autofree char *first = qemu_opts_first_key(o);

    g_assert_cmpstr(first, ==, "alpha");
}

static void test_to_string(void)
{
    g_autoptr(GHashTable) o = parse_ok("b=x,,y,a=1", NULL);
    g_autofree char *s = qemu_opts_to_string(o);
    g_autoptr(GHashTable) back = parse_ok(s, NULL);

    g_assert_cmpstr(s, ==, "a=1,b=x,,y");
    g_assert_cmpstr(g_hash_table_lookup(back, "b"), ==, "x,y");
}

/* QEMU's JSON takes single-quoted strings too (qemu-iotests do). */
static void test_json_single_quotes(void)
{
    g_autoptr(GHashTable) o = qemu_opts_from_json(
        "{ 'driver': 'null-co', 'size': 1048576, 'read-zeroes': true, "
        "'file': { \"x\": \"a'b\", 'q': 'say \"hi\"', "
        "'e': 'don\\'t' } }", &error_abort);
    Error *err = NULL;

    g_assert_cmpstr(g_hash_table_lookup(o, "driver"), ==, "null-co");
    g_assert_cmpstr(g_hash_table_lookup(o, "size"), ==, "1048576");
    g_assert_cmpstr(g_hash_table_lookup(o, "read-zeroes"), ==, "on");
    g_assert_cmpstr(g_hash_table_lookup(o, "file.x"), ==, "a'b");
    g_assert_cmpstr(g_hash_table_lookup(o, "file.q"), ==, "say \"hi\"");
    g_assert_cmpstr(g_hash_table_lookup(o, "file.e"), ==, "don't");
    g_assert_null(qemu_opts_from_json("{ 'a': 'unterminated }", &err));
    g_assert_nonnull(err);
    error_free(err);
}

static void test_strtosz(void)
{
    static const struct {
        const char *str;
        uint64_t size;
    } good[] = {
        { "0", 0 },
        { "512", 512 },
        { "4k", 4096 },
        { "4K", 4096 },
        { "512M", 512ull << 20 },
        { "1G", 1ull << 30 },
        { "1.5G", 3ull << 29 },
        { "0.5k", 512 },
        { "2T", 2ull << 40 },
        { "1P", 1ull << 50 },
        { "7E", 7ull << 60 },
        { "100b", 100 },
        { "100B", 100 },
        /* hex, as QEMU: b and e are digits there, k..P suffixes */
        { "0x10", 16 },
        { "0X200", 512 },
        { "0x10B", 0x10b },
        { "0x1E", 30 },
        { "0x100k", 0x100 << 10 },
        { "0x1M", 1 << 20 },
    };
    static const char *const bad[] = {
        "", "k", "-1", "1.5", "12Q", "1GG", "1 G", "16E", "99999999999999E",
        "1.", "abc", "0x", "0x1.5M", "0xg", "0x1Q", "x10", "00x10",
        "0x4000000000000000000", "0x0x10", "0x0x11000k",
    };

    for (size_t i = 0; i < G_N_ELEMENTS(good); i++) {
        Error *err = NULL;
        uint64_t size = 1;

        g_test_message("%s", good[i].str);
        g_assert_cmpint(qemu_strtosz(good[i].str, &size, &err), ==, 0);
        g_assert_cmpuint(size, ==, good[i].size);
    }
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        Error *err = NULL;
        uint64_t size;

        g_test_message("%s", bad[i]);
        g_assert_cmpint(qemu_strtosz(bad[i], &size, &err), ==, -1);
        g_assert_nonnull(strstr(error_get_pretty(err), "Invalid size"));
        error_free(err);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/block/options/parse-dotted", test_parse_dotted);
    g_test_add_func("/block/options/json-single-quotes",
                    test_json_single_quotes);
    g_test_add_func("/block/options/comma-escape", test_parse_comma_escape);
    g_test_add_func("/block/options/implied-key", test_parse_implied_key);
    g_test_add_func("/block/options/last-wins", test_parse_last_wins);
    g_test_add_func("/block/options/extract-prefix", test_extract_prefix);
    g_test_add_func("/block/options/take", test_take);
    g_test_add_func("/block/options/first-key-sorted",
                    test_first_key_sorted);
    g_test_add_func("/block/options/to-string", test_to_string);
    g_test_add_func("/block/options/strtosz", test_strtosz);
    return g_test_run();
}
