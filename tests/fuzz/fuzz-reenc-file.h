/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The re-encryption fuzz targets' file: the input in memory behind a
 * QCryptoReencryptIO. It may grow, but never past its max (twice the input
 * plus FUZZ_REENC_GROWTH, at most FUZZ_REENC_MAX_FILE); a read past its end
 * fails as a short read of a real file would. Progress calls count the
 * zones, and can stop a run after a given one (to resume it).
 */
#ifndef FUZZ_REENC_FILE_H
#define FUZZ_REENC_FILE_H

#include "fuzz-image.h"
#include "crypto/reencrypt.h"

/* The file may grow to twice the input plus this (a truncate, a write). */
#define FUZZ_REENC_GROWTH (1024 * 1024)
#define FUZZ_REENC_MAX_FILE (16 * 1024 * 1024)
#define FUZZ_REENC_HOTZONE (16 * 1024)
/* Zones per run: the file bounds them, this bounds them more. */
#define FUZZ_REENC_MAX_ZONES 256

typedef struct FuzzFile {
    uint8_t *data;
    size_t len;             /* the file's length */
    size_t alloc;           /* data's size */
    size_t max;             /* the largest length allowed */
    unsigned zones;         /* progress calls this run */
    unsigned stop_after;    /* stop at this progress call (0: never) */
} FuzzFile;

static int ff_reserve(FuzzFile *f, uint64_t len, Error **errp)
{
    if (len > f->max) {
        error_setg(errp, "No space left: the file would grow to %" PRIu64
                   " bytes", len);
        return -1;
    }
    if (len > f->alloc) {
        size_t n = MIN(MAX(len, 2 * f->alloc), f->max);

        f->data = g_realloc(f->data, n);
        f->alloc = n;
    }
    return 0;
}

static int ff_read(void *opaque, uint64_t off, void *buf, size_t len,
                   Error **errp)
{
    FuzzFile *f = opaque;

    if (off > f->len || len > f->len - off) {
        error_setg(errp, "Read of %zu bytes at %" PRIu64 " is beyond the "
                   "end of the file (%zu bytes)", len, off, f->len);
        return -1;
    }
    memcpy(buf, f->data + off, len);
    return 0;
}

static int ff_write(void *opaque, uint64_t off, const void *buf, size_t len,
                    Error **errp)
{
    FuzzFile *f = opaque;

    if (off > f->max || len > f->max - off) {
        error_setg(errp, "Write of %zu bytes at %" PRIu64 " is beyond the "
                   "largest file allowed", len, off);
        return -1;
    }
    if (ff_reserve(f, off + len, errp) < 0) {
        return -1;
    }
    if (off > f->len) {
        memset(f->data + f->len, 0, off - f->len);
    }
    memcpy(f->data + off, buf, len);
    f->len = MAX(f->len, off + len);
    return 0;
}

static int ff_sync(void *opaque, Error **errp)
{
    return 0;
}

static int64_t ff_length(void *opaque, Error **errp)
{
    FuzzFile *f = opaque;

    return f->len;
}

static int ff_truncate(void *opaque, uint64_t size, Error **errp)
{
    FuzzFile *f = opaque;

    if (ff_reserve(f, size, errp) < 0) {
        return -1;
    }
    if (size > f->len) {
        memset(f->data + f->len, 0, size - f->len);
    }
    f->len = size;
    return 0;
}

static bool ff_progress(void *opaque, uint64_t done, uint64_t total)
{
    FuzzFile *f = opaque;

    if (done > total) {
        fuzz_fail("progress: %" PRIu64 " of %" PRIu64 " bytes done", done,
                  total);
    }
    f->zones++;
    if (f->zones > FUZZ_REENC_MAX_ZONES) {
        return true;
    }
    return f->stop_after && f->zones == f->stop_after;
}

/* f, holding a copy of the input, and io on it. */
static void ff_init(FuzzFile *f, QCryptoReencryptIO *io, const uint8_t *data,
                    size_t size)
{
    *f = (FuzzFile) { 0 };
    f->max = MIN((uint64_t)2 * size + FUZZ_REENC_GROWTH, FUZZ_REENC_MAX_FILE);
    f->max = MAX(f->max, size);
    f->alloc = MAX(size, 1);
    f->data = fuzz_memdup(data, size);
    f->len = size;
    *io = (QCryptoReencryptIO) {
        .read = ff_read,
        .write = ff_write,
        .sync = ff_sync,
        .length = ff_length,
        .truncate = ff_truncate,
        .progress = ff_progress,
        .opaque = f,
    };
}

static void ff_free(FuzzFile *f)
{
    explicit_bzero(f->data, f->alloc);
    g_free(f->data);
}

/* A finished image opens with the passphrase (the real open, strict). */
static void fuzz_check_done(FuzzFile *f, const QCryptoBlockSecret *secret)
{
    FuzzImage img = { .data = f->data, .size = f->len, .strict = true };
    QCryptoBlockOpenOptions opts = {
        .format = QCRYPTO_BLOCK_FORMAT_LUKS,
        .secret = *secret,
    };
    g_autoptr(Error) err = NULL;
    g_autoptr(QCryptoBlock) block = NULL;

    block = qcrypto_block_open(&opts, fuzz_image_read, &img, 0, &err);
    if (!block) {
        fuzz_fail("resume finished, but the image does not open: %s",
                  error_get_pretty(err));
    }
    fuzz_payload(block);
}

/*
 * Resume the run in f: once stopped after the first zone, then to the
 * end. A run that says it finished must leave an image that opens with
 * secret (checked when check_done).
 */
static void ff_resume_twice(FuzzFile *f, QCryptoReencryptIO *io,
                            const QCryptoBlockSecret *secret, bool check_done)
{
    for (int run = 0; run < 2; run++) {
        g_autoptr(Error) err = NULL;
        int ret;

        f->zones = 0;
        f->stop_after = run == 0 ? 2 : 0;
        ret = qcrypto_reencrypt_resume(secret, FUZZ_REENC_HOTZONE, io, &err);
        g_assert(ret >= -1 && ret <= 1);
        g_assert((ret < 0) == !!err);
        fuzz_debug(run ? "resume again" : "resume", err);
        if (f->len > f->max) {
            fuzz_fail("the file grew past its limit");
        }
        if (ret == 0 && check_done) {
            fuzz_check_done(f, secret);
        }
        if (ret <= 0) {
            break;
        }
    }
}

#endif
