/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Secure buffers for key material (see include/crypto/secure-mem.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "crypto/secure-mem.h"

static size_t secure_page_size(void)
{
    static size_t page;

    if (!page) {
        long n = sysconf(_SC_PAGESIZE);

        page = n > 0 ? (size_t)n : 4096;
    }
    return page;
}

/*
 * Out of memory, or a size no allocation can hold: no caller could do
 * anything about it, so stop here with the reason, as g_malloc() does.
 * abort() rather than g_error(): SIGABRT, like every other broken promise
 * in this code (the fuzzers keep an input on SIGABRT, not on SIGTRAP).
 */
static G_NORETURN void secure_alloc_abort(const char *why, size_t len)
{
    fprintf(stderr, "qcrypto_secure_alloc: %s (%zu bytes)\n", why, len);
    abort();
}

/* Bytes actually allocated for len: whole pages, at least one. */
static size_t secure_span(size_t len)
{
    size_t page = secure_page_size();

    if (len > SIZE_MAX - page) {
        secure_alloc_abort("too large", len);
    }
    return len ? (len + page - 1) / page * page : page;
}

void *qcrypto_secure_alloc(size_t len)
{
    size_t span = secure_span(len);
    void *p;

    if (posix_memalign(&p, secure_page_size(), span) != 0) {
        secure_alloc_abort("out of memory", span);
    }
    memset(p, 0, span);
    /*
     * Both fail softly: over RLIMIT_MEMLOCK (EPERM, ENOMEM) the key may be
     * swapped; on kernels without MADV_DONTDUMP it may land in a core dump.
     * Neither is worth refusing to open an image for.
     */
    (void)mlock(p, span);
#ifdef MADV_DONTDUMP
    (void)madvise(p, span, MADV_DONTDUMP);
#endif
    return p;
}

void qcrypto_secure_free(void *p, size_t len)
{
    size_t span;

    if (!p) {
        return;
    }
    span = secure_span(len);
    explicit_bzero(p, span);
#ifdef MADV_DODUMP
    (void)madvise(p, span, MADV_DODUMP);
#endif
    (void)munlock(p, span);
    free(p);
}

QCryptoSecureBuf *qcrypto_secure_buf_new(size_t len)
{
    QCryptoSecureBuf *buf = g_new0(QCryptoSecureBuf, 1);

    buf->data = qcrypto_secure_alloc(len);
    buf->len = len;
    return buf;
}

void qcrypto_secure_buf_free(QCryptoSecureBuf *buf)
{
    if (buf) {
        qcrypto_secure_free(buf->data, buf->len);
        g_free(buf);
    }
}
