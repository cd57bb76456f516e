/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What the seed makers (make-seed-luks1.c, make-seed-luks2.c) share: an
 * in-memory image that the LUKS create code writes through callbacks and
 * that the fuzz harnesses' reader reads back, and a fatal error exit.
 */
#ifndef SEED_IMAGE_H
#define SEED_IMAGE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-image.h"

static GByteArray *image;

static int seed_write(QCryptoBlock *block, uint64_t offset, const uint8_t *buf,
                      size_t len, void *opaque, Error **errp)
{
    if (offset + len > image->len) {
        size_t old = image->len;

        g_byte_array_set_size(image, offset + len);
        memset(image->data + old, 0, image->len - old);
    }
    memcpy(image->data + offset, buf, len);
    return 0;
}

static int seed_init(QCryptoBlock *block, uint64_t headerlen, void *opaque,
                     Error **errp)
{
    g_byte_array_set_size(image, headerlen);
    memset(image->data, 0, headerlen);
    return 0;
}

/* Read the image as the harness will: strict = no zero-filled tail. */
static int seed_read_image(QCryptoBlock *block, uint64_t offset, uint8_t *buf,
                           size_t len, bool strict, Error **errp)
{
    FuzzImage img = { image->data, image->len, strict };

    return fuzz_image_read(block, offset, buf, len, &img, errp);
}

static G_NORETURN void seed_die(const char *prog, const char *what,
                                Error *err)
{
    fprintf(stderr, "%s: %s: %s\n", prog, what,
            err ? error_get_pretty(err) : "failed");
    exit(1);
}

/* An enum value parsed from a command-line name, or exit 2 saying which. */
static int seed_parse_or_die(const char *prog, int value, const char *what,
                             const char *name)
{
    if (value < 0) {
        fprintf(stderr, "%s: unknown %s '%s'\n", prog, what, name);
        exit(2);
    }
    return value;
}

/* The cipher options both seed makers take (NULL ivhash: none). */
static void seed_cipher_options(QCryptoBlockCreateOptions *opts,
                                const char *prog, const char *cipher,
                                const char *mode, const char *ivgen,
                                const char *ivhash, const char *hash)
{
    opts->cipher_alg = seed_parse_or_die(
        prog, qcrypto_cipher_algo_parse(cipher), "cipher", cipher);
    opts->cipher_mode = seed_parse_or_die(
        prog, qcrypto_cipher_mode_parse(mode), "mode", mode);
    opts->ivgen_alg = seed_parse_or_die(
        prog, qcrypto_ivgen_algo_parse(ivgen), "ivgen", ivgen);
    if (ivhash) {
        opts->has_ivgen_hash_alg = true;
        opts->ivgen_hash_alg = seed_parse_or_die(
            prog, qcrypto_hash_algo_parse(ivhash), "hash", ivhash);
    }
    opts->hash_alg = seed_parse_or_die(prog, qcrypto_hash_algo_parse(hash),
                                       "hash", hash);
}

#endif
