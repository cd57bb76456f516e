/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Secure buffers (crypto/secure-mem.c): zeroed, page-aligned, each on
 * pages of its own, locked while alive where RLIMIT_MEMLOCK allows, and
 * unlocked when freed. Locking is observed through the kernel's own count
 * of this process's locked memory (VmLck in /proc/self/status, proc(5)).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "crypto/secure-mem.h"

/*
 * AddressSanitizer intercepts mlock() and munlock() and does nothing
 * ("AddressSanitizer ignores mlock/mlockall/munlock/munlockall"): nothing
 * to observe there.
 */
#if defined(__SANITIZE_ADDRESS__)
#define MLOCK_IS_NOOP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MLOCK_IS_NOOP 1
#endif
#endif
#ifndef MLOCK_IS_NOOP
#define MLOCK_IS_NOOP 0
#endif

/* VmLck in bytes, or -1 when /proc is not there. */
static long long locked_bytes(void)
{
    g_autofree char *status = NULL;
    const char *line;
    long long kib;

    if (!g_file_get_contents("/proc/self/status", &status, NULL, NULL)) {
        return -1;
    }
    line = strstr(status, "\nVmLck:");
    if (!line || sscanf(line, "\nVmLck: %lld kB", &kib) != 1) {
        return -1;
    }
    return kib * 1024;
}

/* Whether this process may lock another n bytes (and /proc can tell). */
static bool can_lock(size_t n)
{
    struct rlimit rl;
    long long now = locked_bytes();

    if (MLOCK_IS_NOOP || now < 0 || getrlimit(RLIMIT_MEMLOCK, &rl) < 0) {
        return false;
    }
    return rl.rlim_cur == RLIM_INFINITY || now + n <= rl.rlim_cur;
}

static void test_zeroed_and_aligned(void)
{
    size_t page = sysconf(_SC_PAGESIZE);
    size_t sizes[] = { 0, 1, 32, 64, page - 1, page, page + 1, 4000 * 64 };

    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
        uint8_t *p = qcrypto_secure_alloc(sizes[i]);

        g_assert_nonnull(p);
        g_assert_cmpuint((uintptr_t)p % page, ==, 0);
        for (size_t j = 0; j < sizes[i]; j++) {
            g_assert_cmpuint(p[j], ==, 0);
        }
        memset(p, 0xa5, sizes[i]);
        qcrypto_secure_free(p, sizes[i]);
    }
    qcrypto_secure_free(NULL, 32);
}

static void test_separate_pages(void)
{
    size_t page = sysconf(_SC_PAGESIZE);
    uint8_t *a = qcrypto_secure_alloc(16);
    uint8_t *b = qcrypto_secure_alloc(16);

    /* Page-aligned and distinct: never the same page. */
    g_assert_true(a != b);
    g_assert_cmpuint((uintptr_t)a / page, !=, (uintptr_t)b / page);
    qcrypto_secure_free(a, 16);
    qcrypto_secure_free(b, 16);
}

static void test_locked_while_alive(void)
{
    size_t page = sysconf(_SC_PAGESIZE);
    long long before;
    uint8_t *a, *b;

    if (!can_lock(3 * page)) {
        g_test_skip("no /proc/self/status VmLck, RLIMIT_MEMLOCK too small "
                    "to lock 3 pages (locking fails softly there), or "
                    "AddressSanitizer, whose mlock() does nothing");
        return;
    }
    before = locked_bytes();
    a = qcrypto_secure_alloc(page + 1);             /* two pages */
    g_assert_cmpint(locked_bytes(), ==, before + 2 * page);
    b = qcrypto_secure_alloc(64);                   /* one more */
    g_assert_cmpint(locked_bytes(), ==, before + 3 * page);
    /* Freeing one buffer leaves the other locked. */
    qcrypto_secure_free(a, page + 1);
    g_assert_cmpint(locked_bytes(), ==, before + page);
    qcrypto_secure_free(b, 64);
    g_assert_cmpint(locked_bytes(), ==, before);
}

static void test_over_limit_fails_softly(void)
{
    struct rlimit rl;
    size_t len;
    uint8_t *p;

    if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ||
        rl.rlim_cur > (64u << 20)) {
        g_test_skip("RLIMIT_MEMLOCK is unlimited or large: cannot exceed it "
                    "cheaply");
        return;
    }
    /* Twice the limit cannot be locked; the buffer is usable anyway. */
    len = 2 * rl.rlim_cur + 1;
    p = qcrypto_secure_alloc(len);
    memset(p, 0x5a, len);
    g_assert_cmpuint(p[len - 1], ==, 0x5a);
    qcrypto_secure_free(p, len);
}

static void test_autoptr(void)
{
    long long before = locked_bytes();

    {
        g_autoptr(QCryptoSecureBuf) buf = qcrypto_secure_buf_new(48);

        g_assert_cmpuint(buf->len, ==, 48);
        memset(buf->data, 0x11, buf->len);
        if (before >= 0 && can_lock(sysconf(_SC_PAGESIZE))) {
            g_assert_cmpint(locked_bytes(), >, before);
        }
    }
    /* The cleanup ran: the page is unlocked (and freed: ASan checks). */
    if (before >= 0) {
        g_assert_cmpint(locked_bytes(), ==, before);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/crypto/secure-mem/zeroed-and-aligned",
                    test_zeroed_and_aligned);
    g_test_add_func("/crypto/secure-mem/separate-pages", test_separate_pages);
    g_test_add_func("/crypto/secure-mem/locked-while-alive",
                    test_locked_while_alive);
    g_test_add_func("/crypto/secure-mem/over-limit-fails-softly",
                    test_over_limit_fails_softly);
    g_test_add_func("/crypto/secure-mem/autoptr", test_autoptr);
    return g_test_run();
}
