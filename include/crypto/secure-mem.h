/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Buffers for key material: passphrases, PBKDF2 outputs, slot keys, AF
 * split material and master keys.
 *
 * A secure buffer is zeroed when allocated, locked in RAM with mlock() so
 * it is never written to swap, kept out of core dumps (MADV_DONTDUMP), and
 * wiped with explicit_bzero() then unlocked when freed. Locking fails softly:
 * an unprivileged process may lock only RLIMIT_MEMLOCK bytes (often 64 KiB
 * or 8 MiB), and beyond that the buffer is simply an ordinary, still wiped,
 * allocation. No error is ever reported for it.
 *
 * Each buffer takes whole pages of its own: mlock() works on pages and does
 * not count, so two buffers sharing a page would unlock each other when the
 * first is freed.
 */
#ifndef QCRYPTO_SECURE_MEM_H
#define QCRYPTO_SECURE_MEM_H

#include <stddef.h>
#include <stdint.h>

#include <glib.h>

/*
 * len zeroed bytes (len may be 0: a valid, unique pointer all the same).
 * Aborts on out of memory, like g_malloc(). Free with qcrypto_secure_free()
 * and the same len.
 */
void *qcrypto_secure_alloc(size_t len);

/* Wipe, unlock and free p (NULL is fine); len as given at allocation. */
void qcrypto_secure_free(void *p, size_t len);

/* A secure buffer that knows its length, for g_autoptr(). */
typedef struct QCryptoSecureBuf {
    uint8_t *data;
    size_t len;
} QCryptoSecureBuf;

QCryptoSecureBuf *qcrypto_secure_buf_new(size_t len);
void qcrypto_secure_buf_free(QCryptoSecureBuf *buf);

G_DEFINE_AUTOPTR_CLEANUP_FUNC(QCryptoSecureBuf, qcrypto_secure_buf_free)

#endif
