/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite convert: copy an image into a new (or, with -n, an
 * existing) one, in another format: raw -> luks, luks -> raw, luks -> luks
 * (re-encryption under a new key or cipher).
 *
 * The copy is a pipeline of requests handed to a pool of threads:
 * each job reads one chunk (decrypting it, for a LUKS source) and writes
 * it (encrypting it in the same buffer, for a LUKS target), so with two
 * cores one job's system calls run while another's cipher works. Jobs own
 * one of a fixed set of buffers: memory stays at a few MiB whatever the
 * image size.
 *
 * A raw target that we just created reads as zeroes, so runs of zeroes in
 * the source are not written (the target stays sparse), and holes in a
 * raw source are not even read: they are skipped whole, one extent at a
 * time, so a huge sparse image costs what its data costs.
 *
 * Nothing half-written is ever seen: a new target has no name until the
 * copy is complete and synced (bdrv_create_open(), bdrv_create_finish()),
 * so an error, SIGINT/SIGTERM/SIGHUP (checked between chunks) or even
 * SIGKILL leaves nothing. An existing target (-n) is written in place.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "img.h"
#include "qemu/buffer.h"

/*
 * Bytes per job. Large enough that system call and cipher set-up costs
 * vanish, small enough that a chunk stays in the L2 cache between the copy
 * out of the page cache, the cipher and the copy back in: on the 2-CPU test
 * machine 256 KiB jobs took half the kernel time of 1 MiB ones.
 */
#ifndef CONVERT_CHUNK
#define CONVERT_CHUNK (256 * 1024)
#endif
/* Bytes per job at most, whatever a protocol asks (convert_job_size()). */
#define CONVERT_MAX_CHUNK (4 * 1024 * 1024)
/* Default zero-run granularity (-S), as qemu-img's 4k. */
#define CONVERT_SPARSE_DEFAULT 4096
/* qemu-img's largest -S: 32768 sectors (its MAX_BUF_SECTORS). */
#define CONVERT_SPARSE_MAX (16 * 1024 * 1024)
/* -m, as qemu-img's number of coroutines: 1 to 16. */
#define CONVERT_MAX_THREADS 16

typedef struct ConvertState {
    BlockDriverState *src, *dst;
    const char *src_name, *dst_name;
    uint64_t size;
    /* Bytes per job (convert_job_size()). */
    size_t chunk;
    /* The target reads as zeroes: skip zero runs of sparse_size bytes. */
    bool skip_zeroes;
    size_t sparse_size;
    /*
     * --salvage: a block that cannot be read is copied as zeroes; blocks
     * of salvage_unit bytes, the source's logical block size.
     */
    bool salvage;
    uint32_t salvage_unit;
    /* -C: try copy offloading; cleared (atomically) once it fails. */
    gint copy_range;
    /* -r: bytes per second, 0 for no limit. */
    uint64_t rate_limit;
    /* -c: whole clusters compressed, in the job's thread (qcow2). */
    bool compress;
    /*
     * -c: jobs start and end on the target's clusters (0: no such rule),
     * so that a cluster the source holds partly as a hole is still one
     * whole cluster, its hole read as zeroes, and compressed (qemu-img
     * does the same); a job cut at the hole would leave the cluster's
     * pieces to be stored uncompressed.
     */
    uint64_t align;
    /* -B: the target's backing file; blocks equal to it are not written. */
    BlockDriverState *backing;
    uint64_t backing_len;

    GMutex lock;
    GCond cond;
    GPtrArray *free_bufs;       /* buffers not owned by a job */
    uint64_t done;              /* bytes finished */
    Error *err;                 /* the first failure */
    const char *err_file;
} ConvertState;

typedef struct ConvertJob {
    uint64_t offset;
    size_t len;
    /*
     * The scheduler found the range all data: the worker need not ask.
     * (Were it to ask, the file's one-extent block-status cache would go
     * back and forth between the scheduler, already in the next extent, and
     * the workers, still in this one.)
     */
    bool all_data;
    uint8_t *buf;
} ConvertJob;

/*
 * Write buf to the target, leaving out runs of sparse_size-aligned zero
 * blocks when the target already reads as zeroes there.
 */
/* Blocks of -B's comparison: qemu-img's default qcow2 cluster. */
#define CONVERT_BACKING_BLOCK (64 * 1024)

static int convert_write_1(ConvertState *s, uint64_t offset, uint8_t *buf,
                           size_t len, Error **errp);

/*
 * -B: only the blocks that differ from the backing file are written
 * (zeroes included: the target's driver makes zero clusters of them).
 */
static int convert_write_over_backing(ConvertState *s, uint64_t offset,
                                      uint8_t *buf, size_t len, Error **errp)
{
    g_autofree uint8_t *old = g_malloc(CONVERT_BACKING_BLOCK);
    size_t pos = 0, start = 0;     /* [start, pos): differing, unwritten */

    while (pos < len) {
        uint64_t at = offset + pos;
        size_t n = MIN(CONVERT_BACKING_BLOCK - at % CONVERT_BACKING_BLOCK,
                       len - pos);
        size_t in = at < s->backing_len ? MIN(n, s->backing_len - at) : 0;

        memset(old, 0, n);
        if (in && bdrv_pread(s->backing, at, old, in, errp) < 0) {
            return -1;
        }
        if (memcmp(old, buf + pos, n) == 0) {
            /* Equal: write the run of differing blocks before it. */
            if (pos > start &&
                convert_write_1(s, offset + start, buf + start, pos - start,
                                errp) < 0) {
                return -1;
            }
            start = pos + n;
        }
        pos += n;
    }
    if (pos > start &&
        convert_write_1(s, offset + start, buf + start, pos - start,
                        errp) < 0) {
        return -1;
    }
    return 0;
}

static int convert_write(ConvertState *s, uint64_t offset, uint8_t *buf,
                         size_t len, Error **errp)
{
    if (s->backing) {
        return convert_write_over_backing(s, offset, buf, len, errp);
    }
    return convert_write_1(s, offset, buf, len, errp);
}

static int convert_write_1(ConvertState *s, uint64_t offset, uint8_t *buf,
                           size_t len, Error **errp)
{
    size_t pos = 0;

    if (s->compress) {
        /* The driver leaves zero clusters out and compresses the rest. */
        return bdrv_pwrite_compressed(s->dst, offset, buf, len, errp);
    }
    if (!s->skip_zeroes) {
        return bdrv_pwrite(s->dst, offset, buf, len, BDRV_REQ_MAY_CLOBBER,
                           errp);
    }
    while (pos < len) {
        size_t start, n = MIN(s->sparse_size, len - pos);

        /* Skip zero blocks, then write the run of data blocks that follow. */
        if (buffer_is_zero(buf + pos, n)) {
            pos += n;
            continue;
        }
        start = pos;
        while (pos < len && !buffer_is_zero(buf + pos, n)) {
            pos += n;
            n = MIN(s->sparse_size, len - pos);
        }
        if (bdrv_pwrite(s->dst, offset + start, buf + start, pos - start,
                        BDRV_REQ_MAY_CLOBBER, errp) < 0) {
            return -1;
        }
    }
    return 0;
}

/*
 * --salvage: the read of [offset, offset + len) failed; read it again one
 * logical block at a time (512 bytes for a file, as qemu-img, a block
 * device's own block size, a LUKS sector), and let each block that still
 * fails read as zeroes, with a warning: only the blocks that cannot be
 * read are lost, never the rest of the chunk.
 */
static void convert_read_salvage(ConvertState *s, uint64_t offset,
                                 uint8_t *buf, size_t len)
{
    uint32_t unit = s->salvage_unit;

    for (size_t pos = 0; pos < len;) {
        /* Pieces end on block boundaries (the first may be a part). */
        size_t n = MIN(unit - (offset + pos) % unit, len - pos);
        Error *err = NULL;

        if (bdrv_pread(s->src, offset + pos, buf + pos, n, &err) < 0) {
            memset(buf + pos, 0, n);
            /* Under the lock: one worker's line at a time. */
            g_mutex_lock(&s->lock);
            /* qemu-img's line: the errno's text where there is one */
            img_error(NULL, "warning: error while reading offset %"
                      G_GUINT64_FORMAT ": %s", offset + pos,
                      error_get_errno(err) ? g_strerror(error_get_errno(err))
                      : error_get_pretty(err));
            g_mutex_unlock(&s->lock);
            error_free(err);
        }
        pos += n;
    }
}

/*
 * -C: offload the copy of a job to the file system. False (and offloading
 * off from then on, as in qemu-img) when it cannot: the job is then
 * copied the usual way.
 */
static bool convert_chunk_offload(ConvertState *s, ConvertJob *job)
{
    Error *err = NULL;

    if (!g_atomic_int_get(&s->copy_range)) {
        return false;
    }
    if (bdrv_copy_range(s->src, job->offset, s->dst, job->offset, job->len,
                        &err) == 0) {
        return true;
    }
    error_free(err);
    g_atomic_int_set(&s->copy_range, 0);
    return false;
}

/*
 * One chunk: read what the source holds as data, zero what it knows is a
 * hole, and write it all at once (a LUKS target needs whole sectors; a
 * sparse raw one leaves the zero blocks out in convert_write()).
 */
static int convert_chunk(ConvertState *s, ConvertJob *job,
                         const char **err_file, Error **errp)
{
    uint64_t pos = 0, pnum;

    if (convert_chunk_offload(s, job)) {
        return 0;
    }
    *err_file = s->src_name;
    while (pos < job->len) {
        pnum = job->len - pos;
        if (job->all_data ||
            bdrv_block_status_is_data(s->src, job->offset + pos, pnum,
                                      &pnum)) {
            Error *err = NULL;

            if (bdrv_pread(s->src, job->offset + pos, job->buf + pos, pnum,
                           &err) < 0) {
                if (!s->salvage) {
                    error_propagate(errp, err);
                    return -1;
                }
                error_free(err);
                convert_read_salvage(s, job->offset + pos, job->buf + pos,
                                     pnum);
            }
        } else {
            memset(job->buf + pos, 0, pnum);
        }
        pos += pnum;
    }
    *err_file = s->dst_name;
    return convert_write(s, job->offset, job->buf, job->len, errp);
}

static void convert_worker(gpointer data, gpointer user_data)
{
    ConvertJob *job = data;
    ConvertState *s = user_data;
    const char *err_file = NULL;
    Error *err = NULL;
    bool failed = false;

    g_mutex_lock(&s->lock);
    failed = s->err != NULL;
    g_mutex_unlock(&s->lock);
    /* After a failure, queued jobs are dropped: the copy is abandoned. */
    if (!failed && !img_interrupted) {
        convert_chunk(s, job, &err_file, &err);
    }

    g_mutex_lock(&s->lock);
    if (err && !s->err) {
        s->err = err;
        s->err_file = err_file;
    } else if (err) {
        error_free(err);
    }
    s->done += job->len;
    g_ptr_array_add(s->free_bufs, job->buf);
    g_cond_signal(&s->cond);
    g_mutex_unlock(&s->lock);
    g_free(job);
}

static unsigned convert_threads(int requested, ConvertState *s)
{
    unsigned network = MAX(bdrv_parallel_requests(s->src),
                           bdrv_parallel_requests(s->dst));

    if (requested > 0) {
        return requested;
    }
    /*
     * A network protocol (RBD) waits for round trips, not CPUs: as many
     * threads as it serves requests in flight best.
     */
    if (network) {
        return MIN(network, CONVERT_MAX_THREADS);
    }
    /*
     * One thread per CPU, at least two (one reads and encrypts while the
     * other writes). One more was 5-8% slower on 2 CPUs, ext4 and tmpfs
     * alike (512 MiB, -t unsafe, minimum of 7): writes to one file take
     * turns on its inode lock in the kernel, and a third thread only
     * adds a waiter that spins there. No difference with O_DIRECT or a
     * synced target.
     */
    return CLAMP(g_get_num_processors(), 2, CONVERT_MAX_THREADS);
}

/*
 * Bytes per job: CONVERT_CHUNK, or more where a protocol below the source
 * or the target serves larger requests best (a network's round trips:
 * RBD), up to CONVERT_MAX_CHUNK.
 */
static size_t convert_job_size(ConvertState *s)
{
    size_t want = MAX(bdrv_request_size(s->src), bdrv_request_size(s->dst));

    return CLAMP(want, CONVERT_CHUNK, CONVERT_MAX_CHUNK);
}

/*
 * The next job from *offset on: its length, 0 at the end of the image.
 * Where the target already reads as zeroes, the source's holes are jumped
 * over, each whole one in a single step however large (a 2 TiB sparse
 * image costs one block-status call per extent, not one per chunk), and a
 * job ends where its data extent does, so that the hole after it is
 * jumped over too; *all_data then says the job is all data. *skipped: the
 * bytes jumped over.
 */
static size_t convert_next_job(ConvertState *s, uint64_t *offset,
                               bool *all_data, uint64_t *skipped)
{
    uint64_t len, pnum;

    *skipped = 0;
    *all_data = false;
    while (*offset < s->size) {
        len = MIN(s->size - *offset, s->chunk);
        if (!s->skip_zeroes) {
            return len;     /* holes are written: the worker finds them */
        }
        if (bdrv_block_status_is_data(s->src, *offset, s->size - *offset,
                                      &pnum)) {
            uint64_t start, end;

            if (!s->align) {
                *all_data = true;
                return MIN(len, pnum);
            }
            /*
             * Whole clusters: back to the start of this one (never before
             * the end of the last job, which ended on a cluster), to the
             * end of the one the data ends in; the holes inside are
             * zeroes (the worker asks block status again).
             */
            start = MAX(ROUND_DOWN(*offset, s->align),
                        *offset - *skipped);
            end = MIN(ROUND_UP(*offset + MIN(len, pnum), s->align),
                      s->size);
            *skipped -= *offset - start;
            *offset = start;
            return MIN(end - start, MAX(s->chunk, s->align));
        }
        *offset += pnum;
        *skipped += pnum;
    }
    return 0;
}

/*
 * -r: before a job is queued, wait until the bytes already queued fit the
 * rate (bytes per second since start), in short naps that notice ^C.
 */
static void convert_throttle(ConvertState *s, gint64 start, uint64_t queued)
{
    gint64 due, now;

    if (!s->rate_limit) {
        return;
    }
    due = start + (gint64)((double)queued * G_USEC_PER_SEC / s->rate_limit);
    while (!img_interrupted && (now = g_get_monotonic_time()) < due) {
        g_usleep(MIN(due - now, G_USEC_PER_SEC / 10));
    }
}

/* The copy loop. Returns 0, or -1 with the error printed. */
static int convert_copy(ConvertState *s, unsigned nthreads, bool progress)
{
    /* One spare buffer per thread: a job waits in the queue, ready. */
    unsigned nbufs = 2 * nthreads;
    g_autoptr(GError) gerr = NULL;
    GThreadPool *pool;
    ImgProgress prog;
    uint64_t offset = 0, queued = 0;
    gint64 start = g_get_monotonic_time();
    int ret = 0;

    g_mutex_init(&s->lock);
    g_cond_init(&s->cond);
    /*
     * Aligned for O_DIRECT (-t/-T none): an aligned buffer at an aligned
     * offset goes straight to the file, without block/file-direct.c's
     * bounce copy.
     */
    s->free_bufs = g_ptr_array_new_with_free_func(g_aligned_free);
    for (unsigned i = 0; i < nbufs; i++) {
        g_ptr_array_add(s->free_bufs,
                        g_aligned_alloc(1, s->chunk, BDRV_DIRECT_ALIGN));
    }
    pool = g_thread_pool_new(convert_worker, s, nthreads, TRUE, &gerr);
    if (!pool) {
        img_error(NULL, "Cannot start threads: %s", gerr->message);
        ret = -1;
        goto out;
    }

    img_progress_init(&prog, progress);
    while (true) {
        uint64_t skipped;
        bool all_data;
        /* Block status is asked outside the lock: the workers go on. */
        size_t len = convert_next_job(s, &offset, &all_data, &skipped);
        ConvertJob *job;

        convert_throttle(s, start, queued);
        queued += len;

        g_mutex_lock(&s->lock);
        s->done += skipped;
        while (len && s->free_bufs->len == 0 && !s->err) {
            g_cond_wait(&s->cond, &s->lock);
        }
        img_progress_update(&prog, 100.0 * s->done / s->size);
        if (!len || s->err || img_interrupted) {
            g_mutex_unlock(&s->lock);
            break;
        }
        job = g_new0(ConvertJob, 1);
        job->offset = offset;
        job->len = len;
        job->all_data = all_data;
        job->buf = g_ptr_array_steal_index_fast(s->free_bufs,
                                                s->free_bufs->len - 1);
        g_mutex_unlock(&s->lock);
        offset += len;
        g_thread_pool_push(pool, job, NULL);
    }
    /* Wait for every job: all buffers back home. */
    g_mutex_lock(&s->lock);
    while (s->free_bufs->len < nbufs) {
        g_cond_wait(&s->cond, &s->lock);
    }
    g_mutex_unlock(&s->lock);
    g_thread_pool_free(pool, FALSE, TRUE);

    if (s->err) {
        img_error_free(s->err_file, s->err);
        s->err = NULL;
        ret = -1;
    } else if (img_interrupted) {
        img_error(NULL, "Interrupted");
        ret = -1;
    } else {
        img_progress_update(&prog, 100.0);
    }
    img_progress_end(&prog);

out:
    g_ptr_array_unref(s->free_bufs);
    g_cond_clear(&s->cond);
    g_mutex_clear(&s->lock);
    return ret;
}

/*
 * -t and -T, QEMU's cache modes: which ones bypass the page cache
 * (O_DIRECT) and which ask for a flush at the end. The defaults are
 * writeback for both: the target, new or existing (-n), file or block
 * device, is synced before convert says it is done. (qemu-img's default
 * for the target is unsafe, and it exits 0 when the write-back fails.)
 * Only -t unsafe, given on purpose, skips the sync.
 */
static int convert_parse_cache(const char *cache, const char *dflt,
                               const char *what, bool *direct, bool *flush)
{
    static const struct {
        const char *name;
        bool direct, flush;
    } modes[] = {
        { "none", true, true },
        { "directsync", true, true },
        { "writeback", false, true },
        { "writethrough", false, true },
        { "unsafe", false, false },
    };

    for (size_t i = 0; i < G_N_ELEMENTS(modes); i++) {
        if (g_str_equal(cache ? cache : dflt, modes[i].name)) {
            *direct = modes[i].direct;
            *flush = modes[i].flush;
            return 0;
        }
    }
    img_error(NULL, "Invalid %scache option: %s", what, cache);
    return -1;
}

/* The target of -n: an existing image, opened read-write. */
static BlockDriverState *convert_open_target(const char *name,
                                             const char *fmt,
                                             bool image_opts,
                                             GHashTable *create_opts,
                                             int flags)
{
    g_autoptr(GHashTable) opts = qemu_opts_new();
    g_autofree char *secret = qemu_opt_take(create_opts, "key-secret");
    g_autofree char *unknown = qemu_opts_first_key(create_opts);
    BlockDriverState *bs;
    Error *err = NULL;

    if (unknown) {
        img_error(NULL, "With -n, -o takes key-secret only (the target "
                  "exists): '%s' cannot be used", unknown);
        return NULL;
    }
    if (image_opts) {
        if (secret) {
            img_error(NULL, "With --target-image-opts, give key-secret in "
                      "the target's options");
            return NULL;
        }
        return img_open(name, NULL, true, flags);
    }
    if (secret) {
        g_hash_table_insert(opts, g_strdup("key-secret"),
                            g_steal_pointer(&secret));
    }
    bs = bdrv_open(name, fmt, opts, flags, &err);
    if (!bs) {
        img_error_free(name, err);
    }
    return bs;
}

/* --bitmaps: qemu-img refuses inconsistent bitmaps before the copy. */
static int convert_check_bitmaps(BlockDriverState *src, bool skip_broken)
{
    BlockImageInfoBitmap *list;
    size_t nb;
    Error *err = NULL;
    int ret = 0;

    if (bdrv_bitmap_list(src, &list, &nb, &err) < 0) {
        img_error_free(bdrv_get_filename(src), err);
        return -1;
    }
    /* In qemu-img's order: the last bitmap of the directory first. */
    for (size_t i = nb; i-- > 0 && !skip_broken;) {
        if (list[i].in_use) {
            img_error(NULL, "Cannot copy inconsistent bitmap '%s'",
                      list[i].name);
            fprintf(stderr, "Try --skip-broken-bitmaps, or use 'qemu-img "
                    "bitmap --remove' to delete it\n");
            ret = -1;
            break;
        }
    }
    bdrv_bitmap_list_free(list, nb);
    return ret;
}

/*
 * --bitmaps, after the data: each bitmap of src added to dst with its
 * granularity and state, its bits merged in, and all written.
 */
static int convert_copy_bitmaps(BlockDriverState *src, BlockDriverState *dst,
                                bool skip_broken)
{
    BlockImageInfoBitmap *list;
    size_t nb;
    Error *err = NULL;
    int ret = -1;

    if (bdrv_bitmap_list(src, &list, &nb, &err) < 0) {
        img_error_free(bdrv_get_filename(src), err);
        return -1;
    }
    /* qemu-img's warnings come last bitmap first (its in-memory order). */
    for (size_t i = nb; i-- > 0;) {
        if (list[i].in_use) {
            img_error(NULL, "warning: Skipping inconsistent bitmap '%s'",
                      list[i].name);
        }
    }
    /* Added in the directory's order, which the target's keeps. */
    for (size_t i = 0; i < nb; i++) {
        const char *name = list[i].name;

        if (list[i].in_use) {
            continue;
        }
        if (bdrv_bitmap_op(dst, BDRV_BITMAP_ADD, name, list[i].granularity,
                           &err) < 0 ||
            (!list[i].autoload &&
             bdrv_bitmap_op(dst, BDRV_BITMAP_DISABLE, name, 0, &err) < 0)) {
            img_error(NULL, "Failed to create bitmap %s: %s", name,
                      error_get_pretty(err));
            error_free(err);
            goto out;
        }
        if (bdrv_bitmap_merge(dst, name, src, name, &err) < 0) {
            img_error(NULL, "Failed to populate bitmap %s: %s", name,
                      error_get_pretty(err));
            error_free(err);
            bdrv_bitmap_op(dst, BDRV_BITMAP_REMOVE, name, 0, NULL);
            goto out;
        }
    }
    if (bdrv_bitmaps_store(dst, &err) < 0) {
        img_error_free(bdrv_get_filename(dst), err);
        goto out;
    }
    ret = 0;
out:
    bdrv_bitmap_list_free(list, nb);
    return ret;
}

int img_convert(int argc, char **argv)
{
    g_autofree char *fmt = NULL, *out_fmt = NULL, *cache = NULL;
    g_autofree char *snapshot = NULL, *sn_id = NULL, *sn_name = NULL;
    g_autofree char *src_cache = NULL, *sparse_str = NULL;
    g_autofree char *threads_str = NULL, *rate_str = NULL;
    g_autofree char *backing = NULL, *backing_fmt = NULL;
    g_auto(GStrv) opt_strs = NULL;
    g_autoptr(GHashTable) opts = NULL;
    g_autoptr(BlockDriverState) src = NULL;
    BlockDriverState *dst = NULL;
    gboolean image_opts = FALSE, target_image_opts = FALSE;
    gboolean no_create = FALSE, progress = FALSE, out_of_order = FALSE;
    gboolean force_share = FALSE, copy_range = FALSE, compress = FALSE;
    gboolean target_is_zero = FALSE, salvage = FALSE;
    gboolean bitmaps = FALSE, skip_broken = FALSE;
    gint64 num_threads = 0;
    ImgCommonOpts common = { 0 };
    const GOptionEntry entries[] = {
        { "format", 'f', 0, G_OPTION_ARG_STRING, &fmt,
          "source format (default: probe)", "FMT" },
        { "target-format", 'O', 0, G_OPTION_ARG_STRING, &out_fmt,
          "target format: raw (default), luks or qcow2", "FMT" },
        { "options", 'o', 0, G_OPTION_ARG_STRING_ARRAY, &opt_strs,
          "target creation options (as for create; with -n only "
          "key-secret)", "OPTIONS" },
        { "compress", 'c', 0, G_OPTION_ARG_NONE, &compress,
          "write compressed clusters (qcow2 target; compressed by the "
          "copying threads in parallel)", NULL },
        { "backing", 'B', 0, G_OPTION_ARG_STRING, &backing,
          "backing file of the new qcow2 target: only what differs from "
          "it is written", "FILE" },
        { "backing-format", 'F', 0, G_OPTION_ARG_STRING, &backing_fmt,
          "format of -B's file (required)", "FMT" },
        { "no-create", 'n', 0, G_OPTION_ARG_NONE, &no_create,
          "write into an existing target instead of creating it", NULL },
        { "progress", 'p', 0, G_OPTION_ARG_NONE, &progress,
          "show progress", NULL },
        { "image-opts", 0, 0, G_OPTION_ARG_NONE, &image_opts,
          "SRC is an option string (driver=...,file.filename=...)", NULL },
        { "target-image-opts", 0, 0, G_OPTION_ARG_NONE, &target_image_opts,
          "DST is an option string (needs -n)", NULL },
        { "sparse-size", 'S', 0, G_OPTION_ARG_STRING, &sparse_str,
          "zero runs this long are not written to a new raw target "
          "(default 4k; 0: write everything)", "SIZE" },
        { "cache", 't', 0, G_OPTION_ARG_STRING, &cache,
          "target cache mode: writeback or writethrough (sync at the "
          "end), none or directsync (O_DIRECT, and sync at the end), "
          "unsafe (no sync). Default: writeback (a new target is synced "
          "before it is named)", "CACHE" },
        { "source-cache", 'T', 0, G_OPTION_ARG_STRING, &src_cache,
          "source cache mode: writeback (default), none or directsync "
          "(O_DIRECT); unsafe and writethrough read as writeback",
          "CACHE" },
        { "parallel", 'm', 0, G_OPTION_ARG_STRING, &threads_str,
          "number of threads copying at once, 1 to 16 (default: one per "
          "CPU, at least 2)",
          "N" },
        { "copy-range-offloading", 'C', 0, G_OPTION_ARG_NONE, &copy_range,
          "let the file system copy (copy_file_range: a reflink or a "
          "server-side copy) where it can; elsewhere, copy as usual",
          NULL },
        { "rate-limit", 'r', 0, G_OPTION_ARG_STRING, &rate_str,
          "copy at most RATE bytes per second (suffixes k, M, G...)",
          "RATE" },
        { "target-is-zero", 0, 0, G_OPTION_ARG_NONE, &target_is_zero,
          "the target (-n) reads as zeroes: zeroes are not written", NULL },
        { "salvage", 0, 0, G_OPTION_ARG_NONE, &salvage,
          "copy sectors that cannot be read as zeroes, with a warning for "
          "each, instead of failing", NULL },
        { "out-of-order", 'W', 0, G_OPTION_ARG_NONE, &out_of_order,
          "accepted for qemu-img compatibility (writes are always out of "
          "order)", NULL },
        { "snapshot", 'l', 0, G_OPTION_ARG_STRING, &snapshot,
          "read SRC as its internal snapshot SNAPSHOT was: snapshot.id=ID,"
          "snapshot.name=NAME, or an id or name", "SNAPSHOT" },
        { "bitmaps", 0, 0, G_OPTION_ARG_NONE, &bitmaps,
          "copy the persistent bitmaps (qcow2 to qcow2)", NULL },
        { "skip-broken-bitmaps", 0, 0, G_OPTION_ARG_NONE, &skip_broken,
          "with --bitmaps, leave out the inconsistent ones (a warning "
          "each) instead of failing", NULL },
        { "force-share", 'U', 0, G_OPTION_ARG_NONE, &force_share,
          "take no lock on the source, and read it even while another "
          "process writes it (the copy may be inconsistent)", NULL },
        { NULL }
    };
    ConvertState s = { 0 };
    const char *src_name, *dst_name;
    g_autofree char *dst_path = NULL;
    int dst_flags = BDRV_O_RDWR, src_flags = 0;
    bool created = false, flush, direct, src_direct, src_flush;
    bool with_backing = false;
    uint64_t sparse_size = CONVERT_SPARSE_DEFAULT, rate_limit = 0;
    int64_t len;
    Error *err = NULL;
    int r, ret = 1;

    if (img_parse_args(&argc, &argv, "SRC DST",
                       "Convert the image SRC into DST, between raw, luks "
                       "and qcow2 (luks -> luks re-encrypts).",
                       "DST is created, and appears only once the copy is "
                       "complete (an existing file is replaced then); with "
                       "-n it is written in place.\n\nExamples:\n"
                       "  qemu-img-lite convert --object secret,id=s0,"
                       "data=pass -O luks -o key-secret=s0 disk.raw "
                       "disk.luks\n"
                       "  qemu-img-lite convert --object secret,id=s0,"
                       "data=pass --image-opts \\\n"
                       "      driver=luks,key-secret=s0,file.filename="
                       "disk.luks -O raw disk.raw",
                       entries, &common) < 0) {
        goto out;
    }
    /* qemu-img checks -l's form while it parses the options. */
    if (snapshot && img_parse_snapshot_param(snapshot, &sn_id,
                                             &sn_name) < 0) {
        goto out;
    }
    opts = img_parse_create_opts(opt_strs);
    if (!opts) {
        goto out;
    }
    /* "-o help" needs no images; with the target's name, as qemu-img. */
    r = img_handle_opts_help(opts, out_fmt ? out_fmt : "raw",
                             argc == 3 ? argv[2] : NULL);
    if (r) {
        ret = r < 0;
        goto out;
    }
    if (argc != 3) {
        img_error(NULL, argc < 3 ? "Expecting a source and a target image" :
                  "Only one source image is supported");
        goto out;
    }
    src_name = argv[1];
    dst_name = argv[2];
    if (target_image_opts && !no_create) {
        img_error(NULL, "--target-image-opts requires use of -n flag");
        goto out;
    }
    if (target_is_zero && !no_create) {
        img_error(NULL, "--target-is-zero requires use of -n flag");
        goto out;
    }
    if (skip_broken && !bitmaps) {
        img_error(NULL, "Use of --skip-broken-bitmaps requires --bitmaps");
        goto out;
    }
    if (target_image_opts && out_fmt) {
        img_error(NULL, "--target-image-opts and -O are mutually exclusive");
        goto out;
    }
    if (convert_parse_cache(cache, "writeback", "", &direct, &flush) < 0 ||
        convert_parse_cache(src_cache, "writeback", "source ", &src_direct,
                            &src_flush) < 0) {
        goto out;
    }
    if (!flush) {
        dst_flags |= BDRV_O_NO_FLUSH;
    }
    /*
     * -t unsafe also names a new target unsynced: as fast as a plain copy
     * but not crash-safe.
     */
    if (!flush) {
        dst_flags |= BDRV_O_CREATE_NO_SYNC;
    }
    if (direct) {
        dst_flags |= BDRV_O_NOCACHE;
    }
    if (force_share) {
        src_flags |= BDRV_O_FORCE_SHARE;
    }
    if (src_direct) {
        src_flags |= BDRV_O_NOCACHE;
    }
    if (sparse_str) {
        if (img_parse_size_as(sparse_str, "buffer size for sparse output",
                              &sparse_size) < 0) {
            goto out;
        }
        if (sparse_size % BDRV_SECTOR_SIZE ||
            sparse_size > CONVERT_SPARSE_MAX) {
            img_error(NULL, "Invalid buffer size for sparse output "
                      "specified. Valid sizes are multiples of %d up to %d. "
                      "Select 0 to disable sparse detection (fully "
                      "allocates output).", BDRV_SECTOR_SIZE,
                      CONVERT_SPARSE_MAX);
            goto out;
        }
    }
    if (threads_str) {
        char *end;

        /* Base 0 as qemu-img: "0x4" is 4. */
        num_threads = g_ascii_strtoll(threads_str, &end, 0);
        if (end == threads_str || *end || num_threads < 1 ||
            num_threads > CONVERT_MAX_THREADS) {
            img_error(NULL, "Invalid number of coroutines. Allowed number of "
                      "coroutines is between 1 and %d", CONVERT_MAX_THREADS);
            goto out;
        }
    }
    if (rate_str &&
        img_parse_size_as(rate_str, "rate limit", &rate_limit) < 0) {
        goto out;
    }
    if (copy_range && sparse_str) {
        /* Offloaded copies cannot leave zero runs out. */
        img_error(NULL, "Cannot enable copy offloading when -S is used");
        goto out;
    }
    if (copy_range && salvage) {
        /* Nor can they turn a read error into zeroes. */
        img_error(NULL, "Cannot use copy offloading in salvaging mode");
        goto out;
    }
    if (img_add_objects(common.objects) < 0) {
        goto out;
    }
    /* As qemu-img: -o backing_file= and backing_fmt= stand for -B and -F. */
    if (!backing && g_hash_table_lookup(opts, "backing_file")) {
        backing = g_strdup(g_hash_table_lookup(opts, "backing_file"));
    }
    if (!backing_fmt && g_hash_table_lookup(opts, "backing_fmt")) {
        backing_fmt = g_strdup(g_hash_table_lookup(opts, "backing_fmt"));
    }
    if (backing) {
        if (no_create) {
            img_error(NULL, "-B cannot be used with -n (the target exists "
                      "with its own backing file)");
            goto out;
        }
        if (!backing_fmt) {
            img_error(NULL, "Use of backing file requires explicit backing "
                      "format");
            goto out;
        }
        if (!out_fmt || !g_str_equal(out_fmt, "qcow2")) {
            img_error(NULL, "Backing file not supported for file format "
                      "'%s'", out_fmt ? out_fmt : "raw");
            goto out;
        }
        with_backing = true;
        g_hash_table_insert(opts, g_strdup("backing_file"),
                            g_steal_pointer(&backing));
        g_hash_table_insert(opts, g_strdup("backing_fmt"),
                            g_steal_pointer(&backing_fmt));
    }

    /* The source is opened read-only: it is never written. */
    src = img_open(src_name, fmt, image_opts, src_flags);
    if (!src) {
        goto out;
    }
    if (snapshot && img_load_snapshot(src, snapshot, sn_id, sn_name) < 0) {
        goto out;
    }
    len = bdrv_getlength(src, &err);
    if (len < 0) {
        img_error_free(src_name, err);
        goto out;
    }
    if (bitmaps && convert_check_bitmaps(src, skip_broken) < 0) {
        goto out;
    }

    if (no_create) {
        int64_t dst_len;

        dst = convert_open_target(dst_name, out_fmt, target_image_opts, opts,
                                  dst_flags);
        if (!dst) {
            goto out;
        }
        dst_len = bdrv_getlength(dst, &err);
        if (dst_len < 0) {
            img_error_free(dst_name, err);
            goto out;
        }
        if (dst_len < len) {
            img_error(dst_name, "The target image is smaller than the "
                      "source (%" G_GINT64_FORMAT " < %" G_GINT64_FORMAT
                      " bytes)", dst_len, len);
            goto out;
        }
    } else {
        /* The new file's path: "file:x" is x (bdrv_parse_filename()). */
        bool on_device;

        dst_path = bdrv_parse_filename(dst_name, &err);
        if (!dst_path) {
            img_error_free(dst_name, err);
            goto out;
        }
        /*
         * A block device is written in place, as by qemu-img; an existing
         * file is replaced when the new image is complete (never before:
         * block/file-create.h).
         */
        on_device = bdrv_block_device_size(dst_path) >= 0;
        g_hash_table_insert(opts, g_strdup("size"),
                            g_strdup_printf("%" G_GINT64_FORMAT, len));
        dst = bdrv_create_open(out_fmt ? out_fmt : "raw", dst_path, opts,
                               dst_flags, &img_interrupted, &err);
        if (!dst) {
            img_error_free(dst_name, err);
            goto out;
        }
        /* An image on a device has the device's size: no padding to tell. */
        if (!on_device) {
            img_warn_if_padded(dst_name, dst, len);
        }
        created = true;
    }

    if (bitmaps && !bdrv_supports_persistent_bitmaps(dst)) {
        img_error(NULL, "Format driver '%s' does not support bitmaps",
                  bdrv_get_format_name(dst));
        goto out;
    }
    if (compress && !bdrv_supports_compressed_writes(dst)) {
        img_error(NULL, "Compression not supported for this file format");
        goto out;
    }
    if (compress && bdrv_is_encrypted(dst)) {
        img_error(NULL, "Compression and encryption not supported at the "
                  "same time");
        goto out;
    }
    s.compress = compress;
    if (compress) {
        g_autoptr(BlockImageInfo) info = bdrv_get_image_info(dst, NULL);

        s.align = info && info->cluster_size > 0 ? info->cluster_size : 0;
    }
    s.backing = with_backing ? bdrv_get_backing(dst) : NULL;
    if (s.backing) {
        int64_t blen = bdrv_getlength(s.backing, &err);

        if (blen < 0) {
            img_error_free(dst_name, err);
            goto out;
        }
        s.backing_len = blen;
    }
    s.src = src;
    s.dst = dst;
    s.src_name = src_name;
    s.dst_name = dst_name;
    s.size = len;
    s.chunk = convert_job_size(&s);
    s.sparse_size = sparse_size;
    /*
     * Only a target we made ourselves is known to read as zeroes, or one
     * the user vouches for (--target-is-zero).
     */
    s.skip_zeroes = sparse_size &&
        ((created && bdrv_has_zero_init(dst)) || target_is_zero);
    s.salvage = salvage;
    s.salvage_unit = bdrv_get_logical_block_size(src);
    s.copy_range = copy_range;
    s.rate_limit = rate_limit;
    if (img_interrupted) {
        img_error(NULL, "Interrupted");
        goto out;
    }
    if (convert_copy(&s, convert_threads(num_threads, &s),
                     progress && !common.quiet) < 0) {
        goto out;
    }
    if (bitmaps && convert_copy_bitmaps(src, dst, skip_broken) < 0) {
        goto out;
    }
    /*
     * Always: a format's cached metadata reaches the file here, and the
     * file the disk (not with -t unsafe), where a failure can still be
     * told: a failed sync, now or earlier (block/io.c), fails the convert.
     */
    if (bdrv_flush(dst, &err) < 0) {
        img_error_free(dst_name, err);
        goto out;
    }
    /* A new target: synced, then named; until here it had no name. */
    if (created && bdrv_create_finish(dst, &err) < 0) {
        img_error_free(dst_name, err);
        goto out;
    }
    ret = 0;

out:
    /* A new target not finished goes with its last descriptor. */
    bdrv_close(dst);
    img_common_opts_clear(&common);
    return ret;
}
