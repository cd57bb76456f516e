/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite map: which ranges of an image hold data, and where, as
 * qemu-img 7.2 prints them. The block layer says what each run of one
 * node is (bdrv_block_status()); this walks a run down the backing chain
 * until a node has it, and joins runs that read the same way.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "img.h"

/* qemu-img asks about at most 1 GiB at a time. */
#define MAP_PROBE_MAX (1ull << 30)

typedef struct MapEntry {
    uint64_t start;
    uint64_t length;
    int depth;              /* backing files below the top that hold it */
    bool present;           /* some node of the chain has it allocated */
    bool zero;
    bool data;
    bool has_offset;
    uint64_t offset;        /* in filename, with has_offset */
    const char *filename;   /* the protocol node, with has_offset */
} MapEntry;

/* The first run at offset, from the node of the chain that holds it. */
static int map_get_status(BlockDriverState *bs, uint64_t offset,
                          uint64_t bytes, MapEntry *e, Error **errp)
{
    BlockDriverState *file = NULL;
    uint64_t map = 0;
    int depth = 0, ret;

    /* A filter on top (blkdebug): its image's chain is the one walked. */
    bs = bdrv_skip_filters(bs);
    for (;;) {
        ret = bdrv_block_status(bs, offset, bytes, &bytes, &map, &file, errp);
        if (ret < 0) {
            return -1;
        }
        if (!bytes) {
            error_setg(errp, "Input/output error");
            return -1;
        }
        if (ret & (BDRV_BLOCK_ZERO | BDRV_BLOCK_DATA)) {
            break;
        }
        bs = bdrv_get_backing(bs);
        if (!bs) {
            ret = 0;
            break;
        }
        depth++;
    }
    *e = (MapEntry) {
        .start = offset,
        .length = bytes,
        .depth = depth,
        .present = ret & BDRV_BLOCK_ALLOCATED,
        .zero = ret & BDRV_BLOCK_ZERO,
        .data = ret & BDRV_BLOCK_DATA,
        .has_offset = ret & BDRV_BLOCK_OFFSET_VALID,
        .offset = map,
    };
    if (e->has_offset && file) {
        e->filename = bdrv_get_filename(file);
    }
    return 0;
}

/* Whether next continues curr: same status, same file, adjacent there. */
static bool map_entry_mergeable(const MapEntry *curr, const MapEntry *next)
{
    if (!curr->length) {
        return false;
    }
    if (curr->zero != next->zero || curr->data != next->data ||
        curr->depth != next->depth || curr->present != next->present ||
        !curr->filename != !next->filename ||
        curr->has_offset != next->has_offset) {
        return false;
    }
    if (curr->filename && strcmp(curr->filename, next->filename)) {
        return false;
    }
    return !curr->has_offset ||
           curr->offset + curr->length == next->offset;
}

/*
 * Print e (qemu-img's formats); next is the entry that follows, or NULL
 * for the last one. Human output lists data only and cannot show data
 * that has no host offset (compressed, encrypted): that is an error.
 */
static int map_print_entry(bool json, const MapEntry *e, MapEntry *next)
{
    if (json) {
        printf("{ \"start\": %" PRIu64 ", \"length\": %" PRIu64 ", "
               "\"depth\": %d, \"present\": %s, \"zero\": %s, "
               "\"data\": %s", e->start, e->length, e->depth,
               e->present ? "true" : "false", e->zero ? "true" : "false",
               e->data ? "true" : "false");
        if (e->has_offset) {
            printf(", \"offset\": %" PRIu64, e->offset);
        }
        putchar('}');
        if (next) {
            puts(",");
        }
        return 0;
    }
    if (e->data && !e->has_offset) {
        img_error(NULL, "File contains external, encrypted or compressed "
                  "clusters.");
        return -1;
    }
    if (e->data && !e->zero) {
        printf("%#-16" PRIx64 "%#-16" PRIx64 "%#-16" PRIx64 "%s\n",
               e->start, e->length, e->has_offset ? e->offset : 0,
               e->filename ? e->filename : "");
    }
    /*
     * Human output does not tell holes, zeroes and allocated zeroes apart:
     * as qemu-img, make them alike so that they join.
     */
    if (next && (!next->data || next->zero)) {
        next->data = false;
        next->zero = true;
    }
    return 0;
}

/* qemu-img's cvtnum() for --start-offset and --max-length. */
static int map_parse_offset(const char *name, const char *str,
                            uint64_t *value)
{
    if (qemu_strtosz(str, value, NULL) < 0) {
        img_error(NULL, "Invalid %s specified. You may use k, M, G, T, P or "
                  "E suffixes for", name);
        img_error(NULL, "kilobytes, megabytes, gigabytes, terabytes, "
                  "petabytes and exabytes.");
        return -1;
    }
    if (*value > G_MAXINT64) {
        img_error(NULL, "Invalid %s specified. Must be between 0 and %"
                  G_GINT64_FORMAT ".", name, G_MAXINT64);
        return -1;
    }
    return 0;
}

static int map_image(BlockDriverState *bs, const char *filename, bool json,
                     uint64_t start, uint64_t max_length, bool has_max)
{
    MapEntry curr = { .start = start }, next;
    Error *err = NULL;
    int64_t length;

    if (json) {
        putchar('[');
    } else {
        printf("%-16s%-16s%-16s%s\n", "Offset", "Length", "Mapped to",
               "File");
    }
    length = bdrv_getlength(bs, &err);
    if (length < 0) {
        error_free(err);
        img_error(NULL, "Failed to get size for '%s'", filename);
        return -1;
    }
    if (has_max) {
        length = MIN(start + max_length, (uint64_t)length);
    }
    while (curr.start + curr.length < (uint64_t)length) {
        uint64_t offset = curr.start + curr.length;

        if (img_interrupted) {
            img_error(NULL, "Interrupted");
            return -1;
        }
        if (map_get_status(bs, offset, MIN(MAP_PROBE_MAX, length - offset),
                           &next, &err) < 0) {
            img_error(NULL, "Could not read file metadata: %s",
                      error_get_pretty(err));
            error_free(err);
            return -1;
        }
        if (map_entry_mergeable(&curr, &next)) {
            curr.length += next.length;
            continue;
        }
        if (curr.length && map_print_entry(json, &curr, &next) < 0) {
            return -1;
        }
        curr = next;
    }
    if (map_print_entry(json, &curr, NULL) < 0) {
        return -1;
    }
    if (json) {
        puts("]");
    }
    return 0;
}

int img_map(int argc, char **argv)
{
    g_autofree char *fmt = NULL, *output = NULL;
    g_autofree char *start_str = NULL, *length_str = NULL;
    g_autoptr(BlockDriverState) bs = NULL;
    gboolean image_opts = FALSE, force_share = FALSE;
    ImgCommonOpts common = { 0 };
    const GOptionEntry entries[] = {
        { "format", 'f', 0, G_OPTION_ARG_STRING, &fmt,
          "image format (default: probe)", "FMT" },
        { "image-opts", 0, 0, G_OPTION_ARG_NONE, &image_opts,
          "FILENAME is an option string (driver=...,file.filename=...)",
          NULL },
        { "output", 0, 0, G_OPTION_ARG_STRING, &output,
          "output format: human (default) or json", "FMT" },
        { "start-offset", 's', 0, G_OPTION_ARG_STRING, &start_str,
          "map from this offset on (default 0)", "OFFSET" },
        { "max-length", 'l', 0, G_OPTION_ARG_STRING, &length_str,
          "map at most this many bytes", "LENGTH" },
        { "force-share", 'U', 0, G_OPTION_ARG_NONE, &force_share,
          "take no image lock, and read the image even while another "
          "process writes it (what is read may be inconsistent)", NULL },
        { NULL }
    };
    uint64_t start = 0, max_length = 0;
    bool json;
    int ret = 1;

    if (img_parse_args(&argc, &argv, "FILENAME",
                       "Show which ranges of an image hold data, which read "
                       "as zeroes, and where they lie in which file.",
                       "Human output lists the data only; json lists every "
                       "range, with its depth in the backing chain.\n\n"
                       "Example:\n  qemu-img-lite map --output=json "
                       "disk.qcow2", entries, &common) < 0) {
        goto out;
    }
    if (img_parse_output_format(output, &json) < 0) {
        goto out;
    }
    if ((start_str && map_parse_offset("start offset", start_str,
                                       &start) < 0) ||
        (length_str && map_parse_offset("max length", length_str,
                                        &max_length) < 0)) {
        goto out;
    }
    if (argc != 2) {
        img_error(NULL, "Expecting one image file name");
        goto out;
    }
    if (img_add_objects(common.objects) < 0) {
        goto out;
    }
    bs = img_open(argv[1], fmt, image_opts,
                  force_share ? BDRV_O_FORCE_SHARE : 0);
    if (!bs) {
        goto out;
    }
    if (map_image(bs, argv[1], json, start, max_length, length_str) == 0) {
        ret = 0;
    }

out:
    img_common_opts_clear(&common);
    return ret;
}
