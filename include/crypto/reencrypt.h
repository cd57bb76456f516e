/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * In-place encryption of a raw image into LUKS2, resumable and crash-safe,
 * with the re-encryption metadata cryptsetup 2.6 writes (the
 * "online-reencrypt-v2" requirement, a "reencrypt" key slot with
 * "datashift" resilience, linear and crypt segments, and the digest over
 * the re-encryption parameters). See docs/reencrypt.md.
 *
 * Like the rest of crypto/, this does no I/O of its own: the caller's
 * QCryptoReencryptIO moves the bytes of the one file that holds header and
 * data.
 */
#ifndef QCRYPTO_REENCRYPT_H
#define QCRYPTO_REENCRYPT_H

#include "crypto/block.h"

/*
 * Test-only: where qcrypto_reencrypt_resume() stops on purpose, leaving a
 * state that tests would otherwise need a kill at the right instant to
 * reach. Normal callers leave QCRYPTO_REENCRYPT_STOP_NONE (zero).
 */
typedef enum QCryptoReencryptStop {
    QCRYPTO_REENCRYPT_STOP_NONE = 0,
    /*
     * Encryption and a new volume key: every zone done, in the last state
     * before the final metadata (as cryptsetup leaves it when stopped
     * there); resume returns 1.
     */
    QCRYPTO_REENCRYPT_STOP_BEFORE_FINISH,
    /*
     * Decryption: the moved zone's checksums and metadata written, none
     * of its data; resume returns 1.
     */
    QCRYPTO_REENCRYPT_STOP_IN_MOVED_ZONE,
} QCryptoReencryptStop;

typedef struct QCryptoReencryptIO {
    int (*read)(void *opaque, uint64_t offset, void *buf, size_t len,
                Error **errp);
    int (*write)(void *opaque, uint64_t offset, const void *buf, size_t len,
                 Error **errp);
    /* Make every write so far durable (fdatasync). */
    int (*sync)(void *opaque, Error **errp);
    /* The file's size, and setting it (growing reads back zeroes). */
    int64_t (*length)(void *opaque, Error **errp);
    int (*truncate)(void *opaque, uint64_t size, Error **errp);
    /*
     * Called after every hot zone with the bytes done and the total;
     * returns true to stop there (the image stays resumable). May be NULL.
     */
    bool (*progress)(void *opaque, uint64_t done, uint64_t total);
    /*
     * The header's own file (a detached LUKS2 header, as decryption uses
     * it: the data overwrites the header in the image). NULL: the header
     * is in the data file, read and written with read/write/sync.
     */
    int (*hdr_read)(void *opaque, uint64_t offset, void *buf, size_t len,
                    Error **errp);
    int (*hdr_write)(void *opaque, uint64_t offset, const void *buf,
                     size_t len, Error **errp);
    int (*hdr_sync)(void *opaque, Error **errp);
    void *opaque;
    /* Test-only, see QCryptoReencryptStop; the rest leave it zero. */
    QCryptoReencryptStop stop_at;
} QCryptoReencryptIO;

/*
 * Volume keys unlocked by one step of a run, handed to the next in the
 * same process (secure memory, wiped when freed; never written). Each is
 * checked against the metadata's digest before use: a key that does not
 * match is ignored and the key slot unlocked as usual.
 */
typedef struct QCryptoReencryptKeys QCryptoReencryptKeys;
QCryptoReencryptKeys *qcrypto_reencrypt_keys_new(void);
void qcrypto_reencrypt_keys_free(QCryptoReencryptKeys *keys);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QCryptoReencryptKeys, qcrypto_reencrypt_keys_free)

/*
 * Turn the raw image behind io (its whole length is the data) into a LUKS2
 * image in re-encryption state: the file grows by twice the data shift
 * (the payload offset of a LUKS2 image created with options, 16 MiB by
 * default), the first data-shift bytes are copied to the end, and the
 * header is written over them. Nothing is encrypted yet: resume does it.
 * hotzone: 0 for the data shift, else at most the data shift.
 */
int qcrypto_reencrypt_encrypt_init(const QCryptoBlockCreateOptions *options,
                                   const QCryptoReencryptIO *io,
                                   Error **errp);
/*
 * The same, keeping the new volume key in keys (NULL: not kept) for the
 * resume that follows in the same process: it then derives no key.
 */
int qcrypto_reencrypt_encrypt_init_keys(
    const QCryptoBlockCreateOptions *options, QCryptoReencryptKeys *keys,
    const QCryptoReencryptIO *io, Error **errp);


/* How a hot zone of a new-volume-key run survives a crash (docs/reencrypt.md). */
typedef enum QCryptoReencryptResilience {
    /* a hash of each block of the zone's old ciphertext (cryptsetup's default) */
    QCRYPTO_REENCRYPT_RESILIENCE_CHECKSUM,
    /* a copy of the zone's old ciphertext */
    QCRYPTO_REENCRYPT_RESILIENCE_JOURNAL,
    /* nothing: a crash inside a zone loses that zone */
    QCRYPTO_REENCRYPT_RESILIENCE_NONE,
} QCryptoReencryptResilience;

typedef struct QCryptoReencryptRekeyOptions {
    /*
     * create.secret opens the key slots; create's KDF fields (has_kdf,
     * kdf, hash_alg, has_iter_time, iter_time, kdf_memory, kdf_parallel)
     * shape the new key slots; with has_cipher, cipher_alg, cipher_mode,
     * ivgen_alg and ivgen_hash_alg the new cipher (else the old one and
     * its key size); create.sector_size the new sector size (0: the old).
     */
    QCryptoBlockCreateOptions create;
    bool has_cipher;
    /*
     * One secret per key slot of the volume key, in ascending slot order,
     * when they do not all open with create.secret (nslot_secrets 0).
     */
    const QCryptoBlockSecret *slot_secrets;
    size_t nslot_secrets;
    /* >= 0: only this key slot gets a new one; the others go at the end */
    int keyslot;
    QCryptoReencryptResilience resilience;
    /*
     * Optional: the init keeps the old and new volume keys here, so that
     * the resume that follows in the same process unlocks no key slot
     * again (each unlock is a KDF run: seconds with argon2).
     */
    QCryptoReencryptKeys *keys;
} QCryptoReencryptRekeyOptions;

/*
 * Start giving the LUKS2 image behind io a new volume key in place
 * (cryptsetup's reencrypt mode "reencrypt", forward): a new key slot for
 * every one of the old key (same passphrase), the reencrypt key slot with
 * the resilience data area, the backup segments and the requirement.
 * Nothing is re-encrypted yet: qcrypto_reencrypt_resume() does it, and at
 * its end drops the old key slots and the old key's digest.
 */
int qcrypto_reencrypt_rekey_init(const QCryptoReencryptRekeyOptions *options,
                                 const QCryptoReencryptIO *io, Error **errp);

/*
 * In-place decryption of a LUKS2 or LUKS1 image (cryptsetup 2.6's
 * "reencrypt --decrypt" with a detached header: the "online-reencrypt-v3"
 * requirement, "datashift-checksum" resilience). The data overwrites the
 * header in the image, so the header lives in its own file meanwhile
 * (io->hdr_*, required), and the caller removes that file at the end.
 *
 * First qcrypto_reencrypt_decrypt_export_header(): check the passphrase
 * and copy the image's header into the (empty) header file, a LUKS1
 * header converted to LUKS2 (as cryptsetup convert does), then sync. The
 * caller makes that file appear whole (write a temporary, rename it).
 *
 * Then qcrypto_reencrypt_decrypt_init(): from the header file, move the
 * first min(S, V) bytes of ciphertext (S the payload offset, V the data
 * size) to the start of the data file and write the metadata that says
 * so. A crash in it leaves the header file's plain header and the data in
 * place past S: it can be done again. Nothing is decrypted yet:
 * qcrypto_reencrypt_resume() does it, and at the end cuts the data file
 * to V.
 */
int qcrypto_reencrypt_decrypt_export_header(const QCryptoBlockSecret *secret,
                                            const QCryptoReencryptIO *io,
                                            Error **errp);
int qcrypto_reencrypt_decrypt_init(const QCryptoBlockSecret *secret,
                                   const QCryptoReencryptIO *io,
                                   Error **errp);

/* What the header file behind io->hdr_* holds (decryption). */
typedef enum QCryptoReencryptDecryptState {
    QCRYPTO_REENCRYPT_DECRYPT_NONE,         /* not a LUKS2 header */
    QCRYPTO_REENCRYPT_DECRYPT_PLAIN,        /* exported; init not done */
    QCRYPTO_REENCRYPT_DECRYPT_RUNNING,      /* a re-encryption requirement */
    QCRYPTO_REENCRYPT_DECRYPT_DONE,         /* ours, finished: *size is V */
    QCRYPTO_REENCRYPT_DECRYPT_DONE_UNSIZED, /* cryptsetup's finished one */
} QCryptoReencryptDecryptState;

/*
 * Classify the header file (io->hdr_*); for _DONE, *size is the data
 * size to truncate the data file to; for _PLAIN, the length a whole
 * export has (the end of its key-slot areas; 0 if unknown): a shorter
 * file is an export cut short. -1 and errp if it cannot be read.
 */
int qcrypto_reencrypt_decrypt_state(const QCryptoReencryptIO *io,
                                    QCryptoReencryptDecryptState *state,
                                    uint64_t *size, Error **errp);

/*
 * Whether the image behind io->read holds a LUKS2 header (either copy: a
 * run may have stopped before its primary) that is being re-encrypted
 * (an online- or offline-reencrypt requirement). Never fails: a header
 * that does not read says no.
 */
bool qcrypto_reencrypt_unfinished(const QCryptoReencryptIO *io);

/* Whose unfinished re-encryption it is, for messages. */
typedef enum QCryptoReencryptKind {
    QCRYPTO_REENCRYPT_KIND_NONE,
    QCRYPTO_REENCRYPT_KIND_LUKS2,           /* ours or cryptsetup's */
    QCRYPTO_REENCRYPT_KIND_LUKS1,           /* ours: a new volume key */
    QCRYPTO_REENCRYPT_KIND_LUKS1_CRYPTSETUP, /* cryptsetup 2.6's LUKS1 one */
} QCryptoReencryptKind;
QCryptoReencryptKind qcrypto_reencrypt_unfinished_kind(
    const QCryptoReencryptIO *io);

/*
 * A run taken one zone at a time, for a caller that serves the image
 * meanwhile (online re-encryption: block/crypto-online.c): open finds
 * the run the image behind io is in, unlocks its keys (or takes keys'),
 * and repairs the zone a crash cut short; NULL and errp if there is none
 * or that fails. next says the next zone, zone does it (durable and
 * recorded when it returns 0), finish writes the final metadata once
 * next says none is left. Those run on one thread; the rest on any.
 */
typedef struct QCryptoReencryptRun QCryptoReencryptRun;
QCryptoReencryptRun *qcrypto_reencrypt_run_open(
    const QCryptoBlockSecret *secret, const QCryptoReencryptKeys *keys,
    uint64_t hotzone, const QCryptoReencryptIO *io, Error **errp);
bool qcrypto_reencrypt_run_next(QCryptoReencryptRun *run, uint64_t *off,
                                uint64_t *len);
int qcrypto_reencrypt_run_zone(QCryptoReencryptRun *run, uint64_t off,
                               uint64_t len, Error **errp);
int qcrypto_reencrypt_run_finish(QCryptoReencryptRun *run, Error **errp);
/* Bytes done (as progress counts them) and the data's size. */
uint64_t qcrypto_reencrypt_run_done(QCryptoReencryptRun *run);
uint64_t qcrypto_reencrypt_run_size(QCryptoReencryptRun *run);
/*
 * Whether requests can be served during the run: a new volume key (LUKS2
 * or LUKS1), whose data stays where it is. Then: where the data starts in
 * the file, the sector size requests must be whole multiples of, and
 * crypt, which encrypts or decrypts logical [off, off + len) in place
 * with the key that part is under when [0, done) is done (done: what
 * qcrypto_reencrypt_run_done() said last).
 */
bool qcrypto_reencrypt_run_online(QCryptoReencryptRun *run);
uint64_t qcrypto_reencrypt_run_data_offset(QCryptoReencryptRun *run);
uint32_t qcrypto_reencrypt_run_sector_size(QCryptoReencryptRun *run);
int qcrypto_reencrypt_run_crypt(QCryptoReencryptRun *run, uint64_t done,
                                bool encrypt, uint64_t off, uint8_t *buf,
                                size_t len, Error **errp);
void qcrypto_reencrypt_run_free(QCryptoReencryptRun *run);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(QCryptoReencryptRun, qcrypto_reencrypt_run_free)

/*
 * Finish the re-encryption the image behind io is in (started by us or by
 * cryptsetup), hot zone by hot zone. 0 when done, 1 when progress asked to
 * stop (resumable), -1 and errp on failure.
 */
int qcrypto_reencrypt_resume(const QCryptoBlockSecret *secret,
                             uint64_t hotzone, const QCryptoReencryptIO *io,
                             Error **errp);
/* The same, with the keys an init of this process kept (NULL: none). */
int qcrypto_reencrypt_resume_keys(const QCryptoBlockSecret *secret,
                                  const QCryptoReencryptKeys *keys,
                                  uint64_t hotzone,
                                  const QCryptoReencryptIO *io, Error **errp);

#endif
