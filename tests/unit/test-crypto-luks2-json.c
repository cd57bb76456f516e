/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * LUKS2 JSON metadata: what crypto/block-luks2-json.c accepts and what it
 * refuses, and that edits keep what it does not understand.
 *
 * The base document is what `cryptsetup luksFormat --type luks2` 2.6.1
 * writes for a 16 KiB header (one argon2id key slot, 4096-byte sectors).
 * Each hostile case changes one member of it and names the error it must
 * give; the parser must refuse it cleanly (no crash, no hang).
 */
#include "crypto/luks2priv.h"
#include "luks2-testutil.h"

static const char base_json[] =
    "{\"keyslots\":{\"0\":{\"type\":\"luks2\",\"key_size\":64,"
    "\"af\":{\"type\":\"luks1\",\"stripes\":4000,\"hash\":\"sha256\"},"
    "\"area\":{\"type\":\"raw\",\"offset\":\"32768\",\"size\":\"258048\","
    "\"encryption\":\"aes-xts-plain64\",\"key_size\":64},"
    "\"kdf\":{\"type\":\"argon2id\",\"time\":47,\"memory\":32,\"cpus\":2,"
    "\"salt\":\"4Km2Ut65PzhrdmQqq2i6jDGpwFDvxYq1bLCT+yORTfE=\"}}},"
    "\"tokens\":{},"
    "\"segments\":{\"0\":{\"type\":\"crypt\",\"offset\":\"16777216\","
    "\"size\":\"dynamic\",\"iv_tweak\":\"0\","
    "\"encryption\":\"aes-xts-plain64\","
    "\"sector_size\":4096}},"
    "\"digests\":{\"0\":{\"type\":\"pbkdf2\",\"keyslots\":[\"0\"],"
    "\"segments\":[\"0\"],\"hash\":\"sha256\",\"iterations\":179060,"
    "\"salt\":\"7rtIH+e6PVoigUFnl4twUlIhAbo0JGTU9hj3WNxfsaY=\","
    "\"digest\":\"brr0NWks+J9nw3Qc4BT+A8OxepUj5Ezhn8JLPqY5wOo=\"}},"
    "\"config\":{\"json_size\":\"12288\",\"keyslots_size\":\"16744448\"}}";

#define HDR_SIZE (16 * 1024)

static void test_base_valid(void)
{
    g_autoptr(QCryptoLUKS2Metadata) md =
        qcrypto_luks2_metadata_parse(base_json, HDR_SIZE, &error_abort);
    const QCryptoLUKS2Keyslot *ks;
    const QCryptoLUKS2Segment *seg;
    const QCryptoLUKS2Digest *d;

    g_assert_nonnull(md);
    g_assert_cmpuint(md->keyslots_size, ==, 16744448);
    g_assert_cmpuint(qcrypto_luks2_keyslots_end(md), ==, 16 * 1024 * 1024);

    ks = md->keyslots[0];
    g_assert_nonnull(ks);
    g_assert_null(md->keyslots[1]);
    g_assert_cmpuint(ks->key_size, ==, 64);
    g_assert_cmpint(ks->priority, ==, QCRYPTO_LUKS2_PRIORITY_NORMAL);
    g_assert_cmpint(ks->af_hash, ==, QCRYPTO_HASH_ALGO_SHA256);
    g_assert_cmpuint(ks->af_stripes, ==, 4000);
    g_assert_cmpuint(ks->area_offset, ==, 32768);
    g_assert_cmpuint(ks->area_size, ==, 258048);
    g_assert_cmpstr(ks->area_encryption, ==, "aes-xts-plain64");
    g_assert_cmpint(ks->kdf.type, ==, QCRYPTO_BLOCK_KDF_ARGON2ID);
    g_assert_cmpuint(ks->kdf.time, ==, 47);
    g_assert_cmpuint(ks->kdf.memory, ==, 32);
    g_assert_cmpuint(ks->kdf.parallel, ==, 2);
    g_assert_cmpuint(ks->kdf.nsalt, ==, 32);
    g_assert_cmpint(ks->digest, ==, 0);

    seg = md->segments[0];
    g_assert_nonnull(seg);
    g_assert_cmpuint(seg->offset, ==, 16777216);
    g_assert_true(seg->size_dynamic);
    g_assert_cmpuint(seg->sector_size, ==, 4096);
    g_assert_cmpint(seg->digest, ==, 0);
    g_assert_cmpint(qcrypto_luks2_segment_digest(md, 0), ==, 0);

    d = md->digests[0];
    g_assert_nonnull(d);
    g_assert_cmpuint(d->keyslots, ==, 1);
    g_assert_cmpuint(d->segments, ==, 1);
    g_assert_cmpuint(d->iterations, ==, 179060);
    g_assert_cmpuint(d->ndigest, ==, 32);
    g_assert_cmpuint(d->digest[0], ==, 0x6e);   /* "brr0" */
}

/* One change to the base document, and the error it must cause. */
typedef struct HostileCase {
    const char *name;
    const char *path;           /* dotted members, e.g. "config.json_size" */
    const char *value;          /* JSON text; NULL removes the member */
    const char *error;          /* a part of the expected message */
} HostileCase;

static const HostileCase hostile_cases[] = {
    /* LUKS2 spec, JSON area: the five top-level objects */
    { "missing-keyslots", "keyslots", NULL, "missing 'keyslots'" },
    { "missing-tokens", "tokens", NULL, "missing 'tokens'" },
    { "missing-segments", "segments", NULL, "missing 'segments'" },
    { "missing-digests", "digests", NULL, "missing 'digests'" },
    { "missing-config", "config", NULL, "missing 'config'" },
    { "keyslots-array", "keyslots", "[]", "'keyslots' is not an object" },

    /* 64-bit numbers as strings */
    { "negative", "keyslots.0.area.offset", "\"-32768\"",
      "not an unsigned decimal number" },
    { "plus-sign", "segments.0.offset", "\"+16777216\"",
      "not an unsigned decimal number" },
    { "overflow", "segments.0.iv_tweak", "\"18446744073709551616\"",
      "overflows 64 bits" },
    { "huge", "config.keyslots_size", "\"99999999999999999999999999\"",
      "overflows 64 bits" },
    { "non-digit", "keyslots.0.area.size", "\"258048x\"",
      "not an unsigned decimal number" },
    { "hex", "segments.0.offset", "\"0x1000000\"",
      "not an unsigned decimal number" },
    { "empty", "keyslots.0.area.size", "\"\"", "empty string" },
    { "number-not-string", "segments.0.offset", "16777216",
      "'offset' is not a string" },
    { "float-int", "keyslots.0.key_size", "64.0", "not an integer" },
    { "string-int", "keyslots.0.key_size", "\"64\"", "not an integer" },
    { "negative-int", "keyslots.0.kdf.time", "-1", "outside" },

    /* config */
    { "json-size", "config.json_size", "\"12289\"", "json_size" },
    { "keyslots-size-unaligned", "config.keyslots_size", "\"16744447\"",
      "multiple of 4096" },
    { "mandatory-unknown", "config.requirements",
      "{\"mandatory\":[\"quantum-tunnel\"]}",
      "unknown mandatory requirement 'quantum-tunnel'" },
    { "mandatory-reencrypt", "config.requirements",
      "{\"mandatory\":[\"online-reencrypt-v2\"]}",
      "unfinished re-encryption" },

    /* key slots and their areas */
    { "keyslot-id", "keyslots.x", "{}", "is not a number" },
    { "keyslot-id-32", "keyslots.32", "{}", "is not a number" },
    { "keyslot-type", "keyslots.0.type", "\"reencrypt\"",
      "unsupported type 'reencrypt'" },
    { "area-before", "keyslots.0.area.offset", "\"16384\"",
      "outside the key-slot area" },
    { "area-after", "keyslots.0.area.offset", "\"16580608\"",
      "outside the key-slot area" },
    { "area-wraps", "keyslots.0.area.size", "\"18446744073709547520\"",
      "outside the key-slot area" },
    { "area-small", "keyslots.0.area.size", "\"4096\"", "too small" },
    { "area-overlap", "keyslots.1",
      "{\"type\":\"luks2\",\"key_size\":64,"
      "\"af\":{\"type\":\"luks1\",\"stripes\":4000,\"hash\":\"sha256\"},"
      "\"area\":{\"type\":\"raw\",\"offset\":\"262144\",\"size\":\"258048\","
      "\"encryption\":\"aes-xts-plain64\",\"key_size\":64},"
      "\"kdf\":{\"type\":\"pbkdf2\",\"hash\":\"sha256\",\"iterations\":1000,"
      "\"salt\":\"4Km2Ut65PzhrdmQqq2i6jDGpwFDvxYq1bLCT+yORTfE=\"}}",
      "areas overlap" },
    { "area-cipher", "keyslots.0.area.encryption", "\"rot13-xts-plain64\"",
      "not supported" },
    { "area-keysize", "keyslots.0.area.key_size", "40", "not supported" },
    { "af-type", "keyslots.0.af.type", "\"luks3\"", "AF type" },
    { "af-hash", "keyslots.0.af.hash", "\"sha3000\"", "unsupported hash" },
    { "af-stripes", "keyslots.0.af.stripes", "4000000000", "outside" },
    { "priority", "keyslots.0.priority", "3", "outside" },

    /* KDFs, and bounds on their cost */
    { "kdf-unknown", "keyslots.0.kdf.type", "\"scrypt\"",
      "unknown KDF 'scrypt'" },
    { "argon2-terabytes", "keyslots.0.kdf.memory", "4294967295",
      "above the 4 GiB limit" },
    { "argon2-time", "keyslots.0.kdf.time", "4294967295",
      "unreasonably high" },
    { "argon2-cpus", "keyslots.0.kdf.cpus", "1024", "outside" },
    { "argon2-memory-lanes", "keyslots.0.kdf.memory", "8",
      "below 8 KiB per lane" },
    { "kdf-salt", "keyslots.0.kdf.salt", "\"not base64!\"", "not base64" },
    { "kdf-salt-short", "keyslots.0.kdf.salt", "\"AAAA\"", "shorter" },
    { "pbkdf2-iterations-0", "keyslots.0.kdf",
      "{\"type\":\"pbkdf2\",\"hash\":\"sha256\",\"iterations\":0,"
      "\"salt\":\"4Km2Ut65PzhrdmQqq2i6jDGpwFDvxYq1bLCT+yORTfE=\"}",
      "outside" },

    /* segments */
    { "segment-type", "segments.0.type", "\"linear\"",
      "unsupported type 'linear'" },
    { "segment-offset-unaligned", "segments.0.offset", "\"16777728\"",
      "not a multiple" },
    { "segment-in-keyslots", "segments.0.offset", "\"1048576\"",
      "inside the header and key-slot area" },
    { "segment-sector", "segments.0.sector_size", "1000",
      "not a power of two" },
    { "segment-sector-big", "segments.0.sector_size", "8192", "outside" },
    { "segment-integrity", "segments.0.integrity",
      "{\"type\":\"hmac(sha256)\"}", "dm-integrity" },
    { "segment-size", "segments.0.size", "\"-1\"", "unsigned decimal" },
    { "segment-cipher", "segments.0.encryption", "\"aes\"",
      "cipher-mode-iv" },
    { "segment-tweak", "segments.0.iv_tweak", "\"7\"", "iv_tweak" },

    /* digests */
    { "digest-type", "digests.0.type", "\"sha256\"", "unsupported type" },
    { "digest-keyslot", "digests.0.keyslots", "[\"5\"]",
      "names 5, which does not exist" },
    { "digest-segment", "digests.0.segments", "[\"1\"]",
      "names 1, which does not exist" },
    { "digest-long", "digests.0.digest",
      /* 128 base64 digits: 96 bytes, more than any hash */
      "\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
      "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"",
      "longer than" },
    { "digest-twice", "digests.1",
      "{\"type\":\"pbkdf2\",\"keyslots\":[\"0\"],\"segments\":[],"
      "\"hash\":\"sha256\",\"iterations\":1000,\"salt\":\"AAAAAAAA\","
      "\"digest\":\"AAAAAAAA\"}", "bound to digests 0 and 1" },

    /* tokens */
    { "token-keyslot", "tokens.0",
      "{\"type\":\"luks2-keyring\",\"keyslots\":[\"3\"]}",
      "names 3, which does not exist" },
    { "token-no-type", "tokens.0", "{\"keyslots\":[]}", "missing 'type'" },
};

static void test_hostile(gconstpointer data)
{
    const HostileCase *c = data;
    g_autofree char *json = test_json_mutate(base_json, c->path, c->value);
    g_autoptr(Error) err = NULL;
    g_autoptr(QCryptoLUKS2Metadata) md =
        qcrypto_luks2_metadata_parse(json, HDR_SIZE, &err);

    g_assert_null(md);
    g_assert_nonnull(err);
    if (!strstr(error_get_pretty(err), c->error)) {
        g_test_message("error was: %s", error_get_pretty(err));
    }
    g_assert_nonnull(strstr(error_get_pretty(err), c->error));
}

static void test_not_json(void)
{
    static const char *const texts[] = {
        "", "{", "[]", "\"keyslots\"", "{\"keyslots\":{}} trailing",
    };

    for (size_t i = 0; i < G_N_ELEMENTS(texts); i++) {
        g_autoptr(Error) err = NULL;
        g_autoptr(QCryptoLUKS2Metadata) md =
            qcrypto_luks2_metadata_parse(texts[i], HDR_SIZE, &err);

        g_assert_null(md);
        g_assert_nonnull(err);
    }
}

/*
 * A few MiB of '[' would overflow json-glib's recursive parser: refused
 * before it (cryptsetup's json-c stops at 32 levels too). Brackets inside
 * strings do not count.
 */
static void test_deep_nesting(void)
{
    GString *deep = g_string_new("{\"tokens\":");
    g_autoptr(Error) err = NULL;
    g_autoptr(QCryptoLUKS2Metadata) md = NULL;
    g_autofree char *in_string = NULL;

    for (int i = 0; i < 4 * 1024 * 1024 - 4096 - 16; i++) {
        g_string_append_c(deep, '[');
    }
    md = qcrypto_luks2_metadata_parse(deep->str, 4 * 1024 * 1024, &err);
    g_string_free(deep, TRUE);
    g_assert_null(md);
    g_assert_nonnull(strstr(error_get_pretty(err), "nested deeper than 32"));
    error_free_or_abort(&err);

    /* 40 brackets in a token's string: no nesting at all. */
    in_string = g_strdup_printf(
        "{\"keyslots\":{},\"tokens\":{\"0\":{\"type\":\"x[[[[[[[[[[[[[[[[[[[["
        "[[[[[[[[[[[[[[[[[[[[\\\"\",\"keyslots\":[]}},\"segments\":{},"
        "\"digests\":{},\"config\":{\"json_size\":\"12288\","
        "\"keyslots_size\":\"4161536\"}}");
    md = qcrypto_luks2_metadata_parse(in_string, 16384, &error_abort);
    g_assert_nonnull(md);
    g_assert_cmpuint(strlen(md->tokens[0]->type), ==, 42);
}

/* The argon2 bound against this machine applies when deriving. */
static void test_argon2_memory_cap(void)
{
    QCryptoLUKS2KDF kdf = {
        .type = QCRYPTO_BLOCK_KDF_ARGON2ID, .time = 1, .parallel = 1,
        .nsalt = 16,
    };
    QCryptoBlockSecret secret = { (const uint8_t *)"x", 1 };
    g_autoptr(Error) err = NULL;
    uint8_t out[32];
    uint64_t cap = qcrypto_luks2_memory_cap_kib();

    g_assert_cmpuint(cap, >, 0);
    if (cap >= UINT32_MAX) {
        g_test_skip("more than 8 TiB of memory: cannot exceed half of it");
        return;
    }
    kdf.memory = cap + 1;
    g_assert_cmpint(qcrypto_luks2_kdf_derive(&kdf, &secret, out, sizeof(out),
                                             &err), ==, -1);
    g_assert_nonnull(strstr(error_get_pretty(err), "half of this machine"));
}

/*
 * Any PBKDF2 cost up to 2^32 - 1 is valid metadata (cryptsetup makes
 * costly slots on request): the limit applies when unlocking, so that
 * info still shows such a header.
 */
static void test_pbkdf2_iterations_any(void)
{
    g_autofree char *json = test_json_mutate(base_json, "keyslots.0.kdf",
        "{\"type\":\"pbkdf2\",\"hash\":\"sha256\",\"iterations\":4294967295,"
        "\"salt\":\"4Km2Ut65PzhrdmQqq2i6jDGpwFDvxYq1bLCT+yORTfE=\"}");
    g_autofree char *digest = test_json_mutate(base_json,
                                               "digests.0.iterations",
                                               "4294967295");
    g_autoptr(QCryptoLUKS2Metadata) md =
        qcrypto_luks2_metadata_parse(json, HDR_SIZE, &error_abort);
    g_autoptr(QCryptoLUKS2Metadata) md2 =
        qcrypto_luks2_metadata_parse(digest, HDR_SIZE, &error_abort);

    g_assert_cmpuint(md->keyslots[0]->kdf.iterations, ==, UINT32_MAX);
    g_assert_cmpuint(md2->digests[0]->iterations, ==, UINT32_MAX);
}

/* Unknown members and tokens survive a key slot edit. */
static void test_edit_preserves_unknown(void)
{
    g_autoptr(JsonNode) root = test_json_parse(base_json);
    JsonObject *o = json_node_get_object(root);
    g_autoptr(JsonGenerator) gen = json_generator_new();
    g_autofree char *json = NULL, *out = NULL;
    g_autoptr(QCryptoLUKS2Metadata) md = NULL;
    QCryptoLUKS2Keyslot ks;

    json_object_set_member(json_object_get_object_member(o, "tokens"), "0",
                           test_json_parse("{\"type\":\"systemd-tpm2\","
                                      "\"keyslots\":[\"0\"],"
                                      "\"tpm2-pcrs\":[7]}"));
    json_object_set_member(json_object_get_object_member(o, "config"),
                           "future_field", test_json_parse("{\"x\":\"y\"}"));
    json_object_set_member(json_object_get_object_member(
                               json_object_get_object_member(o, "keyslots"),
                               "0"), "vendor", test_json_parse("true"));
    json_generator_set_root(gen, root);
    json = json_generator_to_data(gen, NULL);

    md = qcrypto_luks2_metadata_parse(json, HDR_SIZE, &error_abort);
    g_assert_nonnull(md);
    g_assert_cmpstr(md->tokens[0]->type, ==, "systemd-tpm2");
    g_assert_cmpuint(md->tokens[0]->keyslots, ==, 1);

    /* Add slot 1 beside slot 0, bound to the same digest. */
    ks = *md->keyslots[0];
    ks.id = 1;
    ks.area_offset = 32768 + 258048;
    ks.area_encryption = g_strdup("aes-xts-plain64");
    qcrypto_luks2_metadata_set_keyslot(md, &ks);
    g_free(ks.area_encryption);
    g_assert_cmpint(qcrypto_luks2_metadata_reload(md, &error_abort), ==, 0);
    g_assert_nonnull(md->keyslots[1]);
    g_assert_cmpint(md->keyslots[1]->digest, ==, 0);
    g_assert_cmpuint(md->digests[0]->keyslots, ==, 3);

    /* Remove slot 0: digest and token forget it; the rest stays. */
    qcrypto_luks2_metadata_remove_keyslot(md, 0);
    g_assert_cmpint(qcrypto_luks2_metadata_reload(md, &error_abort), ==, 0);
    g_assert_null(md->keyslots[0]);
    g_assert_cmpuint(md->digests[0]->keyslots, ==, 2);
    g_assert_nonnull(md->tokens[0]);
    g_assert_cmpuint(md->tokens[0]->keyslots, ==, 0);

    out = qcrypto_luks2_metadata_to_json(md);
    g_assert_nonnull(strstr(out, "\"tpm2-pcrs\":[7]"));
    g_assert_nonnull(strstr(out, "\"future_field\":{\"x\":\"y\"}"));
    /* slot 0's unknown member went with slot 0 */
    g_assert_null(strstr(out, "\"vendor\""));
}

/* The cipher specs of LUKS2 segments and key-slot areas. */
static void test_cipher_specs(void)
{
    static const struct {
        const char *spec;
        size_t key;
        QCryptoCipherAlgo alg;
        QCryptoCipherMode mode;
        QCryptoIVGenAlgo ivgen;
    } good[] = {
        { "aes-xts-plain64", 64, QCRYPTO_CIPHER_ALGO_AES_256,
          QCRYPTO_CIPHER_MODE_XTS, QCRYPTO_IVGEN_ALGO_PLAIN64 },
        { "aes-xts-plain64", 32, QCRYPTO_CIPHER_ALGO_AES_128,
          QCRYPTO_CIPHER_MODE_XTS, QCRYPTO_IVGEN_ALGO_PLAIN64 },
        { "aes-cbc-essiv:sha256", 16, QCRYPTO_CIPHER_ALGO_AES_128,
          QCRYPTO_CIPHER_MODE_CBC, QCRYPTO_IVGEN_ALGO_ESSIV },
        { "serpent-xts-plain", 64, QCRYPTO_CIPHER_ALGO_SERPENT_256,
          QCRYPTO_CIPHER_MODE_XTS, QCRYPTO_IVGEN_ALGO_PLAIN },
        { "twofish-cbc-plain64", 24, QCRYPTO_CIPHER_ALGO_TWOFISH_192,
          QCRYPTO_CIPHER_MODE_CBC, QCRYPTO_IVGEN_ALGO_PLAIN64 },
        { "aes-lrw-benbi", 48, QCRYPTO_CIPHER_ALGO_AES_256,
          QCRYPTO_CIPHER_MODE_LRW, QCRYPTO_IVGEN_ALGO_BENBI },
        { "aes-ecb", 32, QCRYPTO_CIPHER_ALGO_AES_256,
          QCRYPTO_CIPHER_MODE_ECB, QCRYPTO_IVGEN_ALGO_NULL },
    };
    static const struct {
        const char *spec;
        size_t key;
    } bad[] = {
        { "aes", 32 }, { "aes-xts-plain64", 40 }, { "aes-xts-plain64", 33 },
        { "aes-foo-plain64", 32 }, { "aes-cbc-essiv", 32 },
        { "aes-cbc-plain64:sha256", 32 }, { "aes-cbc-essiv:nohash", 32 },
        { "aes-ecb-bogus", 32 }, { "aes-cbc", 32 }, { "cipher_null-ecb", 0 },
        { "capi:xts(aes)-plain64", 64 },
    };

    for (size_t i = 0; i < G_N_ELEMENTS(good); i++) {
        QCryptoLUKS2Cipher c;
        g_autofree char *back = NULL;

        g_assert_cmpint(qcrypto_luks2_cipher_parse(good[i].spec, good[i].key,
                                                   &c, &error_abort), ==, 0);
        g_assert_cmpint(c.alg, ==, good[i].alg);
        g_assert_cmpint(c.mode, ==, good[i].mode);
        g_assert_cmpint(c.ivgen, ==, good[i].ivgen);
        g_assert_cmpuint(qcrypto_luks2_cipher_key_len(&c), ==, good[i].key);
        back = qcrypto_luks2_cipher_format(&c);
        g_assert_cmpstr(back, ==, good[i].spec);
    }
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        QCryptoLUKS2Cipher c;
        g_autoptr(Error) err = NULL;

        g_test_message("bad spec %s", bad[i].spec);
        g_assert_cmpint(qcrypto_luks2_cipher_parse(bad[i].spec, bad[i].key,
                                                   &c, &err), ==, -1);
        g_assert_nonnull(err);
    }
}

/*
 * json-glib 1.6 writes some numbers so that no parser reads them back
 * (1e20 as 1e+20.0, 1e999 as inf.0): metadata holding one in a token
 * still opens, but is never written (to_json gives NULL); others are
 * written as they read.
 */
static void test_to_json_round_trip(void)
{
    static const struct {
        const char *number;
        bool writable;
    } cases[] = {
        { "1e20", false }, { "-1e17", false }, { "1e999", false },
        { "[1e999]", false }, { "1e16", true }, { "0.1", true },
        { "1e-7", true }, { "18446744073709551615", true },
        { "\"\\u00ae\\u0001\\/\"", true },
    };

    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_auto(GStrv) parts = g_strsplit(base_json, "\"tokens\":{}", 2);
        g_autofree char *json = NULL, *out = NULL;
        g_autoptr(QCryptoLUKS2Metadata) md = NULL, again = NULL;

        g_assert_nonnull(parts[1]);
        json = g_strdup_printf("%s\"tokens\":{\"0\":{\"type\":\"x\","
                               "\"keyslots\":[],\"n\":%s}}%s", parts[0],
                               cases[i].number, parts[1]);
        md = qcrypto_luks2_metadata_parse(json, HDR_SIZE, &error_abort);
        g_assert_nonnull(md);
        out = qcrypto_luks2_metadata_to_json(md);
        if (!cases[i].writable) {
            g_assert_null(out);
            continue;
        }
        g_assert_nonnull(out);
        again = qcrypto_luks2_metadata_parse(out, HDR_SIZE, &error_abort);
        g_assert_nonnull(again);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/crypto/luks2/json/base-valid", test_base_valid);
    g_test_add_func("/crypto/luks2/json/not-json", test_not_json);
    g_test_add_func("/crypto/luks2/json/deep-nesting", test_deep_nesting);
    for (size_t i = 0; i < G_N_ELEMENTS(hostile_cases); i++) {
        g_autofree char *path = g_strdup_printf(
            "/crypto/luks2/json/hostile/%s", hostile_cases[i].name);

        g_test_add_data_func(path, &hostile_cases[i], test_hostile);
    }
    g_test_add_func("/crypto/luks2/json/pbkdf2-iterations-any",
                    test_pbkdf2_iterations_any);
    g_test_add_func("/crypto/luks2/json/argon2-memory-cap",
                    test_argon2_memory_cap);
    g_test_add_func("/crypto/luks2/json/edit-preserves-unknown",
                    test_edit_preserves_unknown);
    g_test_add_func("/crypto/luks2/json/cipher-specs", test_cipher_specs);
    g_test_add_func("/crypto/luks2/json/to-json-round-trip",
                    test_to_json_round_trip);
    return g_test_run();
}
