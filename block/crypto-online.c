/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Online re-encryption: the luks driver with reencrypt=on serves the image
 * while a thread of its own gives it a new volume key (LUKS2 or LUKS1),
 * zone by zone, through the one re-encryption engine
 * (qcrypto_reencrypt_run_*, crypto/block-luks2-reencrypt-engine.c).
 * docs/reencrypt.md, "Online".
 *
 * Every request is routed by the run's position: [0, done) is under the
 * new key, the rest under the old. The zone being re-encrypted is fenced:
 * before the thread reads it, it waits for the requests in flight on it
 * to end, and requests that reach it meanwhile wait until the zone is
 * recorded done (then they go to the new key). Requests elsewhere run as
 * usual, in parallel with the zone. The on-disk state is the engine's:
 * a killed server leaves the image in re-encryption, and a server started
 * again with reencrypt=on resumes it (a crash inside a zone is repaired
 * first, from the checksums or the journal, as by reencrypt --resume-only).
 *
 * The thread starts on block_crypto_online_start(), not at open: a server
 * that forks after opening (nbdkit) starts it in the child.
 */
#include <inttypes.h>
#include <string.h>

#include "block/block_int.h"
#include "block/crypto.h"
#include "block/crypto-online.h"
#include "crypto/reencrypt.h"

struct BlockCryptoOnline {
    BlockDriverState *file;
    QCryptoReencryptIO io;
    QCryptoReencryptRun *run;
    uint64_t offset;            /* the data's, in the file */
    uint64_t size;
    uint32_t sector_size;

    GMutex lock;
    GCond cond;
    /* Under lock: */
    uint64_t done;              /* [0, done) is under the new key */
    uint64_t zone_off, zone_len;    /* the zone fenced (len 0: none) */
    GArray *inflight;           /* ranges of the requests in flight */
    bool stop;                  /* close: stop between zones */
    Error *failed;              /* the run's error: its zone stays fenced */

    QCryptoReencryptKeys *keys;    /* the init's, for the run's start */
    GThread *thread;
    BlockCryptoOnlineProgress *progress;
    void *progress_opaque;
};

typedef struct OnlineRange {
    uint64_t off, len;
} OnlineRange;

/* ---- the engine's I/O: the file node ---- */

static int online_io_read(void *opaque, uint64_t off, void *buf, size_t len,
                          Error **errp)
{
    BlockCryptoOnline *o = opaque;

    return bdrv_pread(o->file, off, buf, len, errp);
}

static int online_io_write(void *opaque, uint64_t off, const void *buf,
                           size_t len, Error **errp)
{
    BlockCryptoOnline *o = opaque;

    return bdrv_pwrite(o->file, off, buf, len, 0, errp);
}

static int online_io_sync(void *opaque, Error **errp)
{
    BlockCryptoOnline *o = opaque;

    return bdrv_flush(o->file, errp);
}

static int64_t online_io_length(void *opaque, Error **errp)
{
    BlockCryptoOnline *o = opaque;

    return bdrv_getlength_exact(o->file, errp);
}

static int online_io_truncate(void *opaque, uint64_t size, Error **errp)
{
    BlockCryptoOnline *o = opaque;

    return bdrv_truncate(o->file, size, PREALLOC_MODE_OFF, errp);
}

/* ---- open: start a new volume key, or find the run to resume ---- */

/*
 * reencrypt-iter-time, reencrypt-resilience, reencrypt-hotzone-size: the
 * new key slots' PBKDF time, the resilience and the zone size of a run
 * that starts here (a resumed run keeps its own resilience).
 */
BlockCryptoOnline *block_crypto_online_open(BlockDriverState *file,
                                            GHashTable *opts,
                                            const QCryptoBlockSecret *secret,
                                            Error **errp)
{
    QCryptoReencryptKeys *keys = qcrypto_reencrypt_keys_new();
    g_autofree char *res = qemu_opt_take(opts, "reencrypt-resilience");
    QCryptoReencryptRekeyOptions ro = { .keyslot = -1, .keys = keys };
    BlockCryptoOnline *o;
    uint64_t iter_time, hotzone;

    if (qemu_opt_take_uint(opts, "reencrypt-iter-time", 0, &iter_time,
                           errp) < 0 ||
        qemu_opt_take_size(opts, "reencrypt-hotzone-size", 0, &hotzone,
                           errp) < 0) {
        qcrypto_reencrypt_keys_free(keys);
        return NULL;
    }
    if (!res || g_str_equal(res, "checksum")) {
        ro.resilience = QCRYPTO_REENCRYPT_RESILIENCE_CHECKSUM;
    } else if (g_str_equal(res, "journal")) {
        ro.resilience = QCRYPTO_REENCRYPT_RESILIENCE_JOURNAL;
    } else if (g_str_equal(res, "none")) {
        ro.resilience = QCRYPTO_REENCRYPT_RESILIENCE_NONE;
    } else {
        error_setg(errp, "Invalid parameter '%s' for 'reencrypt-resilience' "
                   "(use checksum, journal or none)", res);
        qcrypto_reencrypt_keys_free(keys);
        return NULL;
    }
    o = g_new0(BlockCryptoOnline, 1);
    o->file = file;
    o->keys = keys;
    o->io = (QCryptoReencryptIO) {
        .read = online_io_read,
        .write = online_io_write,
        .sync = online_io_sync,
        .length = online_io_length,
        .truncate = online_io_truncate,
        .opaque = o,
    };
    g_mutex_init(&o->lock);
    g_cond_init(&o->cond);
    o->inflight = g_array_new(false, false, sizeof(OnlineRange));

    /* Not being re-encrypted yet: the init of a new volume key. */
    if (qcrypto_reencrypt_unfinished_kind(&o->io) ==
        QCRYPTO_REENCRYPT_KIND_NONE) {
        ro.create.secret = *secret;
        ro.create.has_iter_time = iter_time != 0;
        ro.create.iter_time = iter_time;
        if (qcrypto_reencrypt_rekey_init(&ro, &o->io, errp) < 0) {
            goto fail;
        }
    }
    o->run = qcrypto_reencrypt_run_open(secret, keys, hotzone, &o->io, errp);
    if (!o->run) {
        goto fail;
    }
    if (!qcrypto_reencrypt_run_online(o->run)) {
        error_setg(errp, "The image is being encrypted or decrypted in "
                   "place: only a new volume key runs while it is served; "
                   "finish with 'qemu-img-lite reencrypt --resume-only'");
        goto fail;
    }
    o->offset = qcrypto_reencrypt_run_data_offset(o->run);
    o->size = qcrypto_reencrypt_run_size(o->run);
    o->sector_size = qcrypto_reencrypt_run_sector_size(o->run);
    o->done = qcrypto_reencrypt_run_done(o->run);
    return o;

fail:
    block_crypto_online_close(o);
    return NULL;
}

/* ---- the run's thread ---- */

static bool online_overlaps(uint64_t a, uint64_t alen, uint64_t b,
                            uint64_t blen)
{
    return alen && blen && a < b + blen && b < a + alen;
}

static bool online_inflight_overlaps(BlockCryptoOnline *o, uint64_t off,
                                     uint64_t len)
{
    for (guint i = 0; i < o->inflight->len; i++) {
        OnlineRange *r = &g_array_index(o->inflight, OnlineRange, i);

        if (online_overlaps(r->off, r->len, off, len)) {
            return true;
        }
    }
    return false;
}

/* Asked between zones: true to pause (asked again until false). */
static bool online_report(BlockCryptoOnline *o, uint64_t done)
{
    return o->progress && o->progress(o->progress_opaque, done, o->size,
                                      false, NULL);
}

/*
 * Zone after zone; the caller's progress callback (without the lock: it
 * may ask for the status) between them. Only this thread writes done.
 */
static gpointer online_thread(gpointer opaque)
{
    BlockCryptoOnline *o = opaque;
    Error *err = NULL;
    uint64_t off, len;
    bool stopped;

    for (;;) {
        bool pause = online_report(o, o->done);

        g_mutex_lock(&o->lock);
        if (pause && !o->stop) {
            gint64 until = g_get_monotonic_time() + G_TIME_SPAN_SECOND / 5;

            g_cond_wait_until(&o->cond, &o->lock, until);
            g_mutex_unlock(&o->lock);
            continue;
        }
        if (o->stop || !qcrypto_reencrypt_run_next(o->run, &off, &len)) {
            g_mutex_unlock(&o->lock);
            break;
        }
        /* The fence: new requests on the zone wait; those in flight end. */
        o->zone_off = off;
        o->zone_len = len;
        while (online_inflight_overlaps(o, off, len)) {
            g_cond_wait(&o->cond, &o->lock);
        }
        g_mutex_unlock(&o->lock);

        if (qcrypto_reencrypt_run_zone(o->run, off, len, &err) != 0) {
            if (!err) {
                error_setg(&err, "stopped inside a zone");
            }
            break;
        }
        g_mutex_lock(&o->lock);
        o->done = qcrypto_reencrypt_run_done(o->run);
        o->zone_len = 0;
        g_cond_broadcast(&o->cond);
        g_mutex_unlock(&o->lock);
    }
    g_mutex_lock(&o->lock);
    stopped = o->stop;
    g_mutex_unlock(&o->lock);
    if (!err && !stopped) {
        if (qcrypto_reencrypt_run_finish(o->run, &err) == 0) {
            g_mutex_lock(&o->lock);
            o->done = o->size;
            g_mutex_unlock(&o->lock);
        }
    }
    g_mutex_lock(&o->lock);
    if (err) {
        /* The zone it failed in stays fenced: neither key reads it now. */
        o->failed = err;
    }
    g_cond_broadcast(&o->cond);
    g_mutex_unlock(&o->lock);
    if (o->progress) {
        o->progress(o->progress_opaque, o->done, o->size, true, err);
    }
    return NULL;
}

void block_crypto_online_start(BlockCryptoOnline *o,
                               BlockCryptoOnlineProgress *progress,
                               void *opaque)
{
    if (o->thread) {
        return;
    }
    o->progress = progress;
    o->progress_opaque = opaque;
    o->thread = g_thread_new("reencrypt", online_thread, o);
}

void block_crypto_online_close(BlockCryptoOnline *o)
{
    if (!o) {
        return;
    }
    if (o->thread) {
        g_mutex_lock(&o->lock);
        o->stop = true;
        g_cond_broadcast(&o->cond);
        g_mutex_unlock(&o->lock);
        g_thread_join(o->thread);
    }
    qcrypto_reencrypt_run_free(o->run);
    qcrypto_reencrypt_keys_free(o->keys);
    g_array_unref(o->inflight);
    error_free(o->failed);
    g_mutex_clear(&o->lock);
    g_cond_clear(&o->cond);
    g_free(o);
}

/* ---- requests ---- */

uint64_t block_crypto_online_size(BlockCryptoOnline *o)
{
    return o->size;
}

uint32_t block_crypto_online_sector_size(BlockCryptoOnline *o)
{
    return o->sector_size;
}

/*
 * Wait while [off, off + len) meets the zone, then count the request in
 * flight; *done: the position it is routed by (it does not change for
 * this range until the request ends).
 */
static int online_enter(BlockCryptoOnline *o, uint64_t off, uint64_t len,
                        uint64_t *done, Error **errp)
{
    OnlineRange r = { off, len };

    g_mutex_lock(&o->lock);
    while (online_overlaps(o->zone_off, o->zone_len, off, len)) {
        if (o->failed) {
            error_setg(errp, "Online re-encryption failed in the zone at "
                       "%" PRIu64 " (%s): its bytes are not served until "
                       "the run is resumed", o->zone_off,
                       error_get_pretty(o->failed));
            g_mutex_unlock(&o->lock);
            return -1;
        }
        g_cond_wait(&o->cond, &o->lock);
    }
    g_array_append_val(o->inflight, r);
    *done = o->done;
    g_mutex_unlock(&o->lock);
    return 0;
}

static void online_leave(BlockCryptoOnline *o, uint64_t off, uint64_t len)
{
    g_mutex_lock(&o->lock);
    for (guint i = 0; i < o->inflight->len; i++) {
        OnlineRange *r = &g_array_index(o->inflight, OnlineRange, i);

        if (r->off == off && r->len == len) {
            g_array_remove_index_fast(o->inflight, i);
            break;
        }
    }
    g_cond_broadcast(&o->cond);
    g_mutex_unlock(&o->lock);
}

/* One request, routed by the run's position; a write encrypts buf. */
static int online_request(BlockCryptoOnline *o, uint64_t off, uint8_t *buf,
                          size_t len, bool write, Error **errp)
{
    uint64_t done;
    int ret;

    if (online_enter(o, off, len, &done, errp) < 0) {
        return -1;
    }
    if (write) {
        ret = qcrypto_reencrypt_run_crypt(o->run, done, true, off, buf, len,
                                          errp);
        if (ret == 0) {
            ret = bdrv_pwrite(o->file, o->offset + off, buf, len, 0, errp);
        }
    } else {
        ret = bdrv_pread(o->file, o->offset + off, buf, len, errp);
        if (ret == 0) {
            ret = qcrypto_reencrypt_run_crypt(o->run, done, false, off, buf,
                                              len, errp);
        }
    }
    online_leave(o, off, len);
    return ret;
}

int block_crypto_online_pread(BlockCryptoOnline *o, uint64_t off,
                              uint8_t *buf, size_t len, Error **errp)
{
    return online_request(o, off, buf, len, false, errp);
}

/* buf is encrypted in place. */
int block_crypto_online_pwrite(BlockCryptoOnline *o, uint64_t off,
                               uint8_t *buf, size_t len, Error **errp)
{
    return online_request(o, off, buf, len, true, errp);
}
