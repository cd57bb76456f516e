/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * nbdkit-qil-plugin: an nbdkit plugin that serves any image the block
 * layer opens (raw, LUKS1, LUKS2, qcow2 with or without LUKS, backing
 * chains, on a file or on NBD) as its plain contents: reads decrypt,
 * writes encrypt with the image's key, flush reaches the file.
 *
 * nbdkit does the serving (the protocol, TLS, multi-conn, structured
 * replies, filters, --run); qemu-nbd-lite (main.c) is its front door
 * with qemu-nbd's options. The plugin also works under nbdkit directly:
 *
 *   nbdkit .../nbdkit-qil-plugin.so image=disk.luks \
 *       object=secret,id=sec0,file=pass.txt [format=luks] [...]
 *
 * Parameters (docs/qemu-nbd-lite.md): image= (a file name, or with
 * image-opts=on a QEMU option string), format=, object= (any number),
 * secrets-fd= (secrets handed over by qemu-nbd-lite: "ID\0BASE64\0" pairs
 * in a file descriptor, so that no passphrase is ever on a command line),
 * export= (the only export name served; default ""), description=,
 * cache=, discard=, detect-zeroes=, force-share=, multi-conn=, shared=.
 *
 * The image is opened once, in .get_ready: before nbdkit forks into the
 * background, so a wrong passphrase or a locked image is an error of the
 * command; the image's locks (OFD locks, held by the open file
 * description) go with the file descriptors into the forked server.
 * Every connection shares the one node.
 *
 * Requests run in parallel (nbdkit's PARALLEL thread model): the block
 * layer serves concurrent requests on distinct ranges, but NBD clients
 * may send overlapping or unaligned ones, and an unaligned write to an
 * encrypted image is a read-modify-write of whole sectors. So reads and
 * block status share a lock and everything that changes the image takes
 * it alone: writes are serialised (one core encrypts at several GiB/s,
 * far above what a socket carries) and reads, the common case, are not.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define NBDKIT_API_VERSION 2
/* The ceiling; .thread_model says the same at run time. */
#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL
#include <nbdkit-plugin.h>

#include "../qemu-img-lite/img.h"
#include "block/crypto.h"
#include "crypto/secret.h"

/* The largest run one block status answer describes (nbdkit asks more). */
#define QIL_EXTENTS_MAX (1ULL << 30)

typedef enum {
    QIL_DETECT_ZEROES_OFF,
    QIL_DETECT_ZEROES_ON,
    QIL_DETECT_ZEROES_UNMAP,
} QilDetectZeroes;

static struct {
    char *image;
    char *format;
    bool image_opts;
    char *export_name;
    char *description;
    GPtrArray *objects;
    int secrets_fd;
    int flags;                  /* BDRV_O_* for the open */
    bool discard;               /* --discard=unmap */
    QilDetectZeroes detect_zeroes;
    bool multi_conn;
    bool force_share;
    unsigned shared;            /* most clients at once; 0: no limit */
    unsigned connections;       /* clients past .open (under slot_lock) */
    GMutex slot_lock;

    BlockDriverState *bs;
    bool read_only;
    int64_t size;
    GRWLock lock;
} qil = { .secrets_fd = -1 };

/* ---- Configuration */

static void qil_load(void)
{
    img_set_progname("qemu-nbd-lite");
    qil.objects = g_ptr_array_new_with_free_func(g_free);
    g_rw_lock_init(&qil.lock);
}

static void qil_unload(void)
{
    bdrv_close(g_steal_pointer(&qil.bs));
    img_objects_clear();
    g_clear_pointer(&qil.objects, g_ptr_array_unref);
    g_clear_pointer(&qil.image, g_free);
    g_clear_pointer(&qil.format, g_free);
    g_clear_pointer(&qil.export_name, g_free);
    g_clear_pointer(&qil.description, g_free);
    g_rw_lock_clear(&qil.lock);
    img_set_progname(NULL);
}

static int qil_parse_bool(const char *key, const char *value, bool *out)
{
    int r = nbdkit_parse_bool(value);

    if (r < 0) {
        return -1;
    }
    *out = r;
    return 0;
}

/* qemu-nbd's --cache modes, as the block layer's open flags. */
static int qil_parse_cache(const char *mode)
{
    if (g_str_equal(mode, "writeback") || g_str_equal(mode, "writethrough")) {
        qil.flags &= ~(BDRV_O_NO_FLUSH | BDRV_O_NOCACHE);
    } else if (g_str_equal(mode, "unsafe")) {
        qil.flags = (qil.flags & ~BDRV_O_NOCACHE) | BDRV_O_NO_FLUSH;
    } else if (g_str_equal(mode, "none") || g_str_equal(mode, "directsync")) {
        qil.flags = (qil.flags & ~BDRV_O_NO_FLUSH) | BDRV_O_NOCACHE;
    } else {
        nbdkit_error("Invalid cache mode '%s'", mode);
        return -1;
    }
    return 0;
}

static int qil_config(const char *key, const char *value)
{
    if (g_str_equal(key, "image") || g_str_equal(key, "file")) {
        g_free(qil.image);
        qil.image = g_strdup(value);
    } else if (g_str_equal(key, "format")) {
        g_free(qil.format);
        qil.format = g_strdup(value);
    } else if (g_str_equal(key, "image-opts")) {
        return qil_parse_bool(key, value, &qil.image_opts);
    } else if (g_str_equal(key, "object")) {
        g_ptr_array_add(qil.objects, g_strdup(value));
    } else if (g_str_equal(key, "secrets-fd")) {
        if (nbdkit_parse_int("secrets-fd", value, &qil.secrets_fd) < 0) {
            return -1;
        }
    } else if (g_str_equal(key, "export")) {
        g_free(qil.export_name);
        qil.export_name = g_strdup(value);
    } else if (g_str_equal(key, "description")) {
        g_free(qil.description);
        qil.description = g_strdup(value);
    } else if (g_str_equal(key, "cache")) {
        return qil_parse_cache(value);
    } else if (g_str_equal(key, "discard")) {
        if (g_str_equal(value, "unmap") || g_str_equal(value, "on")) {
            qil.discard = true;
        } else if (g_str_equal(value, "ignore") || g_str_equal(value, "off")) {
            qil.discard = false;
        } else {
            nbdkit_error("Invalid discard mode '%s' (ignore or unmap)", value);
            return -1;
        }
    } else if (g_str_equal(key, "detect-zeroes")) {
        if (g_str_equal(value, "off")) {
            qil.detect_zeroes = QIL_DETECT_ZEROES_OFF;
        } else if (g_str_equal(value, "on")) {
            qil.detect_zeroes = QIL_DETECT_ZEROES_ON;
        } else if (g_str_equal(value, "unmap")) {
            qil.detect_zeroes = QIL_DETECT_ZEROES_UNMAP;
        } else {
            nbdkit_error("Invalid detect-zeroes mode '%s' (off, on or unmap)",
                         value);
            return -1;
        }
    } else if (g_str_equal(key, "read-only")) {
        return qil_parse_bool(key, value, &qil.read_only);
    } else if (g_str_equal(key, "force-share")) {
        return qil_parse_bool(key, value, &qil.force_share);
    } else if (g_str_equal(key, "multi-conn")) {
        return qil_parse_bool(key, value, &qil.multi_conn);
    } else if (g_str_equal(key, "shared")) {
        return nbdkit_parse_unsigned("shared", value, &qil.shared);
    } else {
        nbdkit_error("unknown parameter '%s'", key);
        return -1;
    }
    return 0;
}

/*
 * The secrets qemu-nbd-lite hands over: "ID\0BASE64\0" pairs in a
 * descriptor (a memfd), read whole and closed. The buffer is wiped.
 */
static int qil_read_secrets(int fd)
{
    g_autoptr(GByteArray) buf = g_byte_array_new();
    uint8_t chunk[4096];
    ssize_t n;
    size_t pos = 0;
    int ret = 0;

    while ((n = read(fd, chunk, sizeof(chunk))) != 0) {
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            nbdkit_error("secrets-fd=%d: %s", fd, g_strerror(errno));
            ret = -1;
            break;
        }
        g_byte_array_append(buf, chunk, n);
    }
    explicit_bzero(chunk, sizeof(chunk));
    close(fd);
    while (ret == 0 && pos < buf->len) {
        const char *id = (const char *)buf->data + pos;
        size_t id_len = strnlen(id, buf->len - pos);
        const char *b64 = id + id_len + 1;
        size_t b64_len;
        Error *err = NULL;

        if (pos + id_len + 1 >= buf->len) {
            nbdkit_error("secrets-fd=%d: truncated", fd);
            ret = -1;
            break;
        }
        b64_len = strnlen(b64, buf->len - pos - id_len - 1);
        if (pos + id_len + 1 + b64_len >= buf->len) {
            nbdkit_error("secrets-fd=%d: truncated", fd);
            ret = -1;
            break;
        }
        if (qcrypto_secret_add(id, b64, NULL, QCRYPTO_SECRET_FORMAT_BASE64,
                               &err) < 0) {
            img_error_free(NULL, err);
            ret = -1;
        }
        pos += id_len + 1 + b64_len + 1;
    }
    explicit_bzero(buf->data, buf->len);
    return ret;
}

static int qil_config_complete(void)
{
    g_ptr_array_add(qil.objects, NULL);
    if (img_add_objects((char **)qil.objects->pdata) < 0) {
        return -1;
    }
    if (qil.secrets_fd >= 0 && qil_read_secrets(qil.secrets_fd) < 0) {
        return -1;
    }
    if (!qil.image) {
        nbdkit_error("no image: give image=FILE");
        return -1;
    }
    return 0;
}

/*
 * The image is opened here: before nbdkit forks (--fork) and before it
 * listens, so that the command fails with our message. img_open() prints
 * "qemu-nbd-lite: NAME: why" itself; nbdkit only learns of the failure.
 */
static void qil_reencrypt_signals(void);

static int qil_get_ready(void)
{
    Error *err = NULL;

    /*
     * nbdkit tells whether it serves read-only (-r) to .open only, per
     * connection: read-only=on (which qemu-nbd-lite -r passes along with
     * nbdkit's -r) says so now, so that the image is opened read-only and
     * locked only against writers.
     */
    if (!qil.read_only) {
        qil.flags |= BDRV_O_RDWR;
    } else if (qil.force_share) {
        qil.flags |= BDRV_O_FORCE_SHARE;
    }
    if (qil.force_share && !qil.read_only) {
        img_error(NULL, "--force-share (-U) needs --read-only (-r)");
        return -1;
    }
    qil.bs = img_open(qil.image, qil.format, qil.image_opts, qil.flags);
    if (!qil.bs) {
        return -1;
    }
    qil.size = bdrv_getlength(qil.bs, &err);
    if (qil.size < 0) {
        img_error_free(qil.image, err);
        return -1;
    }
    qil_reencrypt_signals();
    return 0;
}

/* ---- Online re-encryption (the image opened with reencrypt=on) */

/*
 * SIGUSR1 pauses the run between zones and SIGUSR2 asks where it is (the
 * run's thread says so on stderr): only flags here, read by the progress
 * callback.
 */
static volatile sig_atomic_t qil_reenc_paused;
static volatile sig_atomic_t qil_reenc_report;

static void qil_reenc_signal(int sig)
{
    if (sig == SIGUSR1) {
        qil_reenc_paused = !qil_reenc_paused;
    }
    qil_reenc_report = 1;
}

/* On the run's thread: a line at each tenth, when asked, and at the end. */
static bool qil_reenc_progress(void *opaque, uint64_t done, uint64_t size,
                               bool ended, const Error *err)
{
    static unsigned last_tenth;
    static bool was_paused;
    unsigned tenth = size ? done * 10 / size : 10;
    bool paused = qil_reenc_paused;

    if (ended) {
        if (err) {
            img_error(qil.image, "re-encryption stopped at %" PRIu64 " of %"
                      PRIu64 " bytes: %s", done, size, error_get_pretty(err));
        } else {
            fprintf(stderr, "qemu-nbd-lite: re-encryption %s: %" PRIu64
                    " of %" PRIu64 " bytes under the new key\n",
                    done == size ? "done" : "stopped (resumable)", done,
                    size);
        }
        return false;
    }
    if (qil_reenc_report || tenth != last_tenth || paused != was_paused) {
        qil_reenc_report = 0;
        last_tenth = tenth;
        was_paused = paused;
        fprintf(stderr, "qemu-nbd-lite: re-encryption%s: %" PRIu64 " of %"
                PRIu64 " bytes (%.1f%%)\n", paused ? " paused" : "", done,
                size, size ? 100.0 * done / size : 100.0);
    }
    return paused;
}

/*
 * From .get_ready, before nbdkit makes its socket: a SIGUSR1 sent as soon
 * as the socket is there (a script that pauses the run at once) must find
 * the handler, not the default action, which ends the process. The flags
 * wait for the run. Signal dispositions survive nbdkit's fork.
 */
static void qil_reencrypt_signals(void)
{
    struct sigaction sa = { .sa_handler = qil_reenc_signal };

    if (!block_crypto_online_node(qil.bs)) {
        return;
    }
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
}

/*
 * After nbdkit forked (or not): the run is a thread, which a fork would
 * not carry, so it starts here.
 */
static void qil_after_fork_reencrypt(void)
{
    if (qil.bs) {
        block_crypto_online_start_node(qil.bs, qil_reenc_progress, NULL);
    }
}

static int qil_after_fork(void)
{
    qil_after_fork_reencrypt();
    return 0;
}

/* ---- Exports: the one name, as qemu-nbd serves it */

static const char *qil_export(void)
{
    return qil.export_name ? qil.export_name : "";
}

static int qil_list_exports(int readonly, int is_tls,
                            struct nbdkit_exports *exports)
{
    return nbdkit_add_export(exports, qil_export(), qil.description);
}

static const char *qil_default_export(int readonly, int is_tls)
{
    return qil_export();
}

/* ---- Connections: at most shared= at once, the others wait */

/*
 * qemu-nbd --shared=N stops accepting while N clients are connected: a
 * further client waits (in the listen backlog) until one leaves, and is
 * then served. nbdkit's limit filter turns it away instead, which a
 * client that reconnects right after disconnecting (qemu-io, then
 * nbdinfo) sees as a dropped connection while the server is still
 * closing the first. So the wait is here: .preconnect (before the
 * greeting, as qemu-nbd sends none until it accepts) waits for a free
 * slot, .open waits again and takes it (two waiters may pass
 * .preconnect together), .close frees it.
 *
 * The wait polls every 10 ms through nbdkit_nanosleep, which returns
 * early when the server shuts down (SIGTERM, or the exitlast filter once
 * the last client has gone, as qemu-nbd without -t) or the waiting client
 * hangs up: a condition variable would hold up nbdkit's shutdown, which
 * waits for every connection thread.
 */
static int qil_wait_for_slot(bool take)
{
    for (;;) {
        g_mutex_lock(&qil.slot_lock);
        if (!qil.shared || qil.connections < qil.shared) {
            qil.connections += take;
            g_mutex_unlock(&qil.slot_lock);
            return 0;
        }
        g_mutex_unlock(&qil.slot_lock);
        if (nbdkit_nanosleep(0, 10 * 1000 * 1000) < 0) {
            return -1;
        }
    }
}

static int qil_preconnect(int readonly)
{
    return qil_wait_for_slot(false);
}

static void *qil_open(int readonly)
{
    const char *name = nbdkit_export_name();

    /* qemu-nbd refuses every name but its export's. */
    if (name && !g_str_equal(name, qil_export())) {
        nbdkit_error("export '%s' not present", name);
        errno = ENOENT;
        return NULL;
    }
    if (qil_wait_for_slot(true) < 0) {
        errno = ESHUTDOWN;
        return NULL;
    }
    return NBDKIT_HANDLE_NOT_NEEDED;
}

/* Called only after a successful .open: the slot it took is freed. */
static void qil_close(void *handle)
{
    g_mutex_lock(&qil.slot_lock);
    qil.connections--;
    g_mutex_unlock(&qil.slot_lock);
}

static const char *qil_export_description(void *handle)
{
    return qil.description;
}

/* ---- What the export can do */

static int64_t qil_get_size(void *handle)
{
    return qil.size;
}

static int qil_can_write(void *handle)
{
    return !qil.read_only;
}

static int qil_can_flush(void *handle)
{
    return 1;
}

static int qil_can_trim(void *handle)
{
    return qil.discard && !qil.read_only;
}

static int qil_can_zero(void *handle)
{
    return 1;
}

/* nbdkit turns FUA into a flush after the write. */
/*
 * Not offered: on an encrypted image a zero write is a write of
 * ciphertext, as slow as any other.
 */
static int qil_can_fast_zero(void *handle)
{
    return 0;
}

static int qil_can_fua(void *handle)
{
    return NBDKIT_FUA_EMULATE;
}

/*
 * One node behind every connection: a flush on any covers the writes
 * of all. As qemu-nbd, it is offered when more than one client may
 * connect (--shared).
 */
static int qil_can_multi_conn(void *handle)
{
    return qil.multi_conn;
}

static int qil_can_extents(void *handle)
{
    return 1;
}

static int qil_can_cache(void *handle)
{
    return NBDKIT_CACHE_NONE;
}

static int qil_thread_model(void)
{
    return NBDKIT_THREAD_MODEL_PARALLEL;
}

/* ---- Requests */

/* nbdkit's reply carries an errno; the message goes to its log. */
static int qil_fail(Error *err, int errnum)
{
    nbdkit_error("%s", error_get_pretty(err));
    error_free(err);
    errno = errnum;
    return -1;
}

static int qil_pread(void *handle, void *buf, uint32_t count, uint64_t offset,
                     uint32_t flags)
{
    Error *err = NULL;
    int ret;

    g_rw_lock_reader_lock(&qil.lock);
    ret = bdrv_pread(qil.bs, offset, buf, count, &err);
    g_rw_lock_reader_unlock(&qil.lock);
    return ret < 0 ? qil_fail(err, EIO) : 0;
}

static bool qil_buffer_is_zero(const void *buf, size_t len)
{
    const uint8_t *p = buf;

    return len == 0 || (p[0] == 0 && memcmp(p, p + 1, len - 1) == 0);
}

static int qil_pwrite(void *handle, const void *buf, uint32_t count,
                      uint64_t offset, uint32_t flags)
{
    Error *err = NULL;
    int ret;

    g_rw_lock_writer_lock(&qil.lock);
    if (qil.detect_zeroes != QIL_DETECT_ZEROES_OFF &&
        qil_buffer_is_zero(buf, count)) {
        /* "unmap" frees the space, as a trim would: only with --discard. */
        bool unmap = qil.detect_zeroes == QIL_DETECT_ZEROES_UNMAP &&
                     qil.discard;

        ret = bdrv_pwrite_zeroes(qil.bs, offset, count,
                                 unmap ? BDRV_REQ_MAY_UNMAP : 0, &err);
    } else {
        ret = bdrv_pwrite(qil.bs, offset, buf, count, 0, &err);
    }
    g_rw_lock_writer_unlock(&qil.lock);
    return ret < 0 ? qil_fail(err, EIO) : 0;
}

static int qil_zero(void *handle, uint32_t count, uint64_t offset,
                    uint32_t flags)
{
    Error *err = NULL;
    int zflags = 0;
    int ret;

    /* The client allows a hole (no NO_HOLE flag); --discard=unmap too. */
    if ((flags & NBDKIT_FLAG_MAY_TRIM) && qil.discard) {
        zflags |= BDRV_REQ_MAY_UNMAP;
    }
    g_rw_lock_writer_lock(&qil.lock);
    ret = bdrv_pwrite_zeroes(qil.bs, offset, count, zflags, &err);
    g_rw_lock_writer_unlock(&qil.lock);
    return ret < 0 ? qil_fail(err, EIO) : 0;
}

static int qil_trim(void *handle, uint32_t count, uint64_t offset,
                    uint32_t flags)
{
    Error *err = NULL;
    int ret;

    g_rw_lock_writer_lock(&qil.lock);
    ret = bdrv_pdiscard(qil.bs, offset, count, &err);
    g_rw_lock_writer_unlock(&qil.lock);
    return ret < 0 ? qil_fail(err, EIO) : 0;
}

static int qil_flush(void *handle, uint32_t flags)
{
    Error *err = NULL;
    int ret;

    g_rw_lock_writer_lock(&qil.lock);
    ret = bdrv_flush(qil.bs, &err);
    g_rw_lock_writer_unlock(&qil.lock);
    return ret < 0 ? qil_fail(err, EIO) : 0;
}

/*
 * base:allocation from the block layer's status. A run the top node
 * does not hold itself (a qcow2 cluster left to the backing file) is
 * reported as data: always safe, and the reads it then gets are right.
 */
static int qil_extents(void *handle, uint32_t count, uint64_t offset,
                       uint32_t flags, struct nbdkit_extents *extents)
{
    uint64_t end = offset + MIN((uint64_t)count, QIL_EXTENTS_MAX);
    int ret = 0;

    g_rw_lock_reader_lock(&qil.lock);
    while (offset < end) {
        uint64_t pnum = 0;
        Error *err = NULL;
        int st = bdrv_block_status(qil.bs, offset, end - offset, &pnum, NULL,
                                   NULL, &err);
        uint32_t type = 0;

        if (st < 0) {
            ret = qil_fail(err, EIO);
            break;
        }
        if (pnum == 0) {
            break;
        }
        if (st & BDRV_BLOCK_ZERO) {
            type = NBDKIT_EXTENT_ZERO;
            if (!(st & BDRV_BLOCK_DATA)) {
                type |= NBDKIT_EXTENT_HOLE;
            }
        }
        if (nbdkit_add_extent(extents, offset, pnum, type) < 0) {
            ret = -1;
            break;
        }
        offset += pnum;
        if (flags & NBDKIT_FLAG_REQ_ONE) {
            break;
        }
    }
    g_rw_lock_reader_unlock(&qil.lock);
    return ret;
}

static void qil_dump_plugin(void)
{
    printf("qil_formats=raw,luks,qcow2\n");
}

static struct nbdkit_plugin plugin = {
    .name = "qil",
    .longname = "qemu-img-lite's images (raw, LUKS1, LUKS2, qcow2)",
    .version = QIL_VERSION,
    .description = "Serve any image qemu-img-lite opens, decrypted",
    .load = qil_load,
    .unload = qil_unload,
    .config = qil_config,
    .config_complete = qil_config_complete,
    .config_help =
        "image=FILE         the image (with image-opts=on: QEMU options)\n"
        "format=FMT         raw, luks or qcow2 (default: probed)\n"
        "object=DEF         --object secret,... as qemu-img takes it\n"
        "export=NAME        the export's name (default \"\")\n"
        "description=TEXT   the export's description\n"
        "cache=MODE         writeback (default), unsafe, none, directsync\n"
        "discard=MODE       ignore (default) or unmap\n"
        "detect-zeroes=MODE off (default), on or unmap\n"
        "read-only=on       open the image read-only (give nbdkit -r too)\n"
        "force-share=on     with -r: take no image lock (qemu-nbd -U)\n"
        "multi-conn=on      offer multi-conn (qemu-nbd --shared > 1)\n"
        "shared=N           serve N clients at once, others wait (0: any)",
    .magic_config_key = "image",
    .get_ready = qil_get_ready,
    .after_fork = qil_after_fork,
    .list_exports = qil_list_exports,
    .default_export = qil_default_export,
    .preconnect = qil_preconnect,
    .open = qil_open,
    .close = qil_close,
    .export_description = qil_export_description,
    .get_size = qil_get_size,
    .can_write = qil_can_write,
    .can_flush = qil_can_flush,
    .can_trim = qil_can_trim,
    .can_zero = qil_can_zero,
    .can_fast_zero = qil_can_fast_zero,
    .can_fua = qil_can_fua,
    .can_multi_conn = qil_can_multi_conn,
    .can_extents = qil_can_extents,
    .can_cache = qil_can_cache,
    .thread_model = qil_thread_model,
    .pread = qil_pread,
    .pwrite = qil_pwrite,
    .zero = qil_zero,
    .trim = qil_trim,
    .flush = qil_flush,
    .extents = qil_extents,
    .dump_plugin = qil_dump_plugin,
};

NBDKIT_REGISTER_PLUGIN(plugin)
