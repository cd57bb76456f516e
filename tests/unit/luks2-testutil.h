/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Helpers shared by the LUKS2 tests: image files as the header's
 * read/write callbacks, cryptsetup's test images unpacked into a scratch
 * directory, and cryptsetup itself run on a file.
 */
#ifndef LUKS2_TESTUTIL_H
#define LUKS2_TESTUTIL_H

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-glib/json-glib.h>

#include "crypto/block.h"

/* The callbacks of crypto/block.h on a file descriptor (the opaque). */
static inline int test_file_read(QCryptoBlock *block, uint64_t offset,
                                 uint8_t *buf, size_t len, void *opaque,
                                 Error **errp)
{
    int fd = GPOINTER_TO_INT(opaque);

    while (len) {
        ssize_t n = pread(fd, buf, len, offset);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            error_setg(errp, "cannot read at %" PRIu64 "%s", offset,
                       n == 0 ? ": end of file" : "");
            return -1;
        }
        buf += n;
        len -= n;
        offset += n;
    }
    return 0;
}

static inline int test_file_write(QCryptoBlock *block, uint64_t offset,
                                  const uint8_t *buf, size_t len,
                                  void *opaque, Error **errp)
{
    int fd = GPOINTER_TO_INT(opaque);

    while (len) {
        ssize_t n = pwrite(fd, buf, len, offset);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            error_setg_errno(errp, errno, "cannot write at %" PRIu64, offset);
            return -1;
        }
        buf += n;
        len -= n;
        offset += n;
    }
    return 0;
}

/* $QIL_TESTDATA/cryptsetup/name, or NULL (and the test skipped). */
static inline char *test_data_path(const char *name)
{
    const char *dir = g_getenv("QIL_TESTDATA");
    char *path;

    if (!dir) {
        g_test_skip("QIL_TESTDATA is not set: no cryptsetup test images");
        return NULL;
    }
    path = g_build_filename(dir, "cryptsetup", name, NULL);
    if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        g_autofree char *msg = g_strdup_printf("%s is missing", path);

        g_test_skip(msg);
        g_free(path);
        return NULL;
    }
    return path;
}

/* Run argv; its stdout, or NULL (with a test message) if it fails. */
static inline char *test_run(const char *const *argv)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *out = NULL, *errout = NULL;
    int status;

    if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL,
                      NULL, &out, &errout, &status, &err)) {
        g_test_message("cannot run %s: %s", argv[0], err->message);
        return NULL;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        g_autofree char *cmd = g_strjoinv(" ", (char **)argv);

        g_test_message("'%s' failed: %s", cmd, errout);
        return NULL;
    }
    return g_steal_pointer(&out);
}

/* A scratch directory, removed (with its files) by test_scratch_free. */
static inline char *test_scratch_new(void)
{
    g_autoptr(GError) err = NULL;
    char *dir = g_dir_make_tmp("qil-luks2-XXXXXX", &err);

    g_assert_no_error(err);
    return dir;
}

static inline void test_scratch_free(char *dir)
{
    const char *argv[] = { "rm", "-rf", dir, NULL };
    g_autofree char *out = test_run(argv);

    g_free(dir);
}

/* Decompress testdata name.xz into dir/dest; the new path or NULL. */
static inline char *test_unxz(const char *name, const char *dir,
                              const char *dest)
{
    g_autofree char *src = test_data_path(name);
    g_autofree char *cmd = NULL;
    char *path;
    const char *argv[] = { "sh", "-c", NULL, NULL };
    g_autofree char *out = NULL;

    if (!src) {
        return NULL;
    }
    path = g_build_filename(dir, dest, NULL);
    cmd = g_strdup_printf("xz -dc '%s' > '%s'", src, path);
    argv[2] = cmd;
    out = test_run(argv);
    g_assert_nonnull(out);
    return path;
}

/* Whether cryptsetup can be run at all (else the test is skipped). */
static inline bool test_have_cryptsetup(void)
{
    g_autofree char *path = g_find_program_in_path("cryptsetup");

    if (!path) {
        g_test_skip("cryptsetup is not installed");
        return false;
    }
    return true;
}

/*
 * The volume key as `cryptsetup luksDump --dump-volume-key` prints it
 * (the "MK dump:" hex lines), read with the passphrase in keyfile.
 */
static inline GBytes *test_cryptsetup_volume_key(const char *image,
                                                 const char *keyfile)
{
    const char *argv[] = {
        "cryptsetup", "luksDump", "--dump-volume-key", "--batch-mode",
        "--key-file", keyfile, image, NULL,
    };
    g_autofree char *out = test_run(argv);
    g_autoptr(GByteArray) key = g_byte_array_new();
    const char *p;

    g_assert_nonnull(out);
    p = strstr(out, "MK dump:");
    g_assert_nonnull(p);
    p += strlen("MK dump:");
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n') {
            p++;
        }
        if (!g_ascii_isxdigit(p[0]) || !g_ascii_isxdigit(p[1])) {
            break;
        }
        guint8 b = g_ascii_xdigit_value(p[0]) << 4 |
            g_ascii_xdigit_value(p[1]);
        g_byte_array_append(key, &b, 1);
        p += 2;
    }
    g_assert_cmpuint(key->len, >, 0);
    return g_byte_array_free_to_bytes(g_steal_pointer(&key));
}

/* Write data to path (a key file). */
static inline void test_write_file(const char *path, const void *data,
                                   size_t len)
{
    g_autoptr(GError) err = NULL;

    g_file_set_contents(path, data, len, &err);
    g_assert_no_error(err);
}

static inline int test_open(const char *path, int flags)
{
    int fd = open(path, flags);

    g_assert_cmpint(fd, >=, 0);
    return fd;
}

/* Parse JSON text (the test fails if it is not JSON). */
static inline JsonNode *test_json_parse(const char *text)
{
    g_autoptr(JsonParser) p = json_parser_new();
    g_autoptr(GError) err = NULL;

    json_parser_load_from_data(p, text, -1, &err);
    g_assert_no_error(err);
    return json_parser_steal_root(p);
}

/*
 * base with the member at the dotted path (e.g. "config.json_size")
 * replaced or added (value: JSON text), or removed (value NULL).
 */
static inline char *test_json_mutate(const char *base, const char *path,
                                     const char *value)
{
    g_autoptr(JsonNode) root = test_json_parse(base);
    g_auto(GStrv) parts = g_strsplit(path, ".", -1);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    JsonObject *obj = json_node_get_object(root);
    guint n = g_strv_length(parts);

    for (guint i = 0; i + 1 < n; i++) {
        obj = json_object_get_object_member(obj, parts[i]);
        g_assert_nonnull(obj);
    }
    if (value) {
        json_object_set_member(obj, parts[n - 1], test_json_parse(value));
    } else {
        g_assert_true(json_object_has_member(obj, parts[n - 1]));
        json_object_remove_member(obj, parts[n - 1]);
    }
    json_generator_set_root(gen, root);
    return json_generator_to_data(gen, NULL);
}

#endif
