/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite reencrypt: encrypt a raw image into LUKS2 in place,
 * resumable and crash-safe, with metadata cryptsetup reencrypt can resume
 * (docs/reencrypt.md). The work is crypto/block-luks2-reencrypt.c's; this
 * file parses the command line, moves bytes through the file node and
 * shows progress.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "block/crypto.h"
#include "block/options.h"
#include "crypto/reencrypt.h"
#include "crypto/secret.h"
#include "img.h"

typedef struct ReencCtx {
    BlockDriverState *file;
    bool progress;
    bool stopped;
    double start;
    uint64_t start_done;
    BlockDriverState *hdr;      /* --decrypt: the header's own file */
    const char *hdr_path;
    bool is_device;             /* the image is a block device */
    bool hdr_needed;            /* --decrypt: the header file is in use */
} ReencCtx;

/*
 * Test-only: where the environment asks resume to stop on purpose
 * (QCryptoReencryptStop). tests/cli/test_reencrypt*.py and
 * tests/fuzz/make-seeds-reencrypt.sh reach states with it that would
 * otherwise need a kill at the right instant. The library reads no
 * environment: the tool does, here. Each variable is for one mode (stop
 * before finish: encryption and a new volume key; in the moved zone:
 * decryption), so setting both is pointless: the moved zone wins.
 */
static QCryptoReencryptStop reencrypt_test_stop_at(void)
{
    if (g_getenv("QIL_TEST_REENCRYPT_STOP_IN_MOVED_ZONE")) {
        return QCRYPTO_REENCRYPT_STOP_IN_MOVED_ZONE;
    }
    if (g_getenv("QIL_TEST_REENCRYPT_STOP_BEFORE_FINISH")) {
        return QCRYPTO_REENCRYPT_STOP_BEFORE_FINISH;
    }
    return QCRYPTO_REENCRYPT_STOP_NONE;
}

static int ctx_read(void *opaque, uint64_t off, void *buf, size_t len,
                    Error **errp)
{
    ReencCtx *c = opaque;

    return bdrv_pread(c->file, off, buf, len, errp);
}

static int ctx_write(void *opaque, uint64_t off, const void *buf, size_t len,
                     Error **errp)
{
    ReencCtx *c = opaque;

    return bdrv_pwrite(c->file, off, buf, len, 0, errp);
}

static int ctx_sync(void *opaque, Error **errp)
{
    ReencCtx *c = opaque;

    return bdrv_flush(c->file, errp);
}

static int64_t ctx_length(void *opaque, Error **errp)
{
    ReencCtx *c = opaque;

    return bdrv_getlength(c->file, errp);
}

/*
 * A block device keeps its size: the room a run gives back at its end
 * (the moved copy, cryptsetup's --reduce-device-size) stays part of the
 * device, as with cryptsetup; growing it is impossible.
 */
static int ctx_truncate(void *opaque, uint64_t size, Error **errp)
{
    ReencCtx *c = opaque;

    if (c->is_device) {
        int64_t len = bdrv_getlength(c->file, errp);

        if (len < 0) {
            return -1;
        }
        if (size > (uint64_t)len) {
            error_setg(errp, "A block device cannot grow: in-place "
                       "encryption needs room after the data; give up the "
                       "end of the device with --reduce-device-size 32M "
                       "(its last 32 MiB must hold nothing of value)");
            return -1;
        }
        return 0;
    }
    return bdrv_truncate(c->file, size, PREALLOC_MODE_OFF, errp);
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * -p, before the zones: a phase that shows no bytes moving, the key
 * derivation above all (argon2id key slots take seconds, and a new key
 * unlocks the old slots and makes new ones). The zones' line replaces it.
 */
static void ctx_show_phase(ReencCtx *c, const char *what)
{
    if (c->progress) {
        printf("    (%3.2f/100%%) %s   \r", 0.0, what);
        fflush(stdout);
    }
}

/* -p: percent, rate and time left; SIGINT/SIGTERM: stop between zones. */
static bool ctx_progress(void *opaque, uint64_t done, uint64_t total)
{
    ReencCtx *c = opaque;

    if (c->start == 0) {
        c->start = now();
        c->start_done = done;
    }
    if (c->progress) {
        double t = now() - c->start;
        double rate = t > 0 ? (done - c->start_done) / t : 0;
        double left = rate > 0 ? (total - done) / rate : 0;

        printf("    (%3.2f/100%%) %.1f MiB/s, %d:%02d left%-24s\r",
               total ? 100.0 * done / total : 100.0, rate / (1 << 20),
               (int)left / 60, (int)left % 60, "");
        fflush(stdout);
    }
    if (img_interrupted && done < total) {
        c->stopped = true;
        return true;
    }
    return false;
}

/*
 * A LUKS header at the start, or a LUKS2 secondary header at one of the
 * header sizes (16 KiB .. 4 MiB): an encryption whose primary header was
 * not yet written when it stopped must be resumed, not started again.
 */
static bool file_is_luks(BlockDriverState *file)
{
    static const uint8_t magic[6] = { 'L', 'U', 'K', 'S', 0xba, 0xbe };
    static const uint8_t magic2[6] = { 'S', 'K', 'U', 'L', 0xba, 0xbe };
    int64_t len = bdrv_getlength(file, NULL);
    uint8_t buf[6];

    if (len >= 6 && bdrv_pread(file, 0, buf, sizeof(buf), NULL) == 0 &&
        !memcmp(buf, magic, sizeof(magic))) {
        return true;
    }
    for (int64_t off = 16 << 10; off <= 4 << 20 && off + 6 <= len;
         off *= 2) {
        if (bdrv_pread(file, off, buf, sizeof(buf), NULL) == 0 &&
            !memcmp(buf, magic2, sizeof(magic2))) {
            return true;
        }
    }
    return false;
}

/*
 * --image-opts: the file node as its "file." options describe it (a
 * blkdebug filter over the file, as the fault-injection tests use), else
 * the file named by file.filename. *name is the file's own name (the
 * deepest *.filename), for messages and the --decrypt header's default.
 */
static GHashTable *file_node_opts(GHashTable *iopts, const char **name)
{
    static const char *const names[] = {
        "file.filename", "file.file.filename", "file.image.filename",
    };
    GHashTable *opts = qemu_opts_new();
    GHashTableIter it;
    gpointer k, v;

    *name = NULL;
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        *name = *name ? *name : g_hash_table_lookup(iopts, names[i]);
    }
    g_hash_table_iter_init(&it, iopts);
    while (g_hash_table_iter_next(&it, &k, &v)) {
        if (g_str_has_prefix(k, "file.")) {
            g_hash_table_insert(opts, g_strdup((char *)k + 5), g_strdup(v));
        }
    }
    if (!g_hash_table_contains(opts, "driver")) {
        g_hash_table_destroy(opts);
        return NULL;
    }
    return opts;
}

/*
 * The name of the node fopts describe (rbd:POOL/IMAGE), as the node says
 * it: opened read-only for that (no lock, no write), and closed.
 */
static char *reenc_file_node_name(GHashTable *fopts, Error **errp)
{
    g_autoptr(GHashTable) copy = qemu_opts_copy(fopts);
    g_autoptr(BlockDriverState) bs = NULL;

    bs = bdrv_open(NULL, NULL, copy, BDRV_O_NO_IO, errp);
    return bs ? g_strdup(bdrv_get_filename(bs)) : NULL;
}

/*
 * What --image-opts may say beyond the file node ("file."): the driver
 * the image is (raw before an encryption, luks otherwise; either for
 * --resume-only) and key-secret. Anything else would be silently ignored
 * by a tool that works on the whole file, so it is refused: offset= and
 * size= of a raw node above all ("encrypt only this partition" would
 * encrypt the whole disk).
 */
static int reenc_check_image_opts(GHashTable *iopts, bool encrypt,
                                  bool resume_only, Error **errp)
{
    static const char *const part[] = { "offset", "size" };
    const char *drv = g_hash_table_lookup(iopts, "driver");
    GHashTableIter it;
    gpointer k;

    if (drv && !(g_str_equal(drv, "raw") && (encrypt || resume_only)) &&
        !(g_str_equal(drv, "luks") && (!encrypt || resume_only))) {
        error_setg(errp, "In-place %s works on a %s image, not "
                   "driver=%s", encrypt ? "encryption" : "re-encryption",
                   encrypt && !resume_only ? "raw" : "LUKS", drv);
        return -1;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(part); i++) {
        if (g_hash_table_contains(iopts, part[i])) {
            error_setg(errp, "In-place re-encryption works on the whole "
                       "file: '%s' is not supported (copy the part out, or "
                       "use 'convert' with -O luks)", part[i]);
            return -1;
        }
    }
    g_hash_table_iter_init(&it, iopts);
    while (g_hash_table_iter_next(&it, &k, NULL)) {
        const char *key = k;

        if (!g_str_equal(key, "driver") && !g_str_equal(key, "key-secret") &&
            !g_str_has_prefix(key, "file.")) {
            error_setg(errp, "Invalid parameter '%s' for in-place "
                       "re-encryption", key);
            return -1;
        }
    }
    return 0;
}

/*
 * --encrypt takes a raw image: anything a format driver claims (qcow2,
 * vmdk, vhd...) would end up as a container inside LUKS2.
 */
static int reenc_check_raw(BlockDriverState *file, Error **errp)
{
    const char *fmt = bdrv_probe_format_name(file, errp);

    if (!fmt) {
        return -1;
    }
    if (!g_str_equal(fmt, "raw")) {
        error_setg(errp, "The image is a %s image: in-place encryption "
                   "takes a raw image (a %s image gets its encryption "
                   "from 'qemu-img-lite convert')", fmt, fmt);
        return -1;
    }
    return 0;
}

/*
 * The image's file node: its --image-opts file options, or
 * FILENAME's.
 */
static BlockDriverState *reenc_open_file(GHashTable *fopts,
                                         const char *filename, bool protocol,
                                         Error **errp)
{
    if (fopts) {
        return bdrv_open(NULL, NULL, fopts, BDRV_O_RDWR, errp);
    }
    return protocol ? bdrv_open_protocol(filename, BDRV_O_RDWR, errp)
                    : bdrv_open(filename, "file", NULL, BDRV_O_RDWR, errp);
}

/*
 * After a failure of a run that started it: if the image is left in
 * re-encryption, how to finish it (the error said what went wrong, not
 * what state it left).
 */
static void reencrypt_resume_hint(const QCryptoReencryptIO *io,
                                  const char *filename, bool was_unfinished)
{
    if (!was_unfinished && qcrypto_reencrypt_unfinished(io)) {
        img_error(filename, "The image is left being re-encrypted: finish "
                  "with 'qemu-img-lite reencrypt --resume-only'");
    }
}

/* ---- --decrypt: the header lives in its own file meanwhile ---- */

static int ctx_hdr_read(void *opaque, uint64_t off, void *buf, size_t len,
                        Error **errp)
{
    ReencCtx *c = opaque;

    return bdrv_pread(c->hdr, off, buf, len, errp);
}

/* A protocol node: the header file grows as the header is written. */
static int ctx_hdr_write(void *opaque, uint64_t off, const void *buf,
                         size_t len, Error **errp)
{
    ReencCtx *c = opaque;

    return bdrv_pwrite(c->hdr, off, buf, len, 0, errp);
}

static int ctx_hdr_sync(void *opaque, Error **errp)
{
    ReencCtx *c = opaque;

    return bdrv_flush(c->hdr, errp);
}

/*
 * The header file as a "file" node: a new one has no name until
 * bdrv_create_finish(); an existing one is opened by its literal name, as
 * cryptsetup's --header takes it.
 */
static BlockDriverState *hdr_open(const char *path, bool create,
                                  Error **errp)
{
    g_autoptr(GHashTable) opts = qemu_opts_new();

    if (create) {
        return bdrv_create_open("file", path, opts, 0, &img_interrupted,
                                errp);
    }
    g_hash_table_insert(opts, g_strdup("driver"), g_strdup("file"));
    g_hash_table_insert(opts, g_strdup("filename"), g_strdup(path));
    return bdrv_open(NULL, NULL, opts, BDRV_O_RDWR, errp);
}

/*
 * The end of a decryption: the data file cut to the data size (if the
 * crash came before), the header file removed.
 */
static int decrypt_cleanup(ReencCtx *ctx, uint64_t size, Error **errp)
{
    int64_t len = bdrv_getlength(ctx->file, errp);

    if (len < 0) {
        return -1;
    }
    /* A block device keeps its size (ctx_truncate): only a file is cut. */
    if ((uint64_t)len > size && !ctx->is_device &&
        (bdrv_truncate(ctx->file, size, PREALLOC_MODE_OFF, errp) < 0 ||
         bdrv_flush(ctx->file, errp) < 0)) {
        return -1;
    }
    if (bdrv_delete_file(ctx->hdr, errp) < 0) {
        error_prepend(errp, "Could not remove the header file: ");
        return -1;
    }
    return 0;
}

/*
 * An existing header file that is no usable export (not LUKS2, or shorter
 * than its key-slot areas). Ours is named only when whole; cryptsetup
 * writes its export in place, so a kill in the middle leaves such a file,
 * before anything touched the image. Whether the image still holds its
 * own header tells which.
 */
static void decrypt_bad_header_file(ReencCtx *ctx, const char *what,
                                    Error **errp)
{
    /* LUKS1 and LUKS2 on-disk formats: the magic both versions share */
    static const uint8_t luks_magic[6] = { 'L', 'U', 'K', 'S', 0xba, 0xbe };
    uint8_t magic[sizeof(luks_magic)];
    bool own = bdrv_pread(ctx->file, 0, magic, sizeof(magic), NULL) == 0 &&
        !memcmp(magic, luks_magic, sizeof(magic));

    if (own) {
        error_setg(errp, "'%s' %s: likely an export cut short (as a kill "
                   "during cryptsetup reencrypt --decrypt leaves one); the "
                   "image still holds its own header, so nothing was "
                   "decrypted: remove '%s' and run again",
                   ctx->hdr_path, what, ctx->hdr_path);
    } else {
        error_setg(errp, "'%s' %s, and the image holds no LUKS header of "
                   "its own: nothing to decrypt with (restore the header "
                   "from a backup)", ctx->hdr_path, what);
    }
}

/*
 * --decrypt, or --resume-only of a decryption: start or finish, whatever
 * the header file (ours or cryptsetup's) says. 0 done, 1 stopped, -1 error.
 */
static int reencrypt_decrypt(ReencCtx *ctx, QCryptoReencryptIO *io,
                             const QCryptoBlockSecret *secret,
                             uint64_t hotzone, bool init_only,
                             bool resume_only, Error **errp)
{
    QCryptoReencryptDecryptState st = QCRYPTO_REENCRYPT_DECRYPT_NONE;
    bool exists = access(ctx->hdr_path, F_OK) == 0;
    uint64_t size = 0;
    int r;

    if (!exists && resume_only) {
        error_setg(errp, "No decryption to resume: its header file '%s' "
                   "does not exist", ctx->hdr_path);
        return -1;
    }
    io->hdr_read = ctx_hdr_read;
    io->hdr_write = ctx_hdr_write;
    io->hdr_sync = ctx_hdr_sync;
    ctx->hdr = hdr_open(ctx->hdr_path, !exists, errp);
    if (!ctx->hdr) {
        error_prepend(errp, "Could not %s the header file: ",
                      exists ? "open" : "create");
        return -1;
    }
    if (!exists) {
        /*
         * Written whole, synced, then named (never over a file that took
         * the name meanwhile): all or nothing, even after a kill.
         */
        ctx_show_phase(ctx, "checking the passphrase (key derivation)");
        if (qcrypto_reencrypt_decrypt_export_header(secret, io, errp) < 0 ||
            bdrv_create_finish(ctx->hdr, errp) < 0) {
            return -1;
        }
        st = QCRYPTO_REENCRYPT_DECRYPT_PLAIN;
    } else {
        if (qcrypto_reencrypt_decrypt_state(io, &st, &size, errp) < 0) {
            return -1;
        }
    }
    switch (st) {
    case QCRYPTO_REENCRYPT_DECRYPT_NONE:
        decrypt_bad_header_file(ctx, "exists but holds no LUKS2 header",
                                errp);
        return -1;
    case QCRYPTO_REENCRYPT_DECRYPT_PLAIN:
        if (exists) {
            int64_t len = bdrv_getlength(ctx->hdr, errp);

            if (len < 0) {
                return -1;
            }
            if ((uint64_t)len < size) {
                g_autofree char *what = g_strdup_printf(
                    "holds %" PRId64 " of the %" PRIu64 " bytes of its "
                    "header", len, size);

                decrypt_bad_header_file(ctx, what, errp);
                return -1;
            }
        }
        /* new, or an init cut short: the data past S is intact */
        ctx->hdr_needed = true;
        if (qcrypto_reencrypt_decrypt_init(secret, io, errp) < 0) {
            return -1;
        }
        break;
    case QCRYPTO_REENCRYPT_DECRYPT_RUNNING:
        ctx->hdr_needed = true;
        break;
    case QCRYPTO_REENCRYPT_DECRYPT_DONE:
        return decrypt_cleanup(ctx, size, errp);
    case QCRYPTO_REENCRYPT_DECRYPT_DONE_UNSIZED:
        error_setg(errp, "The decryption was finished by cryptsetup: the "
                   "file holds the plain data followed by the old payload "
                   "offset's worth of bytes; cut it to the data size and "
                   "remove '%s'", ctx->hdr_path);
        return -1;
    }
    if (init_only) {
        return 0;
    }
    ctx_show_phase(ctx, "unlocking the key slot (key derivation)");
    r = qcrypto_reencrypt_resume(secret, hotzone, io, errp);
    if (ctx->progress) {
        printf("\n");
        fflush(stdout);
    }
    if (r != 0) {
        return r;
    }
    if (qcrypto_reencrypt_decrypt_state(io, &st, &size, errp) < 0) {
        return -1;
    }
    g_assert(st == QCRYPTO_REENCRYPT_DECRYPT_DONE);
    return decrypt_cleanup(ctx, size, errp);
}

/* Whether path lives on a RAM file system (tmpfs, ramfs, devtmpfs). */
static bool path_is_volatile(const char *path)
{
    struct statfs sf;

    return statfs(path, &sf) == 0 &&
        (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC);
}

/*
 * While a decryption runs, its header file holds the only key slots of
 * the data not yet decrypted: it must outlive a reboot as long as the
 * data does. A block device has no sensible default
 * (/dev/loop0.luks2-header would sit in devtmpfs): --header is required,
 * as with cryptsetup. A header on a RAM file system is refused when the
 * data is not on one too (an image in tmpfs is lost by a reboot anyway).
 */
static int reenc_check_header_place(const char *path, const char *data,
                                    bool is_default, bool is_device,
                                    Error **errp)
{
    g_autofree char *dir = g_path_get_dirname(path);

    if (is_device && is_default) {
        error_setg(errp, "--decrypt of a block device needs --header FILE: "
                   "a file on persistent storage that holds the key slots "
                   "until the end");
        return -1;
    }
    /* An RBD image (any name not of a local file): no place beside it. */
    if (is_default && !bdrv_names_local_file(data)) {
        error_setg(errp, "--decrypt of '%s' needs --header FILE: a local "
                   "file on persistent storage that holds the key slots "
                   "until the end", data);
        return -1;
    }
    if (path_is_volatile(dir) && (is_device || !path_is_volatile(data))) {
        error_setg(errp, "The header file '%s' would be on a RAM file "
                   "system (tmpfs), the data is not: a reboot meanwhile "
                   "would lose the key slots of the data not yet "
                   "decrypted; give --header FILE on persistent storage",
                   path);
        return -1;
    }
    return 0;
}

/* The --decrypt command: the file node opened, errors printed. */
static int img_reencrypt_decrypt(ReencCtx *ctx, QCryptoReencryptIO *io,
                                 GHashTable *fopts, const char *filename,
                                 const QCryptoBlockSecret *secret,
                                 uint64_t hotzone, bool init_only,
                                 bool resume_only)
{
    Error *err = NULL;
    int r;

    /* A local name is a file by its literal name; rbd: and the like not. */
    ctx->file = reenc_open_file(fopts, filename,
                                !bdrv_names_local_file(filename), &err);
    if (!ctx->file) {
        img_error_free(filename, err);
        return 1;
    }
    r = reencrypt_decrypt(ctx, io, secret, hotzone, init_only, resume_only,
                          &err);
    /* Done only once on the disk (a failed sync before fails it too). */
    if (r == 0 && bdrv_flush(ctx->file, &err) < 0) {
        r = -1;
    }
    bdrv_close(ctx->hdr);
    bdrv_close(ctx->file);
    if (r < 0) {
        img_error_free(filename, err);
        if (!resume_only && ctx->hdr_needed &&
            access(ctx->hdr_path, F_OK) == 0) {
            img_error(filename, "The image is left being decrypted: finish "
                      "with 'qemu-img-lite reencrypt --resume-only' (keep "
                      "'%s')", ctx->hdr_path);
        }
        return 1;
    }
    if (r > 0) {
        img_error(filename, "Interrupted at a consistent point; finish with "
                  "'qemu-img-lite reencrypt --resume-only' (or cryptsetup "
                  "reencrypt --resume-only --force-offline-reencrypt "
                  "--header %s)", ctx->hdr_path);
        return 1;
    }
    return 0;
}

/*
 * A new volume key (neither --encrypt nor --decrypt): -o takes the cipher,
 * sector-size and KDF options of create -O luks, slot-secrets=ID:ID...
 * (one secret per key slot, in slot order) and keyslot=N. secret is
 * key-secret. Writes the metadata; the resume does the work.
 */
static int reencrypt_rekey_init(GHashTable *opts,
                                const QCryptoBlockSecret *secret,
                                QCryptoReencryptKeys *keys,
                                const char *resilience,
                                const QCryptoReencryptIO *io, Error **errp)
{
    static const char *const not_here[] = {
        "size", "luks-version", "label", "align-payload", "detached-header",
    };
    static const char *const cipher_opts[] = {
        "cipher-alg", "cipher-mode", "ivgen-alg", "ivgen-hash-alg",
    };
    QCryptoReencryptRekeyOptions o = { .keyslot = -1 };
    g_autofree char *slot_ids = qemu_opt_take(opts, "slot-secrets");
    g_auto(GStrv) ids = NULL;
    g_autofree QCryptoBlockSecret *slot_secrets = NULL;
    QCryptoBlockSecret taken;
    size_t n = 0;
    uint64_t keyslot;
    int ret = -1;

    for (size_t i = 0; i < G_N_ELEMENTS(not_here); i++) {
        if (g_hash_table_contains(opts, not_here[i])) {
            error_setg(errp, "Option '%s' does not apply to a new volume "
                       "key", not_here[i]);
            return -1;
        }
    }
    for (size_t i = 0; i < G_N_ELEMENTS(cipher_opts); i++) {
        o.has_cipher |= g_hash_table_contains(opts, cipher_opts[i]);
    }
    if (!resilience || g_str_equal(resilience, "checksum")) {
        o.resilience = QCRYPTO_REENCRYPT_RESILIENCE_CHECKSUM;
    } else if (g_str_equal(resilience, "journal")) {
        o.resilience = QCRYPTO_REENCRYPT_RESILIENCE_JOURNAL;
    } else if (g_str_equal(resilience, "none")) {
        o.resilience = QCRYPTO_REENCRYPT_RESILIENCE_NONE;
    } else {
        error_setg(errp, "--resilience '%s' does not apply to a new volume "
                   "key: use checksum (the default), journal or none",
                   resilience);
        return -1;
    }
    if (qemu_opt_take_uint(opts, "keyslot", UINT64_MAX, &keyslot,
                           errp) < 0) {
        return -1;
    }
    if (keyslot != UINT64_MAX) {
        if (keyslot > 31) {
            error_setg(errp, "Option 'keyslot' %" PRIu64 " is not a key slot "
                       "(LUKS2: 0..31, LUKS1: 0..7)", keyslot);
            return -1;
        }
        o.keyslot = keyslot;
    }
    if (block_crypto_take_luks_create_opts(opts, &o.create, false,
                                           errp) < 0) {
        return -1;
    }
    taken = o.create.secret;
    o.create.secret = *secret;
    if (g_hash_table_size(opts)) {
        GHashTableIter it;
        gpointer key;

        g_hash_table_iter_init(&it, opts);
        g_hash_table_iter_next(&it, &key, NULL);
        error_setg(errp, "Invalid parameter '%s'", (char *)key);
        goto out;
    }
    if (slot_ids) {
        ids = g_strsplit(slot_ids, ":", -1);
        slot_secrets = g_new0(QCryptoBlockSecret, g_strv_length(ids));
        for (; ids[n]; n++) {
            uint8_t *data;
            size_t len;

            if (qcrypto_secret_lookup(ids[n], &data, &len, errp) < 0) {
                goto out;
            }
            slot_secrets[n] = (QCryptoBlockSecret) { data, len };
        }
        o.slot_secrets = slot_secrets;
        o.nslot_secrets = n;
    }
    o.keys = keys;
    ret = qcrypto_reencrypt_rekey_init(&o, io, errp);
out:
    for (size_t i = 0; i < n; i++) {
        qcrypto_secret_value_free((uint8_t *)slot_secrets[i].data,
                                  slot_secrets[i].len);
    }
    o.create.secret = taken;
    block_crypto_clear_luks_create_opts(&o.create);
    return ret;
}

int img_reencrypt(int argc, char **argv)
{
    g_auto(GStrv) opt_strs = NULL;
    g_autoptr(GHashTable) opts = NULL;
    g_autoptr(GHashTable) iopts = NULL;
    g_autoptr(GHashTable) fopts = NULL;
    g_autofree char *resilience = NULL, *hotzone_str = NULL;
    g_autofree char *reduce_str = NULL;
    uint64_t reduce = 0;
    g_autofree char *header = NULL, *default_header = NULL;
    g_autofree char *file_node_name = NULL;
    gboolean image_opts = FALSE, encrypt = FALSE, decrypt = FALSE;
    gboolean init_only = FALSE, resume_only = FALSE, progress = FALSE;
    gboolean force_offline = FALSE;
    ImgCommonOpts common = { 0 };
    const GOptionEntry entries[] = {
        { "encrypt", 0, 0, G_OPTION_ARG_NONE, &encrypt,
          "encrypt the raw image FILENAME into LUKS2 in place", NULL },
        { "decrypt", 0, 0, G_OPTION_ARG_NONE, &decrypt,
          "decrypt a LUKS2 (or LUKS1) image in place", NULL },
        { "header", 0, 0, G_OPTION_ARG_FILENAME, &header,
          "--decrypt: the header's file meanwhile (default "
          "FILE.luks2-header)", "HDR" },
        { "options", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &opt_strs,
          "key-secret=ID and the LUKS2 options of create -O luks",
          "OPTIONS" },
        { "image-opts", 0, 0, G_OPTION_ARG_NONE, &image_opts,
          "FILENAME is an option string (driver=luks,key-secret=ID,"
          "file.filename=...)", NULL },
        { "init-only", 0, 0, G_OPTION_ARG_NONE, &init_only,
          "write the metadata only; resume later", NULL },
        { "resume-only", 0, 0, G_OPTION_ARG_NONE, &resume_only,
          "finish an interrupted run (ours or cryptsetup's)", NULL },
        { "resilience", 0, 0, G_OPTION_ARG_STRING, &resilience,
          "datashift (the only mode of --encrypt); checksum (default), "
          "journal or none for a new volume key", "MODE" },
        { "reduce-device-size", 0, 0, G_OPTION_ARG_STRING, &reduce_str,
          "--encrypt: give up the last SIZE bytes of the file or device "
          "for the data shift, which is then SIZE/2 (cryptsetup's "
          "option): nothing grows", "SIZE" },
        { "hotzone-size", 0, 0, G_OPTION_ARG_STRING, &hotzone_str,
          "bytes per step (--encrypt: at most the data shift)", "SIZE" },
        { "progress", 'p', 0, G_OPTION_ARG_NONE, &progress,
          "show progress, rate and time left", NULL },
        { "force-offline-reencrypt", 0, 0, G_OPTION_ARG_NONE, &force_offline,
          "go ahead on a file or device the kernel uses (a loop device's "
          "backing file, mounted)", NULL },
        { NULL }
    };
    QCryptoBlockCreateOptions copts = { 0 };
    /* The volume keys the init unlocked: the resume needs no KDF again. */
    g_autoptr(QCryptoReencryptKeys) keys = qcrypto_reencrypt_keys_new();
    bool have_copts = false;
    QCryptoBlockSecret secret = { 0 };
    bool have_secret = false;
    ReencCtx ctx = { 0 };
    QCryptoReencryptIO io = {
        .read = ctx_read, .write = ctx_write, .sync = ctx_sync,
        .length = ctx_length, .truncate = ctx_truncate,
        .progress = ctx_progress, .opaque = &ctx,
        .stop_at = reencrypt_test_stop_at(),
    };
    const char *filename;
    uint64_t hotzone = 0;
    Error *err = NULL;
    bool rekey, was_unfinished;
    int ret = 1, r;

    if (img_parse_args(&argc, &argv,
                       "[--encrypt | --decrypt | --resume-only] [-o OPTIONS] "
                       "FILENAME",
                       "Encrypt a raw image into LUKS2 in place, "
                       "resumable, as cryptsetup reencrypt --encrypt; "
                       "--decrypt turns a LUKS2 or LUKS1 image back into "
                       "the raw image in place; "
                       "without either, give a LUKS2 image a new volume "
                       "key in place (-o: new cipher, sector-size, KDF, "
                       "slot-secrets=ID:ID..., keyslot=N).",
                       "Example:\n  qemu-img-lite reencrypt --object "
                       "secret,id=s0,data=pw --encrypt \\\n"
                       "      -o key-secret=s0 disk.img\n"
                       "  qemu-img-lite reencrypt --object secret,id=s0,"
                       "data=pw --resume-only \\\n"
                       "      --image-opts driver=luks,key-secret=s0,"
                       "file.filename=disk.img\n"
                       "  qemu-img-lite reencrypt --object secret,id=s0,"
                       "data=pw --resilience journal \\\n"
                       "      --image-opts driver=luks,key-secret=s0,"
                       "file.filename=disk.luks",
                       entries, &common) < 0) {
        goto out;
    }
    if (argc != 2) {
        img_error(NULL, "Expecting one image file name");
        goto out;
    }
    filename = argv[1];
    ctx.progress = progress && !common.quiet;
    if (init_only && resume_only) {
        img_error(NULL, "--init-only and --resume-only exclude each other");
        goto out;
    }
    if (encrypt && decrypt) {
        img_error(NULL, "--encrypt and --decrypt exclude each other");
        goto out;
    }
    if (decrypt && resilience && !g_str_equal(resilience, "datashift") &&
        !g_str_equal(resilience, "datashift-checksum")) {
        img_error(NULL, "--decrypt in place supports --resilience "
                  "datashift(-checksum) only (the data moves back by the "
                  "header size; the last zone, in place, has checksums)");
        goto out;
    }
    rekey = !encrypt && !decrypt && !resume_only;
    if (resilience && encrypt && !g_str_equal(resilience, "datashift")) {
        img_error(NULL, "--encrypt in place supports --resilience datashift "
                  "only (the data moves by the header size)");
        goto out;
    }
    if (hotzone_str && (img_parse_size(hotzone_str, &hotzone) < 0 ||
                        !hotzone)) {
        img_error(NULL, "Invalid hot zone size '%s'", hotzone_str);
        goto out;
    }
    if (reduce_str) {
        if (!encrypt || resume_only) {
            img_error(NULL, "--reduce-device-size is for --encrypt (a run "
                      "in progress keeps its layout)");
            goto out;
        }
        /* Whole sectors, and S = R/2 a whole sector too. */
        if (img_parse_size(reduce_str, &reduce) < 0 || !reduce ||
            reduce % 1024) {
            img_error(NULL, "Invalid --reduce-device-size '%s': a positive "
                      "multiple of 1024 bytes (twice the data offset)",
                      reduce_str);
            goto out;
        }
    }
    opts = img_parse_create_opts(opt_strs);
    if (!opts || img_add_objects(common.objects) < 0) {
        goto out;
    }
    if (reduce && g_hash_table_contains(opts, "align-payload")) {
        img_error(NULL, "--reduce-device-size sets the data offset (half "
                  "of it): give it or -o align-payload, not both");
        goto out;
    }
    if (image_opts) {
        iopts = qemu_opts_parse(filename, "file.filename", NULL);
        if (!iopts) {
            img_error(filename, "Invalid --image-opts string");
            goto out;
        }
        fopts = file_node_opts(iopts, &filename);
        if (!filename && fopts) {
            /* A protocol without a file name (rbd): its node names it. */
            filename = file_node_name = reenc_file_node_name(fopts, &err);
            if (!filename) {
                img_error_free(NULL, err);
                goto out;
            }
        }
        if (!filename) {
            img_error(NULL, "--image-opts needs the file node: file.filename "
                      "or file.driver");
            goto out;
        }
        if (reenc_check_image_opts(iopts, encrypt, resume_only, &err) < 0) {
            img_error_free(filename, err);
            goto out;
        }
    }
    if (encrypt && !resume_only) {
        if (block_crypto_take_luks_create_opts(opts, &copts, true, &err) < 0) {
            img_error_free(filename, err);
            goto out;
        }
        have_copts = true;
        if (g_hash_table_size(opts)) {
            GHashTableIter it;
            gpointer key;

            g_hash_table_iter_init(&it, opts);
            g_hash_table_iter_next(&it, &key, NULL);
            img_error(NULL, "Invalid parameter '%s'", (char *)key);
            goto out;
        }
        secret = copts.secret;
    } else {
        GHashTable *src = iopts && g_hash_table_contains(iopts, "key-secret")
            ? iopts : opts;

        if (block_crypto_take_secret(src, "key-secret", true, NULL, &secret,
                                     &err) < 0) {
            img_error_free(filename, err);
            goto out;
        }
        have_secret = true;
    }

    /* Every byte is rewritten: nobody may be reading it meanwhile. */
    if (!force_offline && img_check_not_in_use(filename, &err) < 0) {
        img_error_free(NULL, err);
        goto out;
    }
    {
        struct stat st;

        ctx.is_device = stat(filename, &st) == 0 && S_ISBLK(st.st_mode);
    }
    default_header = g_strconcat(filename, ".luks2-header", NULL);
    ctx.hdr_path = header ? header : default_header;
    if (decrypt && !resume_only &&
        reenc_check_header_place(ctx.hdr_path, filename, !header,
                                 ctx.is_device, &err) < 0) {
        img_error_free(filename, err);
        goto out;
    }
    if (decrypt ||
        (resume_only && (header || access(ctx.hdr_path, F_OK) == 0))) {
        ret = img_reencrypt_decrypt(&ctx, &io, fopts,
                                    filename, &secret, hotzone,
                                    init_only, resume_only);
        goto out;
    }
    if (header) {
        img_error(NULL, "--header is for --decrypt only");
        goto out;
    }
    /* The header inside: any protocol (a file, an RBD image). */
    ctx.file = reenc_open_file(fopts, filename, true,
                               &err);
    if (!ctx.file) {
        img_error_free(filename, err);
        goto out;
    }
    /* Nothing else may start on an image half decrypted. */
    if (block_crypto_check_not_decrypting(ctx.file, 0, &err) < 0) {
        img_error_free(filename, err);
        goto close;
    }
    /* What the run found: the hint after a failure is for a state it made */
    was_unfinished = qcrypto_reencrypt_unfinished(&io);
    if (rekey) {
        ctx_show_phase(&ctx, "unlocking and making key slots (key "
                       "derivation)");
        if (reencrypt_rekey_init(opts, &secret, keys, resilience, &io,
                                 &err) < 0) {
            img_error_free(filename, err);
            reencrypt_resume_hint(&io, filename, was_unfinished);
            goto close;
        }
        if (init_only) {
            goto done;
        }
    }
    if (encrypt && !resume_only) {
        if (file_is_luks(ctx.file)) {
            img_error(filename, "The image is already LUKS: resume an "
                      "interrupted encryption with --resume-only");
            goto close;
        }
        if (reenc_check_raw(ctx.file, &err) < 0) {
            img_error_free(filename, err);
            goto close;
        }
        if (reduce) {
            /* The data: all but the last R bytes; S = R / 2. */
            int64_t len = bdrv_getlength(ctx.file, &err);

            if (len < 0) {
                img_error_free(filename, err);
                goto close;
            }
            if ((uint64_t)len <= reduce) {
                img_error(filename, "--reduce-device-size %" PRIu64 " is not "
                          "smaller than the image (%" PRId64 " bytes)",
                          reduce, len);
                goto close;
            }
            copts.size = len - reduce;
            copts.align_payload = reduce / 2 / 512;
        }
        ctx_show_phase(&ctx, "making the key slot (key derivation)");
        if (qcrypto_reencrypt_encrypt_init_keys(&copts, keys, &io,
                                                &err) < 0) {
            img_error_free(filename, err);
            reencrypt_resume_hint(&io, filename, was_unfinished);
            goto close;
        }
        if (init_only) {
            goto done;
        }
    }
    /* After an init in this process: its keys, no derivation. */
    ctx_show_phase(&ctx, rekey || (encrypt && !resume_only) ? "starting"
                   : "unlocking the key slot (key derivation)");
    r = qcrypto_reencrypt_resume_keys(&secret, keys, hotzone, &io, &err);
    if (ctx.progress) {
        printf("\n");
        fflush(stdout);
    }
    if (r < 0) {
        img_error_free(filename, err);
        if (!resume_only) {
            reencrypt_resume_hint(&io, filename, was_unfinished);
        }
        goto close;
    }
    if (r > 0) {
        /* cryptsetup resumes LUKS2 runs only (LUKS1 keeps its own state) */
        img_error(filename, "Interrupted at a consistent point; finish with "
                  "'qemu-img-lite reencrypt --resume-only'%s",
                  qcrypto_reencrypt_unfinished_kind(&io) ==
                  QCRYPTO_REENCRYPT_KIND_LUKS2 ?
                  " (or cryptsetup reencrypt --resume-only "
                  "--force-offline-reencrypt)" : "");
        goto close;
    }
done:
    /* Done only once on the disk (a failed sync before fails it too). */
    if (bdrv_flush(ctx.file, &err) < 0) {
        img_error_free(filename, err);
        goto close;
    }
    ret = 0;
close:
    bdrv_close(ctx.file);
out:
    if (have_copts) {
        block_crypto_clear_luks_create_opts(&copts);
    } else if (have_secret) {
        qcrypto_secret_value_free((uint8_t *)secret.data, secret.len);
    }
    img_common_opts_clear(&common);
    return ret;
}
