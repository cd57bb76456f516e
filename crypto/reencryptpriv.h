/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Private to the LUKS2 re-encryption code (crypto/block-luks2-reencrypt*.c):
 * the state of a run and the helpers every mode shares.
 */
#ifndef QCRYPTO_REENCRYPTPRIV_H
#define QCRYPTO_REENCRYPTPRIV_H

#include <json-glib/json-glib.h>

#include "crypto/blockpriv.h"
#include "crypto/hash.h"
#include "crypto/luks2priv.h"
#include "crypto/reencrypt.h"

/* cryptsetup's reencrypt key slot area: one 4 KiB block, unused by datashift */
#define REENC_AREA_SIZE 4096
#define REENC_DIGEST_SALT_LEN 32
/* cryptsetup rejects longer strings when it serialises for the digest */
#define REENC_MAX_STR 256
/* Larger offsets and sizes are refused: sums of a few never wrap. */
#define REENC_MAX_BYTES (1ull << 60)

typedef struct Reenc {
    const QCryptoReencryptIO *io;
    QCryptoBlock *block;
    QCryptoLUKS2Header *hdr;
    JsonNode *root;
    int version;                /* N of the online-reencrypt-vN requirement */
    int ks_id;                  /* the "reencrypt" key slot */
    int digest_new;             /* digest of the final segment's key */
    int digest_reenc;           /* digest over the re-encryption metadata */
    JsonObject *prev, *final, *moved;   /* the backup segments */
    uint64_t shift;             /* S */
    uint64_t size;              /* V */
    uint64_t moved_offset;
    uint64_t moved_size;        /* M */
    const QCryptoReencryptKeys *keys;   /* unlocked before, or NULL */
} Reenc;

/* At most the old and the new volume key. */
#define REENC_KEYS_MAX 2
struct QCryptoReencryptKeys {
    QCryptoSecureBuf *key[REENC_KEYS_MAX];
};

/* Keep a copy of key (nkey bytes) in keys (NULL: nothing kept). */
void reenc_keys_add(QCryptoReencryptKeys *keys, const uint8_t *key,
                    size_t nkey);
/*
 * A kept key that matches digest d, copied into *key (a new secure
 * buffer): 1; none: 0; -1 on error.
 */
int reenc_keys_find(const QCryptoReencryptKeys *keys,
                    const QCryptoLUKS2Digest *d, QCryptoSecureBuf **key,
                    Error **errp);

void reenc_clear(Reenc *r);

/* QCryptoBlock header I/O through the QCryptoReencryptIO in opaque */
int reenc_block_read(QCryptoBlock *block, uint64_t offset, uint8_t *buf,
                     size_t len, void *opaque, Error **errp);
int reenc_block_write(QCryptoBlock *block, uint64_t offset,
                      const uint8_t *buf, size_t len, void *opaque,
                      Error **errp);

/* Read the header through io into r (block, hdr, root). */
int reenc_load(Reenc *r, const QCryptoReencryptIO *io, Error **errp);
/* The reencrypt key slot and the requirement's version; *mode its mode. */
JsonObject *reenc_find_keyslot(Reenc *r, const char **mode, Error **errp);

/* JSON helpers: numbers as LUKS2 strings, segments, id arrays */
void reenc_set_u64(JsonObject *o, const char *key, uint64_t v);
int reenc_get_u64(JsonObject *o, const char *what, const char *key,
                  uint64_t *v, Error **errp);
/* o[key] if it is a string, else def (missing, or another type). */
const char *reenc_get_str(JsonObject *o, const char *key, const char *def);
bool reenc_seg_has_flag(JsonObject *seg, const char *flag);
JsonNode *reenc_deep_copy(JsonNode *node);
JsonObject *reenc_seg_copy(JsonObject *seg, const char *flag);
JsonObject *reenc_linear_seg(uint64_t offset, uint64_t size);
/*
 * What every mode reads first: the metadata's segments and digests, and
 * the reencrypt key slot ks's direction, area and area type.
 */
int reenc_slot_lookup(JsonNode *root, JsonObject *ks, JsonObject **segs,
                      JsonObject **digests, JsonObject **area,
                      const char **dir, const char **atype, Error **errp);
/*
 * A piece of the crypt segment tmpl (flag: its only flag, or NULL):
 * logical [x, x + size) stored at physical, IVs from x; size 0: "dynamic"
 * (to the end of the device).
 */
JsonObject *reenc_crypt_seg(JsonObject *tmpl, uint64_t physical, uint64_t x,
                            uint64_t size, const char *flag);
char *reenc_json_text(JsonNode *root);
JsonObject *reenc_section(JsonNode *root, const char *name);
JsonArray *reenc_id_array(const int *ids, int n);
/*
 * Our data-size token (QCRYPTO_LUKS2_TOKEN_DATA_SIZE): added with the
 * data size at the first free token id (replacing one there was), or
 * dropped. It says where the data ends when cryptsetup finishes a run of
 * ours and leaves a "dynamic" segment over a longer file.
 */
int reenc_add_size_token(JsonNode *root, uint64_t size, Error **errp);
void reenc_drop_size_token(JsonNode *root);
/* The size our data-size token holds; 0 if there is none (or not valid). */
uint64_t reenc_size_token(JsonNode *root);
/*
 * The reencrypt key slot (r->ks_id) with its area, mode and direction,
 * added to keyslots; area is taken.
 */
void reenc_add_keyslot(Reenc *r, JsonObject *keyslots, JsonObject *area,
                       const char *mode, const char *direction);
/*
 * A "pbkdf2" digest object: hash and iterations, salt and digest given in
 * bytes (base64 in the JSON), bound to keyslots and segments (taken).
 */
JsonObject *reenc_pbkdf2_digest(const char *hash, int64_t iterations,
                                const uint8_t *salt, size_t nsalt,
                                const uint8_t *dig, size_t ndig,
                                JsonArray *keyslots, JsonArray *segments);
JsonObject *reenc_find_backup(JsonObject *segs, const char *flag, int *id);
bool reenc_id_array_has(JsonObject *o, const char *key, int id);

/*
 * The digest binding the metadata (r->ks_id's key slot, r->prev, r->final,
 * r->moved, r->version) to the old and/or new volume key (NULL: none).
 */
int reenc_digest_compute(Reenc *r, QCryptoHashAlgo hash, uint64_t iters,
                         const uint8_t *salt, size_t nsalt,
                         const uint8_t *old, size_t nold,
                         const uint8_t *new, size_t nnew,
                         uint8_t *out, size_t nout, Error **errp);
/* Check digest r->digest_reenc, in constant time. */
int reenc_digest_check(Reenc *r, const uint8_t *old, size_t nold,
                       const uint8_t *new, size_t nnew, Error **errp);

/* Sync the header's file (the data file unless the header is detached). */
int reenc_hdr_sync(const QCryptoReencryptIO *io, Error **errp);
/* reenc_hdr_sync() as a QCryptoBlockFlushFunc (opaque: the io). */
int reenc_block_flush(QCryptoBlock *block, void *opaque, Error **errp);

/*
 * The hot zone of a run: asked (0: dflt), at most max, whole units of
 * align bytes; 0 and errp when not one unit fits.
 */
uint64_t reenc_hotzone_size(uint64_t asked, uint64_t dflt, uint64_t max,
                            uint64_t align, Error **errp);

/* Write root as both header copies, then sync. */
int reenc_write_root(Reenc *r, JsonNode *root, Error **errp);
/*
 * A hot-zone buffer of len bytes aligned to REENC_ZONE_ALIGN, and its
 * end (zeroed: it held plain text or keys' work).
 */
#define REENC_ZONE_ALIGN 4096
uint8_t *reenc_zone_buf_new(uint64_t len);
void reenc_zone_buf_free(uint8_t *buf, uint64_t len);
/* Copy len bytes from src to dst in the file. */
int reenc_io_copy(const QCryptoReencryptIO *io, uint64_t src, uint64_t dst,
                  uint64_t len, Error **errp);

/* ---- The one resume loop and its modes (block-luks2-reencrypt-engine.c) */

typedef struct ReencRun ReencRun;

/*
 * A re-encryption mode, as cryptsetup's reencrypt key slot names it: how
 * its zones are read and written and protected. The loop, the same for
 * every mode (reenc_mode_resume()): start; redo the zone a crash cut
 * short; then zone after zone, progress reported before each, each one a
 * step after which a crash leaves the image resumable; the tests' stop;
 * finish.
 */
typedef struct ReencMode {
    const char *name;           /* the key slot's "mode" */
    /*
     * Check the metadata against the mode, find where the run is, unlock
     * the key(s); set run->state (freed by clear), run->hotzone (from the
     * one asked for, 0: the mode's default) and run->bufsize (the largest
     * zone, the buffer the loop then gives in run->buf).
     */
    int (*start)(ReencRun *run, JsonObject *ks,
                 const QCryptoBlockSecret *secret, uint64_t hotzone,
                 Error **errp);
    /* Optional: the zone a crash cut short, repaired. */
    int (*recover)(ReencRun *run, Error **errp);
    /* The next zone, logical [*off, *off + *len); false when none is left. */
    bool (*next)(ReencRun *run, uint64_t *off, uint64_t *len);
    /* Do it: 0, 1 (a test stop: resumable), -1 and errp. */
    int (*zone)(ReencRun *run, uint64_t off, uint64_t len, Error **errp);
    /* The bytes done so far, as the progress callback counts them. */
    uint64_t (*done)(ReencRun *run);
    /*
     * Optional, tests only (QCRYPTO_REENCRYPT_STOP_BEFORE_FINISH): leave
     * the last state before the final one, as cryptsetup does when
     * stopped there. Without it, that stop is ignored.
     */
    int (*stop_before_finish)(ReencRun *run, Error **errp);
    /* Every zone done: the final metadata. */
    int (*finish)(ReencRun *run, Error **errp);
    /* Optional: free run->state's insides (the loop frees run->state). */
    void (*clear)(ReencRun *run);
    /*
     * Optional, online runs (qcrypto_reencrypt_run_crypt(), a new volume
     * key only): encrypt or decrypt logical [off, off + len) of buf in
     * place with the key it is under when [0, done) is new; from any
     * thread, while zone runs on another (never on the same bytes). With
     * it: the data's offset in the file and the largest sector size.
     */
    int (*crypt)(ReencRun *run, uint64_t done, bool encrypt, uint64_t off,
                 uint8_t *buf, size_t len, Error **errp);
    uint64_t (*data_offset)(ReencRun *run);
    uint32_t (*sector_size)(ReencRun *run);
} ReencMode;

struct ReencRun {
    Reenc *r;
    void *state;                /* the mode's own */
    uint64_t hotzone;
    uint64_t bufsize;
    uint8_t *buf;               /* bufsize bytes, REENC_ZONE_ALIGN aligned */
};

/* block-luks2-reencrypt.c, -decrypt.c, -rekey.c, block-luks1-reencrypt.c */
extern const ReencMode reenc_mode_encrypt;
extern const ReencMode reenc_mode_decrypt;
extern const ReencMode reenc_mode_rekey;
extern const ReencMode reenc_mode_luks1;

/*
 * A new volume key's init: key slot slot of a fmt ("LUKS1", "LUKS2")
 * image did not open with its secret (from slot-secrets, or key-secret).
 */
void reenc_slot_not_opened(Error **errp, const char *fmt, int slot,
                           bool from_list);

/* ---- LUKS1 (block-luks1-reencrypt.c) ---- */

/* The image behind io->read starts with a LUKS1 header, whole or marked
 * as being re-encrypted (ours or cryptsetup's); false with io->hdr_read. */
bool reenc_luks1_image(const QCryptoReencryptIO *io);
/* ... marked as being re-encrypted (ours or cryptsetup's). */
bool reenc_luks1_running(const QCryptoReencryptIO *io);
/* The same, with errp saying whose run it is and how to finish it. */
bool reenc_luks1_busy(const QCryptoReencryptIO *io, Error **errp);
/*
 * The run a LUKS1 image is in: 1 ours (mode reenc_mode_luks1), 0 none
 * left (what a finished one left was wiped), -1 and errp (not being
 * re-encrypted, or by cryptsetup).
 */
int reenc_luks1_find(const QCryptoReencryptIO *io, Error **errp);
/* qcrypto_reencrypt_rekey_init() of a LUKS1 image. */
int reenc_luks1_rekey_init(const QCryptoReencryptRekeyOptions *o,
                           const QCryptoReencryptIO *io, Error **errp);

#endif
