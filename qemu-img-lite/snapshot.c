/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite snapshot: list, create, apply or delete the internal
 * snapshots of an image (qcow2), in qemu-img 7.2's words; and the
 * "Snapshot list:" table that info shares.
 */
#include <stdio.h>
#include <inttypes.h>
#include <time.h>

#include "img.h"

void img_print_snapshot_list(const BlockSnapshotInfo *list, size_t n)
{
    printf("Snapshot list:\n");
    /* qemu-img 7.2's columns (bdrv_snapshot_dump) */
    printf("%-10s%-17s%8s%20s%13s%11s\n", "ID", "TAG", "VM SIZE", "DATE",
           "VM CLOCK", "ICOUNT");
    for (size_t i = 0; i < n; i++) {
        const BlockSnapshotInfo *sn = &list[i];
        g_autofree char *size = img_size_to_str(sn->vm_state_size);
        uint64_t secs = sn->vm_clock_nsec / 1000000000ull;
        char date[64] = "", clock[64], icount[32] = "";
        time_t t = sn->date_sec;
        struct tm tm;

        if (localtime_r(&t, &tm)) {
            strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S", &tm);
        }
        snprintf(clock, sizeof(clock), "%02d:%02d:%02d.%03d",
                 (int)(secs / 3600), (int)((secs / 60) % 60),
                 (int)(secs % 60),
                 (int)((sn->vm_clock_nsec / 1000000) % 1000));
        if (sn->icount != UINT64_MAX) {
            snprintf(icount, sizeof(icount), "%" PRId64,
                     (int64_t)sn->icount);
        }
        printf("%-9s %-16s %8s%20s%13s%11s\n", sn->id, sn->name, size, date,
               clock, icount);
    }
}

static void snapshot_usage_hint(void)
{
    fprintf(stderr, "Try 'qemu-img-lite --help' for more information\n");
}

int img_snapshot(int argc, char **argv)
{
    g_autofree char *fmt = NULL, *create = NULL, *apply = NULL;
    g_autofree char *delete = NULL;
    g_autoptr(BlockDriverState) bs = NULL;
    gboolean image_opts = FALSE, force_share = FALSE, list = FALSE;
    ImgCommonOpts common = { 0 };
    const GOptionEntry entries[] = {
        { "format", 'f', 0, G_OPTION_ARG_STRING, &fmt,
          "image format (default: probe)", "FMT" },
        { "image-opts", 0, 0, G_OPTION_ARG_NONE, &image_opts,
          "FILENAME is an option string (driver=...,file.filename=...)",
          NULL },
        { "force-share", 'U', 0, G_OPTION_ARG_NONE, &force_share,
          "open the image even if another process holds it (with -l)",
          NULL },
        { "list", 'l', 0, G_OPTION_ARG_NONE, &list,
          "list the snapshots (the default)", NULL },
        { "create", 'c', 0, G_OPTION_ARG_STRING, &create,
          "create a snapshot named NAME", "NAME" },
        { "apply", 'a', 0, G_OPTION_ARG_STRING, &apply,
          "revert the image to the snapshot with id or name NAME", "NAME" },
        { "delete", 'd', 0, G_OPTION_ARG_STRING, &delete,
          "delete the snapshot named NAME", "NAME" },
        { NULL }
    };
    BlockSnapshotInfo *sns = NULL;
    size_t nb = 0;
    Error *err = NULL;
    const char *what = NULL, *name = NULL, *warning;
    int actions, flags = BDRV_O_NO_BACKING | BDRV_O_NO_IO;
    int ret = 1;

    if (img_parse_args(&argc, &argv, "FILENAME",
                       "List, create, apply or delete the internal "
                       "snapshots of an image.",
                       "Only one of -l, -c, -a, -d; without any, -l.",
                       entries, &common) < 0) {
        goto out;
    }
    actions = !!list + !!create + !!apply + !!delete;
    if (actions > 1) {
        img_error(NULL, "Cannot mix '-l', '-a', '-c', '-d'");
        snapshot_usage_hint();
        goto out;
    }
    if (argc != 2) {
        img_error(NULL, "Expecting one image file name");
        snapshot_usage_hint();
        goto out;
    }
    if (img_add_objects(common.objects) < 0) {
        goto out;
    }
    if (create) {
        what = "create";
        name = create;
    } else if (apply) {
        what = "apply";
        name = apply;
    } else if (delete) {
        what = "delete";
        name = delete;
    }
    if (what) {
        if (force_share) {
            img_error(NULL, "Could not open '%s': force-share=on can only "
                      "be used with read-only images", argv[1]);
            goto out;
        }
        flags |= BDRV_O_RDWR;
    } else if (force_share) {
        flags |= BDRV_O_FORCE_SHARE;
    }
    bs = img_open(argv[1], fmt, image_opts, flags);
    if (!bs) {
        goto out;
    }
    if (!what) {
        if (bdrv_snapshot_list(bs, &sns, &nb, &err) < 0) {
            img_error_free(NULL, err);
            goto out;
        }
        /* Nothing at all for an image without snapshots, as qemu-img. */
        if (nb) {
            img_print_snapshot_list(sns, nb);
        }
        bdrv_snapshot_info_list_free(sns, nb);
        ret = 0;
        goto out;
    }
    warning = bdrv_get_warning(bs);
    if (create) {
        ret = bdrv_snapshot_create(bs, name, &err);
    } else if (apply) {
        ret = bdrv_snapshot_goto(bs, name, &err);
    } else {
        ret = bdrv_snapshot_delete(bs, name, &err);
    }
    if (ret == 0 && bdrv_flush_final(bs, &err) < 0) {
        ret = -1;
    }
    /* What the driver noted on the way (a leak), as qemu-img prints it. */
    if (bdrv_get_warning(bs) && bdrv_get_warning(bs) != warning) {
        fprintf(stderr, "%s\n", bdrv_get_warning(bs));
    }
    if (ret < 0) {
        img_error_before(err);
        img_error(NULL, "Could not %s snapshot '%s': %s", what, name,
                  error_get_pretty(err));
        error_free(err);
        ret = 1;
    }

out:
    img_common_opts_clear(&common);
    return ret;
}
