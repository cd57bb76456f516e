/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The "qcow2" format driver: the header and its extensions, open and
 * close (the backing file and the external data file are children),
 * options, the read path and "info". The cluster mapping is in
 * qcow2-cluster.c, the L2 cache in qcow2-cache.c, refcounts in
 * qcow2-refcount.c, compressed clusters in qcow2-compress.c, encryption
 * in qcow2-crypto.c, the write path in qcow2-write.c, creation in
 * qcow2-create.c, amend and resize in qcow2-amend.c, check in
 * qcow2-check.c. The layout is QEMU's
 * docs/interop/qcow2.txt ("the spec"); docs/qcow2.md says what is read
 * and what is refused.
 *
 * Every number in the header is attacker-controlled: it is checked before
 * it sizes an allocation or a read (qcow2_header_parse,
 * qcow2_validate_table), so a hostile image is refused at open with a
 * message, never allocated from.
 */
#include <string.h>
#include <sys/stat.h>

#include "block/crypto.h"
#include "block/qcow2.h"
#include "block/qcow2-bitmap.h"
#include "block/qcow2-measure.h"
#include "crypto/secret.h"

/*
 * Memory for L2 tables, per image: enough for the convert loop's threads
 * to each keep their tables (a 2 MiB-cluster table maps 512 GiB), and
 * small enough that the image size does not matter.
 */
#define QCOW2_L2_CACHE_BYTES (4 * 1024 * 1024)
/* Backing chains deeper than this are refused (each level is an open file). */
/* The LUKS header area of an encrypted image: far above the 2 MiB of a
 * LUKS1 header with 8 slots of 4000 stripes of 64-byte keys. */
#define QCOW2_MAX_CRYPTO_HEADER (16 * 1024 * 1024)
/* Extents one block status answer joins at most (see there). */
#define QCOW2_STATUS_MAX_EXTENTS 1024

int qcow2_probe(const uint8_t *buf, int len, const char *filename)
{
    if (len >= 8 && ldl_be_p(buf) == QCOW2_MAGIC) {
        uint32_t version = ldl_be_p(buf + 4);

        /* Any version claims the file: 1 (qcow) and others are refused
         * by name at open, never read as raw. */
        return version >= 2 ? 100 : 0;
    }
    return 0;
}

/* ---- Header */

static int qcow2_header_check_limits(const Qcow2Header *h, uint64_t file_size,
                                     Error **errp)
{
    uint64_t cluster_size = 1ull << h->cluster_bits;
    Qcow2Geometry g;

    qcow2_geometry_init(&g, h);
    if (h->size > INT64_MAX - cluster_size) {
        error_setg(errp, "Image size %" G_GUINT64_FORMAT " is too large",
                   h->size);
        return -1;
    }
    /* QEMU's words for both, which qemu-iotests 054 and 080 expect. */
    if (qcow2_l1_entries_needed(&g, h->size) > INT_MAX) {
        error_setg(errp, "Image is too big");
        return -1;
    }
    if (qcow2_l1_entries_needed(&g, h->size) > h->l1_size) {
        error_setg(errp, "L1 table is too small");
        return -1;
    }
    if (h->l1_size &&
        qcow2_validate_table(h->l1_table_offset, h->l1_size, sizeof(uint64_t),
                             QCOW2_MAX_L1_BYTES, cluster_size, file_size,
                             "Active L1 table", errp) < 0) {
        return -1;
    }
    if (h->refcount_table_clusters == 0) {
        error_setg(errp, "Image does not contain a reference count table");
        return -1;
    }
    if (qcow2_validate_table(h->refcount_table_offset,
                             (uint64_t)h->refcount_table_clusters *
                             (cluster_size / sizeof(uint64_t)),
                             sizeof(uint64_t), QCOW2_MAX_REFTABLE_BYTES,
                             cluster_size, file_size, "Reference count table",
                             errp) < 0) {
        return -1;
    }
    return 0;
}

int qcow2_header_check_snapshots(const Qcow2Header *h, Error **errp)
{
    /*
     * As QEMU, the table may lie past the end of the file (it reads as
     * zeroes there: qcow2_read_snapshots), not past what an offset holds;
     * more than 65536 entries are "Snapshot table too large".
     */
    if (h->nb_snapshots &&
        qcow2_validate_table(h->snapshots_offset, h->nb_snapshots,
                             QCOW2_SNAPSHOT_HEADER_LEN,
                             (uint64_t)QCOW2_MAX_SNAPSHOTS *
                             QCOW2_SNAPSHOT_HEADER_LEN,
                             1ull << h->cluster_bits, INT64_MAX,
                             "Snapshot table", errp) < 0) {
        return -1;
    }
    return 0;
}

static int qcow2_header_check_fields(const Qcow2Header *h, Error **errp)
{
    uint64_t cluster_size = 1ull << h->cluster_bits;

    if (h->refcount_order > 6) {
        error_setg(errp, "Reference count entry width too large; may not "
                   "exceed 64 bits");
        return -1;
    }
    if (h->crypt_method > QCOW2_CRYPT_LUKS) {
        error_setg(errp, "Unsupported encryption method: %" PRIu32,
                   h->crypt_method);
        return -1;
    }
    if (h->incompatible_features & QCOW2_INCOMPAT_COMPRESSION) {
        if (h->compression_type == QCOW2_COMPRESSION_ZLIB) {
            error_setg(errp, "qcow2 header: compression type bit is set, "
                       "but the compression type is zlib");
            return -1;
        }
    } else if (h->compression_type != QCOW2_COMPRESSION_ZLIB) {
        error_setg(errp, "qcow2 header: compression type bit is not set, "
                   "but the compression type is not zlib");
        return -1;
    }
    if (h->compression_type > QCOW2_COMPRESSION_ZSTD) {
        error_setg(errp, "qcow2 header: unknown compression type %u",
                   h->compression_type);
        return -1;
    }
    if ((h->incompatible_features & QCOW2_INCOMPAT_EXTL2) &&
        h->cluster_bits < QCOW2_MIN_EXTL2_CLUSTER_BITS) {
        error_setg(errp, "Extended L2 entries need clusters of at least "
                   "%u bytes", 1u << QCOW2_MIN_EXTL2_CLUSTER_BITS);
        return -1;
    }
    if (h->backing_file_offset) {
        if (h->backing_file_offset > cluster_size ||
            h->backing_file_size > MIN(QCOW2_MAX_BACKING_NAME,
                                       cluster_size - h->backing_file_offset)) {
            error_setg(errp, "Backing file name too long");
            return -1;
        }
        if (h->backing_file_offset < h->header_length) {
            error_setg(errp, "Backing file name overlaps the qcow2 header");
            return -1;
        }
    }
    return 0;
}

int qcow2_header_parse(const uint8_t *buf, size_t len, uint64_t file_size,
                       Qcow2Header *h, Error **errp)
{
    memset(h, 0, sizeof(*h));
    if (len < QCOW2_V2_HEADER_LEN || ldl_be_p(buf) != QCOW2_MAGIC) {
        error_setg(errp, "Image is not in qcow2 format");
        return -1;
    }
    h->version = ldl_be_p(buf + 4);
    if (h->version != 2 && h->version != 3) {
        error_setg(errp, "Unsupported qcow2 version %" PRIu32 " (qcow2 "
                   "versions 2 and 3 are read)", h->version);
        return -1;
    }
    h->backing_file_offset = ldq_be_p(buf + 8);
    h->backing_file_size = ldl_be_p(buf + 16);
    h->cluster_bits = ldl_be_p(buf + 20);
    h->size = ldq_be_p(buf + 24);
    h->crypt_method = ldl_be_p(buf + 32);
    h->l1_size = ldl_be_p(buf + 36);
    h->l1_table_offset = ldq_be_p(buf + 40);
    h->refcount_table_offset = ldq_be_p(buf + 48);
    h->refcount_table_clusters = ldl_be_p(buf + 56);
    h->nb_snapshots = ldl_be_p(buf + 60);
    h->snapshots_offset = ldq_be_p(buf + 64);

    if (h->cluster_bits < QCOW2_MIN_CLUSTER_BITS ||
        h->cluster_bits > QCOW2_MAX_CLUSTER_BITS) {
        error_setg(errp, "Unsupported cluster size: 2^%" PRIu32
                   " (512 bytes to 2 MiB are read)", h->cluster_bits);
        return -1;
    }

    if (h->version == 2) {
        /* The spec: version 2 is refcount order 4, header length 72. */
        h->refcount_order = 4;
        h->header_length = QCOW2_V2_HEADER_LEN;
    } else {
        if (len < QCOW2_V3_HEADER_LEN) {
            error_setg(errp, "qcow2 header too short");
            return -1;
        }
        h->incompatible_features = ldq_be_p(buf + 72);
        h->compatible_features = ldq_be_p(buf + 80);
        h->autoclear_features = ldq_be_p(buf + 88);
        h->refcount_order = ldl_be_p(buf + 96);
        h->header_length = ldl_be_p(buf + 100);
        if (h->header_length < QCOW2_V3_HEADER_LEN) {
            error_setg(errp, "qcow2 header too short");
            return -1;
        }
        if (h->header_length > (1u << h->cluster_bits) ||
            h->header_length > len) {
            error_setg(errp, "qcow2 header exceeds cluster size");
            return -1;
        }
        if (h->header_length > QCOW2_COMPRESSION_TYPE_OFFSET) {
            h->compression_type = buf[QCOW2_COMPRESSION_TYPE_OFFSET];
        }
    }
    if (qcow2_header_check_fields(h, errp) < 0) {
        return -1;
    }
    return qcow2_header_check_limits(h, file_size, errp);
}

int qcow2_validate_table(uint64_t offset, uint64_t entries, size_t entry_len,
                         uint64_t max_bytes, uint64_t cluster_size,
                         uint64_t file_size, const char *name, Error **errp)
{
    uint64_t bytes;

    if (entries > max_bytes / entry_len) {
        error_setg(errp, "%s too large", name);
        return -1;
    }
    bytes = entries * entry_len;
    if (offset % cluster_size) {
        error_setg(errp, "%s offset invalid (not cluster-aligned)", name);
        return -1;
    }
    if (offset > file_size || bytes > file_size - offset) {
        error_setg(errp, "%s (%" G_GUINT64_FORMAT " bytes at offset %"
                   G_GUINT64_FORMAT ") is beyond the end of the file (%"
                   G_GUINT64_FORMAT " bytes)", name, bytes, offset,
                   file_size);
        return -1;
    }
    return 0;
}

void qcow2_geometry_init(Qcow2Geometry *g, const Qcow2Header *h)
{
    memset(g, 0, sizeof(*g));
    g->cluster_bits = h->cluster_bits;
    g->cluster_size = 1ull << h->cluster_bits;
    g->extended_l2 = h->incompatible_features & QCOW2_INCOMPAT_EXTL2;
    g->l2_entry_size = g->extended_l2 ? 16 : 8;
    g->l2_bits = h->cluster_bits - (g->extended_l2 ? 4 : 3);
    g->l2_entries = 1ull << g->l2_bits;
    g->subcluster_bits = h->cluster_bits - (g->extended_l2 ? 5 : 0);
    g->subcluster_size = 1ull << g->subcluster_bits;
    g->csize_shift = 62 - (h->cluster_bits - 8);
    g->csize_mask = (1ull << (h->cluster_bits - 8)) - 1;
    g->coffset_mask = (1ull << g->csize_shift) - 1;
    g->has_data_file = h->incompatible_features & QCOW2_INCOMPAT_DATA_FILE;
}

uint64_t qcow2_l1_entries_needed(const Qcow2Geometry *g, uint64_t size)
{
    unsigned shift = g->cluster_bits + g->l2_bits;

    return (size >> shift) + !!(size & ((1ull << shift) - 1));
}

/* ---- Header extensions */

void qcow2_extensions_clear(Qcow2Extensions *ext)
{
    g_free(ext->backing_format);
    g_free(ext->data_file);
    if (ext->unknown) {
        g_byte_array_unref(ext->unknown);
    }
    for (int i = 0; i < 64; i++) {
        g_free(ext->incompat_names[i]);
    }
    memset(ext, 0, sizeof(*ext));
}

/*
 * A string extension: no NUL inside, at most max bytes. Given twice, the
 * last one counts, as in QEMU (qemu-iotests 114 adds a second backing
 * format and expects it to win).
 */
static int qcow2_ext_string(const uint8_t *data, uint32_t len, size_t max,
                            const char *what, char **out, Error **errp)
{
    g_clear_pointer(out, g_free);
    if (len > max || memchr(data, 0, len)) {
        error_setg(errp, "qcow2 header: invalid %s extension (%" PRIu32
                   " bytes)", what, len);
        return -1;
    }
    *out = g_strndup((const char *)data, len);
    return 0;
}

/*
 * Spec, "Feature name table": 48-byte entries, read as QEMU reads them:
 * a short last entry is padded with zeroes, the table ends at an entry
 * without a name, and the first name of a bit counts. Incompatible
 * features' names are kept in table order (the order of the message).
 */
static void qcow2_ext_feature_table(const uint8_t *data, uint32_t len,
                                    Qcow2Extensions *ext)
{
    for (uint32_t i = 0; i < len; i += 48) {
        uint8_t entry[48] = { 0 };
        uint8_t bit;

        memcpy(entry, data + i, MIN(48, len - i));
        if (!entry[2]) {
            break;
        }
        bit = entry[1];
        if (entry[0] == 0 && bit < 64 && !ext->incompat_names[bit]) {
            ext->incompat_names[bit] = g_strndup((const char *)entry + 2, 46);
            ext->incompat_order[ext->nb_incompat_order++] = bit;
        }
    }
}

static int qcow2_ext_crypto_header(const Qcow2Header *h, const uint8_t *data,
                                   uint32_t len, uint64_t file_size,
                                   Qcow2Extensions *ext, Error **errp)
{
    uint64_t cluster_size = 1ull << h->cluster_bits;

    if (h->crypt_method != QCOW2_CRYPT_LUKS) {
        error_setg(errp, "qcow2 header: a crypto header extension is only "
                   "expected with LUKS encryption");
        return -1;
    }
    if (len != 16 || ext->has_crypto_header) {
        error_setg(errp, "qcow2 header: invalid crypto header extension");
        return -1;
    }
    ext->has_crypto_header = true;
    ext->crypto_header_offset = ldq_be_p(data);
    ext->crypto_header_length = ldq_be_p(data + 8);
    if (ext->crypto_header_length == 0) {
        error_setg(errp, "qcow2 header: the crypto header is empty");
        return -1;
    }
    return qcow2_validate_table(ext->crypto_header_offset,
                                ext->crypto_header_length, 1,
                                QCOW2_MAX_CRYPTO_HEADER, cluster_size,
                                file_size, "Crypto header", errp);
}

static int qcow2_extensions_parse_inner(const Qcow2Header *h,
                                        const uint8_t *buf, size_t len,
                                        uint64_t file_size,
                                        Qcow2Extensions *ext, Error **errp)
{
    /* Extensions end where the backing file name starts, or the cluster. */
    uint64_t end = MIN(len, 1ull << h->cluster_bits);
    uint64_t off = h->header_length;

    if (h->backing_file_offset) {
        end = MIN(end, h->backing_file_offset);
    }
    while (off + 8 <= end) {
        uint32_t type = ldl_be_p(buf + off);
        uint32_t elen = ldl_be_p(buf + off + 4);
        const uint8_t *data = buf + off + 8;

        if (type == QCOW2_EXT_END) {
            break;
        }
        if (elen > end - off - 8) {
            error_setg(errp, "qcow2 header: extension 0x%08" PRIx32
                       " is too large (%" PRIu32 " bytes)", type, elen);
            return -1;
        }
        switch (type) {
        case QCOW2_EXT_BACKING_FORMAT:
            /* QEMU keeps the format name in 16 bytes. */
            if (qcow2_ext_string(data, elen, 15, "backing format",
                                 &ext->backing_format, errp) < 0) {
                return -1;
            }
            break;
        case QCOW2_EXT_DATA_FILE:
            if (qcow2_ext_string(data, elen, QCOW2_MAX_EXT_STRING,
                                 "data file name", &ext->data_file,
                                 errp) < 0) {
                return -1;
            }
            break;
        case QCOW2_EXT_FEATURE_TABLE:
            qcow2_ext_feature_table(data, elen, ext);
            break;
        case QCOW2_EXT_CRYPTO_HEADER:
            if (qcow2_ext_crypto_header(h, data, elen, file_size, ext,
                                        errp) < 0) {
                return -1;
            }
            break;
        case QCOW2_EXT_BITMAPS:
            /* Read for info and measure only (block/qcow2-bitmap.c). */
            if (elen >= 24 && (h->autoclear_features &
                               QCOW2_AUTOCLEAR_BITMAPS)) {
                ext->nb_bitmaps = ldl_be_p(data);
                ext->bitmap_directory_size = ldq_be_p(data + 8);
                ext->bitmap_directory_offset = ldq_be_p(data + 16);
            }
            break;
        default:
            /* The spec: ignored, and kept when the header is rewritten. */
            if (!ext->unknown) {
                ext->unknown = g_byte_array_new();
            }
            g_byte_array_append(ext->unknown, buf + off,
                                8 + MIN(ROUND_UP((uint64_t)elen, 8),
                                        end - off - 8));
            /* (a last one whose padding the cluster cuts: padded here) */
            while (ext->unknown->len % 8) {
                g_byte_array_append(ext->unknown, (const uint8_t *)"", 1);
            }
            break;
        }
        off += 8 + ROUND_UP((uint64_t)elen, 8);
    }
    if (h->crypt_method == QCOW2_CRYPT_LUKS && !ext->has_crypto_header) {
        error_setg(errp, "qcow2 header: LUKS encryption without a crypto "
                   "header extension");
        return -1;
    }
    return 0;
}

int qcow2_extensions_parse(const Qcow2Header *h, const uint8_t *buf,
                           size_t len, uint64_t file_size,
                           Qcow2Extensions *ext, Error **errp)
{
    memset(ext, 0, sizeof(*ext));
    if (qcow2_extensions_parse_inner(h, buf, len, file_size, ext, errp) < 0) {
        qcow2_extensions_clear(ext);
        return -1;
    }
    return 0;
}

/* Unknown incompatible features: refuse, naming them as the image does. */
static int qcow2_check_features(const Qcow2Header *h,
                                const Qcow2Extensions *ext, Error **errp)
{
    uint64_t unknown = h->incompatible_features & ~QCOW2_INCOMPAT_KNOWN;
    g_autoptr(GString) names = NULL;

    if (unknown) {
        /* Named ones in table order, then the rest as one mask (QEMU). */
        names = g_string_new(NULL);
        for (int i = 0; i < ext->nb_incompat_order; i++) {
            uint64_t bit = 1ull << ext->incompat_order[i];

            if (unknown & bit) {
                g_string_append_printf(names, "%s%s", names->len ? ", " : "",
                                       ext->incompat_names[
                                           ext->incompat_order[i]]);
                unknown &= ~bit;
            }
        }
        if (unknown) {
            g_string_append_printf(names, "%sUnknown incompatible feature: "
                                   "%" PRIx64, names->len ? ", " : "",
                                   unknown);
        }
        error_setg(errp, "Unsupported qcow2 feature(s): %s", names->str);
        return -1;
    }
    if ((h->autoclear_features & QCOW2_AUTOCLEAR_DATA_FILE_RAW) &&
        !(h->incompatible_features & QCOW2_INCOMPAT_DATA_FILE)) {
        error_setg(errp, "data-file-raw requires a data file");
        return -1;
    }
    return 0;
}

/* ---- Open */

/*
 * The backing file's name as opened: absolute names and json:{...} as
 * they are, others relative to the directory of the image that names
 * them (QEMU's bdrv_get_full_backing_filename), as its protocol says.
 */
static char *qcow2_full_backing_name(BlockDriverState *bs,
                                     const char *backing, Error **errp)
{
    g_autofree char *dir = NULL;

    if (bdrv_backing_name_is_absolute(backing)) {
        return g_strdup(backing);
    }
    dir = bdrv_dirname(bs, errp);
    return dir ? g_strconcat(dir, backing, NULL) : NULL;
}

static int qcow2_read_backing_name(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    const Qcow2Header *h = &s->header;
    g_autofree char *name = NULL;

    if (!h->backing_file_offset) {
        return 0;
    }
    name = g_malloc0(h->backing_file_size + 1);
    if (bdrv_pread(bs->file, h->backing_file_offset, name,
                   h->backing_file_size, errp) < 0) {
        return -1;
    }
    if (strlen(name) != h->backing_file_size || !*name) {
        error_setg(errp, "qcow2 header: invalid backing file name");
        return -1;
    }
    /*
     * Protocol URLs are QEMU's, not ours to follow; json:{...} options
     * are opened as on the command line (qemu-iotests 020), if they name
     * local nodes only: an image must not make the tool connect anywhere.
     */
    if (strstr(name, "://") && !g_path_is_absolute(name)) {
        error_setg(errp, "Backing file '%s' is not a local file name", name);
        return -1;
    }
    if (g_str_has_prefix(name, "json:") &&
        !bdrv_json_name_is_local(name, errp)) {
        return -1;
    }
    s->backing_file = g_steal_pointer(&name);
    /*
     * A relative name over a node with no directory (quorum's files need
     * not share one) has no full name: "info" says so, as qemu-img does
     * ("cannot determine actual path"), and only opening the backing
     * file fails (qcow2_open_backing()).
     */
    s->full_backing_filename =
        qcow2_full_backing_name(bs, s->backing_file, NULL);
    return 0;
}

static int qcow2_open_backing(BlockDriverState *bs, GHashTable *opts,
                              int flags, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    g_autoptr(GHashTable) bopts = qemu_opts_extract_prefix(opts, "backing");
    const char *fmt = s->ext.backing_format;
    Error *local_err = NULL;

    if (!s->backing_file || (flags & BDRV_O_NO_BACKING)) {
        return 0;
    }
    if (fmt && !g_str_equal(fmt, "raw") && !g_str_equal(fmt, "qcow2")) {
        error_setg(errp, "Backing file '%s' has format '%s'; qemu-img-lite "
                   "reads raw and qcow2 backing files", s->backing_file, fmt);
        return -1;
    }
    if (!s->full_backing_filename) {
        g_autofree char *full = qcow2_full_backing_name(bs, s->backing_file,
                                                        &local_err);

        error_prepend(&local_err, "Could not open backing file '%s': ",
                      s->backing_file);
        error_propagate(errp, local_err);
        return -1;
    }
    if (bdrv_open_backing(bs, s->full_backing_filename, fmt, bopts, flags,
                          &local_err) < 0) {
        error_prepend(&local_err, "Could not open backing file '%s': ",
                      s->full_backing_filename);
        error_propagate(errp, local_err);
        return -1;
    }
    return 0;
}

static int qcow2_open_data_file(BlockDriverState *bs, GHashTable *opts,
                                int flags, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    bool external = s->header.incompatible_features & QCOW2_INCOMPAT_DATA_FILE;

    if (s->data_file) {
        /* The new data file create made (qcow2_open_created()). */
        g_assert(external);
        return 0;
    }
    if (bdrv_opts_has_child(opts, "data-file")) {
        if (!external) {
            error_setg(errp, "'data-file' can only be set for images with "
                       "an external data file");
            return -1;
        }
        s->data_file = bdrv_open_child(opts, "data-file", flags, false, errp);
    } else if (external) {
        if (!s->ext.data_file) {
            error_setg(errp, "'data-file' is required for this image");
            return -1;
        }
        /*
         * As QEMU 7.2: the name is opened as given (from the cwd). A file,
         * never another protocol: a name in an image must not make the
         * tool connect anywhere (QEMU 7.2 follows "nbd://" or "blkdebug::"
         * prefixes there; later QEMUs do not, CVE-2024-4467).
         */
        s->data_file = bdrv_open(s->ext.data_file, "file", NULL, flags, errp);
    } else {
        s->data_file = bs->file;
        return 0;
    }
    if (!s->data_file) {
        /* As QEMU: the data file's own words ("Could not open 'F': ..."). */
        return -1;
    }
    bdrv_attach_child(bs, s->data_file, "data-file", BDRV_CHILD_DATA);
    return 0;
}

static int qcow2_load_l1(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    /* Only the entries the virtual size needs: the rest map nothing. */
    s->l1_size = qcow2_l1_entries_needed(&s->g, s->header.size);
    if (!s->l1_size) {
        return 0;
    }
    s->l1_table = g_new(uint64_t, s->l1_size);
    if (bdrv_pread(bs->file, s->header.l1_table_offset,
                   s->l1_table, s->l1_size * sizeof(uint64_t),
                   errp) < 0) {
        return -1;
    }
    for (uint64_t i = 0; i < s->l1_size; i++) {
        s->l1_table[i] = GUINT64_FROM_BE(s->l1_table[i]);
    }
    return 0;
}

/* Read the first cluster and parse the header and its extensions. */
static int qcow2_read_header(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint8_t first[QCOW2_V3_HEADER_LEN] = { 0 };
    g_autofree uint8_t *cluster = NULL;
    uint32_t cluster_bits;
    size_t n;

    n = MIN(s->file_size, sizeof(first));
    if (bdrv_pread(bs->file, 0, first, n, errp) < 0) {
        return -1;
    }
    cluster_bits = n >= 24 ? ldl_be_p(first + 20) : 0;
    if (cluster_bits < QCOW2_MIN_CLUSTER_BITS ||
        cluster_bits > QCOW2_MAX_CLUSTER_BITS) {
        /* Fails, saying what is wrong (magic, version, cluster size). */
        return qcow2_header_parse(first, n, s->file_size, &s->header, errp);
    }
    n = 1u << cluster_bits;
    cluster = g_malloc0(n);
    if (bdrv_pread(bs->file, 0, cluster,
                   MIN(n, s->file_size), errp) < 0) {
        return -1;
    }
    if (qcow2_header_parse(cluster, n, s->file_size, &s->header, errp) < 0 ||
        qcow2_extensions_parse(&s->header, cluster, n, s->file_size, &s->ext,
                               errp) < 0) {
        return -1;
    }
    return qcow2_check_features(&s->header, &s->ext, errp);
}

static int qcow2_open_crypto(BlockDriverState *bs, GHashTable *opts,
                             int flags, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    g_autofree char *format = qemu_opt_take(opts, "encrypt.format");
    static const char *const names[] = { NULL, "aes", "luks" };
    QCryptoBlockSecret secret = { 0 };
    bool no_io = flags & BDRV_O_NO_IO;
    int ret;

    if (s->crypto) {
        /* Made by create, with the key it made (qcow2_open_created). */
        return 0;
    }
    if (s->header.crypt_method == QCOW2_CRYPT_NONE) {
        /*
         * As QEMU: a format is an error, a secret is taken and unused
         * (one --image-opts spec serves a plain copy and an encrypted
         * one: qemu-iotests 188).
         */
        if (format) {
            error_setg(errp, "No encryption in image header, but options "
                       "specified format '%s'", format);
            return -1;
        }
        g_free(qemu_opt_take(opts, "encrypt.key-secret"));
        return 0;
    }
    if (format && !g_str_equal(format, names[s->header.crypt_method])) {
        error_setg(errp, "Header reported 'encrypt.format=%s' encryption, "
                   "but 'encrypt.format=%s' was given",
                   names[s->header.crypt_method], format);
        return -1;
    }
    if (block_crypto_take_secret(opts, "encrypt.key-secret", !no_io, NULL,
                                 &secret, errp) < 0) {
        return -1;
    }
    s->crypto = qcow2_crypto_open(bs, &s->header, &s->ext, &secret, no_io,
                                  errp);
    ret = s->crypto ? 0 : -1;
    /* Encrypted data is decrypted in whole 512-byte sectors. */
    bs->request_alignment = BDRV_SECTOR_SIZE;
    qcrypto_secret_value_free((uint8_t *)secret.data, secret.len);
    /* Said when the data is read (not by "info", which reads none). */
    if (ret == 0 && s->header.crypt_method == QCOW2_CRYPT_AES && !no_io) {
        s->warning = g_strdup("The qcow2 AES encryption format is weak and "
                              "deprecated: convert the image to LUKS");
    }
    return ret;
}

static void qcow2_close(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    /*
     * bdrv_close() flushed already; if that failed, the image is left
     * marked dirty (lazy refcounts) for check -r to repair, as is a
     * broken one (whose refcounts in memory are not the file's).
     */
    qcow2_bitmaps_close(bs);
    if (!s->broken && qcow2_flush_metadata(bs, NULL) == 0 && s->dirty) {
        /* Every refcount was written before its cluster was used. */
        qcow2_mark_dirty(bs, false, NULL);
    }
    qcow2_crypto_free(s->crypto);
    qcow2_cache_free(s->l2_cache);
    g_free(s->l1_table);
    g_free(s->backing_file);
    g_free(s->full_backing_filename);
    g_free(s->warning);
    qcow2_extensions_clear(&s->ext);
    g_free(s->reftable);
    g_free(s->rb.block);
    g_free(s->l2p.table);
    if (s->l2_reserved) {
        g_array_unref(s->l2_reserved);
    }
    qcow2_snapshots_free(s->snapshots, s->header.nb_snapshots);
    g_mutex_clear(&s->lock);
    g_mutex_clear(&s->alloc_lock);
    /* The block layer closes bs->backing. */
}

/* What the write path (qcow2-write.c) does not change: refuse it. */
static int qcow2_open_writable(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    const Qcow2Header *h = &s->header;
    const char *why = NULL;

    if (h->crypt_method == QCOW2_CRYPT_AES) {
        why = "it uses the legacy AES encryption";
    } else if (h->incompatible_features & QCOW2_INCOMPAT_CORRUPT) {
        why = "it is marked corrupt (run 'qemu-img check -r all')";
    } else if (h->incompatible_features & QCOW2_INCOMPAT_DIRTY) {
        why = "its dirty bit is set: its refcounts may be stale (run "
              "'qemu-img check -r all')";
    } else if (h->autoclear_features & ~QCOW2_AUTOCLEAR_KNOWN) {
        why = "it has autoclear features qemu-img-lite does not know";
    }
    if (why) {
        error_setg(errp, "qcow2 image '%s' cannot be written by "
                   "qemu-img-lite: %s", bdrv_get_filename(bs->file), why);
        return -1;
    }
    s->next_free = ROUND_UP(s->file_size, s->g.cluster_size);
    if (qcow2_refcount_init(bs, errp) < 0) {
        return -1;
    }
    /* Writes keep the enabled bitmaps up to date (qcow2-bitmap.c). */
    return qcow2_bitmaps_open_rw(bs, errp);
}

/*
 * Spec, autoclear features: a program that writes an image without
 * knowing such a bit clears it (what it guards may no longer hold). QEMU
 * does so at every writable open, check -r's included (qemu-iotests 036).
 */
static int qcow2_clear_unknown_autoclear(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t known = s->header.autoclear_features & QCOW2_AUTOCLEAR_KNOWN;
    uint8_t be[8];

    if (s->header.version < 3 || known == s->header.autoclear_features) {
        return 0;
    }
    stq_be_p(be, known);
    if (bdrv_pwrite(bs->file, 88, be, sizeof(be), 0, errp) < 0 ||
        bdrv_flush(bs->file, errp) < 0) {
        return -1;
    }
    s->header.autoclear_features = known;
    return 0;
}

static int qcow2_open_image(BlockDriverState *bs, GHashTable *opts, int flags,
                            Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t len;

    len = bdrv_getlength_exact(bs->file, errp);
    if (len < 0) {
        return -1;
    }
    s->file_size = len;
    if (qcow2_read_header(bs, errp) < 0) {
        return -1;
    }
    qcow2_geometry_init(&s->g, &s->header);
    s->l2_cache = qcow2_cache_new(s->g.cluster_size, QCOW2_L2_CACHE_BYTES);
    if (qcow2_load_l1(bs, errp) < 0 ||
        qcow2_read_backing_name(bs, errp) < 0 ||
        qcow2_open_data_file(bs, opts, flags, errp) < 0 ||
        qcow2_open_crypto(bs, opts, flags, errp) < 0 ||
        qcow2_open_backing(bs, opts, flags, errp) < 0) {
        return -1;
    }
    /* "check" reads (and reports on) the snapshot table itself. */
    if (!(flags & BDRV_O_CHECK) && qcow2_read_snapshots(bs, errp) < 0) {
        return -1;
    }
    if ((flags & BDRV_O_RDWR) && qcow2_clear_unknown_autoclear(bs, errp) < 0) {
        return -1;
    }
    /*
     * "check -r" writes through qcow2-check.c alone, and must open the
     * dirty and corrupt images the write path refuses.
     */
    if ((flags & BDRV_O_RDWR) && !(flags & BDRV_O_CHECK)) {
        return qcow2_open_writable(bs, errp);
    }
    return 0;
}

static int qcow2_open(BlockDriverState *bs, GHashTable *opts, int flags,
                      Error **errp)
{
    int ret;

    g_mutex_init(&((BDRVQcow2State *)bs->opaque)->lock);
    g_mutex_init(&((BDRVQcow2State *)bs->opaque)->alloc_lock);
    ret = qcow2_open_image(bs, opts, flags, errp);
    if (ret < 0) {
        /* A failed open is not closed: its children are, by the caller. */
        qcow2_close(bs);
    }
    return ret;
}

int qcow2_open_created(BlockDriverState *bs, Qcow2Crypto *crypto,
                       BlockDriverState *data_file, int flags, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    g_autoptr(GHashTable) opts = qemu_opts_new();

    s->crypto = crypto;
    if (data_file) {
        /* A child now: closed with bs, or by bdrv_new_node_abandon(). */
        s->data_file = bdrv_attach_child(bs, data_file, "data-file",
                                         BDRV_CHILD_DATA);
    }
    return qcow2_open(bs, opts, flags, errp);
}

/*
 * A new image with a new external data file: the data file is named
 * first, so that a kill before the image file is named never leaves a
 * new image naming the data file it replaced (bdrv_create_finish()).
 */
static int qcow2_create_finish(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    if (!s->data_file || s->data_file == bs->file) {
        return 0;
    }
    return bdrv_create_finish(s->data_file, errp);
}

static int qcow2_flush(BlockDriverState *bs, Error **errp)
{
    /* (The block layer then flushes bs->file to the disk.) */
    return qcow2_check_usable(bs, errp) < 0 ? -1
                                            : qcow2_flush_metadata(bs, errp);
}

/* Unallocated clusters read as zeroes, and no preallocated encrypted data. */
static bool qcow2_has_zero_init(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    if (bs->backing) {
        return false;
    }
    for (uint64_t i = 0; s->crypto && i < s->l1_size; i++) {
        if (s->l1_table[i]) {
            return false;
        }
    }
    return true;
}

/* ---- Reads */

/* The image file alone: qemu-img 7.2 leaves an external data file out. */
static int64_t qcow2_get_allocated_file_size(BlockDriverState *bs)
{
    return bdrv_get_allocated_file_size(bs->file);
}

static int64_t qcow2_getlength(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    return s->header.size;
}

/* Unallocated: the backing file's bytes, zeroes past its end or without. */
static int qcow2_read_backing(BlockDriverState *bs, uint64_t offset,
                              uint8_t *buf, uint64_t bytes, Error **errp)
{
    BlockDriverState *backing = bs->backing;
    int64_t blen;
    uint64_t n = 0;

    if (backing) {
        blen = bdrv_getlength_exact(backing, errp);
        if (blen < 0) {
            return -1;
        }
        if (offset < (uint64_t)blen) {
            n = MIN(bytes, (uint64_t)blen - offset);
            if (bdrv_pread(backing, offset, buf, n, errp) < 0) {
                return -1;
            }
        }
    }
    memset(buf + n, 0, bytes - n);
    return 0;
}

static int qcow2_read_compressed(BlockDriverState *bs, const Qcow2Extent *ext,
                                 uint64_t offset, uint8_t *buf, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t coffset, clen;
    uint64_t in_cluster = offset & (s->g.cluster_size - 1);
    /* A whole cluster is wanted (convert's case): no bounce buffer. */
    bool whole = in_cluster == 0 && ext->bytes == s->g.cluster_size;
    g_autofree uint8_t *in = NULL;
    g_autofree uint8_t *bounce = NULL;
    uint8_t *out = buf;

    qcow2_compressed_extent(&s->g, ext->l2_entry, &coffset, &clen);
    /* clen is bounded by the descriptor: at most 2 clusters (spec). */
    in = g_malloc(clen);
    if (!whole) {
        out = bounce = g_malloc(s->g.cluster_size);
    }
    if (bdrv_pread(bs->file, coffset, in, clen, errp) < 0) {
        return -1;
    }
    if (qcow2_decompress(s->header.compression_type, in, clen, out,
                         s->g.cluster_size, errp) < 0) {
        error_prepend(errp, "Compressed cluster at guest offset %"
                      G_GUINT64_FORMAT ": ", offset - in_cluster);
        return -1;
    }
    if (!whole) {
        memcpy(buf, bounce + in_cluster, ext->bytes);
    }
    return 0;
}

/* One extent's bytes into buf. */
static int qcow2_read_extent(BlockDriverState *bs, const Qcow2Extent *ext,
                             uint64_t offset, uint8_t *buf, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    switch (ext->type) {
    case QCOW2_SC_UNALLOCATED:
        return qcow2_read_backing(bs, offset, buf, ext->bytes, errp);
    case QCOW2_SC_ZERO:
        memset(buf, 0, ext->bytes);
        return 0;
    case QCOW2_SC_COMPRESSED:
        return qcow2_read_compressed(bs, ext, offset, buf, errp);
    case QCOW2_SC_NORMAL:
        bdrv_debug_event(s->data_file, "read_aio");
        if (bdrv_pread(s->data_file, ext->host_offset, buf,
                       ext->bytes, errp) < 0) {
            return -1;
        }
        if (s->crypto) {
            return qcow2_crypto_decrypt(s->crypto, ext->host_offset, offset,
                                        buf, ext->bytes, errp);
        }
        return 0;
    }
    g_assert_not_reached();
}

/* Also the write path's COW reads (qcow2-write.c). */
int qcow2_read_mapped(BlockDriverState *bs, uint64_t offset, uint8_t *buf,
                      uint64_t bytes, Error **errp)
{
    while (bytes) {
        Qcow2Extent ext;

        if (qcow2_get_extent(bs, offset, bytes, &ext, errp) < 0 ||
            qcow2_read_extent(bs, &ext, offset, buf, errp) < 0) {
            return -1;
        }
        offset += ext.bytes;
        buf += ext.bytes;
        bytes -= ext.bytes;
    }
    return 0;
}

/* Encrypted images: whole sectors only (bs->request_alignment). */
static int qcow2_pread(BlockDriverState *bs, uint64_t offset, void *buf,
                       size_t bytes, Error **errp)
{
    if (qcow2_check_usable(bs, errp) < 0) {
        return -1;
    }
    return qcow2_read_mapped(bs, offset, buf, bytes, errp);
}

/* Whether the first extent at offset may hold data; *pnum its length. */
static bool qcow2_extent_is_data(BlockDriverState *bs, uint64_t offset,
                                 uint64_t bytes, uint64_t *pnum)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2Extent ext;
    int64_t blen;

    if (qcow2_get_extent(bs, offset, bytes, &ext, NULL) < 0) {
        /* Let the read report what is wrong. */
        *pnum = bytes;
        return true;
    }
    *pnum = ext.bytes;
    switch (ext.type) {
    case QCOW2_SC_ZERO:
        return false;
    case QCOW2_SC_UNALLOCATED:
        if (!bs->backing) {
            return false;
        }
        blen = bdrv_getlength_exact(bs->backing, NULL);
        if (blen < 0) {
            return true;
        }
        if (offset >= (uint64_t)blen) {
            return false;
        }
        return bdrv_block_status_is_data(bs->backing, offset,
                                         MIN(ext.bytes, blen - offset), pnum);
    case QCOW2_SC_NORMAL:
        /*
         * As QEMU: allocated clusters that are a hole in the file read as
         * zeroes (preallocation=metadata, the zeroes qemu-img writes as
         * holes around a partial write). Not when encrypted: a hole
         * decrypts to noise.
         */
        if (s->crypto) {
            return true;
        }
        return bdrv_block_status_is_data(s->data_file, ext.host_offset,
                                         ext.bytes, pnum);
    default:
        return true;
    }
}

/*
 * The block layer wants whole runs: extents that answer alike are joined
 * (a zero cluster next to unallocated ones, holes across L2 tables), up to
 * a bound that keeps one call cheap whatever the image holds.
 */
static bool qcow2_block_status_is_data(BlockDriverState *bs, uint64_t offset,
                                       uint64_t bytes, uint64_t *pnum)
{
    bool data = qcow2_extent_is_data(bs, offset, bytes, pnum);
    uint64_t done = *pnum, n;

    for (int i = 0; i < QCOW2_STATUS_MAX_EXTENTS && done < bytes; i++) {
        if (qcow2_extent_is_data(bs, offset + done, bytes - done, &n) !=
            data) {
            break;
        }
        done += n;
    }
    *pnum = done;
    return data;
}

/*
 * QEMU's qcow2_detect_metadata_preallocation: clearly more clusters in
 * use (refcount not 0) than the file has blocks on disk means clusters
 * were given to data that was never written (preallocation=metadata),
 * holes in the file that read as zeroes. Stops at the threshold.
 */
static bool qcow2_detect_metadata_prealloc(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;
    int64_t file_len = bdrv_getlength(bs->file, NULL);
    int64_t on_disk = bdrv_get_allocated_file_size(bs->file);
    uint64_t real_clusters, threshold, end, used = 0, refcount;

    if (file_len < 0 || on_disk < 0) {
        return false;
    }
    real_clusters = on_disk / s->g.cluster_size;
    threshold = MAX(real_clusters * 10 / 9, real_clusters + 2);
    end = ROUND_UP((uint64_t)file_len, s->g.cluster_size) >>
          s->g.cluster_bits;
    for (uint64_t i = 0; i < end && used < threshold; i++) {
        if (qcow2_get_refcount(bs, i << s->g.cluster_bits, &refcount,
                               NULL) < 0) {
            return false;
        }
        used += refcount != 0;
    }
    return used >= threshold;
}

/*
 * QEMU's qcow2_co_block_status: what the L2 entries say. Host offsets are
 * given where the run has host clusters, unless encrypted (the bytes
 * there are not the guest's); compressed data has none.
 */
static int qcow2_block_status(BlockDriverState *bs, uint64_t offset,
                              uint64_t bytes, uint64_t *pnum, uint64_t *map,
                              BlockDriverState **file, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2Extent ext;
    int ret = 0;

    if (qcow2_get_extent(bs, offset, bytes, &ext, errp) < 0) {
        return -1;
    }
    *pnum = ext.bytes;
    if (qcow2_extent_has_host(ext.type, ext.l2_entry) && !s->crypto) {
        *map = ext.host_offset;
        *file = s->data_file;
        ret |= BDRV_BLOCK_OFFSET_VALID;
    }
    if (ext.type == QCOW2_SC_ZERO) {
        ret |= BDRV_BLOCK_ZERO;
    } else if (ext.type != QCOW2_SC_UNALLOCATED) {
        ret |= BDRV_BLOCK_DATA;
    }
    /* Asked from one thread ("map"): no lock around the check. */
    if (!s->prealloc_checked) {
        s->metadata_prealloc = qcow2_detect_metadata_prealloc(bs);
        s->prealloc_checked = true;
    }
    if (s->metadata_prealloc && (ret & BDRV_BLOCK_DATA) &&
        (ret & BDRV_BLOCK_OFFSET_VALID)) {
        ret |= BDRV_BLOCK_RECURSE;
    }
    return ret;
}

static bool qcow2_is_encrypted(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    return s->header.crypt_method != QCOW2_CRYPT_NONE;
}

static const char *qcow2_get_warning(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    return s->warning;
}

static int qcow2_get_info(BlockDriverState *bs, BlockImageInfo *info,
                          Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    const Qcow2Header *h = &s->header;
    BlockImageInfoQcow2 *q = g_new0(BlockImageInfoQcow2, 1);
    static const char *const compression_names[] = { "zlib", "zstd" };
    static const char *const crypt_names[] = { NULL, "aes", "luks" };

    info->qcow2 = q;
    info->cluster_size = s->g.cluster_size;
    info->dirty_flag = h->incompatible_features & QCOW2_INCOMPAT_DIRTY;
    info->backing_filename = g_strdup(s->backing_file);
    info->full_backing_filename = g_strdup(s->full_backing_filename);
    info->backing_filename_format = g_strdup(s->ext.backing_format);

    q->version = h->version;
    q->compression_type = compression_names[h->compression_type];
    q->lazy_refcounts = h->compatible_features & QCOW2_COMPAT_LAZY_REFCOUNTS;
    q->refcount_bits = 1u << h->refcount_order;
    q->corrupt = h->incompatible_features & QCOW2_INCOMPAT_CORRUPT;
    q->extended_l2 = s->g.extended_l2;
    if (h->incompatible_features & QCOW2_INCOMPAT_DATA_FILE) {
        q->has_data_file = true;
        q->data_file = g_strdup(s->ext.data_file);
        q->data_file_raw =
            h->autoclear_features & QCOW2_AUTOCLEAR_DATA_FILE_RAW;
    }
    if (qcow2_read_bitmaps(bs, &q->bitmaps, &q->nb_bitmaps, errp) < 0) {
        return -1;
    }
    q->encrypt_format = crypt_names[h->crypt_method];
    if (h->crypt_method == QCOW2_CRYPT_LUKS) {
        q->encrypt_luks = qcow2_crypto_get_info(s->crypto, errp);
        if (!q->encrypt_luks) {
            return -1;
        }
    }
    return 0;
}

/*
 * ---- Writes: refused by a broken node (qcow2-empty.c); the enabled
 * bitmaps' bits set first (qcow2-bitmap.c)
 */

static int qcow2_before_write(BlockDriverState *bs, uint64_t offset,
                              uint64_t bytes, Error **errp)
{
    return qcow2_check_usable(bs, errp) < 0 ||
           qcow2_bitmaps_before_write(bs, offset, bytes, errp) < 0 ? -1 : 0;
}

static int qcow2_pwrite_tracked(BlockDriverState *bs, uint64_t offset,
                                const void *buf, size_t bytes, int flags,
                                Error **errp)
{
    if (qcow2_before_write(bs, offset, bytes, errp) < 0) {
        return -1;
    }
    return qcow2_pwrite(bs, offset, buf, bytes, flags, errp);
}

static int qcow2_pwrite_zeroes_tracked(BlockDriverState *bs, uint64_t offset,
                                       size_t bytes, int flags, Error **errp)
{
    if (qcow2_before_write(bs, offset, bytes, errp) < 0) {
        return -1;
    }
    return qcow2_pwrite_zeroes(bs, offset, bytes, flags, errp);
}

/* (Compressing writes nothing: the checks come with the store.) */
static int qcow2_store_compressed_tracked(BlockDriverState *bs,
                                          const BdrvCompressed *c,
                                          Error **errp)
{
    if (qcow2_before_write(bs, c->offset, c->bytes, errp) < 0) {
        return -1;
    }
    return qcow2_store_compressed(bs, c, errp);
}

static int qcow2_make_empty_tracked(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    if (qcow2_before_write(bs, 0, s->header.size, errp) < 0) {
        return -1;
    }
    return qcow2_make_empty(bs, errp);
}

/* Spec: the bitmaps extension needs version 3 (autoclear_features). */
static bool qcow2_supports_bitmaps(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    return s->header.version >= 3;
}

/* "-o help" (qemu-img's options and words; what qcow2-create.c takes). */
static const BlockOptionDesc qcow2_create_opts[] = {
    { "size", "size", "Virtual disk size" },
    { "compat", "str", "Compatibility level (v2 [0.10] or v3 [1.1])" },
    { "backing_file", "str", "File name of a base image" },
    { "backing_fmt", "str", "Image format of the base image" },
    { "encrypt.format", "str", "Encrypt the image, format choices: 'luks' "
      "('aes' is refused)" },
    { "encrypt.key-secret", "str",
      "ID of secret providing qcow AES key or LUKS passphrase" },
    { "encrypt.cipher-alg", "str", "Name of encryption cipher algorithm" },
    { "encrypt.cipher-mode", "str", "Name of encryption cipher mode" },
    { "encrypt.ivgen-alg", "str", "Name of IV generator algorithm" },
    { "encrypt.ivgen-hash-alg", "str",
      "Name of IV generator hash algorithm" },
    { "encrypt.hash-alg", "str", "Name of encryption hash algorithm" },
    { "encrypt.iter-time", "num", "Time to spend in PBKDF in milliseconds" },
    { "cluster_size", "size", "qcow2 cluster size" },
    { "extended_l2", "bool (on/off)", "Extended L2 tables" },
    { "preallocation", "str", "Preallocation mode (allowed values: off, "
      "metadata, falloc, full)" },
    { "lazy_refcounts", "bool (on/off)", "Postpone refcount updates" },
    { "refcount_bits", "num", "Width of a reference count entry in bits" },
    { "compression_type", "str",
      "Compression method used for image cluster compression" },
    { NULL }
};

/* "-o help" for amend (qemu-img's list, less the external data file). */
static const BlockOptionDesc qcow2_amend_opts[] = {
    { "size", "size", "Virtual disk size" },
    { "compat", "str", "Compatibility level (v2 [0.10] or v3 [1.1])" },
    { "backing_file", "str", "File name of a base image" },
    { "backing_fmt", "str", "Image format of the base image" },
    { "lazy_refcounts", "bool (on/off)", "Postpone refcount updates" },
    { "refcount_bits", "num", "Width of a reference count entry in bits" },
    { "encrypt.state", "str",
      "Select new state of affected keyslots (active/inactive)" },
    { "encrypt.keyslot", "num",
      "Select a single keyslot to modify explicitly" },
    { "encrypt.old-secret", "str",
      "Select all keyslots that match this password" },
    { "encrypt.new-secret", "str", "New secret to set in the matching "
      "keyslots. Empty string to erase" },
    { "encrypt.iter-time", "num", "Time to spend in PBKDF in milliseconds" },
    { NULL }
};

const BlockDriver bdrv_qcow2 = {
    .format_name = "qcow2",
    .instance_size = sizeof(BDRVQcow2State),
    .bdrv_probe = qcow2_probe,
    .bdrv_open = qcow2_open,
    .bdrv_close = qcow2_close,
    .bdrv_pread = qcow2_pread,
    .bdrv_getlength = qcow2_getlength,
    .bdrv_get_allocated_file_size = qcow2_get_allocated_file_size,
    .bdrv_block_status_is_data = qcow2_block_status_is_data,
    .bdrv_block_status = qcow2_block_status,
    .supports_backing = true,
    .bdrv_is_encrypted = qcow2_is_encrypted,
    .bdrv_get_warning = qcow2_get_warning,
    .bdrv_get_info = qcow2_get_info,
    .bdrv_measure = qcow2_measure,
    .bdrv_check = qcow2_check,
    .bdrv_pwrite = qcow2_pwrite_tracked,
    .bdrv_flush = qcow2_flush,
    .bdrv_has_zero_init = qcow2_has_zero_init,
    .bdrv_create = qcow2_create,
    .bdrv_create_finish = qcow2_create_finish,
    .bdrv_compress = qcow2_compress_clusters,
    .bdrv_store_compressed = qcow2_store_compressed_tracked,
    .bdrv_truncate = qcow2_truncate,
    .bdrv_amend = qcow2_amend,
    .bdrv_change_backing_file = qcow2_change_backing_file,
    .bdrv_make_empty = qcow2_make_empty_tracked,
    .bdrv_snapshot_list = qcow2_snapshot_list,
    .bdrv_snapshot_create = qcow2_snapshot_create,
    .bdrv_snapshot_goto = qcow2_snapshot_goto,
    .bdrv_snapshot_delete = qcow2_snapshot_delete,
    .bdrv_snapshot_load_tmp = qcow2_snapshot_load_tmp,
    .bdrv_pwrite_zeroes = qcow2_pwrite_zeroes_tracked,
    .bdrv_supports_persistent_bitmaps = qcow2_supports_bitmaps,
    .bdrv_bitmap_list = qcow2_read_bitmaps,
    .bdrv_bitmap_op = qcow2_bitmap_op,
    .bdrv_bitmap_get = qcow2_bitmap_get,
    .bdrv_bitmap_merge = qcow2_bitmap_merge,
    .bdrv_bitmaps_store = qcow2_bitmaps_store,
    .create_opts = qcow2_create_opts,
    .amend_opts = qcow2_amend_opts,
};
