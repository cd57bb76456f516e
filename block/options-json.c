/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * "json:{...}" file names: QEMU's other way to write a node's options,
 * nested objects for children. They are flattened into the dotted form
 * the block layer takes (include/block/options.h), as QEMU's
 * qdict_flatten() does:
 *
 *   json:{"driver":"luks","key-secret":"s0","file":{"filename":"x"}}
 *   -> driver=luks,key-secret=s0,file.filename=x
 *
 * Scalars become the strings the option parsers read: integers in
 * decimal, booleans "on"/"off"; null leaves the option out; array
 * elements are numbered ("list.0.x").
 */
#include <string.h>

#include <json-glib/json-glib.h>

#include "block/options.h"

static int json_flatten(GHashTable *opts, const char *prefix, JsonNode *node,
                        Error **errp);

static int json_flatten_object(GHashTable *opts, const char *prefix,
                               JsonObject *obj, Error **errp)
{
    g_autoptr(GList) members = json_object_get_members(obj);

    for (GList *m = members; m; m = m->next) {
        const char *name = m->data;
        g_autofree char *key = prefix ? g_strconcat(prefix, ".", name, NULL)
                                      : g_strdup(name);
        JsonNode *child = json_object_get_member(obj, name);

        /* No option is named so: and "a=b" could not be written back. */
        if (!*name || strpbrk(name, "=,")) {
            error_setg(errp, "Invalid option name '%s' in the JSON options",
                       name);
            return -1;
        }

        /*
         * A string where a child node belongs names an existing node in
         * QEMU (a node-name); a tool opening one image has none.
         */
        if (g_str_equal(name, "file") &&
            JSON_NODE_HOLDS_VALUE(child) &&
            json_node_get_value_type(child) == G_TYPE_STRING) {
            const char *ref = json_node_get_string(child);

            error_setg(errp, "Cannot find device='%s' nor node-name='%s'",
                       ref, ref);
            return -1;
        }
        if (json_flatten(opts, key, child, errp) < 0) {
            return -1;
        }
    }
    return 0;
}

static int json_flatten(GHashTable *opts, const char *prefix, JsonNode *node,
                        Error **errp)
{
    char *value;

    switch (JSON_NODE_TYPE(node)) {
    case JSON_NODE_OBJECT:
        return json_flatten_object(opts, prefix, json_node_get_object(node),
                                   errp);
    case JSON_NODE_ARRAY: {
        JsonArray *arr = json_node_get_array(node);

        for (guint i = 0; i < json_array_get_length(arr); i++) {
            g_autofree char *key = g_strdup_printf("%s.%u", prefix, i);

            if (json_flatten(opts, key, json_array_get_element(arr, i),
                             errp) < 0) {
                return -1;
            }
        }
        return 0;
    }
    case JSON_NODE_NULL:
        return 0;
    case JSON_NODE_VALUE:
        break;
    }
    switch (json_node_get_value_type(node)) {
    case G_TYPE_STRING:
        value = g_strdup(json_node_get_string(node));
        break;
    case G_TYPE_INT64:
        value = g_strdup_printf("%" G_GINT64_FORMAT, json_node_get_int(node));
        break;
    case G_TYPE_BOOLEAN:
        value = g_strdup(json_node_get_boolean(node) ? "on" : "off");
        break;
    default: {
        /* A double: QEMU prints it with %.17g, and so do we. */
        char buf[G_ASCII_DTOSTR_BUF_SIZE];

        value = g_strdup(g_ascii_formatd(buf, sizeof(buf), "%.17g",
                                         json_node_get_double(node)));
        break;
    }
    }
    g_hash_table_insert(opts, g_strdup(prefix), value);
    return 0;
}

/*
 * QEMU's JSON parser also takes strings in single quotes
 * ({ 'driver': 'null-co' }, which qemu-iotests write): rewritten here into
 * standard JSON for json-glib, \' becoming ' and " becoming \".
 */
static char *json_unquote_single(const char *json)
{
    GString *out = g_string_sized_new(strlen(json) + 16);
    char quote = 0;

    for (const char *p = json; *p; p++) {
        if (!quote) {
            if (*p == '\'' || *p == '"') {
                quote = *p;
                g_string_append_c(out, '"');
            } else {
                g_string_append_c(out, *p);
            }
        } else if (*p == '\\' && p[1]) {
            if (quote == '\'' && p[1] == '\'') {
                g_string_append_c(out, '\'');
            } else {
                g_string_append_c(out, '\\');
                g_string_append_c(out, p[1]);
            }
            p++;
        } else if (*p == quote) {
            quote = 0;
            g_string_append_c(out, '"');
        } else if (*p == '"') {
            g_string_append(out, "\\\"");
        } else {
            g_string_append_c(out, *p);
        }
    }
    return g_string_free(out, FALSE);
}

GHashTable *qemu_opts_from_json(const char *json, Error **errp)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GHashTable) opts = qemu_opts_new();
    g_autoptr(GError) gerr = NULL;
    g_autofree char *std = json_unquote_single(json);
    JsonNode *root;

    if (!json_parser_load_from_data(parser, std, -1, &gerr)) {
        error_setg(errp, "Could not parse the JSON options: %s",
                   gerr->message);
        return NULL;
    }
    root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        error_setg(errp, "Invalid JSON object given");
        return NULL;
    }
    if (json_flatten_object(opts, NULL, json_node_get_object(root),
                            errp) < 0) {
        return NULL;
    }
    return g_steal_pointer(&opts);
}

static int json_key_compare(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Whether obj's members are exactly "0".."n-1" (a flattened list). */
static bool json_object_is_list(JsonObject *obj)
{
    guint n = json_object_get_size(obj);

    for (guint i = 0; i < n; i++) {
        g_autofree char *idx = g_strdup_printf("%u", i);

        if (!json_object_has_member(obj, idx)) {
            return false;
        }
    }
    return n > 0;
}

/*
 * The object that the flat options opts stand for: dotted keys nested
 * again, an object whose members are "0".."n-1" made an array (quorum's
 * "children"), members in sorted order so that a name is the same for
 * the same options. Values stay strings: the flat form has lost whether
 * "1" was a number.
 */
static JsonNode *json_unflatten(GHashTable *opts)
{
    g_autoptr(GHashTable) groups = g_hash_table_new_full(
        g_str_hash, g_str_equal, g_free, (GDestroyNotify)g_hash_table_unref);
    guint n = 0;
    g_autofree gpointer *keys = g_hash_table_get_keys_as_array(opts, &n);
    JsonObject *obj = json_object_new();
    JsonNode *node;

    qsort(keys, n, sizeof(*keys), json_key_compare);
    for (guint i = 0; i < n; i++) {
        const char *key = keys[i], *dot = strchr(key, '.');
        g_autofree char *head = NULL;
        GHashTable *sub;

        if (!dot) {
            continue;
        }
        head = g_strndup(key, dot - key);
        sub = g_hash_table_lookup(groups, head);
        if (!sub) {
            sub = qemu_opts_new();
            g_hash_table_insert(groups, g_strdup(head), sub);
        }
        g_hash_table_insert(sub, g_strdup(dot + 1),
                            g_strdup(g_hash_table_lookup(opts, key)));
    }
    for (guint i = 0; i < n; i++) {
        const char *key = keys[i], *dot = strchr(key, '.');
        g_autofree char *head = dot ? g_strndup(key, dot - key)
                                    : g_strdup(key);
        GHashTable *sub = g_hash_table_lookup(groups, head);

        if (json_object_has_member(obj, head)) {
            continue;
        }
        /* "x" and "x.y" both given: the child's options win. */
        if (sub) {
            json_object_set_member(obj, head, json_unflatten(sub));
        } else {
            json_object_set_string_member(obj, head,
                                          g_hash_table_lookup(opts, key));
        }
    }
    if (json_object_is_list(obj)) {
        JsonArray *arr = json_array_new();

        for (guint i = 0; i < json_object_get_size(obj); i++) {
            g_autofree char *idx = g_strdup_printf("%u", i);

            json_array_add_element(arr, json_node_copy(
                json_object_get_member(obj, idx)));
        }
        json_object_unref(obj);
        node = json_node_new(JSON_NODE_ARRAY);
        json_node_take_array(node, arr);
        return node;
    }
    node = json_node_new(JSON_NODE_OBJECT);
    json_node_take_object(node, obj);
    return node;
}

char *qemu_opts_to_json(GHashTable *opts)
{
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autoptr(JsonNode) root = json_unflatten(opts);

    json_generator_set_root(gen, root);
    return json_generator_to_data(gen, NULL);
}
