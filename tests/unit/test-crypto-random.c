/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Random bytes: large requests are filled completely (getrandom(2) returns
 * at most 32 MiB - 1 per call, and may return less when interrupted), and
 * two requests differ. Statistical quality is the kernel's business.
 */
#include <stdint.h>
#include <string.h>

#include "crypto/random.h"

static void test_random_fills(void)
{
    static const size_t sizes[] = { 0, 1, 16, 256, 257, 4096, 40 << 20 };

    for (size_t i = 0; i < G_N_ELEMENTS(sizes); i++) {
        size_t len = sizes[i];
        g_autofree uint8_t *a = g_malloc0(len + 1);
        g_autofree uint8_t *b = g_malloc0(len + 1);
        Error *err = NULL;

        g_assert_cmpint(qcrypto_random_bytes(a, len, &err), ==, 0);
        g_assert_null(err);
        g_assert_cmpint(qcrypto_random_bytes(b, len, &err), ==, 0);
        g_assert_null(err);
        if (len >= 16) {
            /* Equal 128-bit strings, or a zero tail: not random bytes. */
            static const uint8_t zero[16];
            g_assert_true(memcmp(a, b, len) != 0);
            g_assert_true(memcmp(a + len - 16, zero, 16) != 0);
        }
        g_assert_cmpuint(a[len], ==, 0);    /* nothing written past len */
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/crypto/random/fills", test_random_fills);
    return g_test_run();
}
