/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qcow2 size arithmetic and "qemu-img measure -O qcow2".
 *
 * The figures are QEMU's (block/qcow2.c, qcow2_measure()), because users
 * compare them with qemu-img's and size volumes by them:
 *   fully allocated = LUKS header (rounded up to clusters)
 *                     + every cluster of the image allocated
 *                       (header, L2 tables, L1 table, refcounts, data);
 *   required        = fully allocated - data clusters + the data clusters
 *                     the source really holds (all of them with
 *                     preallocation=falloc/full, or a backing file).
 * Metadata is always counted for the whole virtual size, so "required"
 * overestimates a sparse image, as qemu-img's does.
 */
#include <string.h>

#include "block/crypto.h"
#include "block/qcow2.h"
#include "block/qcow2-bitmap.h"
#include "block/qcow2-measure.h"
#include "crypto/block.h"
#include "crypto/cipher.h"
#include "crypto/hash.h"
#include "crypto/ivgen.h"
#include "crypto/secret.h"

#define QCOW2_L1E_SIZE 8
#define QCOW2_REFTABLE_ENTRY_SIZE 8
#define QCOW2_DEFAULT_CLUSTER_SIZE (64 * 1024)

static uint64_t div_round_up(uint64_t n, uint64_t d)
{
    return n / d + (n % d != 0);
}

uint64_t qcow2_refcount_metadata_size(uint64_t clusters,
                                      uint64_t cluster_size,
                                      unsigned refcount_order,
                                      bool generous_increase,
                                      uint64_t *refblock_count)
{
    uint64_t per_block = cluster_size * 8 >> refcount_order;
    uint64_t per_table_cluster = cluster_size / QCOW2_REFTABLE_ENTRY_SIZE;
    uint64_t blocks = 0, table = 0, total = 0, prev;

    /*
     * Refcount metadata counts itself too: grow the blocks and table
     * until they cover every cluster, their own included (a fixed point,
     * reached in a few rounds).
     */
    do {
        prev = total;
        blocks = div_round_up(clusters + blocks + table, per_block);
        table = div_round_up(blocks, per_table_cluster);
        total = clusters + blocks + table;
        if (total == prev && generous_increase) {
            /* Room for the table to grow by half again; then settle. */
            clusters += div_round_up(table, 2);
            generous_increase = false;
            total = 0;
        }
    } while (total != prev);

    if (refblock_count) {
        *refblock_count = blocks;
    }
    return (blocks + table) * cluster_size;
}

uint64_t qcow2_calc_prealloc_size(uint64_t size, uint64_t cluster_size,
                                  unsigned refcount_order, bool extended_l2)
{
    uint64_t data = ROUND_UP(size, cluster_size);
    uint64_t l2e_size = extended_l2 ? 16 : 8;
    uint64_t meta = cluster_size;           /* the header cluster */
    uint64_t l2_entries, l1_entries;

    /* Whole L2 tables, and a whole number of clusters of L1 table. */
    l2_entries = ROUND_UP(data / cluster_size, cluster_size / l2e_size);
    meta += l2_entries * l2e_size;
    l1_entries = l2_entries * l2e_size / cluster_size;
    l1_entries = ROUND_UP(l1_entries, cluster_size / QCOW2_L1E_SIZE);
    meta += l1_entries * QCOW2_L1E_SIZE;

    meta += qcow2_refcount_metadata_size((meta + data) / cluster_size,
                                         cluster_size, refcount_order, false,
                                         NULL);
    return meta + data;
}

bool qcow2_size_fits_l1(uint64_t size, uint64_t cluster_size,
                        bool extended_l2)
{
    uint64_t l2e_size = extended_l2 ? 16 : 8;
    uint64_t l2_tables = div_round_up(size / cluster_size,
                                      cluster_size / l2e_size);

    return l2_tables <= QCOW2_MAX_L1_BYTES / QCOW2_L1E_SIZE;
}

/* The creation options measure reads; qemu-img's defaults. */
typedef struct Qcow2MeasureOpts {
    uint64_t size;              /* -o size, 0 if absent */
    uint64_t cluster_size;
    unsigned refcount_order;
    int version;
    bool extended_l2;
    bool prealloc_data;         /* falloc or full: data counts too */
    bool has_backing_file;
    bool has_luks;
} Qcow2MeasureOpts;

/*
 * The options qemu-img 7.2's qcow2 accepts, and their types: measure
 * ignores most of them, but refuses a value of the wrong type or a key
 * qcow2 does not know, as qemu-img does when it parses -o.
 */
static int qcow2_measure_check_types(GHashTable *opts, Error **errp)
{
    static const char *const bools[] = {
        "encryption", "lazy_refcounts", "extended_l2", "data_file_raw",
    };
    static const char *const numbers[] = {
        "refcount_bits", "encrypt.iter-time",
    };
    static const char *const strings[] = {
        "compat", "backing_file", "backing_fmt", "data_file",
        "encrypt.format", "encrypt.key-secret", "encrypt.cipher-alg",
        "encrypt.cipher-mode", "encrypt.ivgen-alg", "encrypt.ivgen-hash-alg",
        "encrypt.hash-alg", "preallocation", "compression_type",
        "size", "cluster_size",
    };
    g_autoptr(GHashTable) copy = qemu_opts_copy(opts);
    g_autofree char *unknown = NULL;
    uint64_t n;
    bool b;

    for (size_t i = 0; i < G_N_ELEMENTS(bools); i++) {
        if (qemu_opt_take_bool(copy, bools[i], false, &b, errp) < 0) {
            return -1;
        }
    }
    for (size_t i = 0; i < G_N_ELEMENTS(numbers); i++) {
        if (qemu_opt_take_uint(copy, numbers[i], 0, &n, errp) < 0) {
            return -1;
        }
    }
    if (qemu_opt_take_size(copy, "size", 0, &n, errp) < 0 ||
        qemu_opt_take_size(copy, "cluster_size", 0, &n, errp) < 0) {
        return -1;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(strings); i++) {
        g_free(qemu_opt_take(copy, strings[i]));
    }
    unknown = qemu_opts_first_key(copy);
    if (unknown) {
        error_setg(errp, "Invalid parameter '%s'", unknown);
        return -1;
    }
    return 0;
}

static int qcow2_measure_take_cluster_size(GHashTable *opts,
                                           Qcow2MeasureOpts *o, Error **errp)
{
    uint64_t cs;

    if (qemu_opt_take_size(opts, "cluster_size", QCOW2_DEFAULT_CLUSTER_SIZE,
                           &cs, errp) < 0) {
        return -1;
    }
    if (cs < (1u << QCOW2_MIN_CLUSTER_BITS) ||
        cs > (1u << QCOW2_MAX_CLUSTER_BITS) || (cs & (cs - 1))) {
        error_setg(errp, "Cluster size must be a power of two between %u and "
                   "%uk", 1u << QCOW2_MIN_CLUSTER_BITS,
                   1u << (QCOW2_MAX_CLUSTER_BITS - 10));
        return -1;
    }
    if (o->extended_l2 && cs < (1u << QCOW2_MIN_EXTL2_CLUSTER_BITS)) {
        error_setg(errp, "Extended L2 entries are only supported with "
                   "cluster sizes of at least %u bytes",
                   1u << QCOW2_MIN_EXTL2_CLUSTER_BITS);
        return -1;
    }
    o->cluster_size = cs;
    return 0;
}

static int qcow2_measure_take_version(GHashTable *opts, Qcow2MeasureOpts *o,
                                      Error **errp)
{
    g_autofree char *compat = qemu_opt_take(opts, "compat");
    uint64_t bits;

    /* qemu-img 7.2 knows these two spellings only. */
    o->version = 3;
    if (compat && g_str_equal(compat, "0.10")) {
        o->version = 2;
    } else if (compat && !g_str_equal(compat, "1.1")) {
        error_setg(errp, "Invalid compatibility level: '%s'", compat);
        return -1;
    }
    if (qemu_opt_take_uint(opts, "refcount_bits", 16, &bits, errp) < 0) {
        return -1;
    }
    if (!bits || bits > 64 || (bits & (bits - 1))) {
        error_setg(errp, "Refcount width must be a power of two and may not "
                   "exceed 64 bits");
        return -1;
    }
    if (o->version < 3 && bits != 16) {
        error_setg(errp, "Different refcount widths than 16 bits require "
                   "compatibility level 1.1 or above (use compat=1.1 or "
                   "greater)");
        return -1;
    }
    o->refcount_order = __builtin_ctzll(bits);
    return 0;
}

static int qcow2_measure_take_prealloc(GHashTable *opts, Qcow2MeasureOpts *o,
                                       Error **errp)
{
    g_autofree char *mode = qemu_opt_take(opts, "preallocation");

    /* metadata changes nothing: metadata is always counted. */
    if (!mode || g_str_equal(mode, "off") || g_str_equal(mode, "metadata")) {
        return 0;
    }
    if (g_str_equal(mode, "falloc") || g_str_equal(mode, "full")) {
        o->prealloc_data = true;
        return 0;
    }
    error_setg(errp, "invalid parameter value: %s", mode);
    return -1;
}

/*
 * The LUKS header of encrypt.format=luks: its size follows from the
 * cipher (the key length sets the size of the key material), as QEMU's
 * qcrypto_block_calculate_payload_offset() says. As for measure -O luks,
 * no secret is needed; one that is named must exist.
 */
static int qcow2_measure_luks_header(GHashTable *opts, uint64_t *header,
                                     Error **errp)
{
    static const struct {
        const char *key;
        int (*parse)(const char *);
    } enums[] = {
        { "cipher-alg", qcrypto_cipher_algo_parse },
        { "cipher-mode", qcrypto_cipher_mode_parse },
        { "ivgen-alg", qcrypto_ivgen_algo_parse },
        { "ivgen-hash-alg", qcrypto_hash_algo_parse },
        { "hash-alg", qcrypto_hash_algo_parse },
    };
    QCryptoBlockCreateOptions copts;
    QCryptoBlockSecret secret = { 0 };
    int values[G_N_ELEMENTS(enums)];

    for (size_t i = 0; i < G_N_ELEMENTS(enums); i++) {
        g_autofree char *key = g_strconcat("encrypt.", enums[i].key, NULL);
        g_autofree char *str = qemu_opt_take(opts, key);

        values[i] = str ? enums[i].parse(str) : -1;
        if (str && values[i] < 0) {
            error_setg(errp, "Parameter '%s' does not accept value '%s'",
                       enums[i].key, str);
            return -1;
        }
    }
    if (block_crypto_take_secret(opts, "encrypt.key-secret", false, NULL,
                                 &secret, errp) < 0) {
        return -1;
    }
    qcrypto_secret_value_free((uint8_t *)secret.data, secret.len);

    memset(&copts, 0, sizeof(copts));
    qcrypto_block_create_options_init(&copts);
    copts.format = QCRYPTO_BLOCK_FORMAT_LUKS;
    if (values[0] >= 0) {
        copts.cipher_alg = values[0];
    }
    if (values[1] >= 0) {
        copts.cipher_mode = values[1];
    }
    if (values[2] >= 0) {
        copts.ivgen_alg = values[2];
    }
    if (values[3] >= 0) {
        copts.has_ivgen_hash_alg = true;
        copts.ivgen_hash_alg = values[3];
    }
    if (values[4] >= 0) {
        copts.hash_alg = values[4];
    }
    return qcrypto_block_calculate_payload_offset(&copts, header, errp);
}

static int qcow2_measure_take_opts(GHashTable *opts, Qcow2MeasureOpts *o,
                                   Error **errp)
{
    g_autofree char *backing = NULL, *format = NULL;

    memset(o, 0, sizeof(*o));
    if (qcow2_measure_check_types(opts, errp) < 0 ||
        qemu_opt_take_size(opts, "size", 0, &o->size, errp) < 0 ||
        qemu_opt_take_bool(opts, "extended_l2", false, &o->extended_l2,
                           errp) < 0 ||
        qcow2_measure_take_cluster_size(opts, o, errp) < 0 ||
        qcow2_measure_take_version(opts, o, errp) < 0 ||
        qcow2_measure_take_prealloc(opts, o, errp) < 0) {
        return -1;
    }
    backing = qemu_opt_take(opts, "backing_file");
    o->has_backing_file = backing != NULL;
    format = qemu_opt_take(opts, "encrypt.format");
    o->has_luks = format && g_str_equal(format, "luks");
    return 0;
}

/*
 * The data clusters of in_bs that hold something (QEMU counts by block
 * status: zero and unallocated runs are skipped, a cluster with any data
 * counts whole).
 */
static uint64_t qcow2_measure_data(BlockDriverState *in_bs, uint64_t len,
                                   uint64_t cluster_size)
{
    uint64_t offset, pnum, required = 0;

    for (offset = 0; offset < len; offset += pnum) {
        if (!bdrv_block_status_is_data(in_bs, offset, len - offset, &pnum)) {
            continue;
        }
        /* Count up to the end of the cluster and go on from there. */
        pnum = ROUND_UP(offset + pnum, cluster_size) - offset;
        required += offset % cluster_size + pnum;
    }
    return required;
}

/*
 * "bitmaps size", printed for a qcow2 v3 source and target (QEMU's test:
 * both can hold persistent bitmaps): the source's bitmaps, as the new
 * image would hold them.
 */
static int qcow2_measure_bitmaps(BlockDriverState *in_bs, uint64_t size,
                                 const Qcow2MeasureOpts *o,
                                 BlockMeasureInfo *info, Error **errp)
{
    const BDRVQcow2State *s;
    BlockImageInfoBitmap *bitmaps;
    size_t nb;

    if (o->version < 3 || !in_bs || in_bs->drv != &bdrv_qcow2) {
        return 0;
    }
    s = in_bs->opaque;
    if (s->header.version < 3) {
        return 0;
    }
    if (qcow2_read_bitmaps(in_bs, &bitmaps, &nb, errp) < 0) {
        return -1;
    }
    info->has_bitmaps = true;
    info->bitmaps = qcow2_bitmaps_size(bitmaps, nb, size, o->cluster_size);
    for (size_t i = 0; i < nb; i++) {
        g_free(bitmaps[i].name);
    }
    g_free(bitmaps);
    return 0;
}

int qcow2_measure(GHashTable *opts, BlockDriverState *in_bs, uint64_t size,
                  BlockMeasureInfo *info, Error **errp)
{
    Qcow2MeasureOpts o;
    uint64_t virtual_size, required = 0, luks_header = 0;

    if (qcow2_measure_take_opts(opts, &o, errp) < 0) {
        return -1;
    }
    if (o.has_luks && qcow2_measure_luks_header(opts, &luks_header,
                                                errp) < 0) {
        return -1;
    }
    /* The encrypt.* options mean nothing without encrypt.format=luks. */
    g_hash_table_remove_all(opts);

    /*
     * qemu-img checks the size the options give (--size, or -o size with
     * a source image), not the source's.
     */
    if (!in_bs) {
        o.size = size;
    }
    if (o.size > G_MAXUINT64 - o.cluster_size ||
        !qcow2_size_fits_l1(ROUND_UP(o.size, o.cluster_size), o.cluster_size,
                            o.extended_l2)) {
        error_setg(errp, "The image size is too large (try using a larger "
                   "cluster size)");
        return -1;
    }
    virtual_size = ROUND_UP(o.size, o.cluster_size);
    if (in_bs) {
        if (size > G_MAXUINT64 - o.cluster_size) {
            error_setg(errp, "The image size is too large (try using a "
                       "larger cluster size)");
            return -1;
        }
        virtual_size = ROUND_UP(size, o.cluster_size);
        /*
         * With a backing file, the new image may share nothing with it:
         * every cluster may have to be written.
         */
        required = o.has_backing_file ? virtual_size :
                   qcow2_measure_data(in_bs, size, o.cluster_size);
    }
    if (o.prealloc_data) {
        required = virtual_size;
    }

    info->fully_allocated = ROUND_UP(luks_header, o.cluster_size) +
        qcow2_calc_prealloc_size(virtual_size, o.cluster_size,
                                 o.refcount_order, o.extended_l2);
    info->required = info->fully_allocated - virtual_size + required;
    return qcow2_measure_bitmaps(in_bs, size, &o, info, errp);
}
