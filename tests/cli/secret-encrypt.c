/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * secret-encrypt KEYFILE IV_HEX < PLAINTEXT > CIPHERTEXT
 *
 * Encrypt a secret the way libvirt does for QEMU's "--object secret,
 * keyid=...,iv=...": AES-256-CBC under the 32 bytes of KEYFILE, with PKCS#7
 * padding (RFC 5652, section 6.3). test_secrets.py uses it when the openssl
 * CLI is not installed. It calls nettle directly, not crypto/, so the tool's
 * decryption is never checked against its own code.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/aes.h>
#include <nettle/cbc.h>

#define MAX_SECRET 4096

static int unhex(const char *hex, uint8_t *out, size_t len)
{
    if (strlen(hex) != 2 * len) {
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned byte;

        if (sscanf(hex + 2 * i, "%2x", &byte) != 1) {
            return -1;
        }
        out[i] = byte;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static uint8_t buf[MAX_SECRET + AES_BLOCK_SIZE];
    uint8_t key[AES256_KEY_SIZE + 1], iv[AES_BLOCK_SIZE];
    struct aes256_ctx ctx;
    size_t len, padded;
    FILE *f;

    if (argc != 3 || !(f = fopen(argv[1], "rb"))) {
        fprintf(stderr, "usage: secret-encrypt KEYFILE IV_HEX\n");
        return 2;
    }
    if (fread(key, 1, sizeof(key), f) != AES256_KEY_SIZE ||
        unhex(argv[2], iv, sizeof(iv)) < 0) {
        fprintf(stderr, "secret-encrypt: a 32-byte key file and a "
                "16-byte hex IV are needed\n");
        return 2;
    }
    fclose(f);
    len = fread(buf, 1, MAX_SECRET + 1, stdin);
    if (len > MAX_SECRET) {
        fprintf(stderr, "secret-encrypt: secret too long\n");
        return 2;
    }
    padded = (len / AES_BLOCK_SIZE + 1) * AES_BLOCK_SIZE;
    memset(buf + len, (int)(padded - len), padded - len);
    aes256_set_encrypt_key(&ctx, key);
    cbc_encrypt(&ctx, (nettle_cipher_func *)aes256_encrypt, AES_BLOCK_SIZE,
                iv, padded, buf, buf);
    return fwrite(buf, 1, padded, stdout) == padded ? 0 : 1;
}
