/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qcow2 image creation ("create -f qcow2", and convert's new targets):
 * the options qemu-img 7.2 takes, the layout, the header and its
 * extensions, and the LUKS header inside the image.
 *
 * The whole layout is computed before a byte is written, as QEMU's
 * create ends up laying it out:
 *
 *   cluster 0          the header, its extensions, the backing file name
 *   1 ..               the refcount table
 *   ..                 the refcount blocks
 *   ..                 the L1 table
 *   ..                 the LUKS header (encrypt.format=luks), zero-filled
 *                      to whole clusters
 *   ..                 L2 tables, then data (preallocation != off only)
 *
 * With an external data file (data_file=), the data is there instead, each
 * guest cluster at its own offset (spec, "External data file"): the image
 * file holds the metadata alone, and preallocation fills the data file.
 * QEMU ends a file whose last table is the L1 table at that table's last
 * entry (196616 bytes for 64 MiB, qemu-iotests 243), and so do we.
 *
 * As QEMU's, the refcount table starts with one cluster (more only if
 * the blocks for what is in the file need more entries); writers grow it
 * (qcow2-refcount.c, qcow2_grow_reftable()).
 */
#include <string.h>

#include "block/crypto.h"
#include "block/qcow2.h"
#include "crypto/secret.h"

#define QCOW2_DEFAULT_CLUSTER_BITS 16
/* QEMU's header: 104 bytes of v3 fields, the compression type, padding. */
#define QCOW2_V3_CREATE_HEADER_LEN 112
#define QCOW2_FEATURE_ENTRY_LEN 48

typedef enum {
    QCOW2_PREALLOC_OFF,
    QCOW2_PREALLOC_METADATA,
    QCOW2_PREALLOC_FALLOC,
    QCOW2_PREALLOC_FULL,
} Qcow2Prealloc;

typedef struct Qcow2CreateOpts {
    uint64_t size;
    uint32_t version;
    unsigned cluster_bits;
    Qcow2Prealloc prealloc;
    bool lazy_refcounts;
    unsigned refcount_order;
    bool extended_l2;
    Qcow2CompressionType compression;
    char *backing_file;
    char *backing_fmt;
    char *data_file;                /* the name in the header; NULL: none */
    bool data_file_raw;
    bool encrypt;
    bool encrypt_aes;               /* legacy AES: crypt_method 1 */
    QCryptoBlockCreateOptions copts;
} Qcow2CreateOpts;

/* Where everything goes, in bytes (see the top of the file). */
typedef struct Qcow2Layout {
    uint64_t cs;
    uint64_t reftable_offset, reftable_clusters;
    uint64_t refblocks_offset, refblocks;
    uint64_t l1_offset, l1_size, l1_clusters;
    uint64_t luks_offset, luks_len, luks_clusters;
    uint64_t l2_offset, l2_tables;
    uint64_t data_offset, data_clusters;
    /* Preallocated: guest clusters mapped, and where cluster 0 is mapped. */
    uint64_t mapped_clusters, map_base;
    uint64_t clusters;              /* in the file */
    uint64_t file_len;              /* bytes: clusters, or up to the L1 end */
} Qcow2Layout;

static void qcow2_create_opts_clear(Qcow2CreateOpts *o)
{
    g_free(o->backing_file);
    g_free(o->backing_fmt);
    g_free(o->data_file);
    if (o->encrypt) {
        block_crypto_clear_luks_create_opts(&o->copts);
    }
}

/* ---- Header */

static void qcow2_put_ext(uint8_t *buf, size_t *pos, uint32_t type,
                          const void *data, uint32_t len)
{
    stl_be_p(buf + *pos, type);
    stl_be_p(buf + *pos + 4, len);
    memcpy(buf + *pos + 8, data, len);
    *pos += 8 + ROUND_UP(len, 8);
}

/* QEMU's feature name table: every feature it knows, by name. */
static size_t qcow2_feature_table(uint8_t *t)
{
    static const struct {
        uint8_t type, bit;
        const char *name;
    } names[] = {
        { 0, 0, "dirty bit" },
        { 0, 1, "corrupt bit" },
        { 0, 2, "external data file" },
        { 0, 3, "compression type" },
        { 0, 4, "extended L2 entries" },
        { 1, 0, "lazy refcounts" },
        { 2, 0, "bitmaps" },
        { 2, 1, "raw external data" },
    };

    memset(t, 0, sizeof(names) / sizeof(names[0]) * QCOW2_FEATURE_ENTRY_LEN);
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        uint8_t *e = t + i * QCOW2_FEATURE_ENTRY_LEN;

        e[0] = names[i].type;
        e[1] = names[i].bit;
        memcpy(e + 2, names[i].name, strlen(names[i].name));
    }
    return G_N_ELEMENTS(names) * QCOW2_FEATURE_ENTRY_LEN;
}

size_t qcow2_header_build(const Qcow2Header *h, const char *backing_file,
                          const char *backing_fmt, const char *data_file,
                          uint64_t crypto_off,
                          uint64_t crypto_len, bool feature_table,
                          const GByteArray *unknown, uint8_t *buf,
                          size_t len)
{
    uint8_t table[8 * QCOW2_FEATURE_ENTRY_LEN];
    size_t pos;

    memset(buf, 0, len);
    stl_be_p(buf, QCOW2_MAGIC);
    stl_be_p(buf + 4, h->version);
    stl_be_p(buf + 20, h->cluster_bits);
    stq_be_p(buf + 24, h->size);
    stl_be_p(buf + 32, h->crypt_method);
    stl_be_p(buf + 36, h->l1_size);
    stq_be_p(buf + 40, h->l1_table_offset);
    stq_be_p(buf + 48, h->refcount_table_offset);
    stl_be_p(buf + 56, h->refcount_table_clusters);
    stl_be_p(buf + 60, h->nb_snapshots);
    stq_be_p(buf + 64, h->snapshots_offset);
    if (h->version >= 3) {
        stq_be_p(buf + 72, h->incompatible_features);
        stq_be_p(buf + 80, h->compatible_features);
        stq_be_p(buf + 88, h->autoclear_features);
        stl_be_p(buf + 96, h->refcount_order);
        stl_be_p(buf + 100, h->header_length);
        buf[QCOW2_COMPRESSION_TYPE_OFFSET] = h->compression_type;
    }
    pos = h->header_length;
    /*
     * QEMU's order: backing format, external data file, crypto header,
     * feature table.
     */
    if (backing_fmt) {
        qcow2_put_ext(buf, &pos, QCOW2_EXT_BACKING_FORMAT, backing_fmt,
                      strlen(backing_fmt));
    }
    if (data_file) {
        qcow2_put_ext(buf, &pos, QCOW2_EXT_DATA_FILE, data_file,
                      strlen(data_file));
    }
    if (crypto_len) {
        uint8_t ext[16];

        stq_be_p(ext, crypto_off);
        stq_be_p(ext + 8, crypto_len);
        qcow2_put_ext(buf, &pos, QCOW2_EXT_CRYPTO_HEADER, ext, sizeof(ext));
    }
    if (h->version >= 3 && feature_table) {
        size_t n = qcow2_feature_table(table);

        qcow2_put_ext(buf, &pos, QCOW2_EXT_FEATURE_TABLE, table, n);
    }
    /* Then, as QEMU, the unknown ones as they were (when they fit). */
    if (unknown && pos + unknown->len + 8 <= len) {
        memcpy(buf + pos, unknown->data, unknown->len);
        pos += unknown->len;
    }
    pos += 8;   /* the end marker: zeroes */
    if (backing_file) {
        size_t n = strlen(backing_file);

        stq_be_p(buf + 8, pos);
        stl_be_p(buf + 16, n);
        memcpy(buf + pos, backing_file, n);
        pos += n;
    }
    return pos;
}

/* ---- Options */

static int qcow2_take_compat(GHashTable *opts, uint32_t *version,
                             Error **errp)
{
    g_autofree char *compat = qemu_opt_take(opts, "compat");

    *version = 3;
    if (!compat) {
        return 0;
    }
    if (g_str_equal(compat, "0.10") || g_str_equal(compat, "v2")) {
        *version = 2;
    } else if (!g_str_equal(compat, "1.1") && !g_str_equal(compat, "v3")) {
        error_setg(errp, "Parameter 'version' does not accept value '%s'",
                   compat);
        return -1;
    }
    return 0;
}

static int qcow2_take_prealloc(GHashTable *opts, Qcow2Prealloc *p,
                               Error **errp)
{
    static const char *const names[] = { "off", "metadata", "falloc",
                                         "full" };
    g_autofree char *str = qemu_opt_take(opts, "preallocation");

    *p = QCOW2_PREALLOC_OFF;
    if (!str) {
        return 0;
    }
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        if (g_str_equal(str, names[i])) {
            *p = i;
            return 0;
        }
    }
    error_setg(errp, "Parameter 'preallocation' does not accept value '%s'",
               str);
    return -1;
}

/*
 * Legacy AES (encrypt.format=aes, or encryption=on): qemu-img 7.2 still
 * creates it, so scripts that do (qemu-iotests among them) work here too.
 * It is weak: the passphrase's first 16 bytes are the AES-128 key, CBC
 * with plain64 IVs (docs/qcow2.md). Nothing of it is stored: the header
 * says crypt_method 1 and the secret must exist now, as qemu-img checks.
 */
static int qcow2_take_encrypt_aes(GHashTable *eopts, Qcow2CreateOpts *o,
                                  Error **errp)
{
    const char *id = g_hash_table_lookup(eopts, "key-secret");
    g_autofree char *unknown = NULL;
    uint8_t *data = NULL;
    size_t len = 0;

    if (!id) {
        error_setg(errp, "Parameter 'encrypt.key-secret' is required for "
                   "cipher");
        return -1;
    }
    if (qcrypto_secret_lookup(id, &data, &len, errp) < 0) {
        return -1;
    }
    qcrypto_secret_value_free(data, len);
    g_hash_table_remove(eopts, "key-secret");
    unknown = qemu_opts_first_key(eopts);
    if (unknown) {
        error_setg(errp, "Invalid parameter 'encrypt.%s'", unknown);
        return -1;
    }
    o->encrypt_aes = true;
    return 0;
}

static int qcow2_take_encrypt(GHashTable *opts, Qcow2CreateOpts *o,
                              Error **errp)
{
    static const char *const luks_only[] = {
        "luks-version", "sector-size", "label", "kdf", "kdf-memory",
        "kdf-parallel", "detached-header", "align-payload",
    };
    g_autofree char *format = qemu_opt_take(opts, "encrypt.format");
    g_autoptr(GHashTable) eopts = qemu_opts_extract_prefix(opts, "encrypt");
    g_autofree char *legacy = qemu_opt_take(opts, "encryption");
    g_autofree char *unknown = NULL;
    bool legacy_on = false;

    if (legacy && (g_str_equal(legacy, "on") || g_str_equal(legacy, "true") ||
                   g_str_equal(legacy, "yes"))) {
        legacy_on = true;
    }
    if (legacy_on && format && !g_str_equal(format, "aes")) {
        error_setg(errp, "Options 'encryption' and 'encrypt.format' are "
                   "mutually exclusive");
        return -1;
    }
    if (legacy_on || (format && g_str_equal(format, "aes"))) {
        return qcow2_take_encrypt_aes(eopts, o, errp);
    }
    if (!format) {
        if (g_hash_table_size(eopts)) {
            unknown = qemu_opts_first_key(eopts);
            error_setg(errp, "Parameter 'encrypt.%s' needs "
                       "encrypt.format=luks", unknown);
            return -1;
        }
        return 0;
    }
    if (!g_str_equal(format, "luks")) {
        error_setg(errp, "Parameter 'encrypt.format' does not accept value "
                   "'%s'", format);
        return -1;
    }
    /* QEMU's qcow2 takes the LUKS1 options only. */
    for (size_t i = 0; i < G_N_ELEMENTS(luks_only); i++) {
        if (g_hash_table_contains(eopts, luks_only[i])) {
            error_setg(errp, "Invalid parameter 'encrypt.%s'", luks_only[i]);
            return -1;
        }
    }
    if (!g_hash_table_contains(eopts, "key-secret")) {
        error_setg(errp, "Parameter 'encrypt.key-secret' is required for "
                   "cipher");
        return -1;
    }
    if (block_crypto_take_luks_create_opts(eopts, &o->copts, true,
                                           errp) < 0) {
        return -1;
    }
    o->encrypt = true;
    unknown = qemu_opts_first_key(eopts);
    if (unknown) {
        error_setg(errp, "Invalid parameter 'encrypt.%s'", unknown);
        return -1;
    }
    return 0;
}

/* qemu-img's words: the reason, then a line saying what it was for. */
static void qcow2_backing_open_failed(Error **errp)
{
    g_autofree char *why = NULL;

    if (!errp || !*errp) {
        return;
    }
    why = g_strdup(error_get_pretty(*errp));
    error_free(*errp);
    *errp = NULL;
    error_setg(errp, "%s\nCould not open backing image.", why);
}

/* The backing file: its format must be given, and it must open. */
static int qcow2_check_backing(BlockDriverState *file, Qcow2CreateOpts *o,
                               bool has_size, bool unchecked, Error **errp)
{
    g_autofree char *dir = NULL;
    g_autofree char *path = NULL;
    g_autoptr(BlockDriverState) bs = NULL;
    int64_t len;

    if (!o->backing_file) {
        if (o->backing_fmt) {
            error_setg(errp, "Backing format cannot be used without backing "
                       "file");
            return -1;
        }
        return 0;
    }
    if (strlen(o->backing_file) > QCOW2_MAX_BACKING_NAME) {
        error_setg(errp, "Backing file name too long");
        return -1;
    }
    /* Relative to the new image, as its protocol resolves names. */
    if (bdrv_backing_name_is_absolute(o->backing_file)) {
        path = g_strdup(o->backing_file);
    } else {
        dir = bdrv_dirname(file, errp);
        if (!dir) {
            return -1;
        }
        path = g_strconcat(dir, o->backing_file, NULL);
    }
    if (!o->backing_fmt) {
        /* qemu-img's order: a backing file that does not open says so. */
        bs = bdrv_open(path, NULL, NULL, BDRV_O_NO_IO | BDRV_O_NO_BACKING,
                       errp);
        if (!bs) {
            qcow2_backing_open_failed(errp);
            return -1;
        }
        error_setg(errp, "Backing file specified without backing format\n"
                   "Detected format of %s.", bdrv_get_format_name(bs));
        return -1;
    }
    if (!g_str_equal(o->backing_fmt, "raw") &&
        !g_str_equal(o->backing_fmt, "qcow2")) {
        error_setg(errp, "Backing format '%s': qemu-img-lite makes overlays "
                   "on raw and qcow2 images", o->backing_fmt);
        return -1;
    }
    /* create -u: a backing file that may not exist yet. */
    if (unchecked && has_size) {
        return 0;
    }
    bs = bdrv_open(path, o->backing_fmt, NULL, BDRV_O_NO_IO, errp);
    if (!bs) {
        qcow2_backing_open_failed(errp);
        return -1;
    }
    if (!has_size) {
        len = bdrv_getlength(bs, errp);
        if (len < 0) {
            return -1;
        }
        o->size = len;
    }
    return 0;
}

/*
 * data_file and data_file_raw, as QEMU 7.2 checks them. data_file_raw
 * (spec: the data file reads as the guest's disk on its own) needs every
 * guest cluster mapped to its place in the data file: at least
 * preallocation=metadata, as QEMU makes it.
 */
static int qcow2_check_data_file(Qcow2CreateOpts *o, Error **errp)
{
    if (o->data_file_raw && !o->data_file) {
        error_setg(errp, "data-file-raw requires data-file");
        return -1;
    }
    if (o->data_file_raw && o->backing_file) {
        error_setg(errp, "Backing file and data-file-raw cannot be used at "
                   "the same time");
        return -1;
    }
    if (o->data_file_raw && o->prealloc == QCOW2_PREALLOC_OFF) {
        o->prealloc = QCOW2_PREALLOC_METADATA;
    }
    if (!o->data_file) {
        return 0;
    }
    if (o->version < 3) {
        error_setg(errp, "External data files are only supported with "
                   "compatibility level 1.1 and above (use version=v3 or "
                   "greater)");
        return -1;
    }
    /* The name is opened as a file name later (qcow2_open_data_file()). */
    if (!bdrv_names_local_file(o->data_file)) {
        error_setg(errp, "External data files are local files in "
                   "qemu-img-lite: '%s' names another protocol",
                   o->data_file);
        return -1;
    }
    /* What the header extension may hold (QEMU reads no longer a name). */
    if (strlen(o->data_file) > QCOW2_MAX_EXT_STRING) {
        error_setg(errp, "Data file name too long");
        return -1;
    }
    return 0;
}

int qcow2_opt_take_refcount_bits(GHashTable *opts, uint64_t def,
                                 uint64_t *bits, Error **errp)
{
    g_autofree char *str = qemu_opt_take(opts, "refcount_bits");
    bool negative = str && str[0] == '-';

    *bits = def;
    if (!str) {
        return 0;
    }
    /* QEMU's number options take "-1" as 2^64 - 1, refused below. */
    if (qemu_strtou64_opt(str + negative, bits) < 0) {
        error_setg(errp, "Parameter 'refcount_bits' expects a number");
        return -1;
    }
    if (negative) {
        *bits = -*bits;
    }
    if (*bits > 64 || !*bits || (*bits & (*bits - 1))) {
        error_setg(errp, "Refcount width must be a power of two and may not "
                   "exceed 64 bits");
        return -1;
    }
    return 0;
}

static int qcow2_take_create_opts(BlockDriverState *file, GHashTable *opts,
                                  Qcow2CreateOpts *o, Error **errp)
{
    g_autofree char *ctype = NULL;
    uint64_t cluster_size, refcount_bits;
    bool has_size = g_hash_table_contains(opts, "size");
    bool unchecked = false;

    memset(o, 0, sizeof(*o));
    if (qemu_opt_take_bool(opts, "x-backing-unchecked", false, &unchecked,
                           errp) < 0) {
        return -1;
    }
    if (qemu_opt_take_size(opts, "size", 0, &o->size, errp) < 0 ||
        qcow2_take_compat(opts, &o->version, errp) < 0 ||
        qemu_opt_take_size(opts, "cluster_size",
                           1u << QCOW2_DEFAULT_CLUSTER_BITS, &cluster_size,
                           errp) < 0 ||
        qcow2_take_prealloc(opts, &o->prealloc, errp) < 0 ||
        qemu_opt_take_bool(opts, "lazy_refcounts", false, &o->lazy_refcounts,
                           errp) < 0 ||
        qcow2_opt_take_refcount_bits(opts, 16, &refcount_bits, errp) < 0 ||
        qemu_opt_take_bool(opts, "extended_l2", false, &o->extended_l2,
                           errp) < 0) {
        return -1;
    }
    if (qemu_opt_take_bool(opts, "data_file_raw", false, &o->data_file_raw,
                           errp) < 0) {
        return -1;
    }
    o->data_file = qemu_opt_take(opts, "data_file");
    o->backing_file = qemu_opt_take(opts, "backing_file");
    o->backing_fmt = qemu_opt_take(opts, "backing_fmt");
    ctype = qemu_opt_take(opts, "compression_type");
    if (cluster_size < 512 || cluster_size > (2u << 20) ||
        (cluster_size & (cluster_size - 1))) {
        error_setg(errp, "Cluster size must be a power of two between 512 "
                   "and 2048k");
        return -1;
    }
    o->cluster_bits = __builtin_ctzll(cluster_size);
    if (refcount_bits > 64 || !refcount_bits ||
        (refcount_bits & (refcount_bits - 1))) {
        error_setg(errp, "Refcount width must be a power of two and may not "
                   "exceed 64 bits");
        return -1;
    }
    o->refcount_order = __builtin_ctzll(refcount_bits);
    if (ctype && g_str_equal(ctype, "zstd")) {
        o->compression = QCOW2_COMPRESSION_ZSTD;
    } else if (ctype && !g_str_equal(ctype, "zlib")) {
        error_setg(errp, "Parameter 'compression-type' does not accept value "
                   "'%s'", ctype);
        return -1;
    }
    if (o->version < 3) {
        const char *what = NULL;

        if (refcount_bits != 16) {
            error_setg(errp, "Different refcount widths than 16 bits require "
                       "compatibility level 1.1 or above (use version=v3 or "
                       "greater)");
            return -1;
        }
        if (o->lazy_refcounts) {
            what = "Lazy refcounts only supported";
        } else if (o->compression != QCOW2_COMPRESSION_ZLIB) {
            what = "Non-zlib compression type is only supported";
        } else if (o->extended_l2) {
            what = "Extended L2 entries are only supported";
        }
        if (what) {
            error_setg(errp, "%s with compatibility level 1.1 and above (use "
                       "version=v3 or greater)", what);
            return -1;
        }
    }
    if (o->extended_l2 && o->cluster_bits < QCOW2_MIN_EXTL2_CLUSTER_BITS) {
        error_setg(errp, "Extended L2 entries are only supported with "
                   "cluster sizes of at least %u bytes",
                   1u << QCOW2_MIN_EXTL2_CLUSTER_BITS);
        return -1;
    }
    if (o->backing_file && o->prealloc != QCOW2_PREALLOC_OFF &&
        !o->extended_l2) {
        /* With extended_l2 the preallocated subclusters stay unallocated:
         * they read the backing file (qcow2_write_tables()). */
        error_setg(errp, "Backing file and preallocation can only be used "
                   "at the same time if extended_l2 is on");
        return -1;
    }
    if (qcow2_check_data_file(o, errp) < 0 ||
        qcow2_take_encrypt(opts, o, errp) < 0 ||
        qcow2_check_backing(file, o, has_size, unchecked, errp) < 0) {
        return -1;
    }
    if (!has_size && !o->backing_file) {
        error_setg(errp, "Image creation needs a size parameter");
        return -1;
    }
    o->size = ROUND_UP(o->size, BDRV_SECTOR_SIZE);
    return 0;
}

/* ---- Layout */

static uint64_t div_round_up(uint64_t n, uint64_t d)
{
    return n / d + !!(n % d);
}

static int qcow2_plan(const Qcow2CreateOpts *o, uint64_t luks_len,
                      Qcow2Layout *l, Error **errp)
{
    Qcow2Header h = {
        .cluster_bits = o->cluster_bits,
        .incompatible_features = o->extended_l2 ? QCOW2_INCOMPAT_EXTL2 : 0,
    };
    Qcow2Geometry g;
    uint64_t cs = 1ull << o->cluster_bits;
    uint64_t per_block = (cs * 8) >> o->refcount_order;
    uint64_t fixed;

    qcow2_geometry_init(&g, &h);
    memset(l, 0, sizeof(*l));
    l->cs = cs;
    l->l1_size = qcow2_l1_entries_needed(&g, o->size);
    if (l->l1_size * 8 > QCOW2_MAX_L1_BYTES) {
        error_setg(errp, "The image size is too large for file format 'qcow2' "
                   "(try using a larger cluster size)");
        return -1;
    }
    l->l1_clusters = div_round_up(l->l1_size * 8, cs);
    l->luks_len = luks_len;
    l->luks_clusters = div_round_up(luks_len, cs);
    if (o->prealloc != QCOW2_PREALLOC_OFF) {
        l->l2_tables = l->l1_size;
        l->mapped_clusters = div_round_up(o->size, cs);
        /* An external data file holds the data clusters: not counted here. */
        l->data_clusters = o->data_file ? 0 : l->mapped_clusters;
    }
    fixed = 1 + l->l1_clusters + l->luks_clusters + l->l2_tables +
            l->data_clusters;
    /*
     * The refcount table starts as QEMU's does, one cluster, and grows
     * only as far as the blocks that cover what is in the file now need
     * (themselves and the table included). Writers grow it when the
     * image fills (qcow2_grow_reftable(), doubling: a few times over a
     * whole image with small clusters). A table sized for the full image
     * up front spared those moves but made every later writer's refcount
     * growth differ from QEMU's: qemu-io's writes into our images never
     * reached the refcount-table growth that qemu-iotests 026 injects
     * errors into.
     */
    l->reftable_clusters = 1;
    for (;;) {
        uint64_t total = fixed + l->reftable_clusters + l->refblocks;
        uint64_t need = div_round_up(total, per_block);

        if (need * 8 > l->reftable_clusters * cs) {
            l->reftable_clusters = div_round_up(need * 8, cs);
            continue;
        }
        if (need == l->refblocks) {
            break;
        }
        l->refblocks = need;
    }
    if (l->reftable_clusters * cs > QCOW2_MAX_REFTABLE_BYTES) {
        error_setg(errp, "The image size is too large for file format 'qcow2' "
                   "(try using a larger cluster size)");
        return -1;
    }
    l->reftable_offset = cs;
    l->refblocks_offset = l->reftable_offset + l->reftable_clusters * cs;
    l->l1_offset = l->refblocks_offset + l->refblocks * cs;
    l->luks_offset = l->l1_offset + l->l1_clusters * cs;
    l->l2_offset = l->luks_offset + l->luks_clusters * cs;
    l->data_offset = l->l2_offset + l->l2_tables * cs;
    l->map_base = o->data_file ? 0 : l->data_offset;
    l->clusters = l->data_offset / cs + l->data_clusters;
    l->file_len = l->clusters * cs;
    if (l->l1_clusters && l->luks_offset == l->clusters * cs) {
        /* The L1 table last: the file ends with its last entry, as QEMU's. */
        l->file_len = l->l1_offset + l->l1_size * 8;
    }
    return 0;
}

/* ---- Writing */

/* What the file under the data gets (metadata: nothing). */
static PreallocMode qcow2_prealloc_mode(Qcow2Prealloc p)
{
    return p == QCOW2_PREALLOC_FALLOC ? PREALLOC_MODE_FALLOC :
           p == QCOW2_PREALLOC_FULL ? PREALLOC_MODE_FULL : PREALLOC_MODE_OFF;
}

/*
 * The external data file, new (a file already there is replaced, as
 * qemu-img truncates it), as long as the image: its virtual size without
 * preallocation, whole (sub)clusters with it, the
 * data preallocated for falloc and full. Unnamed until finished, as the
 * image file (bdrv_create_finish()).
 */
static BlockDriverState *qcow2_create_data_file(BlockDriverState *file,
                                                const Qcow2CreateOpts *o,
                                                int flags, Error **errp)
{
    /* QEMU's preallocate_co maps whole (sub)clusters, up to its end. */
    uint64_t unit = (1ull << o->cluster_bits) /
                    (o->extended_l2 ? QCOW2_SUBCLUSTERS_PER_CLUSTER : 1);
    uint64_t len = o->prealloc == QCOW2_PREALLOC_OFF ? o->size :
                   ROUND_UP(o->size, unit);
    BlockDriverState *data;

    data = bdrv_create_file(o->data_file, flags, file->interrupt, errp);
    if (!data) {
        return NULL;
    }
    if (bdrv_create_fit(data, len, qcow2_prealloc_mode(o->prealloc),
                        errp) < 0) {
        bdrv_close(data);
        return NULL;
    }
    return data;
}

typedef struct Qcow2CreateState {
    BlockDriverState *file;
    const Qcow2Layout *l;
} Qcow2CreateState;

static int qcow2_write_refcounts(BlockDriverState *file,
                                 const Qcow2CreateOpts *o,
                                 const Qcow2Layout *l, Error **errp)
{
    uint64_t per_block = (l->cs * 8) >> o->refcount_order;
    g_autofree uint8_t *table = g_malloc0(l->reftable_clusters * l->cs);
    g_autofree uint8_t *block = g_malloc(l->cs);

    for (uint64_t b = 0; b < l->refblocks; b++) {
        uint64_t first = b * per_block;

        memset(block, 0, l->cs);
        for (uint64_t i = 0; i < per_block && first + i < l->clusters; i++) {
            qcow2_refcount_block_set(block, i, o->refcount_order, 1);
        }
        if (bdrv_pwrite(file, l->refblocks_offset + b * l->cs, block,
                        l->cs, 0, errp) < 0) {
            return -1;
        }
        stq_be_p(table + b * 8, l->refblocks_offset + b * l->cs);
    }
    return bdrv_pwrite(file, l->reftable_offset, table,
                       l->reftable_clusters * l->cs, 0, errp);
}

/* L1 and, preallocated, L2 tables pointing at contiguous data. */
static int qcow2_write_tables(BlockDriverState *file,
                              const Qcow2CreateOpts *o, const Qcow2Layout *l,
                              Error **errp)
{
    size_t esize = o->extended_l2 ? 16 : 8;
    uint64_t per_l2 = l->cs / esize;
    g_autofree uint8_t *l1 = g_malloc0(MAX(l->l1_clusters, 1) * l->cs);
    g_autofree uint8_t *l2 = g_malloc(l->cs);
    uint64_t data = 0;

    for (uint64_t t = 0; t < l->l2_tables; t++) {
        memset(l2, 0, l->cs);
        for (uint64_t i = 0; i < per_l2 && data < l->mapped_clusters; i++) {
            stq_be_p(l2 + i * esize, (l->map_base + data * l->cs) |
                     QCOW2_OFLAG_COPIED);
            if (o->extended_l2 && !o->backing_file) {
                /* All 32 subclusters allocated. */
                stq_be_p(l2 + i * esize + 8, 0xffffffffull);
            }
            /* Over a backing file none are, as QEMU's: it shows through. */
            data++;
        }
        if (bdrv_pwrite(file, l->l2_offset + t * l->cs, l2, l->cs, 0,
                        errp) < 0) {
            return -1;
        }
        stq_be_p(l1 + t * 8, (l->l2_offset + t * l->cs) | QCOW2_OFLAG_COPIED);
    }
    if (!l->l1_clusters) {
        return 0;
    }
    /* Not past the file's end (file_len): the rest of the cluster reads 0. */
    return bdrv_pwrite(file, l->l1_offset, l1,
                       MIN(l->l1_clusters * l->cs,
                           l->file_len - l->l1_offset), 0, errp);
}

static int qcow2_luks_init(QCryptoBlock *block, uint64_t headerlen,
                           void *opaque, Error **errp)
{
    Qcow2CreateState *cs = opaque;

    /* The layout was planned for this length (payload offset). */
    if (headerlen != cs->l->luks_len) {
        error_setg(errp, "LUKS header of %" G_GUINT64_FORMAT " bytes, %"
                   G_GUINT64_FORMAT " planned", headerlen, cs->l->luks_len);
        return -1;
    }
    return 0;
}

static int qcow2_luks_write(QCryptoBlock *block, uint64_t offset,
                            const uint8_t *buf, size_t buflen, void *opaque,
                            Error **errp)
{
    Qcow2CreateState *cs = opaque;

    if (offset + buflen > cs->l->luks_len) {
        error_setg(errp, "LUKS header write outside its clusters");
        return -1;
    }
    return bdrv_pwrite(cs->file, cs->l->luks_offset + offset, buf,
                       buflen, 0, errp);
}

static int qcow2_write_image(BlockDriverState *file, const Qcow2CreateOpts *o,
                             const Qcow2Layout *l, QCryptoBlock **pblock,
                             Error **errp)
{
    Qcow2CreateState cs = { .file = file, .l = l };
    Qcow2Header h = {
        .version = o->version,
        .cluster_bits = o->cluster_bits,
        .size = o->size,
        .crypt_method = o->encrypt ? QCOW2_CRYPT_LUKS :
                        o->encrypt_aes ? QCOW2_CRYPT_AES : QCOW2_CRYPT_NONE,
        .l1_size = l->l1_size,
        .l1_table_offset = l->l1_size ? l->l1_offset : 0,
        .refcount_table_offset = l->reftable_offset,
        .refcount_table_clusters = l->reftable_clusters,
        .refcount_order = o->refcount_order,
        .header_length = o->version >= 3 ? QCOW2_V3_CREATE_HEADER_LEN :
                                           QCOW2_V2_HEADER_LEN,
        .compression_type = o->compression,
    };
    /* Room for the header, every extension and the names, however large. */
    size_t hlen = 2 * l->cs + QCOW2_MAX_BACKING_NAME +
                  QCOW2_MAX_EXT_STRING + 8;
    g_autofree uint8_t *hdr = g_malloc(hlen);
    size_t need;

    if (o->extended_l2) {
        h.incompatible_features |= QCOW2_INCOMPAT_EXTL2;
    }
    if (o->compression != QCOW2_COMPRESSION_ZLIB) {
        h.incompatible_features |= QCOW2_INCOMPAT_COMPRESSION;
    }
    if (o->lazy_refcounts) {
        h.compatible_features |= QCOW2_COMPAT_LAZY_REFCOUNTS;
    }
    if (o->data_file) {
        h.incompatible_features |= QCOW2_INCOMPAT_DATA_FILE;
    }
    if (o->data_file_raw) {
        h.autoclear_features |= QCOW2_AUTOCLEAR_DATA_FILE_RAW;
    }
    /* As QEMU, the feature name table is left out if it does not fit. */
    need = qcow2_header_build(&h, o->backing_file, o->backing_fmt,
                              o->data_file, l->luks_offset, l->luks_len,
                              true, NULL, hdr, hlen);
    if (need >= l->cs) {
        need = qcow2_header_build(&h, o->backing_file, o->backing_fmt,
                                  o->data_file, l->luks_offset, l->luks_len,
                                  false, NULL, hdr, hlen);
    }
    if (need > l->cs) {
        error_setg(errp, "The header, its extensions and the backing file "
                   "name do not fit in one %" G_GUINT64_FORMAT "-byte "
                   "cluster", l->cs);
        return -1;
    }
    /*
     * The file's full length first (a block device must hold it already):
     * then the tables, then the header.
     */
    if (bdrv_create_fit(file, l->file_len,
                        o->data_file ? PREALLOC_MODE_OFF :
                        qcow2_prealloc_mode(o->prealloc), errp) < 0 ||
        qcow2_write_refcounts(file, o, l, errp) < 0 ||
        qcow2_write_tables(file, o, l, errp) < 0) {
        return -1;
    }
    if (o->encrypt) {
        /* The LUKS header clusters read as zeroes past the header. */
        *pblock = qcrypto_block_create(&o->copts, qcow2_luks_init,
                                       qcow2_luks_write, &cs, errp);
        if (!*pblock) {
            return -1;
        }
    }
    return bdrv_pwrite(file, 0, hdr, l->cs, 0, errp);
}

int qcow2_create(BlockDriverState *file, GHashTable *opts, int flags,
                 BlockDriverState **pbs, Error **errp)
{
    Qcow2CreateOpts o;
    Qcow2Layout l;
    QCryptoBlock *block = NULL;
    BlockDriverState *data = NULL;
    uint64_t luks_len = 0;
    int ret = -1;

    if (qcow2_take_create_opts(file, opts, &o, errp) < 0 ||
        bdrv_create_check_leftovers(opts, errp) < 0) {
        goto out;
    }
    if (o.encrypt &&
        qcrypto_block_calculate_payload_offset(&o.copts, &luks_len,
                                               errp) < 0) {
        goto out;
    }
    if (qcow2_plan(&o, luks_len, &l, errp) < 0) {
        goto out;
    }
    if (o.data_file) {
        data = qcow2_create_data_file(file, &o, flags, errp);
        if (!data) {
            goto out;
        }
    }
    if (qcow2_write_image(file, &o, &l, &block, errp) < 0 ||
        bdrv_flush(file, errp) < 0) {
        qcrypto_block_free(block);
        bdrv_close(data);       /* never named: nothing is left */
        goto out;
    }
    ret = 0;
    if (!pbs) {
        /*
         * The caller names the image file alone: the data file is named
         * now, first (a kill in between leaves it without its image, as
         * a qemu-img killed there leaves it truncated).
         */
        qcrypto_block_free(block);
        if (data && bdrv_create_finish(data, errp) < 0) {
            ret = -1;
        }
        bdrv_close(data);
        goto out;
    }
    if (!block && !data) {
        /* Opened the usual way by the caller. */
        goto out;
    }
    /*
     * Hand over the image with the master key just made, or with its new
     * data file: its name is not there yet (until bdrv_create_finish()).
     */
    *pbs = bdrv_new_node(&bdrv_qcow2, file, BDRV_O_RDWR | flags);
    if (qcow2_open_created(*pbs, block ?
                           qcow2_crypto_new_luks(file, block, l.luks_offset,
                                                 l.luks_len) : NULL,
                           data, BDRV_O_RDWR | flags, errp) < 0) {
        /* qcow2_open_created undid the open; file stays the caller's. */
        bdrv_new_node_abandon(*pbs);
        *pbs = NULL;
        ret = -1;
    }
out:
    qcow2_create_opts_clear(&o);
    return ret;
}
