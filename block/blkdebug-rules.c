/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * blkdebug's rules in QEMU's syntax (block/blkdebug-rules.h): what
 * qemu-iotests and QEMU users write, as options or as a config file:
 *
 *   inject-error.0.event=write_aio,inject-error.0.errno=28,
 *   inject-error.0.once=on,set-state.0.event=...,set-state.0.new_state=2
 *
 *   [inject-error]
 *   event = "write_aio"
 *   errno = "28"
 *
 * QEMU's semantics: an event activates the inject-error rules listed for
 * it (those of the current state), replacing the rules active before; the
 * next request of a matching I/O type (and sector, if one is given) then
 * fails with the rule's errno (once: the rule goes away after it). A
 * set-state rule for the event moves the state machine on.
 *
 * Events: QEMU's whole list is accepted. As in QEMU, the formats above
 * raise read_aio and write_aio before they read or write guest data
 * (raw, qcow2: bdrv_debug_event()), and a write or a flush of the filter
 * itself raises pwritev, or flush_to_os then flush_to_disk. Of qcow2's
 * metadata events only cluster_free and those of emptying an image
 * (block/qcow2-empty.c) are raised: rules on the others (l2_update...)
 * are taken and never fire.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "block/blkdebug-rules.h"

static const char *const blkdebug_events[] = {
    "l1_update", "l1_grow_alloc_table", "l1_grow_write_table",
    "l1_grow_activate_table", "l2_load", "l2_update", "l2_update_compressed",
    "l2_alloc_cow_read", "l2_alloc_write", "read_aio", "read_backing_aio",
    "read_compressed", "write_aio", "write_compressed", "vmstate_load",
    "vmstate_save", "cow_read", "cow_write", "reftable_load",
    "reftable_grow", "reftable_update", "refblock_load", "refblock_update",
    "refblock_update_part", "refblock_alloc", "refblock_alloc_hookup",
    "refblock_alloc_write", "refblock_alloc_write_blocks",
    "refblock_alloc_write_table", "refblock_alloc_switch_table",
    "cluster_alloc", "cluster_alloc_bytes", "cluster_free", "flush_to_os",
    "flush_to_disk", "pwritev_rmw_head", "pwritev_rmw_after_head",
    "pwritev_rmw_tail", "pwritev_rmw_after_tail", "pwritev", "pwritev_zero",
    "pwritev_done", "empty_image_prepare", "l1_shrink_write_table",
    "l1_shrink_free_l2_clusters", "cor_write", "cluster_alloc_space", "none",
};

static const char *const blkdebug_iotypes[] = {
    [BLKDEBUG_IO_READ] = "read",
    [BLKDEBUG_IO_WRITE] = "write",
    [BLKDEBUG_IO_WRITE_ZEROES] = "write-zeroes",
    [BLKDEBUG_IO_DISCARD] = "discard",
    [BLKDEBUG_IO_FLUSH] = "flush",
    [BLKDEBUG_IO_BLOCK_STATUS] = "block-status",
};

typedef struct BlkdebugRule {
    bool set_state;             /* else inject-error */
    char *event;
    int64_t state;              /* 0: any */
    /* inject-error */
    int error;
    int64_t sector;             /* -1: any */
    bool once;
    uint32_t iotypes;
    /* set-state */
    int64_t new_state;
} BlkdebugRule;

struct BlkdebugRules {
    GMutex lock;
    GPtrArray *rules;           /* BlkdebugRule */
    GPtrArray *active;          /* of rules: not owned */
    int64_t state;
};

static void blkdebug_rule_free(gpointer p)
{
    BlkdebugRule *r = p;

    g_free(r->event);
    g_free(r);
}

static bool blkdebug_event_known(const char *name)
{
    for (size_t i = 0; i < G_N_ELEMENTS(blkdebug_events); i++) {
        if (g_str_equal(name, blkdebug_events[i])) {
            return true;
        }
    }
    return false;
}

/* A number as QEMU's option parser takes it (decimal, 0x, octal). */
static int blkdebug_take_int(GHashTable *o, const char *key, int64_t def,
                             int64_t *out, Error **errp)
{
    g_autofree char *v = qemu_opt_take(o, key);
    char *end;

    *out = def;
    if (!v) {
        return 0;
    }
    errno = 0;
    *out = g_ascii_strtoll(v, &end, 0);
    if (errno || end == v || *end) {
        error_setg(errp, "Parameter '%s' expects a number", key);
        return -1;
    }
    return 0;
}

/* One rule from its options (o: "event", "errno"...; all taken). */
static int blkdebug_rule_add(BlkdebugRules *r, bool set_state, GHashTable *o,
                             Error **errp)
{
    g_autofree char *event = qemu_opt_take(o, "event");
    g_autofree char *iotype = qemu_opt_take(o, "iotype");
    g_autofree char *unknown = NULL;
    BlkdebugRule rule = { .set_state = set_state };
    int64_t err = EIO;
    bool immediately;

    if (!event) {
        error_setg(errp, "Parameter 'event' is missing");
        return -1;
    }
    if (!blkdebug_event_known(event)) {
        /* QEMU's words for a value outside an enumeration */
        error_setg(errp, "Invalid parameter '%s'", event);
        return -1;
    }
    if (blkdebug_take_int(o, "state", 0, &rule.state, errp) < 0) {
        return -1;
    }
    if (set_state) {
        if (blkdebug_take_int(o, "new_state", 0, &rule.new_state,
                              errp) < 0) {
            return -1;
        }
    } else if (blkdebug_take_int(o, "errno", EIO, &err, errp) < 0 ||
               blkdebug_take_int(o, "sector", -1, &rule.sector, errp) < 0 ||
               qemu_opt_take_bool(o, "once", false, &rule.once, errp) < 0 ||
               qemu_opt_take_bool(o, "immediately", false, &immediately,
                                  errp) < 0) {
        return -1;
    }
    rule.error = err;
    /* QEMU's default: every type but block status. */
    rule.iotypes = ((1u << BLKDEBUG_IO__MAX) - 1) &
                   ~(1u << BLKDEBUG_IO_BLOCK_STATUS);
    if (iotype) {
        rule.iotypes = 0;
        for (int t = 0; t < BLKDEBUG_IO__MAX; t++) {
            if (g_str_equal(iotype, blkdebug_iotypes[t])) {
                rule.iotypes = 1u << t;
            }
        }
        if (!rule.iotypes) {
            error_setg(errp, "Invalid parameter '%s'", iotype);
            return -1;
        }
    }
    unknown = qemu_opts_first_key(o);
    if (unknown) {
        error_setg(errp, "Invalid parameter '%s'", unknown);
        return -1;
    }
    rule.event = g_steal_pointer(&event);
    g_ptr_array_add(r->rules, g_memdup2(&rule, sizeof(rule)));
    return 0;
}

/*
 * QEMU's config file: [inject-error] and [set-state] sections of
 * key = "value" lines, '#' comments.
 */
static int blkdebug_read_config(BlkdebugRules *r, const char *path,
                                Error **errp)
{
    g_autofree char *text = NULL;
    g_autoptr(GError) gerr = NULL;
    g_auto(GStrv) lines = NULL;
    g_autoptr(GHashTable) o = NULL;
    bool set_state = false;

    if (!g_file_get_contents(path, &text, NULL, &gerr)) {
        error_setg(errp, "Could not read blkdebug config file: %s",
                   gerr->message);
        return -1;
    }
    lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; ; l++) {
        char *line = *l ? g_strstrip(*l) : NULL;
        char *eq;

        if (!line || line[0] == '[') {
            if (o && blkdebug_rule_add(r, set_state, o, errp) < 0) {
                error_prepend(errp, "%s: ", path);
                return -1;
            }
            g_clear_pointer(&o, g_hash_table_unref);
            if (!line) {
                return 0;
            }
            if (g_str_equal(line, "[inject-error]") ||
                g_str_equal(line, "[set-state]")) {
                set_state = g_str_equal(line, "[set-state]");
                o = qemu_opts_new();
                continue;
            }
            error_setg(errp, "%s: unknown section '%s'", path, line);
            return -1;
        }
        if (!*line || line[0] == '#') {
            continue;
        }
        eq = strchr(line, '=');
        if (!o || !eq) {
            error_setg(errp, "%s: cannot parse '%s'", path, line);
            return -1;
        }
        *eq = '\0';
        {
            char *key = g_strstrip(line);
            char *val = g_strstrip(eq + 1);
            size_t n = strlen(val);

            if (n >= 2 && val[0] == '"' && val[n - 1] == '"') {
                val[n - 1] = '\0';
                val++;
            }
            g_hash_table_insert(o, g_strdup(key), g_strdup(val));
        }
    }
}

BlkdebugRules *blkdebug_rules_take(GHashTable *opts, Error **errp)
{
    g_autofree char *config = qemu_opt_take(opts, "config");
    BlkdebugRules *r = g_new0(BlkdebugRules, 1);

    g_mutex_init(&r->lock);
    r->rules = g_ptr_array_new_with_free_func(blkdebug_rule_free);
    r->active = g_ptr_array_new();
    r->state = 1;               /* QEMU's machine starts in state 1 */
    if (config && *config && blkdebug_read_config(r, config, errp) < 0) {
        goto fail;
    }
    /* inject-error.N.* and set-state.N.*, N from 0 while present. */
    for (int kind = 0; kind < 2; kind++) {
        const char *name = kind ? "set-state" : "inject-error";

        for (unsigned n = 0; ; n++) {
            g_autofree char *prefix = g_strdup_printf("%s.%u", name, n);
            g_autoptr(GHashTable) o = qemu_opts_extract_prefix(opts, prefix);

            if (!g_hash_table_size(o)) {
                break;
            }
            if (blkdebug_rule_add(r, kind, o, errp) < 0) {
                goto fail;
            }
        }
    }
    /* Rules on the event "none" are armed from the start (qemu-iotests 251). */
    blkdebug_rules_event(r, "none");
    return r;

fail:
    blkdebug_rules_free(r);
    return NULL;
}

void blkdebug_rules_free(BlkdebugRules *r)
{
    if (!r) {
        return;
    }
    g_ptr_array_unref(r->active);
    g_ptr_array_unref(r->rules);
    g_mutex_clear(&r->lock);
    g_free(r);
}

bool blkdebug_rules_empty(BlkdebugRules *r)
{
    return !r->rules->len;
}

void blkdebug_rules_event(BlkdebugRules *r, const char *event)
{
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&r->lock);
    int64_t new_state = r->state;
    bool injected = false;

    for (guint i = 0; i < r->rules->len; i++) {
        BlkdebugRule *rule = g_ptr_array_index(r->rules, i);

        if (!g_str_equal(rule->event, event) ||
            (rule->state && rule->state != r->state)) {
            continue;
        }
        if (rule->set_state) {
            new_state = rule->new_state;
            continue;
        }
        /* The event's rules replace those active before (QEMU's). */
        if (!injected) {
            g_ptr_array_set_size(r->active, 0);
            injected = true;
        }
        g_ptr_array_add(r->active, rule);
    }
    r->state = new_state;
}

int blkdebug_rules_check(BlkdebugRules *r, BlkdebugIOType type,
                         uint64_t offset, uint64_t bytes)
{
    g_autoptr(GMutexLocker) locker = g_mutex_locker_new(&r->lock);

    for (guint i = 0; i < r->active->len; i++) {
        BlkdebugRule *rule = g_ptr_array_index(r->active, i);
        int error;

        if (!(rule->iotypes & (1u << type)) ||
            (rule->sector >= 0 &&
             ((uint64_t)rule->sector * 512 + 512 <= offset ||
              (uint64_t)rule->sector * 512 >= offset + bytes))) {
            continue;
        }
        error = rule->error;
        if (rule->once) {
            g_ptr_array_remove_index(r->active, i);
            g_ptr_array_remove(r->rules, rule);
        }
        return error;
    }
    return 0;
}
