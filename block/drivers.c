/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The block drivers of this build: the one list that names them. The core
 * (block.c) looks drivers up by name here and probes every format in this
 * order, so on a tie in score the earlier wins. A new driver is a line
 * here, its extern in block/block_int.h and its file in
 * meson.build.
 *
 * The formats recognised only to be refused (block/foreign.c) come last:
 * a tie goes to a format that can be read.
 */
#include "block/block_int.h"

const BlockDriver *const bdrv_drivers[] = {
    &bdrv_file,
    &bdrv_raw,
    &bdrv_luks,
    &bdrv_qcow2,
    &bdrv_blkdebug,
    &bdrv_quorum,
    &bdrv_null_co,
    &bdrv_null_aio,
#ifdef CONFIG_NBD
    &bdrv_nbd,
    &bdrv_nbd_tcp,
    &bdrv_nbd_unix,
    &bdrv_nbds,
    &bdrv_nbds_unix,
#endif
#ifdef CONFIG_RBD
    &bdrv_rbd,
#endif
    &bdrv_vmdk,
    &bdrv_vhdx,
    &bdrv_vdi,
    &bdrv_vpc,
    &bdrv_qed,
    &bdrv_qcow,
    &bdrv_parallels,
    &bdrv_dmg,
    &bdrv_cloop,
    &bdrv_bochs,
    NULL,
};

/*
 * Every block driver name QEMU 7.2 registers (its bdrv_find_format()):
 * a name qemu-img takes where it only stores a format (rebase -u -F),
 * whether or not this build has the driver.
 */
bool bdrv_qemu_format_known(const char *name)
{
    static const char *const qemu_names[] = {
        "blkdebug", "blklogwrites", "blkreplay", "blkverify", "bochs",
        "cloop", "compress", "copy-before-write", "copy-on-read", "dmg",
        "file", "ftp", "ftps", "host_cdrom", "host_device", "http", "https",
        "iscsi", "iser", "luks", "nbd", "nfs", "null-aio", "null-co",
        "nvme", "parallels", "preallocate", "qcow", "qcow2", "qed",
        "quorum", "raw", "rbd", "replication", "snapshot-access", "ssh",
        "throttle", "vdi", "vhdx", "vmdk", "vpc", "vvfat",
    };

    for (size_t i = 0; i < G_N_ELEMENTS(qemu_names); i++) {
        if (g_str_equal(name, qemu_names[i])) {
            return true;
        }
    }
    return bdrv_find_driver(name) != NULL;
}
