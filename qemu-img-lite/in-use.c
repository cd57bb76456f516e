/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Is a file or block device in use by the kernel? In-place re-encryption
 * rewrites every byte under whoever reads it: a loop device over the
 * file (mounted or not), a mounted device, a device held by device-mapper
 * or md. cryptsetup refuses those (and any regular file) unless given
 * --force-offline-reencrypt; so do we, for what we can see:
 *
 * - a regular file: the backing file of a loop device
 *   (/sys/block/loopN/loop/backing_file, compared by device and inode);
 * - a block device: an exclusive open (O_EXCL) fails with EBUSY while it
 *   is mounted or claimed (dm, md, a mounted partition), and
 *   /sys/dev/block/MAJ:MIN/holders lists what holds it.
 *
 * Our own users (another qemu-img-lite, QEMU) are kept out by the image
 * locks of the file protocol, not here.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "img.h"

/* The loop device whose backing file is st's inode, or NULL. */
static char *loop_device_over(const struct stat *st)
{
    g_autoptr(GDir) dir = g_dir_open("/sys/block", 0, NULL);
    const char *name;

    if (!dir) {
        return NULL;
    }
    while ((name = g_dir_read_name(dir))) {
        g_autofree char *path = NULL, *backing = NULL;
        struct stat bst;
        char *nl;

        if (!g_str_has_prefix(name, "loop")) {
            continue;
        }
        path = g_strdup_printf("/sys/block/%s/loop/backing_file", name);
        if (!g_file_get_contents(path, &backing, NULL, NULL)) {
            continue;               /* not attached */
        }
        nl = strchr(backing, '\n');
        if (nl) {
            *nl = '\0';
        }
        if (stat(backing, &bst) == 0 && bst.st_dev == st->st_dev &&
            bst.st_ino == st->st_ino) {
            return g_strdup_printf("/dev/%s", name);
        }
    }
    return NULL;
}

/* The first holder of block device rdev (dm-0, md0...), or NULL. */
static char *block_device_holder(dev_t rdev)
{
    g_autofree char *path = g_strdup_printf("/sys/dev/block/%u:%u/holders",
                                            major(rdev), minor(rdev));
    g_autoptr(GDir) dir = g_dir_open(path, 0, NULL);
    const char *name = dir ? g_dir_read_name(dir) : NULL;

    return g_strdup(name);
}

int img_check_not_in_use(const char *path, Error **errp)
{
    struct stat st;

    if (stat(path, &st) < 0) {
        return 0;                   /* not a local file: the open says */
    }
    if (S_ISREG(st.st_mode)) {
        g_autofree char *loop = loop_device_over(&st);

        if (loop) {
            error_setg(errp, "'%s' is in use by the loop device %s: detach "
                       "it first (losetup -d %s), or force with "
                       "--force-offline-reencrypt", path, loop, loop);
            return -1;
        }
    } else if (S_ISBLK(st.st_mode)) {
        g_autofree char *holder = block_device_holder(st.st_rdev);
        int fd;

        if (holder) {
            error_setg(errp, "'%s' is in use by %s: deactivate it first, or "
                       "force with --force-offline-reencrypt", path, holder);
            return -1;
        }
        fd = open(path, O_RDONLY | O_EXCL | O_CLOEXEC);
        if (fd < 0 && errno == EBUSY) {
            error_setg(errp, "'%s' is in use (mounted, or opened "
                       "exclusively): unmount it first, or force with "
                       "--force-offline-reencrypt", path);
            return -1;
        }
        if (fd >= 0) {
            close(fd);
        }
    }
    return 0;
}
