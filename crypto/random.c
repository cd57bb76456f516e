/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Random bytes from the kernel's CSPRNG through getrandom(2), which blocks
 * only until the pool is first initialised and never runs dry afterwards.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/random.h>

#include "crypto/random.h"

int qcrypto_random_bytes(void *buf, size_t buflen, Error **errp)
{
    uint8_t *p = buf;

    /*
     * getrandom(2) may return fewer bytes than asked (above 256 bytes, or
     * when a signal arrives), and fail with EINTR: keep going until done.
     */
    while (buflen > 0) {
        ssize_t got = getrandom(p, buflen, 0);

        if (got < 0) {
            if (errno == EINTR) {
                continue;
            }
            error_setg_errno(errp, errno, "Unable to read random bytes");
            return -1;
        }
        p += got;
        buflen -= got;
    }
    return 0;
}
