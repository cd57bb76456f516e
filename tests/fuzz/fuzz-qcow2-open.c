/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target: a whole qcow2 open through the block layer, then "info",
 * block status and reads across the virtual disk (standard, zero,
 * compressed and encrypted clusters, subclusters), as convert does, and
 * the block status walk of "map" (bdrv_block_status(), which also looks
 * for metadata preallocation in the refcounts); then the write path on
 * the same image, read-write (fuzz_writes()).
 *
 * The input is the image file, followed by zeros up to
 * FUZZ_IMAGE_MAX_SIZE (as in fuzz-image.h: seeds are images truncated
 * after their last metadata). It lives in a memfd, an in-memory file that
 * the ordinary "file" driver opens as /proc/self/fd/N, so the real open
 * path runs, and nothing touches the disk.
 *
 * Names in the input are never followed: backing files stay closed
 * (BDRV_O_NO_BACKING), and an image with an external data file gets the
 * memfd itself as its data file (the data-file option), not the file the
 * header names. Encrypted images are opened with the secret "fuzz" (LUKS
 * or legacy AES); the seeds' LUKS headers (make-seeds-qcow2.sh) have the
 * fewest PBKDF2 iterations qemu-img makes, and inputs asking for more
 * than FUZZ_MAX_ITERS are skipped. Reads stop after FUZZ_READ_BUDGET
 * bytes, so a 16 TiB virtual disk costs what a small one does.
 */
#include <unistd.h>

#include "block/qcow2.h"
#include "crypto/secret.h"
#include "fuzz-image.h"
#include "fuzz-memfd.h"

#define FUZZ_PASSPHRASE "fuzz"
#define FUZZ_SECRET_ID "sec0"

/* Bytes read from the virtual disk per input, and per read. */
#define FUZZ_READ_BUDGET (4 * 1024 * 1024)
#define FUZZ_READ_CHUNK (256 * 1024)
/* Block status calls per input. */
#define FUZZ_MAX_STATUS 256
/*
 * qemu-img's LUKS headers have at least 1000 iterations per slot and for
 * the digest (iter-time=1 gives a few thousand); the LUKS format allows
 * 2^27, a minute each. More than this is a slow input, not a bug (the
 * LUKS header targets cover the limits).
 */
#define FUZZ_MAX_ITERS 10000

/* The LUKS1 spec's header offsets (figures 1 and 2). */
#define LUKS1_VERSION_OFFSET 6
#define LUKS1_MK_DIGEST_ITER_OFFSET 164
#define LUKS1_KEY_SLOTS_OFFSET 208
#define LUKS1_KEY_SLOT_LEN 48
#define LUKS1_KEY_SLOT_ITER_OFFSET 4
#define LUKS1_NUM_KEY_SLOTS 8

/* qcow2 header fields the harness looks at (spec, "Header"). */
#define QCOW2_CRYPT_METHOD_OFFSET 32
#define QCOW2_INCOMPAT_OFFSET 72

static bool fuzz_luks_bounded(const uint8_t *luks, size_t len)
{
    /* qemu-img puts LUKS1 in qcow2; LUKS2's argon2 is skipped. */
    if ((fuzz_get_be32(luks, len, 4) & 0xffff) != 1) {
        return false;
    }
    if (fuzz_get_be32(luks, len, LUKS1_MK_DIGEST_ITER_OFFSET) >
        FUZZ_MAX_ITERS) {
        return false;
    }
    for (int i = 0; i < LUKS1_NUM_KEY_SLOTS; i++) {
        size_t off = LUKS1_KEY_SLOTS_OFFSET + i * LUKS1_KEY_SLOT_LEN +
            LUKS1_KEY_SLOT_ITER_OFFSET;

        if (fuzz_get_be32(luks, len, off) > FUZZ_MAX_ITERS) {
            return false;
        }
    }
    return true;
}

/* Whether the LUKS header the image points at (if any) is cheap to try. */
static bool fuzz_kdf_bounded(const uint8_t *data, size_t size)
{
    size_t cluster = (size_t)1 << QCOW2_MAX_CLUSTER_BITS;
    g_autofree uint8_t *first = NULL;
    Qcow2Header h;
    Qcow2Extensions ext;
    bool ok = true;

    if (fuzz_get_be32(data, size, QCOW2_CRYPT_METHOD_OFFSET) !=
        QCOW2_CRYPT_LUKS) {
        return true;
    }
    /* The driver parses the first cluster, zeros past the input. */
    first = g_malloc0(cluster);
    memcpy(first, data, MIN(size, cluster));
    if (qcow2_header_parse(first, cluster, FUZZ_IMAGE_MAX_SIZE, &h,
                           NULL) < 0 ||
        qcow2_extensions_parse(&h, first, cluster, FUZZ_IMAGE_MAX_SIZE, &ext,
                               NULL) < 0) {
        return true;    /* no LUKS header, or the open refuses it early */
    }
    /* Beyond the input the header reads as zeros: no magic, refused. */
    if (ext.has_crypto_header && ext.crypto_header_offset < size) {
        ok = fuzz_luks_bounded(data + ext.crypto_header_offset,
                               size - ext.crypto_header_offset);
    }
    qcow2_extensions_clear(&ext);
    return ok;
}

static void fuzz_setup(void)
{
    g_autoptr(Error) err = NULL;

    if (fuzz_fd >= 0) {
        return;
    }
    fuzz_memfd_setup("fuzz-qcow2");
    if (qcrypto_secret_add(FUZZ_SECRET_ID, FUZZ_PASSPHRASE, NULL,
                           QCRYPTO_SECRET_FORMAT_RAW, &err) < 0) {
        fuzz_fail("secret: %s", error_get_pretty(err));
    }
}

/* A read that fails must say why; one that works must not. */
static void fuzz_read(BlockDriverState *bs, uint64_t offset, size_t len,
                      uint8_t *buf, size_t *budget)
{
    g_autoptr(Error) err = NULL;
    int ret;

    len = MIN(len, *budget);
    if (!len) {
        return;
    }
    *budget -= len;
    ret = bdrv_pread(bs, offset, buf, len, &err);
    g_assert((ret < 0) == !!err);
    fuzz_debug("read", err);
}

/*
 * Walk block status from the start (bounded), reading the start of each
 * data extent; then the first and last bytes of the disk, and an odd,
 * unaligned read (the bounce path of encrypted images).
 */
static void fuzz_reads(BlockDriverState *bs, uint64_t len)
{
    g_autofree uint8_t *buf = g_malloc(FUZZ_READ_CHUNK);
    size_t budget = FUZZ_READ_BUDGET;
    uint64_t offset = 0;

    fuzz_read(bs, 0, MIN(len, FUZZ_READ_CHUNK), buf, &budget);
    if (len > 1001) {
        fuzz_read(bs, 1, 1000, buf, &budget);
    }
    for (int i = 0; i < FUZZ_MAX_STATUS && offset < len && budget; i++) {
        uint64_t pnum = 0;
        bool data = bdrv_block_status_is_data(bs, offset, len - offset,
                                              &pnum);

        if (pnum == 0 || pnum > len - offset) {
            fuzz_fail("block status at %" PRIu64 ": %" PRIu64 " bytes of %"
                      PRIu64, offset, pnum, len - offset);
        }
        if (data) {
            fuzz_read(bs, offset, MIN(pnum, FUZZ_READ_CHUNK), buf, &budget);
        }
        offset += pnum;
    }
    if (len >= 4096) {
        fuzz_read(bs, len - 4096, 4096, buf, &budget);
    }
}

/*
 * What "map" asks (bdrv_block_status(), bounded): each answer covers 1 to
 * the rest of the disk, an error says why, a host offset names its file.
 */
static void fuzz_map(BlockDriverState *bs, uint64_t len)
{
    uint64_t offset = 0;

    for (int i = 0; i < FUZZ_MAX_STATUS && offset < len; i++) {
        g_autoptr(Error) err = NULL;
        BlockDriverState *file = NULL;
        uint64_t pnum = 0, map = 0;
        int ret = bdrv_block_status(bs, offset, len - offset, &pnum, &map,
                                    &file, &err);

        g_assert((ret < 0) == !!err);
        if (ret < 0) {
            fuzz_debug("block status", err);
            return;
        }
        if (pnum == 0 || pnum > len - offset) {
            fuzz_fail("bdrv_block_status at %" PRIu64 ": %" PRIu64
                      " bytes of %" PRIu64, offset, pnum, len - offset);
        }
        if ((ret & BDRV_BLOCK_OFFSET_VALID) && !file) {
            fuzz_fail("bdrv_block_status at %" PRIu64 ": an offset and no "
                      "file", offset);
        }
        offset += pnum;
    }
}

/* The open's options (each open takes what it uses from them). */
static GHashTable *fuzz_open_opts(const uint8_t *data, size_t size)
{
    GHashTable *opts = qemu_opts_new();

    if (fuzz_get_be32(data, size, QCOW2_CRYPT_METHOD_OFFSET)) {
        g_hash_table_insert(opts, g_strdup("encrypt.key-secret"),
                            g_strdup(FUZZ_SECRET_ID));
    }
    /* Version 3 with the external data file bit: the memfd is the file. */
    if (fuzz_get_be32(data, size, 4) == 3 &&
        (fuzz_get_be32(data, size, QCOW2_INCOMPAT_OFFSET + 4) &
         QCOW2_INCOMPAT_DATA_FILE)) {
        g_hash_table_insert(opts, g_strdup("data-file.filename"),
                            g_strdup(fuzz_path));
    }
    return opts;
}

/*
 * The write path on the same image, opened read-write (what it refuses,
 * it must say why): a few writes of every kind (aligned, unaligned, a
 * zero cluster, across clusters, the last bytes), a flush (the cached
 * refcounts and L2 entries go out), reads of what was written, a close.
 * The data read back is not compared: a hostile image may point two
 * guest clusters at one host cluster, which this driver does not detect
 * (QEMU's overlap checks would mark the image corrupt).
 */
static void fuzz_writes(const uint8_t *data, size_t size, uint64_t len)
{
    static const struct {
        uint64_t offset;    /* from the end if from_end */
        size_t len;
        bool from_end, zero;
    } writes[] = {
        { 0, 4096 }, { 1, 1000 }, { 65536 - 512, 1024 },
        { 131072, 65536, false, true }, { 4096, 4096, true },
        { 200000, 262144 },
    };
    g_autoptr(GHashTable) opts = fuzz_open_opts(data, size);
    g_autofree uint8_t *buf = g_malloc(FUZZ_READ_CHUNK);
    g_autoptr(Error) err = NULL;
    BlockDriverState *bs;

    bs = bdrv_open(fuzz_path, "qcow2", opts, BDRV_O_NO_BACKING | BDRV_O_RDWR,
                   &err);
    g_assert(!bs == !!err);
    fuzz_debug("open read-write", err);
    if (!bs) {
        return;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(writes); i++) {
        uint64_t off = writes[i].from_end ?
                       len - MIN(len, writes[i].offset) : writes[i].offset;
        size_t n = MIN(writes[i].len, len > off ? len - off : 0);
        int ret;

        if (!n) {
            continue;
        }
        memset(buf, writes[i].zero ? 0 : 0x5a + (int)i, n);
        ret = bdrv_pwrite(bs, off, buf, n, 0, &err);
        g_assert((ret < 0) == !!err);
        fuzz_debug("write", err);
        if (ret < 0) {
            break;      /* the image is refused from here on, as qemu-img */
        }
        ret = bdrv_pread(bs, off, buf, n, &err);
        g_assert((ret < 0) == !!err);
        fuzz_debug("read back", err);
        g_clear_pointer(&err, error_free);
    }
    g_clear_pointer(&err, error_free);
    if (bdrv_flush(bs, &err) < 0) {
        g_assert(err);
        fuzz_debug("flush", err);
    }
    bdrv_close(bs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(GHashTable) opts = NULL;
    g_autoptr(Error) err = NULL;
    g_autoptr(BlockDriverState) bs = NULL;
    g_autoptr(BlockImageInfo) info = NULL;
    int64_t len;

    fuzz_init();
    fuzz_setup();
    if (!fuzz_kdf_bounded(data, size)) {
        fuzz_debug("skipped: too many iterations", NULL);
        return -1;      /* not added to the corpus */
    }
    fuzz_set_file(data, size);
    opts = fuzz_open_opts(data, size);
    bs = bdrv_open(fuzz_path, "qcow2", opts, BDRV_O_NO_BACKING, &err);
    g_assert(!bs == !!err);
    fuzz_debug("open", err);
    if (!bs) {
        return 0;
    }
    g_assert(!bdrv_get_backing(bs));
    info = bdrv_get_image_info(bs, &err);
    g_assert(!info == !!err);
    fuzz_debug("info", err);
    len = bdrv_getlength(bs, NULL);
    g_assert(len >= 0);
    fuzz_reads(bs, len);
    fuzz_map(bs, len);
    /* One writer at a time (the image locks): the reader goes first. */
    g_clear_pointer(&bs, bdrv_close);
    fuzz_writes(data, size, len);
    return 0;
}
