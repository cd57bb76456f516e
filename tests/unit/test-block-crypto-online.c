/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Online re-encryption in the luks driver (block/crypto-online.c): an image
 * opened with reencrypt=on gets a new volume key on the driver's thread
 * while three threads write and read it, each in 4 KiB blocks of its own
 * (block index modulo 3), with a shadow of what each block must hold. Every
 * read during the run must give the shadow's bytes; at the end the image,
 * opened as a plain LUKS image (an image still in re-encryption would be
 * refused), must hold the shadow. LUKS2 and LUKS1, small zones so that the
 * run spans many of them; run it under TSan too (a threads test).
 */
#include <string.h>
#include <unistd.h>

#include "block/block.h"
#include "block/crypto.h"
#include "block/options.h"
#include "crypto/secret.h"

#define IMG_SIZE (8 * 1024 * 1024)
#define BLOCK 4096
#define NBLOCKS (IMG_SIZE / BLOCK)
#define WORKERS 3

typedef struct Online {
    char *dir;
    char *path;
    uint8_t *shadow;            /* block i is written by worker i % 3 only */
    BlockDriverState *bs;
    gint ended;                 /* the run's thread said it ended */
    gint failed;
    gint zones;                 /* progress calls */
} Online;

typedef struct Worker {
    Online *o;
    int id;
    unsigned writes, reads;
} Worker;

static bool progress(void *opaque, uint64_t done, uint64_t size, bool ended,
                     const Error *err)
{
    Online *o = opaque;

    g_assert_cmpuint(done, <=, size);
    g_atomic_int_inc(&o->zones);
    if (ended) {
        if (err) {
            g_test_message("run: %s", error_get_pretty(err));
            g_atomic_int_set(&o->failed, 1);
        }
        g_atomic_int_set(&o->ended, 1);
    }
    return false;
}

static gpointer worker(gpointer opaque)
{
    Worker *w = opaque;
    Online *o = w->o;
    g_autoptr(GRand) rand = g_rand_new_with_seed(100 + w->id);
    g_autofree uint8_t *buf = g_malloc(BLOCK);
    /* Some requests after the end too: the new key alone then. */
    int after = 50;

    while (after > 0) {
        uint64_t i = g_rand_int_range(rand, 0, NBLOCKS / WORKERS) *
            WORKERS + w->id;
        Error *err = NULL;

        if (g_atomic_int_get(&o->ended)) {
            after--;
        }
        if (g_rand_boolean(rand)) {
            for (int k = 0; k < BLOCK; k++) {
                buf[k] = g_rand_int(rand);
            }
            memcpy(o->shadow + i * BLOCK, buf, BLOCK);
            g_assert_cmpint(bdrv_pwrite(o->bs, i * BLOCK, buf, BLOCK, 0,
                                        &err), ==, 0);
            w->writes++;
        } else {
            g_assert_cmpint(bdrv_pread(o->bs, i * BLOCK, buf, BLOCK, &err),
                            ==, 0);
            g_assert_true(memcmp(buf, o->shadow + i * BLOCK, BLOCK) == 0);
            w->reads++;
        }
    }
    return NULL;
}

static void run_online(gconstpointer data)
{
    const char *version = data;
    Online o = { 0 };
    Error *err = NULL;
    g_autofree char *create = NULL, *spec = NULL, *plain = NULL;
    g_autoptr(GHashTable) copts = NULL;
    g_autoptr(GHashTable) opts = NULL;
    g_autoptr(GRand) rand = g_rand_new_with_seed(7);
    g_autofree uint8_t *all = g_malloc(IMG_SIZE);
    Worker w[WORKERS];
    GThread *t[WORKERS];
    BlockDriverState *bs;

    o.dir = g_dir_make_tmp("test-block-crypto-online-XXXXXX", NULL);
    g_assert_nonnull(o.dir);
    o.path = g_build_filename(o.dir, "img.luks", NULL);
    o.shadow = g_malloc(IMG_SIZE);
    g_assert_cmpint(qcrypto_secret_add("s0", "a passphrase", NULL,
                                       QCRYPTO_SECRET_FORMAT_RAW, &err), ==,
                    0);

    /* The image, full of known bytes. */
    create = g_strdup_printf("key-secret=s0,iter-time=10,size=%d,"
                             "luks-version=%s%s", IMG_SIZE, version,
                             g_str_equal(version, "2") ? ",kdf=pbkdf2" : "");
    copts = qemu_opts_parse(create, NULL, NULL);
    bs = bdrv_create_open("luks", o.path, copts, 0, NULL, &err);
    g_assert_nonnull(bs);
    g_assert_cmpint(bdrv_create_finish(bs, &err), ==, 0);
    for (size_t k = 0; k < IMG_SIZE; k++) {
        o.shadow[k] = g_rand_int(rand);
    }
    memcpy(all, o.shadow, IMG_SIZE);
    g_assert_cmpint(bdrv_pwrite(bs, 0, all, IMG_SIZE, BDRV_REQ_MAY_CLOBBER,
                                &err), ==, 0);
    bdrv_close(bs);

    /* Served with reencrypt=on: the run starts when asked. */
    spec = g_strdup_printf("driver=luks,key-secret=s0,reencrypt=on,"
                           "reencrypt-iter-time=10,"
                           "reencrypt-hotzone-size=64k,file.filename=%s",
                           o.path);
    opts = qemu_opts_parse(spec, NULL, NULL);
    o.bs = bdrv_open(NULL, NULL, opts, BDRV_O_RDWR, &err);
    if (!o.bs) {
        g_test_message("open: %s", error_get_pretty(err));
    }
    g_assert_nonnull(o.bs);
    g_assert_cmpint(bdrv_getlength(o.bs, &err), ==, IMG_SIZE);
    g_assert_true(block_crypto_online_start_node(o.bs, progress, &o));
    for (int i = 0; i < WORKERS; i++) {
        w[i] = (Worker) { .o = &o, .id = i };
        t[i] = g_thread_new("worker", worker, &w[i]);
    }
    for (int i = 0; i < WORKERS; i++) {
        g_thread_join(t[i]);
        g_test_message("worker %d: %u writes, %u reads", i, w[i].writes,
                       w[i].reads);
    }
    g_assert_cmpint(g_atomic_int_get(&o.failed), ==, 0);
    g_assert_cmpint(g_atomic_int_get(&o.ended), ==, 1);
    /* Many zones, each a chance for requests to meet the fence. */
    g_assert_cmpint(g_atomic_int_get(&o.zones), >=, IMG_SIZE / 65536);
    bdrv_close(o.bs);

    /* Done: a plain open takes it (a run left would be refused). */
    plain = g_strdup_printf("driver=luks,key-secret=s0,file.filename=%s",
                            o.path);
    g_hash_table_unref(opts);
    opts = qemu_opts_parse(plain, NULL, NULL);
    bs = bdrv_open(NULL, NULL, opts, 0, &err);
    if (!bs) {
        g_test_message("reopen: %s", error_get_pretty(err));
    }
    g_assert_nonnull(bs);
    g_assert_cmpint(bdrv_pread(bs, 0, all, IMG_SIZE, &err), ==, 0);
    g_assert_true(memcmp(all, o.shadow, IMG_SIZE) == 0);
    bdrv_close(bs);

    unlink(o.path);
    rmdir(o.dir);
    g_free(o.dir);
    g_free(o.path);
    g_free(o.shadow);
    qcrypto_secret_clear_all();
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_data_func("/block/crypto-online/luks2", "2", run_online);
    g_test_add_data_func("/block/crypto-online/luks1", "1", run_online);
    return g_test_run();
}
