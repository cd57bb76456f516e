/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Cryptographically strong random bytes (getrandom(2)). */
#ifndef QCRYPTO_RANDOM_H
#define QCRYPTO_RANDOM_H

#include <stddef.h>

#include "qemu/error.h"

int qcrypto_random_bytes(void *buf, size_t buflen, Error **errp);

#endif
