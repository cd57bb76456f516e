/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite and qemu-nbd-lite: the objects of "--object TYPE,id=ID,...",
 * in QEMU's syntax: secrets (crypto/secret.c's registry) and TLS
 * credentials (crypto/tlscreds.c's).
 */
#include <string.h>

#include <json-glib/json-glib.h>

#include "img.h"
#include "crypto/secret.h"
#include "crypto/secure-mem.h"
#include "crypto/tlscreds.h"

/* The ids of the secrets registered, in order (img_object_secret_ids()). */
static GPtrArray *img_secret_ids;

/* A string that may hold a secret: wiped when freed. */
typedef char *ImgSecretStr;

static void img_secret_str_free(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        g_free(s);
    }
}
G_DEFINE_AUTO_CLEANUP_FREE_FUNC(ImgSecretStr, img_secret_str_free, NULL)


/*
 * --object secret,id=ID,data=STR|file=PATH|prompt=on[,format=raw|base64]
 *                                               [,keyid=ID,iv=BASE64]
 *
 * No message here repeats a value or an unknown name of a definition that
 * has data=: with an undoubled comma in the passphrase ("data=ab,cd"), part
 * of it becomes a name ("cd"), and an error must not show it.
 */
static int img_add_secret(GHashTable *opts)
{
    g_autofree char *id = NULL, *file = NULL;
    g_auto(ImgSecretStr) data = NULL;
    g_autofree char *format = NULL, *unknown = NULL;
    g_autofree char *keyid = NULL, *iv = NULL;
    QCryptoSecretOptions sopts = { 0 };
    QCryptoSecretFormat fmt = QCRYPTO_SECRET_FORMAT_RAW;
    uint8_t *typed = NULL;
    size_t typed_len = 0;
    bool prompt;
    Error *err = NULL;
    int ret;

    id = qemu_opt_take(opts, "id");
    data = qemu_opt_take(opts, "data");
    file = qemu_opt_take(opts, "file");
    format = qemu_opt_take(opts, "format");
    keyid = qemu_opt_take(opts, "keyid");
    iv = qemu_opt_take(opts, "iv");
    if (qemu_opt_take_bool(opts, "prompt", false, &prompt, &err) < 0) {
        img_error_free(NULL, err);
        return -1;
    }
    if (format) {
        if (g_str_equal(format, "base64")) {
            fmt = QCRYPTO_SECRET_FORMAT_BASE64;
        } else if (!g_str_equal(format, "raw")) {
            img_error(NULL, "Invalid secret format '%s' (use raw or base64)",
                      format);
            return -1;
        }
    }
    unknown = qemu_opts_first_key(opts);
    if (unknown && data) {
        img_error(NULL, "Unknown property in a secret with data= (its name "
                  "is not shown: it may be part of the passphrase, split "
                  "off at a comma; write a comma inside data= as ',,')");
        return -1;
    }
    if (unknown) {
        img_error(NULL, "Property 'secret.%s' not found", unknown);
        return -1;
    }
    if (prompt) {
        if (data || file) {
            img_error(NULL, "Secret '%s': prompt=on cannot be combined with "
                      "'data' or 'file'", id ? id : "");
            return -1;
        }
        if (!id || !*id) {
            img_error(NULL, "Parameter 'id' is missing");
            return -1;
        }
        typed = img_prompt_secret(id, &typed_len);
        if (!typed) {
            return -1;
        }
    }
    sopts = (QCryptoSecretOptions) {
        .data = typed ? (const char *)typed : data,
        .file = file,
        .format = fmt,
        .keyid = keyid,
        .iv = iv,
    };
    ret = qcrypto_secret_add_opts(id, &sopts, &err);
    qcrypto_secure_free(typed, IMG_PROMPT_MAX + 1);
    if (ret < 0) {
        img_error_free(NULL, err);
        return -1;
    }
    if (!img_secret_ids) {
        img_secret_ids = g_ptr_array_new_with_free_func(g_free);
    }
    g_ptr_array_add(img_secret_ids, g_strdup(id));
    return 0;
}

/*
 * tls-creds-x509,id=ID,dir=DIR[,endpoint=client|server][,verify-peer=on|off]
 *                                                   [,priority=STR]
 * tls-creds-psk,id=ID,dir=DIR[,endpoint=client|server][,username=NAME]
 *                                                   [,priority=STR]
 */
static int img_add_tls_creds(GHashTable *opts, QCryptoTLSCredsType type)
{
    const char *tname = type == QCRYPTO_TLS_CREDS_PSK ? "tls-creds-psk"
                                                      : "tls-creds-x509";
    g_autofree char *id = qemu_opt_take(opts, "id");
    g_autofree char *dir = qemu_opt_take(opts, "dir");
    g_autofree char *endpoint = qemu_opt_take(opts, "endpoint");
    g_autofree char *username = NULL, *priority = NULL, *unknown = NULL;
    QCryptoTLSCreds creds = { .type = type };
    bool verify_peer = true, sanity = true;
    Error *err = NULL;

    if (type == QCRYPTO_TLS_CREDS_PSK) {
        username = qemu_opt_take(opts, "username");
    } else if (qemu_opt_take_bool(opts, "verify-peer", true, &verify_peer,
                                  &err) < 0 ||
               qemu_opt_take_bool(opts, "sanity-check", true, &sanity,
                                  &err) < 0) {
        img_error_free(NULL, err);
        return -1;
    }
    priority = qemu_opt_take(opts, "priority");
    unknown = qemu_opts_first_key(opts);
    if (unknown) {
        img_error(NULL, "Property '%s.%s' not found", tname, unknown);
        return -1;
    }
    if (!endpoint || g_str_equal(endpoint, "client")) {
        creds.endpoint = QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT;
    } else if (g_str_equal(endpoint, "server")) {
        creds.endpoint = QCRYPTO_TLS_CREDS_ENDPOINT_SERVER;
    } else {
        img_error(NULL, "Parameter 'endpoint' does not accept value '%s'",
                  endpoint);
        return -1;
    }
    creds.dir = dir;
    creds.username = username;
    creds.verify_peer = verify_peer;
    creds.priority = priority;
    if (qcrypto_tls_creds_add(id, &creds, &err) < 0) {
        img_error_free(NULL, err);
        return -1;
    }
    return 0;
}

/*
 * {"qom-type":"secret","id":"sec0","data":"..."} as options: members
 * that are strings, numbers or booleans (on/off); NULL otherwise.
 */
static GHashTable *img_object_from_json(const char *def)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GHashTable) opts = qemu_opts_new();
    g_autoptr(GList) members = NULL;
    JsonObject *obj;
    JsonNode *root;

    if (!json_parser_load_from_data(parser, def, -1, NULL)) {
        return NULL;
    }
    root = json_parser_get_root(parser);
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        return NULL;
    }
    obj = json_node_get_object(root);
    members = json_object_get_members(obj);
    for (GList *m = members; m; m = m->next) {
        JsonNode *n = json_object_get_member(obj, m->data);
        GType t = JSON_NODE_HOLDS_VALUE(n) ? json_node_get_value_type(n)
                                           : G_TYPE_INVALID;
        char *value;

        if (t == G_TYPE_STRING) {
            value = g_strdup(json_node_get_string(n));
        } else if (t == G_TYPE_INT64) {
            value = g_strdup_printf("%" G_GINT64_FORMAT, json_node_get_int(n));
        } else if (t == G_TYPE_BOOLEAN) {
            value = g_strdup(json_node_get_boolean(n) ? "on" : "off");
        } else {
            return NULL;
        }
        g_hash_table_insert(opts, g_strdup(m->data), value);
    }
    return g_steal_pointer(&opts);
}

static int img_add_object(const char *def)
{
    g_autoptr(GHashTable) opts = NULL;
    g_autofree char *type = NULL;
    Error *err = NULL;

    /* QEMU also takes an object as JSON: {"qom-type":"secret","id":...} */
    if (def[0] == '{') {
        opts = img_object_from_json(def);
        if (!opts) {
            /* The parser's message may quote the text: not shown. */
            img_error(NULL, "Invalid --object JSON (not shown: it may hold a "
                      "secret): one object of strings, numbers and "
                      "booleans");
            return -1;
        }
    } else {
        opts = qemu_opts_parse(def, "qom-type", &err);
    }
    if (!opts) {
        /* The parser's message quotes the offending text: not shown. */
        error_free(err);
        img_error(NULL, "Invalid --object definition (not shown: it may "
                  "hold a secret): every property is NAME=VALUE, and a "
                  "comma inside a value is written ',,'");
        return -1;
    }
    type = qemu_opt_take(opts, "qom-type");
    if (type && g_str_equal(type, "secret")) {
        return img_add_secret(opts);
    }
    if (type && g_str_equal(type, "tls-creds-x509")) {
        return img_add_tls_creds(opts, QCRYPTO_TLS_CREDS_X509);
    }
    if (type && g_str_equal(type, "tls-creds-psk")) {
        return img_add_tls_creds(opts, QCRYPTO_TLS_CREDS_PSK);
    }
    img_error(NULL, "Invalid object type '%s': the types are 'secret', "
              "'tls-creds-x509' and 'tls-creds-psk'", type ? type : "");
    return -1;
}

int img_add_objects(char **objects)
{
    for (char **o = objects; o && *o; o++) {
        if (img_add_object(*o) < 0) {
            return -1;
        }
    }
    return 0;
}

const GPtrArray *img_object_secret_ids(void)
{
    return img_secret_ids;
}

void img_objects_clear(void)
{
    qcrypto_secret_clear_all();
    qcrypto_tls_creds_clear_all();
    g_clear_pointer(&img_secret_ids, g_ptr_array_unref);
}
