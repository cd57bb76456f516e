/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Every LUKS2 re-encryption mode through one crash harness, on files in
 * memory (the image, and the header file a decryption keeps): the N-th
 * write fails, for every N (everything before it stays, as after a kill;
 * where a mode's table entry says so the failing write is torn: it
 * stores its first half), then the run goes on as the command would,
 * crashing nowhere else, and every byte of the result is checked.
 *
 * One table (crash_modes[]) says, per mode, how its image is made, how a
 * run starts, how the command goes on after a crash and what the result
 * must hold; the loop is the same for all (as the resume loop is the same
 * for all: crypto/block-luks2-reencrypt-engine.c).
 */
#include <string.h>

#include "crypto/random.h"
#include "reencrypt-files.h"

#define MiB (1024 * 1024)
#define SHIFT MiB                   /* align-payload 2048 sectors */

static int blk_read(QCryptoBlock *block, uint64_t off, uint8_t *buf,
                    size_t len, void *opaque, Error **errp)
{
    return data_read(opaque, off, buf, len, errp);
}

static void create_options(QCryptoBlockCreateOptions *o)
{
    memset(o, 0, sizeof(*o));
    qcrypto_block_create_options_init(o);
    o->format = QCRYPTO_BLOCK_FORMAT_LUKS;
    o->secret = reenc_test_secret;
    o->luks_version = 2;
    o->has_kdf = true;
    o->kdf = QCRYPTO_BLOCK_KDF_PBKDF2;
    o->has_iter_time = true;
    o->iter_time = 1;
    o->align_payload = SHIFT / 512;
}

/* The LUKS2 image in f holds want (size bytes) behind SHIFT, exactly. */
static void assert_luks2_data(Files *f, const uint8_t *want, size_t size)
{
    QCryptoBlockOpenOptions oo = {
        .format = QCRYPTO_BLOCK_FORMAT_LUKS, .secret = reenc_test_secret,
        .size = f->data->len,
    };
    g_autoptr(QCryptoBlock) block = qcrypto_block_open(&oo, blk_read, f, 0,
                                                       &error_abort);
    g_autofree uint8_t *buf = NULL;

    g_assert_cmpuint(qcrypto_block_get_payload_offset(block), ==, SHIFT);
    g_assert_cmpuint(f->data->len, ==, SHIFT + size);
    buf = g_memdup2(f->data->data + SHIFT, size);
    g_assert_cmpint(qcrypto_block_decrypt(block, 0, buf, size, &error_abort),
                    ==, 0);
    g_assert_true(memcmp(buf, want, size) == 0);
}

/* An error that is the harness's crash, freed. */
static void assert_crash(Error *err)
{
    g_assert_nonnull(err);
    g_assert_true(g_str_has_suffix(error_get_pretty(err), "crash"));
    error_free(err);
}

/* Resume; a run cut inside its final header write is already finished. */
static void resume_or_finished(Files *f, bool detached, uint64_t hotzone)
{
    QCryptoReencryptIO io = files_io(f, detached);
    Error *err = NULL;

    if (qcrypto_reencrypt_resume(&reenc_test_secret, hotzone, &io, &err) < 0) {
        g_assert_nonnull(strstr(error_get_pretty(err),
                                "not being re-encrypted"));
        error_free(err);
    }
}

/* ---- the modes ---- */

typedef struct CrashMode {
    const char *name;
    size_t size;                    /* the data bytes */
    uint64_t hotzone;
    bool torn;
    /* The image before the run, holding data. */
    Files *(*make)(const struct CrashMode *m, const uint8_t *data);
    /* The whole run, init and resume: 0, or -1 and errp. */
    int (*run)(const struct CrashMode *m, Files *f, Error **errp);
    /* After a crash in run: what the command does next, to the end. */
    void (*go_on)(const struct CrashMode *m, Files *f, const uint8_t *data);
    /* The result holds data. */
    void (*check)(const struct CrashMode *m, Files *f, const uint8_t *data);
    /* Optional: a new volume key's resilience. */
    QCryptoReencryptResilience resilience;
    /* Optional: the sector size of the image made (0: the default). */
    unsigned sector_size;
    /*
     * Optional, encryption: bytes of room after the data, given up for
     * the data shift (--reduce-device-size): the file does not grow.
     */
    size_t room;
} CrashMode;

/* encryption: a raw file in, LUKS2 out, the data shift S = SHIFT */

static Files *encrypt_make(const CrashMode *m, const uint8_t *data)
{
    Files *f = files_new(data, m->size);
    g_autofree uint8_t *junk = g_malloc(m->room);

    /* what the room held before: anything */
    qcrypto_random_bytes(junk, m->room, &error_abort);
    g_byte_array_append(f->data, junk, m->room);
    return f;
}

static int encrypt_run(const CrashMode *m, Files *f, Error **errp)
{
    QCryptoReencryptIO io = files_io(f, false);
    QCryptoBlockCreateOptions o;

    create_options(&o);
    o.size = m->room ? m->size : 0;
    if (qcrypto_reencrypt_encrypt_init(&o, &io, errp) < 0) {
        return -1;
    }
    return qcrypto_reencrypt_resume(&reenc_test_secret, m->hotzone, &io, errp);
}

static bool has_header(Files *f)
{
    return !memcmp(f->data->data, "LUKS\xba\xbe", 6) ||
        !memcmp(f->data->data + 16384, "SKUL\xba\xbe", 6);
}

/*
 * No header yet: only the copy may have been written, the raw data is
 * whole: trim it back and start again. Else resume.
 */
static void encrypt_go_on(const CrashMode *m, Files *f, const uint8_t *data)
{
    if (!has_header(f)) {
        g_assert_true(memcmp(f->data->data, data, m->size) == 0);
        g_byte_array_set_size(f->data, m->size + m->room);
        g_assert_cmpint(encrypt_run(m, f, &error_abort), ==, 0);
        return;
    }
    resume_or_finished(f, false, m->hotzone);
}

static void encrypt_check(const CrashMode *m, Files *f, const uint8_t *data)
{
    assert_luks2_data(f, data, m->size);
}

/* decryption: LUKS2 in (made by encryption), raw out, a header file */

static Files *decrypt_make(const CrashMode *m, const uint8_t *data)
{
    Files *f = files_new(data, m->size);
    QCryptoReencryptIO io = files_io(f, false);
    QCryptoBlockCreateOptions o;

    create_options(&o);
    o.sector_size = m->sector_size;
    g_assert_cmpint(qcrypto_reencrypt_encrypt_init(&o, &io, &error_abort),
                    ==, 0);
    g_assert_cmpint(qcrypto_reencrypt_resume(&reenc_test_secret, 0, &io, &error_abort),
                    ==, 0);
    return f;
}

static int decrypt_run(const CrashMode *m, Files *f, Error **errp)
{
    return files_decrypt_go_on(f, m->hotzone, errp);
}

static void decrypt_go_on(const CrashMode *m, Files *f, const uint8_t *data)
{
    g_assert_cmpint(decrypt_run(m, f, &error_abort), ==, 0);
}

static void decrypt_check(const CrashMode *m, Files *f, const uint8_t *data)
{
    g_assert_cmpuint(f->data->len, ==, m->size);
    g_assert_true(memcmp(f->data->data, data, m->size) == 0);
}

/* a new volume key: LUKS2 in, LUKS2 out, in place */

static Files *rekey_make(const CrashMode *m, const uint8_t *data)
{
    Files *f = decrypt_make(m, data);

    /* encryption leaves the file at S + V: what a new key keeps */
    g_assert_cmpuint(f->data->len, ==, SHIFT + m->size);
    return f;
}

static int rekey_run(const CrashMode *m, Files *f, Error **errp)
{
    QCryptoReencryptIO io = files_io(f, false);
    QCryptoReencryptRekeyOptions o;

    memset(&o, 0, sizeof(o));
    qcrypto_block_create_options_init(&o.create);
    o.create.secret = reenc_test_secret;
    o.create.has_iter_time = true;
    o.create.iter_time = 1;
    o.keyslot = -1;
    o.resilience = m->resilience;
    if (qcrypto_reencrypt_rekey_init(&o, &io, errp) < 0) {
        return -1;
    }
    return qcrypto_reencrypt_resume(&reenc_test_secret, m->hotzone, &io, errp);
}

/*
 * Not in re-encryption after the crash: cut before the metadata (the old
 * image, whole) or inside the final header (the new one): resume says so.
 */
static void rekey_go_on(const CrashMode *m, Files *f, const uint8_t *data)
{
    resume_or_finished(f, false, 3 * m->hotzone);
}

static void rekey_check(const CrashMode *m, Files *f, const uint8_t *data)
{
    assert_luks2_data(f, data, m->size);
}

/*
 * a new volume key for LUKS1 (QEMU's layout: slots right after the
 * header, the payload right after them), in place, LUKS1 out
 */

static int luks1_init(QCryptoBlock *block, uint64_t len, void *opaque,
                      Error **errp)
{
    g_byte_array_set_size(((Files *)opaque)->data, len);
    memset(((Files *)opaque)->data->data, 0, len);
    return 0;
}

static int luks1_write(QCryptoBlock *block, uint64_t off, const uint8_t *buf,
                       size_t len, void *opaque, Error **errp)
{
    return data_write(opaque, off, buf, len, errp);
}

static Files *luks1_make(const CrashMode *m, const uint8_t *data)
{
    Files *f = files_new(NULL, 0);
    QCryptoBlockCreateOptions o;
    g_autoptr(QCryptoBlock) block = NULL;
    g_autofree uint8_t *buf = g_memdup2(data, m->size);
    uint64_t payload;

    create_options(&o);
    o.luks_version = 1;
    o.has_kdf = false;
    o.align_payload = 0;
    block = qcrypto_block_create(&o, luks1_init, luks1_write, f,
                                 &error_abort);
    payload = qcrypto_block_get_payload_offset(block);
    g_assert_cmpuint(f->data->len, <=, payload);
    g_assert_cmpint(qcrypto_block_encrypt(block, 0, buf, m->size,
                                          &error_abort), ==, 0);
    g_byte_array_set_size(f->data, payload);
    g_byte_array_append(f->data, buf, m->size);
    return f;
}

/* The LUKS1 image in f holds want; a finished run left no metadata. */
static void luks1_check(const CrashMode *m, Files *f, const uint8_t *want)
{
    QCryptoBlockOpenOptions oo = {
        .format = QCRYPTO_BLOCK_FORMAT_LUKS, .secret = reenc_test_secret,
        .size = f->data->len,
    };
    g_autoptr(QCryptoBlock) block = qcrypto_block_open(&oo, blk_read, f, 0,
                                                       &error_abort);
    uint64_t payload = qcrypto_block_get_payload_offset(block);
    g_autofree uint8_t *buf = NULL;
    static const uint8_t zero[64];

    g_assert_true(!memcmp(f->data->data, "LUKS\xba\xbe\0\1", 8));
    g_assert_cmpuint(f->data->len, ==, payload + m->size);
    buf = g_memdup2(f->data->data + payload, m->size);
    g_assert_cmpint(qcrypto_block_decrypt(block, 0, buf, m->size,
                                          &error_abort), ==, 0);
    g_assert_true(memcmp(buf, want, m->size) == 0);
    /* the old key's image (nothing ran) or the new one's, wiped */
    if (memcmp(f->data->data + 640, zero, sizeof(zero))) {
        g_assert_true(memcmp(f->data->data + 640, "QILL1PTR", 8) == 0);
    }
}

/*
 * torn: the failing write stores its first half. Not for encryption: a
 * torn write of its init's first header copy, before the other exists,
 * leaves no header to read (the known gap of docs/reencrypt.md; a kill
 * never tears a write, power loss can).
 */
static const CrashMode crash_modes[] = {
    {
        .name = "encrypt", .size = 3 * MiB + 64 * 1024,
        .hotzone = 256 * 1024,
        .make = encrypt_make, .run = encrypt_run, .go_on = encrypt_go_on,
        .check = encrypt_check,
    }, {
        /* the room there already: the staging copy before the moved one */
        .name = "encrypt-reduced", .size = 3 * MiB + 64 * 1024,
        .hotzone = 256 * 1024, .room = 2 * SHIFT,
        .make = encrypt_make, .run = encrypt_run, .go_on = encrypt_go_on,
        .check = encrypt_check,
    }, {
        .name = "decrypt", .size = 3 * MiB + 64 * 1024,
        .hotzone = 256 * 1024, .torn = true,
        .make = decrypt_make, .run = decrypt_run, .go_on = decrypt_go_on,
        .check = decrypt_check,
    }, {
        /* less than one data shift: all of it is the moved segment */
        .name = "decrypt-small", .size = 200 * 1024, .hotzone = 0, .torn = true,
        .make = decrypt_make, .run = decrypt_run, .go_on = decrypt_go_on,
        .check = decrypt_check,
    }, {
        .name = "rekey-checksum", .size = 2 * MiB + 64 * 1024,
        .hotzone = 128 * 1024, .torn = true,
        .make = rekey_make, .run = rekey_run, .go_on = rekey_go_on,
        .check = rekey_check,
        .resilience = QCRYPTO_REENCRYPT_RESILIENCE_CHECKSUM,
        .sector_size = 512,
    }, {
        .name = "rekey-journal", .size = 2 * MiB + 64 * 1024,
        .hotzone = 128 * 1024, .torn = true,
        .make = rekey_make, .run = rekey_run, .go_on = rekey_go_on,
        .check = rekey_check,
        .resilience = QCRYPTO_REENCRYPT_RESILIENCE_JOURNAL,
        .sector_size = 512,
    }, {
        /* zones of 64 KiB; the last one shorter */
        .name = "luks1-rekey", .size = MiB + 3 * 512,
        .hotzone = 64 * 1024, .torn = true,
        .make = luks1_make, .run = rekey_run, .go_on = rekey_go_on,
        .check = luks1_check,
    },
};

/*
 * The N-th write fails, for every N until a run completes: go on, check.
 * At least one crash must have happened, or the test proves nothing.
 */
static void test_crash_after_every_write(gconstpointer opaque)
{
    const CrashMode *m = opaque;
    g_autofree uint8_t *data = g_malloc(m->size);
    Files *image;
    bool completed = false;
    int n;

    qcrypto_random_bytes(data, m->size, &error_abort);
    image = m->make(m, data);
    for (n = 0; !completed; n++) {
        Files *f = files_copy(image);
        Error *err = NULL;

        f->writes_left = n;
        f->torn = m->torn;
        if (m->run(m, f, &err) == 0) {
            completed = true;           /* n was past the last write */
        } else {
            assert_crash(err);
            f->writes_left = -1;
            m->go_on(m, f, data);
        }
        m->check(m, f, data);
        files_free(f);
        g_assert_cmpint(n, <, 2000);
    }
    g_assert_cmpint(n, >, 10);
    files_free(image);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    for (size_t i = 0; i < G_N_ELEMENTS(crash_modes); i++) {
        g_autofree char *path =
            g_strdup_printf("/crypto/luks2-reencrypt/crash-after-every-"
                            "write/%s", crash_modes[i].name);

        g_test_add_data_func(path, &crash_modes[i],
                             test_crash_after_every_write);
    }
    return g_test_run();
}
