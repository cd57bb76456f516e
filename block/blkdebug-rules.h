/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * blkdebug's error-injection rules in QEMU's syntax (inject-error.N.*,
 * set-state.N.*, config=FILE): block/blkdebug-rules.c says how they fire.
 */
#ifndef BLOCK_BLKDEBUG_RULES_H
#define BLOCK_BLKDEBUG_RULES_H

#include "block/block_int.h"

typedef enum {
    BLKDEBUG_IO_READ,
    BLKDEBUG_IO_WRITE,
    BLKDEBUG_IO_WRITE_ZEROES,
    BLKDEBUG_IO_DISCARD,
    BLKDEBUG_IO_FLUSH,
    BLKDEBUG_IO_BLOCK_STATUS,
    BLKDEBUG_IO__MAX,
} BlkdebugIOType;

typedef struct BlkdebugRules BlkdebugRules;

/* Take config= and the rule options from opts; NULL and errp on error. */
BlkdebugRules *blkdebug_rules_take(GHashTable *opts, Error **errp);
void blkdebug_rules_free(BlkdebugRules *r);
bool blkdebug_rules_empty(BlkdebugRules *r);
/* An event happened (QEMU's name): activate its rules, move the state. */
void blkdebug_rules_event(BlkdebugRules *r, const char *event);
/* The errno a request of type at [offset, +bytes) fails with, or 0. */
int blkdebug_rules_check(BlkdebugRules *r, BlkdebugIOType type,
                         uint64_t offset, uint64_t bytes);

#endif
