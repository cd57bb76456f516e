/* SPDX-License-Identifier: GPL-2.0-or-later */
/* PBKDF2 (RFC 8018 section 5.2) with HMAC over any QCryptoHashAlgo. */
#ifndef QCRYPTO_PBKDF_H
#define QCRYPTO_PBKDF_H

#include "crypto/hash.h"

bool qcrypto_pbkdf2_supports(QCryptoHashAlgo hash);

/* Derive nout bytes into out. iterations must be >= 1. */
int qcrypto_pbkdf2(QCryptoHashAlgo hash,
                   const uint8_t *key, size_t nkey,
                   const uint8_t *salt, size_t nsalt,
                   uint64_t iterations,
                   uint8_t *out, size_t nout,
                   Error **errp);

/*
 * Iterations per second of this thread's CPU time for hash, deriving nout
 * bytes (what LUKS then scales by iter-time). Measured on the thread CPU
 * clock, with the work per sample grown until the clock's resolution is
 * negligible, so a busy machine does not make it fail or go wildly wrong.
 * Returns 0 and sets errp only on a real failure.
 */
uint64_t qcrypto_pbkdf2_count_iters(QCryptoHashAlgo hash,
                                    const uint8_t *key, size_t nkey,
                                    const uint8_t *salt, size_t nsalt,
                                    size_t nout,
                                    Error **errp);

/*
 * What LUKS1 and LUKS2 calibrate their key slots and digests with: PBKDF2
 * iterations per second of this thread's CPU time for hash, deriving nout
 * bytes. Measured once per process and hash, for one digest-sized block,
 * and cached (thread-safe): the measurement counts thread CPU time, which
 * other load does not change, and each further block of output costs as
 * much again (RFC 8018 section 5.2, T_1 .. T_l). Returns 0 and sets errp
 * on failure, which is not cached: the next call measures again.
 */
uint64_t qcrypto_pbkdf2_rate(QCryptoHashAlgo hash, size_t nout,
                             Error **errp);

/*
 * *iters = the PBKDF2 iterations that take ms milliseconds of this CPU
 * for hash deriving nout bytes (qcrypto_pbkdf2_rate, scaled); the caller
 * applies its format's floor and ceiling. -1 with errp set on failure,
 * or when the count does not fit in 64 bits.
 */
int qcrypto_pbkdf2_iters_for_time(QCryptoHashAlgo hash, size_t nout,
                                  uint64_t ms, uint64_t *iters,
                                  Error **errp);

#endif
