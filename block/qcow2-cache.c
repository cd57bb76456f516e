/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A bounded cache of qcow2 L2 tables (QEMU's qcow2-cache.c idea, reads
 * only): a fixed number of table-sized slots, least recently used evicted
 * first. Memory is capped by the slot count, never by the image: a 16 TiB
 * sparse image costs no more than a small one. Slots are allocated on
 * first use, so a small image never pays for the whole cap.
 */
#include "block/qcow2.h"

/* Past this many slots a linear search on a miss would cost too much. */
#define QCOW2_CACHE_MAX_TABLES 1024

typedef struct Qcow2CacheSlot {
    uint64_t offset;            /* 0: empty (no L2 table lives at 0) */
    uint64_t last_used;
    uint8_t *table;
} Qcow2CacheSlot;

struct Qcow2Cache {
    size_t table_size;
    size_t nslots;
    uint64_t clock;
    GHashTable *index;          /* offset -> slot + 1 */
    Qcow2CacheSlot *slots;
};

Qcow2Cache *qcow2_cache_new(size_t table_size, size_t max_bytes)
{
    Qcow2Cache *c = g_new0(Qcow2Cache, 1);

    c->table_size = table_size;
    c->nslots = CLAMP(max_bytes / table_size, QCOW2_CACHE_MIN_TABLES,
                      QCOW2_CACHE_MAX_TABLES);
    c->slots = g_new0(Qcow2CacheSlot, c->nslots);
    c->index = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free,
                                     NULL);
    return c;
}

void qcow2_cache_free(Qcow2Cache *c)
{
    if (!c) {
        return;
    }
    for (size_t i = 0; i < c->nslots; i++) {
        g_free(c->slots[i].table);
    }
    g_hash_table_destroy(c->index);
    g_free(c->slots);
    g_free(c);
}

static Qcow2CacheSlot *qcow2_cache_find(Qcow2Cache *c, uint64_t offset)
{
    gpointer v = g_hash_table_lookup(c->index, &offset);

    return v ? &c->slots[GPOINTER_TO_SIZE(v) - 1] : NULL;
}

const uint8_t *qcow2_cache_lookup(Qcow2Cache *c, uint64_t offset)
{
    Qcow2CacheSlot *slot = qcow2_cache_find(c, offset);

    if (!slot) {
        return NULL;
    }
    slot->last_used = ++c->clock;
    return slot->table;
}

uint8_t *qcow2_cache_insert(Qcow2Cache *c, uint64_t offset)
{
    Qcow2CacheSlot *victim = &c->slots[0];
    uint64_t *key;

    g_assert(offset && !qcow2_cache_find(c, offset));
    /* An empty slot, or else the least recently used one. */
    for (size_t i = 0; i < c->nslots; i++) {
        if (!c->slots[i].offset) {
            victim = &c->slots[i];
            break;
        }
        if (c->slots[i].last_used < victim->last_used) {
            victim = &c->slots[i];
        }
    }
    if (victim->offset) {
        g_hash_table_remove(c->index, &victim->offset);
    }
    if (!victim->table) {
        victim->table = g_malloc(c->table_size);
    }
    victim->offset = offset;
    victim->last_used = ++c->clock;
    key = g_new(uint64_t, 1);
    *key = offset;
    g_hash_table_insert(c->index, key,
                        GSIZE_TO_POINTER(victim - c->slots + 1));
    return victim->table;
}

void qcow2_cache_drop(Qcow2Cache *c, uint64_t offset)
{
    Qcow2CacheSlot *slot = qcow2_cache_find(c, offset);

    if (slot) {
        g_hash_table_remove(c->index, &offset);
        slot->offset = 0;
        slot->last_used = 0;
    }
}

void qcow2_cache_clear(Qcow2Cache *c)
{
    g_hash_table_remove_all(c->index);
    for (size_t i = 0; i < c->nslots; i++) {
        c->slots[i].offset = 0;
        c->slots[i].last_used = 0;
    }
}

size_t qcow2_cache_capacity(const Qcow2Cache *c)
{
    return c->nslots;
}

size_t qcow2_cache_memory(const Qcow2Cache *c)
{
    size_t n = 0;

    for (size_t i = 0; i < c->nslots; i++) {
        n += c->slots[i].table ? c->table_size : 0;
    }
    return n;
}

void qcow2_cache_update(Qcow2Cache *c, uint64_t offset, size_t pos,
                        const void *data, size_t len)
{
    Qcow2CacheSlot *slot = qcow2_cache_find(c, offset);

    g_assert(pos <= c->table_size && len <= c->table_size - pos);
    if (slot) {
        memcpy(slot->table + pos, data, len);
    }
}
