/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The re-encryption unit tests' files in memory: the image and the header
 * file a decryption keeps, whose N-th write fails (writes_left; torn: it
 * stores its first half), as QCryptoReencryptIO; and how the command goes
 * on with a decryption from whatever its header file holds.
 */
#ifndef TESTS_UNIT_REENCRYPT_FILES_H
#define TESTS_UNIT_REENCRYPT_FILES_H

#include <string.h>

#include "crypto/block.h"
#include "crypto/reencrypt.h"

#define REENC_TEST_PASS "unit test pass"

static const QCryptoBlockSecret reenc_test_secret = {
    .data = (const uint8_t *)REENC_TEST_PASS,
    .len = sizeof(REENC_TEST_PASS) - 1,
};

typedef struct Files {
    GByteArray *data, *hdr;
    int writes_left;                /* < 0: no limit; both files count */
    bool torn;                      /* the failing write stores half */
} Files;

static inline Files *files_new(const uint8_t *data, size_t len)
{
    Files *f = g_new0(Files, 1);

    f->data = g_byte_array_new();
    f->hdr = g_byte_array_new();
    f->writes_left = -1;
    g_byte_array_append(f->data, data, len);
    return f;
}

static inline Files *files_copy(const Files *src)
{
    Files *f = files_new(src->data->data, src->data->len);

    g_byte_array_append(f->hdr, src->hdr->data, src->hdr->len);
    return f;
}

static inline void files_free(Files *f)
{
    g_byte_array_unref(f->data);
    g_byte_array_unref(f->hdr);
    g_free(f);
}

static inline int rd(GByteArray *b, uint64_t off, void *buf, size_t len,
                     Error **errp)
{
    if (off + len > b->len) {
        error_setg(errp, "read past the end");
        return -1;
    }
    memcpy(buf, b->data + off, len);
    return 0;
}

/* A file grows when written past its end; the gap reads as zeroes. */
static inline int wr(Files *f, GByteArray *b, uint64_t off,
                     const void *buf, size_t len, Error **errp)
{
    size_t n = len;

    if (f->writes_left == 0) {
        /* whole 4 KiB pages of the first half, or nothing */
        n = f->torn ? (len / 2 & ~(size_t)4095) : 0;
    } else if (f->writes_left > 0) {
        f->writes_left--;
    }
    if (n && off + n > b->len) {
        uint64_t old = b->len;

        g_byte_array_set_size(b, off + n);
        memset(b->data + old, 0, off + n - old);
    }
    memcpy(b->data + off, buf, n);
    if (n != len) {
        error_setg(errp, "crash");
        return -1;
    }
    return 0;
}

static inline int data_read(void *opaque, uint64_t off, void *buf,
                            size_t len, Error **errp)
{
    return rd(((Files *)opaque)->data, off, buf, len, errp);
}

static inline int data_write(void *opaque, uint64_t off, const void *buf,
                             size_t len, Error **errp)
{
    Files *f = opaque;

    return wr(f, f->data, off, buf, len, errp);
}

static inline int hdr_read(void *opaque, uint64_t off, void *buf,
                           size_t len, Error **errp)
{
    return rd(((Files *)opaque)->hdr, off, buf, len, errp);
}

static inline int hdr_write(void *opaque, uint64_t off, const void *buf,
                            size_t len, Error **errp)
{
    Files *f = opaque;

    return wr(f, f->hdr, off, buf, len, errp);
}

static inline int no_sync(void *opaque, Error **errp)
{
    return 0;
}

static inline int64_t data_length(void *opaque, Error **errp)
{
    return ((Files *)opaque)->data->len;
}

static inline int data_truncate(void *opaque, uint64_t size, Error **errp)
{
    GByteArray *b = ((Files *)opaque)->data;
    uint64_t old = b->len;

    g_byte_array_set_size(b, size);
    if (size > old) {
        memset(b->data + old, 0, size - old);
    }
    return 0;
}

/* detached: the header in its own file (decryption). */
static inline QCryptoReencryptIO files_io(Files *f, bool detached)
{
    QCryptoReencryptIO io = {
        .read = data_read, .write = data_write, .sync = no_sync,
        .length = data_length, .truncate = data_truncate, .opaque = f,
    };

    if (detached) {
        io.hdr_read = hdr_read;
        io.hdr_write = hdr_write;
        io.hdr_sync = no_sync;
    }
    return io;
}

/*
 * Go on from whatever a stop left, as the command does: no header file
 * yet (or an empty one): start; a plain header: init again; a running
 * state: resume; a finished one: cut the file to the data size.
 */
static inline int files_decrypt_go_on(Files *f, uint64_t hotzone,
                                      Error **errp)
{
    QCryptoReencryptIO io = files_io(f, true);
    QCryptoReencryptDecryptState st = QCRYPTO_REENCRYPT_DECRYPT_NONE;
    uint64_t size = 0;
    int r = 0;

    if (f->hdr->len) {
        g_assert_cmpint(qcrypto_reencrypt_decrypt_state(&io, &st, &size,
                                                        &error_abort), ==, 0);
    }
    switch (st) {
    case QCRYPTO_REENCRYPT_DECRYPT_NONE:
        /*
         * The command writes the header file under another name and
         * renames it when whole: a copy cut short is never seen.
         */
        g_byte_array_set_size(f->hdr, 0);
        r = qcrypto_reencrypt_decrypt_export_header(&reenc_test_secret, &io, errp);
        if (r == 0) {
            r = qcrypto_reencrypt_decrypt_init(&reenc_test_secret, &io, errp);
        }
        break;
    case QCRYPTO_REENCRYPT_DECRYPT_PLAIN:
        r = qcrypto_reencrypt_decrypt_init(&reenc_test_secret, &io, errp);
        break;
    case QCRYPTO_REENCRYPT_DECRYPT_RUNNING:
        break;
    case QCRYPTO_REENCRYPT_DECRYPT_DONE:
        g_assert_cmpuint(f->data->len, >=, size);
        g_byte_array_set_size(f->data, size);
        return 0;
    default:
        g_assert_not_reached();
    }
    if (r == 0) {
        r = qcrypto_reencrypt_resume(&reenc_test_secret, hotzone, &io, errp);
    }
    if (r == 0) {
        g_assert_cmpint(qcrypto_reencrypt_decrypt_state(&io, &st, &size,
                                                        &error_abort), ==, 0);
        g_assert_cmpint(st, ==, QCRYPTO_REENCRYPT_DECRYPT_DONE);
        g_assert_cmpuint(f->data->len, ==, size);
    }
    return r;
}

#endif
