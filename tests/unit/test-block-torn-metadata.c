/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Metadata updates survive a torn write (issue 27): amend adds or removes
 * a key slot of a LUKS1, a LUKS2 and a qcow2+LUKS image through the real
 * drivers, on "torn", a test-only protocol that models a disk with a
 * write-back cache: a write is pending until a flush makes it durable.
 *
 * A crash is made in every write of the update, at every 512-byte
 * boundary of it (a disk writes whole sectors, or not at all): each write
 * still pending then keeps only its first k * 512 bytes, and nothing
 * after reaches the disk. What is left must be the old state or the new
 * one, never neither and never in between:
 * - the passphrase that stays opens the image, and its data reads back;
 * - the slot the update changes is active in the header exactly when its
 *   passphrase opens it (never an enabled slot over torn key material,
 *   never a wiped slot that the header still names).
 * Writing both LUKS2 header copies before one flush, or the header before
 * its key material is flushed, fails here.
 */
#include <errno.h>
#include <string.h>

#include "block/block_int.h"
#include "block/options.h"
#include "crypto/secret.h"
#include "test-tmpdir.h"

#define SECTOR 512
#define DATA_LEN (64 * 1024)

/* ---- The "torn" protocol: one disk, a write-back cache, a crash */

typedef struct TornWrite {
    uint64_t offset;
    GBytes *data;
} TornWrite;

typedef struct TornRange {
    uint64_t offset;
    size_t len;
} TornRange;

typedef struct TornDisk {
    const GByteArray *base; /* the image each run starts from */
    GByteArray *cache;      /* what reads see: every write */
    GByteArray *disk;       /* what a crash leaves: what was flushed */
    GArray *touched;        /* TornRange written since base (to undo) */
    GPtrArray *pending;     /* TornWrite since the last flush, in order */
    GArray *lens;           /* the length of every write (size_t) */
    unsigned tear_write;    /* the crash is in this write (from 1), 0: none */
    size_t keep;            /* bytes of each pending write that land */
    bool dead;              /* after the crash: every request fails */
    unsigned max_pending;   /* most writes pending at once (reported) */
} TornDisk;

static TornDisk torn;

static void torn_write_free(gpointer p)
{
    TornWrite *w = p;

    g_bytes_unref(w->data);
    g_free(w);
}

static void bytes_put(GByteArray *a, uint64_t offset, const void *buf,
                      size_t len)
{
    if (offset + len > a->len) {
        size_t old = a->len;

        g_byte_array_set_size(a, offset + len);
        memset(a->data + old, 0, a->len - old);
    }
    memcpy(a->data + offset, buf, len);
}

static void torn_clear(void)
{
    torn.base = NULL;
    g_clear_pointer(&torn.cache, g_byte_array_unref);
    g_clear_pointer(&torn.disk, g_byte_array_unref);
    g_clear_pointer(&torn.touched, g_array_unref);
    g_clear_pointer(&torn.pending, g_ptr_array_unref);
    g_clear_pointer(&torn.lens, g_array_unref);
}

/*
 * The disk holds image, nothing pending; the crash is set up. (A LUKS2
 * image is 17 MiB: what the last run wrote is undone rather than the
 * whole image copied again.)
 */
static void torn_reset(const GByteArray *image, unsigned tear_write,
                       size_t keep)
{
    if (torn.base == image && torn.cache->len == image->len &&
        torn.disk->len == image->len) {
        for (guint i = 0; i < torn.touched->len; i++) {
            TornRange r = g_array_index(torn.touched, TornRange, i);

            memcpy(torn.cache->data + r.offset, image->data + r.offset,
                   r.len);
            memcpy(torn.disk->data + r.offset, image->data + r.offset, r.len);
        }
        g_array_set_size(torn.touched, 0);
        g_ptr_array_set_size(torn.pending, 0);
        g_array_set_size(torn.lens, 0);
    } else {
        torn_clear();
        torn.base = image;
        torn.cache = g_byte_array_new();
        torn.disk = g_byte_array_new();
        g_byte_array_append(torn.cache, image->data, image->len);
        g_byte_array_append(torn.disk, image->data, image->len);
        torn.touched = g_array_new(false, false, sizeof(TornRange));
        torn.pending = g_ptr_array_new_with_free_func(torn_write_free);
        torn.lens = g_array_new(false, false, sizeof(size_t));
    }
    torn.tear_write = tear_write;
    torn.keep = keep;
    torn.dead = false;
}

/* The power is back: reads see what the disk kept, nothing is torn. */
static void torn_power_on(void)
{
    /* The cache holds every write: it is as long as the disk, or longer. */
    g_byte_array_set_size(torn.cache, torn.disk->len);
    for (guint i = 0; i < torn.touched->len; i++) {
        TornRange r = g_array_index(torn.touched, TornRange, i);

        if (r.offset < torn.disk->len) {
            memcpy(torn.cache->data + r.offset, torn.disk->data + r.offset,
                   MIN(r.len, torn.disk->len - r.offset));
        }
    }
    g_ptr_array_set_size(torn.pending, 0);
    torn.tear_write = 0;
    torn.dead = false;
}

/* The power goes: what was pending lands in part, nothing after. */
static void torn_crash(void)
{
    for (guint i = 0; i < torn.pending->len; i++) {
        TornWrite *w = g_ptr_array_index(torn.pending, i);
        size_t len;
        const uint8_t *data = g_bytes_get_data(w->data, &len);

        bytes_put(torn.disk, w->offset, data, MIN(len, torn.keep));
    }
    g_ptr_array_set_size(torn.pending, 0);
    torn.dead = true;
}

static bool torn_is_dead(Error **errp)
{
    if (torn.dead) {
        error_setg_errno(errp, EIO, "torn: the power is off");
    }
    return torn.dead;
}

static int torn_open(BlockDriverState *bs, GHashTable *opts, int flags,
                     Error **errp)
{
    g_autofree char *name = qemu_opt_take(opts, "filename");

    bs->filename = g_strconcat("torn:", name ? name : "", NULL);
    return 0;
}

static int torn_pread(BlockDriverState *bs, uint64_t offset, void *buf,
                      size_t bytes, Error **errp)
{
    size_t n;

    if (torn_is_dead(errp)) {
        return -1;
    }
    n = offset < torn.cache->len ? MIN(bytes, torn.cache->len - offset) : 0;
    memcpy(buf, torn.cache->data + offset, n);
    memset((uint8_t *)buf + n, 0, bytes - n);
    return 0;
}

static int torn_pwrite(BlockDriverState *bs, uint64_t offset,
                       const void *buf, size_t bytes, int flags,
                       Error **errp)
{
    TornWrite *w;

    if (torn_is_dead(errp)) {
        return -1;
    }
    g_array_append_val(torn.lens, bytes);
    g_array_append_val(torn.touched, ((TornRange) { offset, bytes }));
    w = g_new(TornWrite, 1);
    w->offset = offset;
    w->data = g_bytes_new(buf, bytes);
    g_ptr_array_add(torn.pending, w);
    torn.max_pending = MAX(torn.max_pending, torn.pending->len);
    bytes_put(torn.cache, offset, buf, bytes);
    if (torn.lens->len == torn.tear_write) {
        torn_crash();
        error_setg_errno(errp, EIO, "torn: the power went in write %u",
                         torn.tear_write);
        return -1;
    }
    return 0;
}

static int torn_flush(BlockDriverState *bs, Error **errp)
{
    if (torn_is_dead(errp)) {
        return -1;
    }
    for (guint i = 0; i < torn.pending->len; i++) {
        TornWrite *w = g_ptr_array_index(torn.pending, i);
        size_t len;
        const uint8_t *data = g_bytes_get_data(w->data, &len);

        bytes_put(torn.disk, w->offset, data, len);
    }
    g_ptr_array_set_size(torn.pending, 0);
    return 0;
}

static int64_t torn_getlength(BlockDriverState *bs, Error **errp)
{
    return torn.cache->len;
}

/* (Amend does not resize: a size change is taken as durable at once.) */
static int torn_truncate(BlockDriverState *bs, uint64_t size,
                         PreallocMode prealloc, Error **errp)
{
    if (torn_is_dead(errp)) {
        return -1;
    }
    g_byte_array_set_size(torn.cache, size);
    g_byte_array_set_size(torn.disk, size);
    return 0;
}

static const BlockDriver bdrv_torn = {
    .format_name = "torn",
    .is_protocol = true,
    .protocol_name = "torn",
    .bdrv_open = torn_open,
    .bdrv_pread = torn_pread,
    .bdrv_pwrite = torn_pwrite,
    .bdrv_flush = torn_flush,
    .bdrv_getlength = torn_getlength,
    .bdrv_truncate = torn_truncate,
};

/* ---- The updates */

typedef struct TornCase {
    const char *format;         /* of bdrv_create() */
    const char *create;         /* its options, with size and key-secret */
    const char *secret_opt;     /* the open option naming the secret */
    const char *add_slot1;      /* amend: put passphrase s1 into slot 1 */
    const char *erase_slot1;    /* amend: erase slot 1 */
    bool remove;                /* this case erases slot 1 (else adds it) */
} TornCase;

#define LUKS_ADD "state=active,new-secret=s1,keyslot=1,iter-time=1"
#define LUKS_ERASE "state=inactive,keyslot=1"

static const TornCase luks1 = {
    "luks", "key-secret=s0,iter-time=1,size=1M", "key-secret",
    LUKS_ADD, LUKS_ERASE,
};
static const TornCase luks2 = {
    "luks", "key-secret=s0,iter-time=1,size=1M,luks-version=2,kdf=pbkdf2",
    "key-secret", LUKS_ADD ",kdf=pbkdf2", LUKS_ERASE,
};
static const TornCase qcow2 = {
    "qcow2", "encrypt.format=luks,encrypt.key-secret=s0,encrypt.iter-time=1,"
    "size=1M", "encrypt.key-secret",
    "encrypt.state=active,encrypt.new-secret=s1,encrypt.keyslot=1,"
    "encrypt.iter-time=1",
    "encrypt.state=inactive,encrypt.keyslot=1",
};

static uint8_t test_data[DATA_LEN];

static BlockDriverState *open_image(const TornCase *c, const char *secret,
                                    const char *file, int flags, Error **errp)
{
    g_autofree char *str = NULL;
    g_autoptr(GHashTable) opts = NULL;

    if (secret) {
        str = g_strdup_printf("driver=%s,%s=%s,%s", c->format, c->secret_opt,
                              secret, file);
    } else {
        str = g_strdup_printf("driver=%s,%s", c->format, file);
    }
    opts = qemu_opts_parse(str, NULL, NULL);
    g_assert_nonnull(opts);
    return bdrv_open(NULL, NULL, opts, flags, errp);
}

static int amend(BlockDriverState *bs, const char *amend_opts, Error **errp)
{
    g_autoptr(GHashTable) opts = qemu_opts_parse(amend_opts, NULL, NULL);

    g_assert_nonnull(opts);
    if (bdrv_amend(bs, opts, false, NULL, NULL, errp) < 0) {
        return -1;
    }
    return bdrv_flush(bs, errp);
}

/*
 * The image before the update, made by the real code on disk: passphrase
 * s0 in slot 0 and test_data at the start; for an erase, s1 in slot 1.
 */
static GByteArray *make_image(const TornCase *c, bool remove)
{
    g_autoptr(GHashTable) opts = qemu_opts_parse(c->create, NULL, NULL);
    g_autofree char *file = NULL;
    g_autofree char *data = NULL;
    BlockDriverState *bs;
    TestTmpFile t;
    GByteArray *image;
    gsize len;

    test_tmpfile_init(&t, "test-torn", "disk.img");
    file = g_strdup_printf("file.filename=%s", t.path);
    g_assert_cmpint(bdrv_create(c->format, t.path, opts, NULL, &error_abort),
                    ==, 0);
    bs = open_image(c, "s0", file, BDRV_O_RDWR, &error_abort);
    g_assert_cmpint(bdrv_pwrite(bs, 0, test_data, DATA_LEN, 0,
                                &error_abort), ==, 0);
    if (remove) {
        g_assert_cmpint(amend(bs, c->add_slot1, &error_abort), ==, 0);
    }
    g_assert_cmpint(bdrv_flush(bs, &error_abort), ==, 0);
    bdrv_close(bs);
    g_assert_true(g_file_get_contents(t.path, &data, &len, NULL));
    test_tmpfile_clear(&t);
    image = g_byte_array_new();
    g_byte_array_append(image, (uint8_t *)data, len);
    return image;
}

#define TORN_FILE "file.driver=torn,file.filename=disk"

/* Run the update on the torn disk; whether it said it was done. */
static bool run_update(const TornCase *c, const char *update)
{
    BlockDriverState *bs;
    Error *err = NULL;
    int ret;

    bs = open_image(c, "s0", TORN_FILE, BDRV_O_RDWR, &err);
    if (!bs) {
        error_free(err);
        return false;
    }
    ret = amend(bs, update, &err);
    error_free(err);
    bdrv_close(bs);
    return ret == 0;
}

/* Whether slot 1 is active in the header on the torn disk. */
static bool slot1_active(const TornCase *c, const char *where)
{
    g_autoptr(BlockDriverState) bs = NULL;
    g_autoptr(BlockImageInfo) info = NULL;
    Error *err = NULL;
    const QCryptoBlockInfo *luks;

    bs = open_image(c, NULL, TORN_FILE, BDRV_O_NO_IO, &err);
    if (!bs) {
        g_error("%s: the header does not open: %s", where,
                error_get_pretty(err));
    }
    info = bdrv_get_image_info(bs, &error_abort);
    luks = info->luks ? info->luks : info->qcow2->encrypt_luks;
    g_assert_nonnull(luks);
    /* (LUKS2 lists the slots up to the last active one.) */
    return luks->nslots > 1 && luks->slots[1].active;
}

/* Whether secret opens the image on the torn disk (and its data reads). */
static bool opens_with(const TornCase *c, const char *secret,
                       const char *where)
{
    g_autoptr(BlockDriverState) bs = NULL;
    g_autofree uint8_t *buf = g_malloc(DATA_LEN);
    Error *err = NULL;

    bs = open_image(c, secret, TORN_FILE, 0, &err);
    if (!bs) {
        error_free(err);
        return false;
    }
    if (bdrv_pread(bs, 0, buf, DATA_LEN, &err) < 0 ||
        memcmp(buf, test_data, DATA_LEN)) {
        g_error("%s: %s opens, but the data does not read back: %s", where,
                secret, err ? error_get_pretty(err) : "other bytes");
    }
    return true;
}

/*
 * What the crash left is the old state or the new one: s0 opens (it stays
 * either way), and slot 1 is active exactly when s1 opens it. Returns
 * whether it is the new state.
 */
static bool check_old_or_new(const TornCase *c, bool remove,
                             const char *where)
{
    bool active, s1;

    torn_power_on();
    if (!opens_with(c, "s0", where)) {
        g_error("%s: the passphrase that stays (s0) no longer opens", where);
    }
    active = slot1_active(c, where);
    s1 = opens_with(c, "s1", where);
    if (active != s1) {
        g_error("%s: neither old nor new: slot 1 is %s but s1 %s", where,
                active ? "active" : "inactive",
                s1 ? "opens" : "does not open");
    }
    return remove ? !active : active;
}

static void test_torn(gconstpointer data, bool remove)
{
    const TornCase *c = data;
    const char *update = remove ? c->erase_slot1 : c->add_slot1;
    g_autoptr(GByteArray) image = make_image(c, remove);
    g_autoptr(GArray) lens = NULL;
    unsigned points = 0, became_new = 0;

    /* Once without a crash: the writes it makes, and the new state. */
    torn_reset(image, 0, 0);
    torn.max_pending = 0;
    g_assert_true(run_update(c, update));
    lens = g_array_copy(torn.lens);
    g_assert_cmpuint(lens->len, >, 0);
    g_assert_true(check_old_or_new(c, remove, "no crash"));

    for (guint n = 1; n <= lens->len; n++) {
        size_t len = g_array_index(lens, size_t, n - 1);

        for (size_t keep = 0; keep <= ROUND_UP(len, SECTOR);
             keep += SECTOR) {
            g_autofree char *where = g_strdup_printf(
                "write %u of %u (%zu bytes) torn at %zu", n, lens->len, len,
                keep);

            torn_reset(image, n, keep);
            g_assert_false(run_update(c, update));
            g_assert_true(torn.dead);
            became_new += check_old_or_new(c, remove, where);
            points++;
        }
    }
    g_test_message("%s: %u writes, %u tear points: %u left the old "
                   "state, %u the new; at most %u writes pending at once",
                   g_test_get_path(), lens->len, points, points - became_new,
                   became_new, torn.max_pending);
}

static void test_torn_add(gconstpointer data)
{
    test_torn(data, false);
}

static void test_torn_erase(gconstpointer data)
{
    test_torn(data, true);
}

int main(int argc, char **argv)
{
    int ret;

    g_test_init(&argc, &argv, NULL);
    bdrv_register(&bdrv_torn);
    for (size_t i = 0; i < DATA_LEN; i++) {
        test_data[i] = (uint8_t)(i * 7 + (i >> 9));
    }
    g_assert_cmpint(qcrypto_secret_add("s0", "old passphrase", NULL,
                                       QCRYPTO_SECRET_FORMAT_RAW,
                                       &error_abort), ==, 0);
    g_assert_cmpint(qcrypto_secret_add("s1", "new passphrase", NULL,
                                       QCRYPTO_SECRET_FORMAT_RAW,
                                       &error_abort), ==, 0);
    g_test_add_data_func("/block/torn-metadata/luks1/add-key", &luks1,
                         test_torn_add);
    g_test_add_data_func("/block/torn-metadata/luks1/erase-key", &luks1,
                         test_torn_erase);
    g_test_add_data_func("/block/torn-metadata/luks2/add-key", &luks2,
                         test_torn_add);
    g_test_add_data_func("/block/torn-metadata/luks2/erase-key", &luks2,
                         test_torn_erase);
    g_test_add_data_func("/block/torn-metadata/qcow2-luks/add-key", &qcow2,
                         test_torn_add);
    g_test_add_data_func("/block/torn-metadata/qcow2-luks/erase-key", &qcow2,
                         test_torn_erase);
    ret = g_test_run();
    torn_clear();
    qcrypto_secret_clear_all();
    return ret;
}
