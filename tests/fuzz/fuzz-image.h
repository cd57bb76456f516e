/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The fuzz input as an in-memory image behind QCryptoBlockReadFunc.
 *
 * Seeds are truncated images (the header and the key material of the
 * slots in use, not megabytes of payload), so a read past the end of the
 * input returns zeros, as a sparse file's unwritten tail does, unless the
 * image is strict. Reads that start beyond FUZZ_IMAGE_MAX_SIZE fail, so a
 * hostile offset is still an error path, as it would be on a real file.
 */
#ifndef FUZZ_IMAGE_H
#define FUZZ_IMAGE_H

#include <glib.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crypto/block.h"

/* The libFuzzer entry point every target defines (replay-main.c calls it). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A virtual file size beyond any seed: 64 MiB. */
#define FUZZ_IMAGE_MAX_SIZE (64 * 1024 * 1024)

typedef struct FuzzImage {
    const uint8_t *data;
    size_t size;
    bool strict;            /* no zero-filled tail: the file is data only */
} FuzzImage;

static inline int fuzz_image_read(QCryptoBlock *block, uint64_t offset,
                                  uint8_t *buf, size_t len, void *opaque,
                                  Error **errp)
{
    const FuzzImage *img = opaque;
    uint64_t limit = img->strict ? img->size : FUZZ_IMAGE_MAX_SIZE;
    size_t n = 0;

    if (offset > limit || len > limit - offset) {
        error_setg(errp, "Read of %zu bytes at %" PRIu64 " is beyond the "
                   "end of the image", len, offset);
        return -1;
    }
    if (offset < img->size) {
        n = MIN(len, img->size - offset);
        memcpy(buf, img->data + offset, n);
    }
    memset(buf + n, 0, len - n);
    return 0;
}

/*
 * A broken promise: say which and abort (libFuzzer saves the input on
 * SIGABRT; g_error() would raise SIGTRAP, which it does not catch).
 */
#define fuzz_fail(...)                                                  \
    do {                                                                \
        g_printerr("%s:%d: ", __FILE__, __LINE__);                      \
        g_printerr(__VA_ARGS__);                                        \
        g_printerr("\n");                                               \
        abort();                                                        \
    } while (0)

/*
 * A GLib critical or warning is a broken precondition (g_return_if_fail
 * in GLib or json-glib, say): a bug like any other, so abort on it.
 */
static void fuzz_log_handler(const char *domain, GLogLevelFlags level,
                             const char *message, gpointer opaque)
{
    if (level & (G_LOG_LEVEL_ERROR | G_LOG_LEVEL_CRITICAL |
                 G_LOG_LEVEL_WARNING)) {
        fuzz_fail("%s: %s", domain ? domain : "", message);
    }
}

/* Called first by every target. */
static inline void fuzz_init(void)
{
    static bool done;

    if (!done) {
        g_log_set_default_handler(fuzz_log_handler, NULL);
        done = true;
    }
}

/*
 * With QIL_FUZZ_DEBUG set in the environment, say why an input was
 * refused (for crafting seeds; silent while fuzzing).
 */
static inline void fuzz_debug(const char *what, const Error *err)
{
    if (g_getenv("QIL_FUZZ_DEBUG")) {
        g_printerr("%s: %s\n", what, err ? error_get_pretty(err) : "ok");
    }
}

/* A heap copy of exactly size bytes (ASan sees any read past it). */
static inline uint8_t *fuzz_memdup(const uint8_t *data, size_t size)
{
    uint8_t *copy = g_malloc(MAX(size, 1));

    memcpy(copy, data, size);
    return copy;
}

/* Big-endian 32-bit field at off, or 0 beyond the input. */
static inline uint32_t fuzz_get_be32(const uint8_t *data, size_t size,
                                     size_t off)
{
    if (off + 4 > size) {
        return 0;
    }
    return (uint32_t)data[off] << 24 | (uint32_t)data[off + 1] << 16 |
        (uint32_t)data[off + 2] << 8 | data[off + 3];
}

/*
 * Run an opened image's payload cipher over a run of two sectors (so the
 * bulk path runs in one call), both ways: it must work whatever the header
 * said.
 */
static inline void fuzz_payload(QCryptoBlock *block)
{
    uint64_t sector = qcrypto_block_get_sector_size(block);
    size_t len = 2 * sector;
    g_autofree uint8_t *buf = g_malloc0(len);
    g_autoptr(Error) err = NULL;

    if (qcrypto_block_decrypt(block, 0, buf, len, &err) < 0 ||
        qcrypto_block_encrypt(block, sector, buf, len, &err) < 0) {
        fuzz_fail("payload cipher of an opened image fails: %s",
                  error_get_pretty(err));
    }
}

#endif
