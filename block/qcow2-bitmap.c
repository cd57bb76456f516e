/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qcow2 persistent dirty bitmaps: the bitmap directory (what info shows
 * and measure counts), and, for an image opened read-write, the bitmaps
 * themselves: "qemu-img bitmap" changes them, and writes set the bits of
 * the enabled ("auto") ones, as QEMU does.
 *
 * Layout: the spec's "Bitmaps" section. The directory is a run of
 * entries, each 24 bytes of fixed fields, extra data, the name, padded
 * to 8 bytes. Each bitmap has a table of 8-byte entries, one per cluster
 * of bitmap data: the data cluster's offset, or 0 for a cluster of zero
 * bits (bit 0 set: of one bits). Bit i of data byte j is granule 8j + i.
 *
 * The life of a read-write open (QEMU's order):
 *  - open: every consistent bitmap is loaded into memory and marked
 *    in_use on disk (the directory rewritten in place, flushed) before
 *    the first data write, so a crash leaves it "inconsistent", never
 *    silently stale;
 *  - writes set the bits of the enabled ones, in memory;
 *  - close (or bdrv_bitmaps_store()): each loaded bitmap gets new data
 *    clusters and a new table, then a new directory, all flushed before
 *    the header extension points at them; the old ones are freed last.
 *    A crash in between leaks clusters and loses nothing. New clusters
 *    go where QEMU's allocator would put them (first free run:
 *    qcow2_alloc_reuse_begin), so the file sizes match qemu-img's.
 * Bitmaps found in_use at open ("inconsistent") keep their clusters and
 * their flag: only --remove takes them.
 */
#include <string.h>

#include "block/qcow2.h"
#include "block/qcow2-bitmap.h"

/* Spec, "Bitmap directory": fixed part of an entry. */
#define QCOW2_BITMAP_DIR_ENTRY_LEN 24
/* Spec, "Bitmaps extension": its data. */
#define QCOW2_BITMAPS_EXT_LEN 24
/* QEMU's limits: directory size, name length, number of bitmaps. */
#define QCOW2_MAX_BITMAP_DIRECTORY_SIZE (64 * 1024 * 1024)
#define QCOW2_MAX_BITMAP_NAME 1023
#define QCOW2_MAX_BITMAPS 65535
/* QEMU's BME_MAX_PHYS_SIZE: bytes of bitmap data per bitmap. */
#define QCOW2_MAX_BITMAP_DATA (512ull * 1024 * 1024)
/* Spec: granularity_bits 9..31 in QEMU (512 B to 2 GiB). */
#define QCOW2_BITMAP_MIN_GRANULARITY_BITS 9
#define QCOW2_BITMAP_MAX_GRANULARITY_BITS 31
/* Spec, flags */
#define QCOW2_BITMAP_FLAG_IN_USE (1u << 0)
#define QCOW2_BITMAP_FLAG_AUTO   (1u << 1)
#define QCOW2_BITMAP_FLAG_EXTRA_DATA_COMPATIBLE (1u << 2)
#define QCOW2_BITMAP_FLAGS_KNOWN 0x7u
/* Spec, type: 1 is the only one, a dirty tracking bitmap. */
#define QCOW2_BITMAP_TYPE_DIRTY 1
/* Spec, "Bitmap table": entry bits */
#define QCOW2_BME_OFFSET_MASK   0x00fffffffffffe00ull
#define QCOW2_BME_RESERVED_MASK 0xff000000000001feull
#define QCOW2_BME_ALL_ONES      1ull

typedef struct Qcow2Bitmap {
    char *name;
    uint32_t flags;                 /* as on disk at open */
    uint8_t gran_bits;
    uint8_t *extra;                 /* extra data, kept as it is */
    uint32_t extra_len;
    uint64_t table_offset;          /* on disk; 0: none yet */
    uint32_t table_size;
    bool enabled;                   /* flag "auto" */
    bool inconsistent;              /* in_use at open: never written */
    uint8_t *bits;                  /* loaded (NULL: as on disk) */
    uint64_t bits_len;              /* table entries * cluster size */
} Qcow2Bitmap;

/* An old bitmap table whose clusters go once the header stops naming it. */
typedef struct Qcow2BitmapOldTable {
    uint64_t offset;
    uint32_t size;
} Qcow2BitmapOldTable;

struct Qcow2BitmapSet {
    GPtrArray *list;                /* Qcow2Bitmap *, in directory order */
    GArray *old_tables;             /* Qcow2BitmapOldTable */
    GMutex lock;                    /* writes set bits from many threads */
    bool changed;                   /* something to store at close */
    bool stored;                    /* bdrv_bitmaps_store() done */
};

static int qcow2_bitmap_dir_invalid(Error **errp, const char *why)
{
    error_setg(errp, "qcow2 bitmap directory: %s", why);
    return -1;
}

static void qcow2_bitmap_free(gpointer p)
{
    Qcow2Bitmap *bm = p;

    g_free(bm->name);
    g_free(bm->extra);
    g_free(bm->bits);
    g_free(bm);
}

/* Bytes of bitmap data for a disk of size bytes (spec: one bit a granule). */
static uint64_t qcow2_bitmap_data_bytes(uint64_t size, unsigned gran_bits)
{
    uint64_t granules = (size >> gran_bits) +
                        ((size & ((1ull << gran_bits) - 1)) != 0);

    return granules / 8 + (granules % 8 != 0);
}

static uint32_t qcow2_bitmap_table_entries(uint64_t size, unsigned gran_bits,
                                           uint64_t cluster_size)
{
    uint64_t bytes = qcow2_bitmap_data_bytes(size, gran_bits);

    return bytes / cluster_size + (bytes % cluster_size != 0);
}

/*
 * The fixed fields of one directory entry, as QEMU's check_dir_entry():
 * everything the rest of this file relies on.
 */
static int qcow2_bitmap_entry_validate(const uint8_t *e, uint64_t room,
                                       uint64_t *entry_len, Error **errp)
{
    uint32_t flags = ldl_be_p(e + 12);
    uint8_t type = e[16], gran_bits = e[17];
    uint16_t name_len = lduw_be_p(e + 18);
    uint32_t extra = ldl_be_p(e + 20);

    *entry_len = ROUND_UP(QCOW2_BITMAP_DIR_ENTRY_LEN + (uint64_t)extra +
                          name_len, 8);
    if (*entry_len > room) {
        return qcow2_bitmap_dir_invalid(errp, "entries run past its end");
    }
    if (name_len == 0 || name_len > QCOW2_MAX_BITMAP_NAME ||
        gran_bits < QCOW2_BITMAP_MIN_GRANULARITY_BITS ||
        gran_bits > QCOW2_BITMAP_MAX_GRANULARITY_BITS ||
        type != QCOW2_BITMAP_TYPE_DIRTY ||
        (flags & ~QCOW2_BITMAP_FLAGS_KNOWN)) {
        return qcow2_bitmap_dir_invalid(errp, "invalid entry");
    }
    /*
     * Names are C strings everywhere past this parser: one with a NUL
     * inside would be read short and written back shorter.
     */
    if (memchr(e + QCOW2_BITMAP_DIR_ENTRY_LEN + extra, 0, name_len)) {
        return qcow2_bitmap_dir_invalid(errp, "bitmap name holds a NUL byte");
    }
    return 0;
}

/* Every entry of a directory of len bytes, into a new list. */
static GPtrArray *qcow2_bitmap_dir_load(const uint8_t *dir, uint64_t len,
                                        uint32_t nb, Error **errp)
{
    g_autoptr(GPtrArray) list = g_ptr_array_new_with_free_func(
        qcow2_bitmap_free);
    /* Names are how every command finds a bitmap: two alike, as QEMU, fail. */
    g_autoptr(GHashTable) names = g_hash_table_new(g_str_hash, g_str_equal);
    uint64_t off = 0;

    for (uint32_t i = 0; i < nb; i++) {
        const uint8_t *e = dir + off;
        Qcow2Bitmap *bm;
        uint64_t entry_len;
        uint16_t name_len;

        if (len - off < QCOW2_BITMAP_DIR_ENTRY_LEN) {
            qcow2_bitmap_dir_invalid(errp, "entries run past its end");
            return NULL;
        }
        if (qcow2_bitmap_entry_validate(e, len - off, &entry_len,
                                        errp) < 0) {
            return NULL;
        }
        bm = g_new0(Qcow2Bitmap, 1);
        bm->table_offset = ldq_be_p(e);
        bm->table_size = ldl_be_p(e + 8);
        bm->flags = ldl_be_p(e + 12);
        bm->gran_bits = e[17];
        name_len = lduw_be_p(e + 18);
        bm->extra_len = ldl_be_p(e + 20);
        bm->extra = g_memdup2(e + QCOW2_BITMAP_DIR_ENTRY_LEN, bm->extra_len);
        bm->name = g_strndup((const char *)e + QCOW2_BITMAP_DIR_ENTRY_LEN +
                             bm->extra_len, name_len);
        bm->enabled = bm->flags & QCOW2_BITMAP_FLAG_AUTO;
        bm->inconsistent = bm->flags & QCOW2_BITMAP_FLAG_IN_USE;
        g_ptr_array_add(list, bm);
        if (!g_hash_table_add(names, bm->name)) {
            error_setg(errp, "Bitmap already exists: %s", bm->name);
            return NULL;
        }
        off += entry_len;
    }
    return g_steal_pointer(&list);
}

int qcow2_bitmap_dir_parse(const uint8_t *dir, uint64_t len, uint32_t nb,
                           BlockImageInfoBitmap **out, Error **errp)
{
    g_autoptr(GPtrArray) list = qcow2_bitmap_dir_load(dir, len, nb, errp);
    BlockImageInfoBitmap *info;

    if (!list) {
        return -1;
    }
    info = g_new0(BlockImageInfoBitmap, nb);
    for (uint32_t i = 0; i < nb; i++) {
        Qcow2Bitmap *bm = g_ptr_array_index(list, i);

        info[i].name = g_strdup(bm->name);
        info[i].granularity = 1u << bm->gran_bits;
        info[i].in_use = bm->inconsistent;
        info[i].autoload = bm->enabled;
    }
    *out = info;
    return 0;
}

/* The directory of an open image (NULL and no error: none). */
static int qcow2_bitmap_read_dir(BlockDriverState *bs, GPtrArray **out,
                                 Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    const Qcow2Extensions *ext = &s->ext;
    g_autofree uint8_t *dir = NULL;

    *out = NULL;
    if (ext->nb_bitmaps == 0) {
        return 0;
    }
    if (ext->nb_bitmaps > QCOW2_MAX_BITMAPS ||
        ext->bitmap_directory_size > QCOW2_MAX_BITMAP_DIRECTORY_SIZE ||
        ext->bitmap_directory_size < QCOW2_BITMAP_DIR_ENTRY_LEN ||
        ext->bitmap_directory_offset > s->file_size ||
        ext->bitmap_directory_size >
            s->file_size - ext->bitmap_directory_offset) {
        return qcow2_bitmap_dir_invalid(errp, "invalid size or offset");
    }
    dir = g_malloc(ext->bitmap_directory_size);
    if (bdrv_pread(bs->file, ext->bitmap_directory_offset,
                   dir, ext->bitmap_directory_size, errp) < 0) {
        return -1;
    }
    *out = qcow2_bitmap_dir_load(dir, ext->bitmap_directory_size,
                                 ext->nb_bitmaps, errp);
    return *out ? 0 : -1;
}

int qcow2_read_bitmaps(BlockDriverState *bs, BlockImageInfoBitmap **out,
                       size_t *nb, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    g_autoptr(GPtrArray) list = NULL;
    GPtrArray *live = s->bitmaps ? s->bitmaps->list : NULL;

    *out = NULL;
    *nb = 0;
    if (!live) {
        if (qcow2_bitmap_read_dir(bs, &list, errp) < 0) {
            return -1;
        }
        live = list;
    }
    if (!live || live->len == 0) {
        return 0;
    }
    *out = g_new0(BlockImageInfoBitmap, live->len);
    for (guint i = 0; i < live->len; i++) {
        Qcow2Bitmap *bm = g_ptr_array_index(live, i);

        (*out)[i].name = g_strdup(bm->name);
        (*out)[i].granularity = 1u << bm->gran_bits;
        (*out)[i].in_use = bm->inconsistent;
        (*out)[i].autoload = bm->enabled;
    }
    *nb = live->len;
    return 0;
}

uint64_t qcow2_bitmaps_size(const BlockImageInfoBitmap *bitmaps, size_t nb,
                            uint64_t size, uint64_t cluster_size)
{
    uint64_t total = 0, dir = 0;

    /*
     * As QEMU's qcow2_get_persistent_dirty_bitmap_size(): every bitmap
     * fully allocated (one bit per granule of size bytes), its table,
     * and the directory entries.
     */
    for (size_t i = 0; i < nb; i++) {
        uint64_t granules = size / bitmaps[i].granularity +
                            (size % bitmaps[i].granularity != 0);
        uint64_t bytes = ROUND_UP(granules, 8) / 8;
        uint64_t clusters = ROUND_UP(bytes, cluster_size) / cluster_size;

        total += clusters * cluster_size;
        total += ROUND_UP(clusters * 8, cluster_size);
        dir += ROUND_UP(QCOW2_BITMAP_DIR_ENTRY_LEN + strlen(bitmaps[i].name),
                        8);
    }
    return total + ROUND_UP(dir, cluster_size);
}

/* ---- Bitmap tables and data */

int qcow2_bitmap_table_validate(const uint64_t *table, uint32_t n,
                                uint64_t cluster_size, uint64_t file_size,
                                Error **errp)
{
    for (uint32_t i = 0; i < n; i++) {
        uint64_t e = table[i], off = e & QCOW2_BME_OFFSET_MASK;

        if ((e & QCOW2_BME_RESERVED_MASK) || (off & (cluster_size - 1)) ||
            ((e & QCOW2_BME_ALL_ONES) && off) ||
            off > file_size || cluster_size > file_size - off) {
            error_setg(errp, "qcow2 bitmap table: invalid entry %" PRIu32
                       " (0x%016" PRIx64 ")", i, e);
            return -1;
        }
    }
    return 0;
}

/* The table of bm, host byte order, checked (NULL for no table). */
static uint64_t *qcow2_bitmap_read_table(BlockDriverState *bs,
                                         const Qcow2Bitmap *bm, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    g_autofree uint64_t *table = NULL;

    if (qcow2_validate_table(bm->table_offset, bm->table_size,
                             sizeof(uint64_t), QCOW2_MAX_BITMAP_DATA / 512 *
                             sizeof(uint64_t), cs, s->file_size,
                             "Bitmap table", errp) < 0) {
        return NULL;
    }
    table = g_new(uint64_t, bm->table_size);
    if (bdrv_pread(bs->file, bm->table_offset, table,
                   bm->table_size * sizeof(uint64_t), errp) < 0) {
        return NULL;
    }
    for (uint32_t i = 0; i < bm->table_size; i++) {
        table[i] = ldq_be_p(&table[i]);
    }
    if (qcow2_bitmap_table_validate(table, bm->table_size, cs, s->file_size,
                                    errp) < 0) {
        return NULL;
    }
    return g_steal_pointer(&table);
}

/* Load the bits of bm (once). */
static int qcow2_bitmap_load(BlockDriverState *bs, Qcow2Bitmap *bm,
                             Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    uint32_t want = qcow2_bitmap_table_entries(s->header.size, bm->gran_bits,
                                               cs);
    g_autofree uint64_t *table = NULL;
    g_autofree uint8_t *bits = NULL;

    if (bm->bits) {
        return 0;
    }
    if (bm->table_size != want) {
        error_setg(errp, "Bitmap '%s': its table has %" PRIu32 " entries, "
                   "%" PRIu32 " expected for the image's size", bm->name,
                   bm->table_size, want);
        return -1;
    }
    /* QEMU's BME_MAX_PHYS_SIZE: what a table may map, in memory too. */
    if ((uint64_t)want * cs > QCOW2_MAX_BITMAP_DATA) {
        error_setg(errp, "Bitmap '%s' is too large (%" PRIu64 " bytes of "
                   "data)", bm->name, (uint64_t)want * cs);
        return -1;
    }
    table = qcow2_bitmap_read_table(bs, bm, errp);
    if (!table) {
        return -1;
    }
    bits = g_malloc0(MAX((uint64_t)want * cs, 1));
    for (uint32_t i = 0; i < want; i++) {
        uint64_t off = table[i] & QCOW2_BME_OFFSET_MASK;

        if (off) {
            if (bdrv_pread(bs->file, off, bits + i * cs, cs, errp) < 0) {
                return -1;
            }
        } else if (table[i] & QCOW2_BME_ALL_ONES) {
            memset(bits + i * cs, 0xff, cs);
        }
    }
    bm->bits_len = (uint64_t)want * cs;
    bm->bits = g_steal_pointer(&bits);
    return 0;
}

/* Set granules [first, first + n) of bits. */
static void qcow2_bits_set(uint8_t *bits, uint64_t first, uint64_t n)
{
    while (n && (first % 8)) {
        bits[first / 8] |= 1u << (first % 8);
        first++;
        n--;
    }
    memset(bits + first / 8, 0xff, n / 8);
    first += n / 8 * 8;
    for (n %= 8; n; n--, first++) {
        bits[first / 8] |= 1u << (first % 8);
    }
}

/* Mark [offset, offset + bytes) of the disk dirty in bm (loaded). */
static void qcow2_bitmap_mark(Qcow2Bitmap *bm, uint64_t offset,
                              uint64_t bytes, uint64_t disk_size)
{
    uint64_t first, last;

    if (!bytes || offset >= disk_size) {
        return;
    }
    bytes = MIN(bytes, disk_size - offset);
    first = offset >> bm->gran_bits;
    last = (offset + bytes - 1) >> bm->gran_bits;
    qcow2_bits_set(bm->bits, first, last - first + 1);
}

/* ---- The header extension */

int qcow2_header_set_bitmaps_ext(uint8_t *buf, uint64_t cs, uint32_t nb,
                                 uint64_t dir_size, uint64_t dir_offset,
                                 Error **errp)
{
    g_autofree uint8_t *old = g_memdup2(buf, cs);
    uint32_t header_length = ldl_be_p(old + 100);
    uint64_t backing_offset = ldq_be_p(old + 8);
    uint32_t backing_size = ldl_be_p(old + 16);
    uint64_t autoclear = ldq_be_p(old + 88);
    uint64_t end = backing_offset ? MIN(cs, backing_offset) : cs;
    uint64_t off = header_length, pos = header_length;

    if (ldl_be_p(old + 4) < 3 || header_length > cs ||
        (backing_offset && (backing_offset > cs ||
                            backing_size > cs - backing_offset))) {
        error_setg(errp, "The image header cannot hold bitmaps");
        return -1;
    }
    memset(buf + header_length, 0, cs - header_length);
    while (off + 8 <= end) {
        uint32_t type = ldl_be_p(old + off);
        uint64_t elen = 8 + ROUND_UP((uint64_t)ldl_be_p(old + off + 4), 8);

        if (type == QCOW2_EXT_END || elen > end - off) {
            break;
        }
        if (type != QCOW2_EXT_BITMAPS) {
            memcpy(buf + pos, old + off, elen);
            pos += elen;
        }
        off += elen;
    }
    if (nb) {
        if (pos + 8 + QCOW2_BITMAPS_EXT_LEN + 8 > cs) {
            goto too_big;
        }
        stl_be_p(buf + pos, QCOW2_EXT_BITMAPS);
        stl_be_p(buf + pos + 4, QCOW2_BITMAPS_EXT_LEN);
        stl_be_p(buf + pos + 8, nb);
        stq_be_p(buf + pos + 16, dir_size);
        stq_be_p(buf + pos + 24, dir_offset);
        pos += 8 + QCOW2_BITMAPS_EXT_LEN;
        autoclear |= QCOW2_AUTOCLEAR_BITMAPS;
    } else {
        autoclear &= ~QCOW2_AUTOCLEAR_BITMAPS;
    }
    pos += 8;   /* the end marker: zeroes */
    if (backing_offset) {
        if (pos + backing_size > cs) {
            goto too_big;
        }
        memcpy(buf + pos, old + backing_offset, backing_size);
        stq_be_p(buf + 8, pos);
    }
    stq_be_p(buf + 88, autoclear);
    return 0;

too_big:
    memcpy(buf, old, cs);
    error_setg(errp, "The bitmaps extension does not fit in the header "
               "cluster");
    return -1;
}

/* The header on disk with the bitmaps extension saying nb, size, offset. */
static int qcow2_bitmap_write_ext(BlockDriverState *bs, uint32_t nb,
                                  uint64_t dir_size, uint64_t dir_offset,
                                  Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    g_autofree uint8_t *buf = g_malloc(cs);

    if (bdrv_pread(bs->file, 0, buf, cs, errp) < 0 ||
        qcow2_header_set_bitmaps_ext(buf, cs, nb, dir_size, dir_offset,
                                     errp) < 0) {
        return -1;
    }
    /* One write of one cluster: the old header or the new one. */
    if (bdrv_pwrite(bs->file, 0, buf, cs, 0, errp) < 0 ||
        bdrv_flush(bs->file, errp) < 0) {
        return -1;
    }
    s->header.backing_file_offset = ldq_be_p(buf + 8);
    s->header.autoclear_features = ldq_be_p(buf + 88);
    s->ext.nb_bitmaps = nb;
    s->ext.bitmap_directory_size = nb ? dir_size : 0;
    s->ext.bitmap_directory_offset = nb ? dir_offset : 0;
    return 0;
}

/* ---- Storing */

static uint32_t qcow2_bitmap_disk_flags(const Qcow2Bitmap *bm, bool in_use)
{
    return (bm->flags & QCOW2_BITMAP_FLAG_EXTRA_DATA_COMPATIBLE) |
           (bm->enabled ? QCOW2_BITMAP_FLAG_AUTO : 0) |
           (in_use || bm->inconsistent ? QCOW2_BITMAP_FLAG_IN_USE : 0);
}

/* The directory bytes for list; the loaded bitmaps in_use while open. */
static uint8_t *qcow2_bitmap_dir_build(GPtrArray *list, bool open,
                                       uint64_t *len)
{
    uint64_t n = 0, pos = 0;
    uint8_t *dir;

    for (guint i = 0; i < list->len; i++) {
        Qcow2Bitmap *bm = g_ptr_array_index(list, i);

        n += ROUND_UP(QCOW2_BITMAP_DIR_ENTRY_LEN + bm->extra_len +
                      strlen(bm->name), 8);
    }
    dir = g_malloc0(MAX(n, 1));
    for (guint i = 0; i < list->len; i++) {
        Qcow2Bitmap *bm = g_ptr_array_index(list, i);
        size_t name_len = strlen(bm->name);

        stq_be_p(dir + pos, bm->table_offset);
        stl_be_p(dir + pos + 8, bm->table_size);
        stl_be_p(dir + pos + 12, qcow2_bitmap_disk_flags(bm, open));
        dir[pos + 16] = QCOW2_BITMAP_TYPE_DIRTY;
        dir[pos + 17] = bm->gran_bits;
        stw_be_p(dir + pos + 18, name_len);
        stl_be_p(dir + pos + 20, bm->extra_len);
        if (bm->extra_len) {
            memcpy(dir + pos + QCOW2_BITMAP_DIR_ENTRY_LEN, bm->extra,
                   bm->extra_len);
        }
        memcpy(dir + pos + QCOW2_BITMAP_DIR_ENTRY_LEN + bm->extra_len,
               bm->name, name_len);
        pos += ROUND_UP(QCOW2_BITMAP_DIR_ENTRY_LEN + bm->extra_len +
                        name_len, 8);
    }
    *len = n;
    return dir;
}

/*
 * Write len bytes to new clusters. alloc_lock held. As QEMU, the bytes
 * alone: at the file's end the last cluster stays short.
 */
static int qcow2_bitmap_write_new(BlockDriverState *bs, const void *data,
                                  uint64_t len, uint64_t *offset,
                                  Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    uint64_t n = len / cs + (len % cs != 0);

    if (!n) {
        /* An empty image's: QEMU takes no table of 0 entries. */
        error_setg(errp, "The bitmaps of an empty image cannot be stored");
        return -1;
    }
    if (qcow2_alloc_clusters(bs, n, offset, errp) < 0) {
        return -1;
    }
    return bdrv_pwrite(bs->file, *offset, data, len, 0, errp);
}

/* New data clusters and table for a loaded bitmap. alloc_lock held. */
static int qcow2_bitmap_write_data(BlockDriverState *bs, Qcow2Bitmap *bm,
                                   Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    uint32_t n = qcow2_bitmap_table_entries(s->header.size, bm->gran_bits,
                                            cs);
    g_autofree uint64_t *table = g_new0(uint64_t, MAX(n, 1));
    Qcow2BitmapOldTable old = { bm->table_offset, bm->table_size };
    uint64_t table_offset;

    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *c = bm->bits + (uint64_t)i * cs;
        uint64_t off;

        /* All-zero clusters are left out (entry 0), as QEMU does. */
        if (c[0] == 0 && memcmp(c, c + 1, cs - 1) == 0) {
            continue;
        }
        if (qcow2_bitmap_write_new(bs, c, cs, &off, errp) < 0) {
            return -1;
        }
        stq_be_p(&table[i], off);
    }
    if (qcow2_bitmap_write_new(bs, table, (uint64_t)n * sizeof(uint64_t),
                               &table_offset, errp) < 0) {
        return -1;
    }
    if (old.offset) {
        g_array_append_val(s->bitmaps->old_tables, old);
    }
    bm->table_offset = table_offset;
    bm->table_size = n;
    return 0;
}

/* Free an old table's data clusters and the table. alloc_lock held. */
static int qcow2_bitmap_free_table(BlockDriverState *bs,
                                   const Qcow2BitmapOldTable *t, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t cs = s->g.cluster_size;
    Qcow2Bitmap probe = { .table_offset = t->offset, .table_size = t->size };
    g_autofree uint64_t *table = qcow2_bitmap_read_table(bs, &probe, errp);

    if (!table) {
        return -1;
    }
    for (uint32_t i = 0; i < t->size; i++) {
        uint64_t off = table[i] & QCOW2_BME_OFFSET_MASK;

        if (off && qcow2_update_refcounts(bs, off, cs, -1, errp) < 0) {
            return -1;
        }
    }
    return qcow2_update_refcounts(bs, t->offset, t->size * sizeof(uint64_t),
                                  -1, errp);
}

/*
 * Store the set: new data for the loaded bitmaps, a new directory, the
 * header pointing at it, then the old clusters freed. open: the image
 * stays open for writing, so the enabled bitmaps stay in_use.
 */
static int qcow2_bitmaps_write(BlockDriverState *bs, bool open, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2BitmapSet *set = s->bitmaps;
    uint64_t old_dir = s->ext.bitmap_directory_offset;
    uint64_t old_dir_len = s->ext.bitmap_directory_size;
    uint64_t dir_len, dir_offset = 0;
    g_autofree uint8_t *dir = NULL;
    int ret = -1;

    g_mutex_lock(&s->alloc_lock);
    if (qcow2_alloc_reuse_begin(bs, errp) < 0) {
        g_mutex_unlock(&s->alloc_lock);
        return -1;
    }
    for (guint i = 0; i < set->list->len; i++) {
        Qcow2Bitmap *bm = g_ptr_array_index(set->list, i);

        if (bm->bits && !bm->inconsistent &&
            qcow2_bitmap_write_data(bs, bm, errp) < 0) {
            goto out;
        }
    }
    dir = qcow2_bitmap_dir_build(set->list, open, &dir_len);
    if (set->list->len &&
        qcow2_bitmap_write_new(bs, dir, dir_len, &dir_offset, errp) < 0) {
        goto out;
    }
    /* Refcounts, data, tables and directory on disk before the header. */
    if (qcow2_flush_metadata_locked(bs, errp) < 0 ||
        bdrv_flush(bs->file, errp) < 0 ||
        qcow2_bitmap_write_ext(bs, set->list->len, dir_len, dir_offset,
                               errp) < 0) {
        goto out;
    }
    for (guint i = 0; i < set->old_tables->len; i++) {
        if (qcow2_bitmap_free_table(bs, &g_array_index(set->old_tables,
                                                       Qcow2BitmapOldTable,
                                                       i), errp) < 0) {
            goto out;
        }
    }
    g_array_set_size(set->old_tables, 0);
    if (old_dir && qcow2_update_refcounts(bs, old_dir, old_dir_len, -1,
                                          errp) < 0) {
        goto out;
    }
    /* The frees on disk too: otherwise a power loss leaks them. */
    ret = qcow2_flush_metadata_locked(bs, errp) < 0 ||
          bdrv_flush(bs->file, errp) < 0 ? -1 : 0;
    set->changed = false;
out:
    qcow2_alloc_reuse_end(bs);
    g_mutex_unlock(&s->alloc_lock);
    return ret;
}

/* ---- Open and close */

/* Rewrite the directory where it is with the loaded bitmaps in_use. */
static int qcow2_bitmaps_mark_in_use(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    uint64_t len;
    g_autofree uint8_t *dir = qcow2_bitmap_dir_build(s->bitmaps->list, true,
                                                     &len);

    if (len != s->ext.bitmap_directory_size) {
        error_setg(errp, "qcow2 bitmap directory: unexpected size");
        return -1;
    }
    return bdrv_pwrite(bs->file, s->ext.bitmap_directory_offset, dir, len, 0,
                       errp) < 0 || bdrv_flush(bs->file, errp) < 0 ? -1 : 0;
}

static void qcow2_bitmap_set_free(Qcow2BitmapSet *set)
{
    if (set) {
        g_ptr_array_unref(set->list);
        g_array_unref(set->old_tables);
        g_mutex_clear(&set->lock);
        g_free(set);
    }
}

int qcow2_bitmaps_open_rw(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    g_autoptr(GPtrArray) list = NULL;
    Qcow2BitmapSet *set;
    bool track = false;

    if (qcow2_bitmap_read_dir(bs, &list, errp) < 0) {
        error_prepend(errp, "qcow2 image '%s' cannot be written: ",
                      bdrv_get_filename(bs->file));
        return -1;
    }
    set = g_new0(Qcow2BitmapSet, 1);
    g_mutex_init(&set->lock);
    set->list = list ? g_steal_pointer(&list) :
                g_ptr_array_new_with_free_func(qcow2_bitmap_free);
    set->old_tables = g_array_new(FALSE, FALSE, sizeof(Qcow2BitmapOldTable));
    s->bitmaps = set;
    for (guint i = 0; i < set->list->len; i++) {
        Qcow2Bitmap *bm = g_ptr_array_index(set->list, i);

        /* All of them, as QEMU: each is written back at close. */
        if (!bm->inconsistent) {
            if (qcow2_bitmap_load(bs, bm, errp) < 0) {
                error_prepend(errp, "qcow2 image '%s' cannot be written: ",
                              bdrv_get_filename(bs->file));
                return -1;
            }
            track = true;
        }
    }
    /* Before the first write: a crash leaves them in_use (inconsistent). */
    if (track && qcow2_bitmaps_mark_in_use(bs, errp) < 0) {
        return -1;
    }
    set->changed = track;
    return 0;
}

int qcow2_bitmaps_store(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2BitmapSet *set = s->bitmaps;

    if (!set || set->stored) {
        return 0;
    }
    if (set->changed && qcow2_bitmaps_write(bs, false, errp) < 0) {
        return -1;
    }
    set->stored = true;
    return 0;
}

void qcow2_bitmaps_close(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    /* On failure the enabled bitmaps stay in_use: inconsistent, not stale. */
    qcow2_bitmaps_store(bs, NULL);
    qcow2_bitmap_set_free(s->bitmaps);
    s->bitmaps = NULL;
}

int qcow2_bitmaps_before_write(BlockDriverState *bs, uint64_t offset,
                               uint64_t bytes, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2BitmapSet *set = s->bitmaps;

    if (!set || set->list->len == 0) {
        return 0;
    }
    g_mutex_lock(&set->lock);
    for (guint i = 0; i < set->list->len; i++) {
        Qcow2Bitmap *bm = g_ptr_array_index(set->list, i);

        if (!bm->enabled || bm->inconsistent) {
            continue;
        }
        if (set->stored || !bm->bits) {
            g_mutex_unlock(&set->lock);
            error_setg(errp, "Cannot write: the image's bitmaps are already "
                       "stored");
            return -1;
        }
        qcow2_bitmap_mark(bm, offset, bytes, s->header.size);
    }
    g_mutex_unlock(&set->lock);
    return 0;
}

/* ---- Operations (qemu-img bitmap, convert --bitmaps) */

static Qcow2Bitmap *qcow2_bitmap_find(BDRVQcow2State *s, const char *name,
                                      guint *index)
{
    for (guint i = 0; s->bitmaps && i < s->bitmaps->list->len; i++) {
        Qcow2Bitmap *bm = g_ptr_array_index(s->bitmaps->list, i);

        if (strcmp(bm->name, name) == 0) {
            if (index) {
                *index = i;
            }
            return bm;
        }
    }
    return NULL;
}

/* The bitmap called name, usable for op (QEMU's bdrv_dirty_bitmap_check). */
static Qcow2Bitmap *qcow2_bitmap_lookup(BlockDriverState *bs,
                                        const char *name, bool allow_broken,
                                        Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2Bitmap *bm = qcow2_bitmap_find(s, name, NULL);

    if (!bm) {
        error_setg(errp, "Dirty bitmap '%s' not found", name);
        return NULL;
    }
    if (bm->inconsistent && !allow_broken) {
        /* With qemu-img's hint, on the line after. */
        error_setg(errp, "Bitmap '%s' is inconsistent and cannot be used\n"
                   "Try block-dirty-bitmap-remove to delete this bitmap "
                   "from disk", name);
        return NULL;
    }
    return bm;
}

static int qcow2_bitmap_add(BlockDriverState *bs, const char *name,
                            uint32_t granularity, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2Bitmap *bm;
    const char *why = NULL;
    unsigned gran_bits;

    if (granularity == 0) {
        /* QEMU's default: the cluster size, within 4 KiB .. 64 KiB. */
        granularity = MIN(MAX(s->g.cluster_size, 4096), 65536);
    }
    /* QEMU's order of checks, for its messages. */
    if (name[0] == '\0') {
        error_setg(errp, "Bitmap name cannot be empty");
        return -1;
    }
    if (granularity < 512 || (granularity & (granularity - 1))) {
        error_setg(errp, "Granularity must be power of 2 and at least 512");
        return -1;
    }
    gran_bits = __builtin_ctz(granularity);
    if (s->header.version < 3) {
        why = "Cannot store dirty bitmaps in qcow2 v2 files";
    } else if (strlen(name) > QCOW2_MAX_BITMAP_NAME) {
        why = "Name length exceeds maximum (1023 characters)";
    } else if (s->bitmaps->list->len >= QCOW2_MAX_BITMAPS) {
        why = "Maximum number of persistent bitmaps is already reached";
    } else if (!s->header.size) {
        /* its table would have no entry, which QEMU refuses */
        why = "The image is empty (0 bytes)";
    } else if (qcow2_bitmap_data_bytes(s->header.size, gran_bits) >
               QCOW2_MAX_BITMAP_DATA) {
        why = "Too much space will be occupied by the bitmap. Use larger "
              "granularity";
    }
    if (why) {
        error_setg(errp, "Can't make bitmap '%s' persistent in '%s': %s",
                   name, bdrv_get_filename(bs->file), why);
        return -1;
    }
    if (qcow2_bitmap_find(s, name, NULL)) {
        error_setg(errp, "Bitmap already exists: %s", name);
        return -1;
    }
    bm = g_new0(Qcow2Bitmap, 1);
    bm->name = g_strdup(name);
    bm->gran_bits = gran_bits;
    bm->enabled = true;
    bm->table_size = qcow2_bitmap_table_entries(s->header.size, gran_bits,
                                                s->g.cluster_size);
    bm->bits_len = (uint64_t)bm->table_size * s->g.cluster_size;
    bm->bits = g_malloc0(MAX(bm->bits_len, 1));
    g_mutex_lock(&s->bitmaps->lock);
    g_ptr_array_add(s->bitmaps->list, bm);
    g_mutex_unlock(&s->bitmaps->lock);
    return 0;
}

static int qcow2_bitmap_remove(BlockDriverState *bs, const char *name,
                               Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    guint index;
    Qcow2Bitmap *bm = qcow2_bitmap_find(s, name, &index);

    if (!bm) {
        error_setg(errp, "Dirty bitmap '%s' not found", name);
        return -1;
    }
    if (bm->table_offset) {
        Qcow2BitmapOldTable old = { bm->table_offset, bm->table_size };

        g_array_append_val(s->bitmaps->old_tables, old);
    }
    g_mutex_lock(&s->bitmaps->lock);
    g_ptr_array_remove_index(s->bitmaps->list, index);
    g_mutex_unlock(&s->bitmaps->lock);
    return 0;
}

int qcow2_bitmap_op(BlockDriverState *bs, BdrvBitmapOp op, const char *name,
                    uint32_t granularity, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2Bitmap *bm;
    int ret;

    if (!s->bitmaps) {
        error_setg(errp, "Image is read-only");
        return -1;
    }
    switch (op) {
    case BDRV_BITMAP_ADD:
        ret = qcow2_bitmap_add(bs, name, granularity, errp);
        break;
    case BDRV_BITMAP_REMOVE:
        ret = qcow2_bitmap_remove(bs, name, errp);
        break;
    case BDRV_BITMAP_CLEAR:
        bm = qcow2_bitmap_lookup(bs, name, false, errp);
        ret = bm ? qcow2_bitmap_load(bs, bm, errp) : -1;
        if (ret == 0) {
            memset(bm->bits, 0, bm->bits_len);
        }
        break;
    case BDRV_BITMAP_ENABLE:
    case BDRV_BITMAP_DISABLE:
        bm = qcow2_bitmap_lookup(bs, name, false, errp);
        /* An enabled bitmap tracks writes: its bits in memory. */
        ret = bm ? qcow2_bitmap_load(bs, bm, errp) : -1;
        if (ret == 0) {
            bm->enabled = op == BDRV_BITMAP_ENABLE;
        }
        break;
    default:
        g_assert_not_reached();
    }
    if (ret == 0) {
        s->bitmaps->changed = true;
    }
    return ret;
}

int qcow2_bitmap_get(BlockDriverState *bs, const char *name,
                     BdrvBitmapBits *out, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    g_autoptr(GPtrArray) list = NULL;
    Qcow2Bitmap *bm = NULL;

    if (s->bitmaps) {
        bm = qcow2_bitmap_lookup(bs, name, false, errp);
        if (!bm || qcow2_bitmap_load(bs, bm, errp) < 0) {
            return -1;
        }
    } else {
        /* Read-only: a copy of the directory, loaded for this call. */
        if (qcow2_bitmap_read_dir(bs, &list, errp) < 0) {
            return -1;
        }
        for (guint i = 0; list && i < list->len; i++) {
            Qcow2Bitmap *b = g_ptr_array_index(list, i);

            if (strcmp(b->name, name) == 0) {
                bm = b;
                break;
            }
        }
        if (!bm) {
            error_setg(errp, "Dirty bitmap '%s' not found", name);
            return -1;
        }
        if (bm->inconsistent) {
            error_setg(errp, "Bitmap '%s' is inconsistent and cannot be "
                       "used\nTry block-dirty-bitmap-remove to delete this "
                       "bitmap from disk", name);
            return -1;
        }
        if (qcow2_bitmap_load(bs, bm, errp) < 0) {
            return -1;
        }
    }
    out->disk_size = s->header.size;
    out->granularity = 1u << bm->gran_bits;
    out->enabled = bm->enabled;
    out->len = qcow2_bitmap_data_bytes(s->header.size, bm->gran_bits);
    out->bits = g_memdup2(bm->bits, out->len);
    return 0;
}

int qcow2_bitmap_merge(BlockDriverState *bs, const char *name,
                       const BdrvBitmapBits *src, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;
    Qcow2Bitmap *bm;
    uint64_t sg = src->granularity;

    if (!s->bitmaps) {
        error_setg(errp, "Image is read-only");
        return -1;
    }
    bm = qcow2_bitmap_lookup(bs, name, false, errp);
    if (!bm || qcow2_bitmap_load(bs, bm, errp) < 0) {
        return -1;
    }
    if (src->disk_size != s->header.size) {
        error_setg(errp, "Bitmaps are incompatible and can't be merged");
        return -1;
    }
    /* Each dirty source granule dirties the target granules it overlaps. */
    for (uint64_t byte = 0; byte < src->len; byte++) {
        if (!src->bits[byte]) {
            continue;
        }
        for (unsigned b = 0; b < 8; b++) {
            if (src->bits[byte] & (1u << b)) {
                qcow2_bitmap_mark(bm, (byte * 8 + b) * sg, sg,
                                  s->header.size);
            }
        }
    }
    s->bitmaps->changed = true;
    return 0;
}

/* ---- resize */

int qcow2_bitmaps_check_resize(BlockDriverState *bs, Error **errp)
{
    BDRVQcow2State *s = bs->opaque;

    for (guint i = 0; s->bitmaps && i < s->bitmaps->list->len; i++) {
        Qcow2Bitmap *bm = g_ptr_array_index(s->bitmaps->list, i);

        if (bm->inconsistent) {
            /* qemu-img's words (its resize fails the same way). */
            error_setg(errp, "Bitmap '%s' is inconsistent and cannot be "
                       "used\nTry block-dirty-bitmap-remove to delete this "
                       "bitmap from disk", bm->name);
            return -1;
        }
    }
    return 0;
}

void qcow2_bitmaps_resize(BlockDriverState *bs, uint64_t size)
{
    BDRVQcow2State *s = bs->opaque;

    for (guint i = 0; s->bitmaps && i < s->bitmaps->list->len; i++) {
        Qcow2Bitmap *bm = g_ptr_array_index(s->bitmaps->list, i);
        uint64_t len = (uint64_t)qcow2_bitmap_table_entries(
            size, bm->gran_bits, s->g.cluster_size) * s->g.cluster_size;
        uint64_t granules = (size >> bm->gran_bits) +
                            ((size & ((1ull << bm->gran_bits) - 1)) != 0);

        bm->bits = g_realloc(bm->bits, MAX(len, 1));
        if (len > bm->bits_len) {
            memset(bm->bits + bm->bits_len, 0, len - bm->bits_len);
        }
        bm->bits_len = len;
        /* Past the new end nothing is dirty (a later grow reads clean). */
        if (granules % 8 && granules / 8 < len) {
            bm->bits[granules / 8] &= (1u << (granules % 8)) - 1;
        }
        if (granules / 8 + (granules % 8 != 0) < len) {
            memset(bm->bits + granules / 8 + (granules % 8 != 0), 0,
                   len - granules / 8 - (granules % 8 != 0));
        }
        bm->table_size = len / s->g.cluster_size;
    }
    /* Without bitmaps there is nothing to store (no header write). */
    if (s->bitmaps && s->bitmaps->list->len) {
        s->bitmaps->changed = true;
    }
}

/* ---- Other writers of the header */

bool qcow2_has_bitmaps(BlockDriverState *bs)
{
    BDRVQcow2State *s = bs->opaque;

    return s->bitmaps ? s->bitmaps->list->len > 0 : s->ext.nb_bitmaps > 0;
}
