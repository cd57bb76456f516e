/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The LUKS anti-forensic splitter (LUKS1 spec, section 2.4 "AF-Splitter"):
 * a key of blocklen bytes is spread over blocklen * stripes bytes, so that
 * destroying any part of the stripes destroys the key.
 */
#ifndef QCRYPTO_AFSPLIT_H
#define QCRYPTO_AFSPLIT_H

#include "crypto/hash.h"

/* Split in (blocklen bytes) into out (blocklen * stripes bytes). */
int qcrypto_afsplit_encode(QCryptoHashAlgo hash, size_t blocklen,
                           uint32_t stripes, const uint8_t *in,
                           uint8_t *out, Error **errp);

/* Merge in (blocklen * stripes bytes) back into out (blocklen bytes). */
int qcrypto_afsplit_decode(QCryptoHashAlgo hash, size_t blocklen,
                           uint32_t stripes, const uint8_t *in,
                           uint8_t *out, Error **errp);

#endif
