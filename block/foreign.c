/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The formats qemu-img knows and qemu-img-lite does not read: vmdk, vhdx,
 * vdi, vpc, qed, qcow (version 1), parallels, dmg, cloop and bochs.
 *
 * Each is a block driver that recognises its images and refuses to open
 * them, naming the format. Without these, probing finds no format but raw
 * for such a file, and convert copies the container's bytes as if they
 * were the disk: a user who then deletes the original has lost it.
 *
 * The probes look for what QEMU's drivers look for (block/<format>.c), with
 * QEMU's scores: 100 for a magic number at the start of the file, 2 for
 * cloop's shell-script header. Two formats are marked at the end of the
 * file, which QEMU's probes never see: a fixed VHD's footer and a dmg's
 * UDIF trailer (QEMU takes the first for raw, and the second only from a
 * ".dmg" name). Those score TAIL_SCORE, below any header magic: a qcow2
 * or LUKS image whose last bytes happen to look like a footer stays what
 * its header says.
 */
#include <string.h>

#include "block/block_int.h"

#define HEAD_SCORE 100
#define TAIL_SCORE 50

static uint32_t load_be32(const uint8_t *p)
{
    uint32_t v;

    memcpy(&v, p, sizeof(v));
    return GUINT32_FROM_BE(v);
}

static uint32_t load_le32(const uint8_t *p)
{
    uint32_t v;

    memcpy(&v, p, sizeof(v));
    return GUINT32_FROM_LE(v);
}

/* Whether buf starts with magic (a string, without its NUL). */
static bool starts_with(const uint8_t *buf, int buf_size, const char *magic)
{
    size_t len = strlen(magic);

    return (size_t)buf_size >= len && memcmp(buf, magic, len) == 0;
}

/* Whether a fixed-size text field holds exactly str, NUL-terminated. */
static bool field_is(const uint8_t *field, const char *str)
{
    return memcmp(field, str, strlen(str) + 1) == 0;
}

/*
 * A VMDK text descriptor ("# Disk DescriptorFile" ...), as QEMU's
 * vmdk_probe() reads one: comment lines and blank lines, then
 * "version=1", "2" or "3" on a line of its own (LF or CRLF). An empty
 * line counts as blank here; QEMU's probe stops at one, and takes the
 * descriptor for raw.
 */
static bool vmdk_is_descriptor(const uint8_t *buf, int buf_size)
{
    const char *p = (const char *)buf;
    const char *end = p + buf_size;

    while (p < end) {
        const char *eol = memchr(p, '\n', end - p);
        size_t len;

        if (!eol) {
            return false;
        }
        len = eol - p;
        if (len && p[len - 1] == '\r') {
            len--;
        }
        if (p[0] == '#' || strspn(p, " ") >= len) {
            p = eol + 1;
            continue;
        }
        return len == strlen("version=1") &&
               memcmp(p, "version=", strlen("version=")) == 0 &&
               p[len - 1] >= '1' && p[len - 1] <= '3';
    }
    return false;
}

/* VMDK: a sparse extent's header (VMDK4 "KDMV", VMDK3 "COWD"). */
static int vmdk_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    if (starts_with(buf, buf_size, "KDMV") ||
        starts_with(buf, buf_size, "COWD") ||
        vmdk_is_descriptor(buf, buf_size)) {
        return HEAD_SCORE;
    }
    return 0;
}

/* VHDX: the file type identifier, MS-VHDX 2.2.1. */
static int vhdx_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    return starts_with(buf, buf_size, "vhdxfile") ? HEAD_SCORE : 0;
}

/*
 * VirtualBox VDI: a 512-byte header whose signature follows 64 bytes of
 * free text ("<<< ... Disk Image >>>").
 */
#define VDI_HEADER_SIZE 512
#define VDI_SIGNATURE_OFFSET 0x40
#define VDI_SIGNATURE 0xbeda107f

static int vdi_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    if (buf_size >= VDI_HEADER_SIZE &&
        load_le32(buf + VDI_SIGNATURE_OFFSET) == VDI_SIGNATURE) {
        return HEAD_SCORE;
    }
    return 0;
}

/*
 * VHD (QEMU's "vpc"): the footer's cookie. A dynamic VHD has a copy of the
 * footer at the start; a fixed one has it only in the last 512 bytes
 * (Virtual Hard Disk Image Format Specification, "Hard Disk Footer").
 */
#define VHD_COOKIE "conectix"
#define VHD_FOOTER_SIZE 512

static int vpc_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    return starts_with(buf, buf_size, VHD_COOKIE) ? HEAD_SCORE : 0;
}

static int vpc_probe_tail(const uint8_t *tail, int tail_size)
{
    if (tail_size == VHD_FOOTER_SIZE &&
        starts_with(tail, tail_size, VHD_COOKIE)) {
        return TAIL_SCORE;
    }
    return 0;
}

/* QED: "QED\0", in a header of 64 bytes (docs/interop/qed_spec.txt). */
#define QED_HEADER_SIZE 64

static int qed_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    if (buf_size >= QED_HEADER_SIZE && memcmp(buf, "QED", 4) == 0) {
        return HEAD_SCORE;
    }
    return 0;
}

/*
 * qcow version 1: "QFI\xfb" and version 1 in a 48-byte header. qcow2 has
 * the same magic with version 2 or 3: those are the qcow2 driver's.
 */
#define QCOW_MAGIC 0x514649fb
#define QCOW1_HEADER_SIZE 48

static int qcow_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    if (buf_size >= QCOW1_HEADER_SIZE && load_be32(buf) == QCOW_MAGIC &&
        load_be32(buf + 4) == 1) {
        return HEAD_SCORE;
    }
    return 0;
}

/*
 * Parallels: one of two 16-byte magics (the second for images with a
 * format extension) and version 2, in a 64-byte header.
 */
#define PARALLELS_HEADER_SIZE 64
#define PARALLELS_VERSION_OFFSET 16
#define PARALLELS_VERSION 2

static int parallels_probe(const uint8_t *buf, int buf_size,
                           const char *filename)
{
    if (buf_size >= PARALLELS_HEADER_SIZE &&
        (starts_with(buf, buf_size, "WithoutFreeSpace") ||
         starts_with(buf, buf_size, "WithouFreSpacExt")) &&
        load_le32(buf + PARALLELS_VERSION_OFFSET) == PARALLELS_VERSION) {
        return HEAD_SCORE;
    }
    return 0;
}

/*
 * Apple dmg (UDIF): a 512-byte trailer, the "koly" block, ends the file;
 * its header-size field (big-endian, at 8) says 512. The file has no
 * header: its data fork starts at byte 0.
 */
#define UDIF_TRAILER_SIZE 512
#define UDIF_HEADER_SIZE_OFFSET 8

static int dmg_probe_tail(const uint8_t *tail, int tail_size)
{
    if (tail_size == UDIF_TRAILER_SIZE &&
        starts_with(tail, tail_size, "koly") &&
        load_be32(tail + UDIF_HEADER_SIZE_OFFSET) == UDIF_TRAILER_SIZE) {
        return TAIL_SCORE;
    }
    return 0;
}

/*
 * cloop 2.0: the shell script that mounts the image heads the file. Only
 * a score of 2, as QEMU: a script is weaker evidence than a magic number.
 */
#define CLOOP_V2_SCRIPT "#!/bin/sh\n#V2.0 Format\n" \
    "modprobe cloop file=$0 && mount -r -t iso9660 /dev/cloop $1\n"

static int cloop_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    return starts_with(buf, buf_size, CLOOP_V2_SCRIPT) ? 2 : 0;
}

/*
 * Bochs redolog: in a 512-byte little-endian header, NUL-terminated
 * strings for the magic (32 bytes), the type (16) and the subtype (16),
 * then the version, 1.0 or 2.0. QEMU claims only the "Growing" subtype,
 * the one it reads; "Undoable" and "Volatile" images are no more raw, so
 * any subtype is taken here.
 */
#define BOCHS_HEADER_SIZE 512
#define BOCHS_TYPE_OFFSET 32
#define BOCHS_VERSION_OFFSET 64
#define BOCHS_VERSION_1 0x00010000
#define BOCHS_VERSION_2 0x00020000

static int bochs_probe(const uint8_t *buf, int buf_size, const char *filename)
{
    uint32_t version;

    if (buf_size < BOCHS_HEADER_SIZE) {
        return 0;
    }
    version = load_le32(buf + BOCHS_VERSION_OFFSET);
    if (field_is(buf, "Bochs Virtual HD Image") &&
        field_is(buf + BOCHS_TYPE_OFFSET, "Redolog") &&
        (version == BOCHS_VERSION_1 || version == BOCHS_VERSION_2)) {
        return HEAD_SCORE;
    }
    return 0;
}

static int foreign_open(BlockDriverState *bs, GHashTable *opts, int flags,
                        Error **errp);

/*
 * The formats of this build that can be read ("raw, luks and qcow2"), or
 * created: what a refusal offers instead.
 */
static char *supported_formats(bool create)
{
    g_autoptr(GPtrArray) names = g_ptr_array_new();
    GString *list = g_string_new(NULL);

    for (size_t i = 0; bdrv_drivers[i]; i++) {
        const BlockDriver *drv = bdrv_drivers[i];

        if (!drv->is_protocol && !drv->is_filter &&
            drv->bdrv_open != foreign_open &&
            (!create || drv->bdrv_create)) {
            g_ptr_array_add(names, (gpointer)drv->format_name);
        }
    }
    for (guint i = 0; i < names->len; i++) {
        if (i) {
            g_string_append(list, i + 1 == names->len ? " and " : ", ");
        }
        g_string_append(list, g_ptr_array_index(names, i));
    }
    return g_string_free(list, FALSE);
}

/*
 * Whether the file under bs holds an image of bs's format: probing picks
 * this driver for its bytes. The driver may have been named by the user
 * (-f vmdk) rather than found by probing.
 */
static bool foreign_file_matches(BlockDriverState *bs)
{
    uint8_t buf[BDRV_PROBE_BUF_SIZE];
    uint8_t tail[BDRV_PROBE_TAIL_SIZE];
    int n, tail_n;

    if (bdrv_probe_read(bs->file, buf, &n, tail, &tail_n, NULL) < 0) {
        return false;
    }
    return bdrv_probe_all(buf, n, tail, tail_n,
                          bdrv_get_filename(bs->file)) == bs->drv;
}

static int foreign_open(BlockDriverState *bs, GHashTable *opts, int flags,
                        Error **errp)
{
    const char *format = bs->drv->format_name;
    g_autofree char *formats = supported_formats(false);

    if (foreign_file_matches(bs)) {
        error_setg(errp, "This is a %s image; qemu-img-lite reads %s",
                   format, formats);
    } else {
        error_setg(errp, "Image format '%s' is not supported; "
                   "qemu-img-lite reads %s", format, formats);
    }
    return -1;
}

static int foreign_refuse_create(const char *format, Error **errp)
{
    g_autofree char *formats = supported_formats(true);

    error_setg(errp, "Image format '%s' is not supported; qemu-img-lite "
               "creates %s images", format, formats);
    return -1;
}

/*
 * A refusing driver. bdrv_create and bdrv_measure are not told which
 * driver they belong to, so each format has its own, which name it (and
 * so create, convert -O and measure -O say the format is not supported,
 * rather than that it cannot create images).
 */
#define FOREIGN_DRIVER(name, probe, probe_tail)                             \
    static int name##_create(BlockDriverState *file, GHashTable *opts,     \
                             int flags, BlockDriverState **pbs,            \
                             Error **errp)                                 \
    {                                                                      \
        return foreign_refuse_create(#name, errp);                         \
    }                                                                      \
                                                                           \
    static int name##_measure(GHashTable *opts, BlockDriverState *in_bs,  \
                              uint64_t size, BlockMeasureInfo *info,       \
                              Error **errp)                                \
    {                                                                      \
        return foreign_refuse_create(#name, errp);                         \
    }                                                                      \
                                                                           \
    const BlockDriver bdrv_##name = {                                      \
        .format_name = #name,                                              \
        .bdrv_probe = probe,                                               \
        .bdrv_probe_tail = probe_tail,                                     \
        .bdrv_open = foreign_open,                                         \
        .bdrv_create = name##_create,                                      \
        .bdrv_measure = name##_measure,                                    \
    }

FOREIGN_DRIVER(vmdk, vmdk_probe, NULL);
FOREIGN_DRIVER(vhdx, vhdx_probe, NULL);
FOREIGN_DRIVER(vdi, vdi_probe, NULL);
FOREIGN_DRIVER(vpc, vpc_probe, vpc_probe_tail);
FOREIGN_DRIVER(qed, qed_probe, NULL);
FOREIGN_DRIVER(qcow, qcow_probe, NULL);
FOREIGN_DRIVER(parallels, parallels_probe, NULL);
FOREIGN_DRIVER(dmg, NULL, dmg_probe_tail);
FOREIGN_DRIVER(cloop, cloop_probe, NULL);
FOREIGN_DRIVER(bochs, bochs_probe, NULL);
