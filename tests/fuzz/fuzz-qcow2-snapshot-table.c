/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Fuzz target: the qcow2 snapshot table parser (qcow2_snapshots_parse,
 * block/qcow2-snapshot.c), from a buffer.
 *
 * The input: the number of entries (2 bytes, big-endian: a small table
 * keeps an input quick), then the table's bytes, zero-padded as the
 * driver pads a table that runs past the end of the file. A table that
 * parses must keep its promises: its entries lie inside the input and
 * their strings are as long as the entry says; written out again
 * (qcow2_snapshots_serialize) and parsed back it is the same table.
 */
#include "block/qcow2.h"
#include "fuzz-image.h"

/* The disk size an entry without one stands for. */
#define FUZZ_DISK_SIZE (1ull << 30)

static void fuzz_same(const Qcow2Snapshot *a, const Qcow2Snapshot *b)
{
    if (a->l1_table_offset != b->l1_table_offset ||
        a->l1_size != b->l1_size || a->disk_size != b->disk_size ||
        a->vm_state_size != b->vm_state_size ||
        a->date_sec != b->date_sec || a->date_nsec != b->date_nsec ||
        a->vm_clock_nsec != b->vm_clock_nsec ||
        /* Written, a missing icount is the "none" value it stood for. */
        a->icount != b->icount ||
        a->unknown_extra_size != b->unknown_extra_size ||
        strcmp(a->id, b->id) || strcmp(a->name, b->name) ||
        (a->unknown_extra_size &&
         memcmp(a->unknown_extra, b->unknown_extra, a->unknown_extra_size))) {
        fuzz_fail("snapshot entry changed when written and read back");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Qcow2Snapshot *sn = NULL, *again = NULL;
    g_autoptr(Error) err = NULL;
    g_autofree uint8_t *out = NULL;
    uint64_t table_size, size2;
    size_t out_len;
    uint32_t nb;
    int ret;

    fuzz_init();
    if (size < 2) {
        return 0;
    }
    nb = lduw_be_p(data);
    ret = qcow2_snapshots_parse(data + 2, size - 2, nb, FUZZ_DISK_SIZE, &sn,
                                &table_size, &err);
    g_assert((ret < 0) == !!err);
    fuzz_debug("snapshot table", err);
    if (ret != 0) {
        g_assert(!sn);
        return 0;
    }
    if (table_size > size - 2) {
        fuzz_fail("table of %" PRIu64 " bytes in an input of %zu",
                  table_size, size - 2);
    }
    for (uint32_t i = 0; i < nb; i++) {
        if (strlen(sn[i].id) > UINT16_MAX || strlen(sn[i].name) > UINT16_MAX ||
            sn[i].unknown_extra_size > QCOW2_SNAPSHOT_MAX_EXTRA) {
            fuzz_fail("entry %" PRIu32 " larger than its fields allow", i);
        }
    }
    out = qcow2_snapshots_serialize(sn, nb, &out_len);
    ret = qcow2_snapshots_parse(out, out_len, nb, FUZZ_DISK_SIZE, &again,
                                &size2, NULL);
    if (ret != 0 || size2 != out_len) {
        fuzz_fail("a table written out does not parse back");
    }
    for (uint32_t i = 0; i < nb; i++) {
        fuzz_same(&sn[i], &again[i]);
    }
    qcow2_snapshots_free(sn, nb);
    qcow2_snapshots_free(again, nb);
    return 0;
}
