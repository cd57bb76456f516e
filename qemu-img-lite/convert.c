/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * qemu-img-lite convert: copy one image, or several one after another,
 * into a new (or, with -n, an existing) one, in another format: raw,
 * luks, qcow2 (re-encryption, compression, overlays).
 *
 * The source is walked as qemu-img walks it (convert_iteration(), its
 * convert_iteration_sectors()): block status over the whole of it, runs
 * of data, of zeroes and of what the target's backing file holds, data
 * in pieces of at most 2 MiB. The walk is done twice, as by qemu-img: a
 * first pass counts the bytes that will be written, so that -p advances
 * by the same steps as qemu-img's (and --salvage warns of the same
 * block-status errors, twice); the second hands the copy out. Both ask
 * the image's metadata only: no byte of data is read twice.
 *
 * The copy is a pipeline of jobs handed to a pool of threads: each job
 * reads its bytes (decrypting them, for a LUKS source) and writes them
 * (encrypting in the same buffer, for a LUKS target), so with two cores
 * one job's system calls run while another's cipher works. Jobs own one
 * of a fixed set of buffers: memory stays at a few MiB whatever the image
 * size. Runs the target need not write (zeroes on a target that reads as
 * zeroes, what its backing file holds) are jumped over whole, so a huge
 * sparse image costs what its data costs. Into a qcow2 image, writes
 * reach the image in the order of the guest offsets, as qemu-img's do
 * (-W lifts it): its clusters are laid out as qemu-img lays them out.
 *
 * Nothing half-written is ever seen: a new target has no name until the
 * copy is complete and synced (bdrv_create_open(), bdrv_create_finish()),
 * so an error, SIGINT/SIGTERM/SIGHUP (checked between chunks) or even
 * SIGKILL leaves nothing. An existing target (-n) is written in place.
 */
#include <limits.h>
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
/* qemu-img's IO_BUF_SIZE: the longest run of data of one step of its walk. */
#define CONVERT_STEP (2 * 1024 * 1024)
/* QEMU's BDRV_REQUEST_MAX_SECTORS: the most one block-status call asks. */
#define CONVERT_STATUS_MAX ((uint64_t)(INT_MAX / BDRV_SECTOR_SIZE) * \
                            BDRV_SECTOR_SIZE)
/* Zeroes written the target's own way (punched, zero clusters): per job. */
#define CONVERT_ZERO_JOB (1024 * 1024 * 1024)
/* Buffers per thread for -c written in order (convert_copy()). */
#ifndef CONVERT_ORDER_BUFS
#define CONVERT_ORDER_BUFS 4
#endif
/* Runs of one job (data read, zeroes taken as data with -S 0). */
#define CONVERT_MAX_SEGS 8

/* What a run of the source is for the target (qemu-img's BLK_*). */
typedef enum {
    CONVERT_DATA,       /* read and written */
    CONVERT_ZERO,       /* reads as zeroes */
    CONVERT_BACKING,    /* left to the target's backing file */
} ConvertStatus;

/* One source image: they are copied one after another. */
typedef struct ConvertSource {
    BlockDriverState *bs;
    const char *name;
    uint64_t start;         /* where it begins in the target */
    uint64_t size;          /* in whole sectors, as qemu-img counts */
    /*
     * qemu-img's src_alignment: its request alignment and cluster size;
     * runs are cut there.
     */
    uint64_t align;
} ConvertSource;

/* The walk's position (qemu-img's status and sector_next_status). */
typedef struct ConvertIter {
    ConvertStatus status;
    uint64_t next_status;   /* status holds up to here */
} ConvertIter;

typedef struct ConvertState {
    ConvertSource *srcs;
    unsigned nsrcs;
    BlockDriverState *dst;
    const char *dst_name;
    uint64_t size;
    /* Bytes per job (convert_job_size()). */
    size_t chunk;
    /* The longest run of data of one step (qemu-img's buf_sectors). */
    uint64_t step;
    /*
     * -S: zero runs this long in data are not written as data (0: every
     * byte is written as data, the target fully allocated); alignment:
     * where zero runs end (qemu-img's is_allocated_sectors()).
     */
    uint64_t min_sparse;
    uint64_t sparse_align;
    /* The target reads as zeroes: zeroes are not written at all. */
    bool has_zero_init;
    /* The target has a backing file: what the source's holds is left. */
    bool target_has_backing;
    /* A new target's backing file ends here (-1: not known, not new). */
    int64_t target_backing_len;
    /*
     * --salvage: a block that cannot be read is copied as zeroes, block
     * status that cannot be had is taken as data; blocks of salvage_unit
     * bytes, the source's logical block size.
     */
    bool salvage;
    /* -q: salvage's warnings are not printed. */
    bool quiet;
    /* -C: try copy offloading; cleared (atomically) once it fails. */
    gint copy_range;
    /* -r: bytes per second, 0 for no limit. */
    uint64_t rate_limit;
    /* -c: whole clusters compressed, in the job's thread (qcow2). */
    bool compress;
    /* -c: the target's cluster size (runs are whole clusters). */
    uint64_t cluster;
    /* -B: the target's backing file; blocks equal to it are not written. */
    BlockDriverState *backing;
    uint64_t backing_len;
    /* Writes reach the target in the order of the jobs (qcow2, not -W). */
    bool in_order;
    /*
     * A job is one step of the walk, never more: its writes are then
     * qemu-img's, where what is allocated depends on them (see
     * convert_step_jobs()).
     */
    bool step_jobs;

    /* The walk's warnings not yet given to a job (the copy's walk). */
    GString *walk_msgs;
    bool walk_to_jobs;

    GMutex lock;
    GCond cond;
    GPtrArray *free_bufs;       /* buffers not owned by a job */
    uint64_t next_seq;          /* the number of the next job */
    uint64_t write_seq;         /* in_order: the job whose turn it is */
    /* in_order: jobs read (and compressed) before their turn, by seq + 1 */
    GHashTable *waiting;
    /* -c in order: jobs' arrays of BdrvCompressed, to be used again */
    GPtrArray *spare_cz;
    uint64_t print_seq;         /* salvage: the job whose messages are next */
    GHashTable *done_msgs;      /* salvage: jobs done before their turn */
    Error *err;                 /* the first failure */
    const char *err_file;
} ConvertState;

typedef struct ConvertSeg {
    uint32_t len;
    bool read;                  /* else zeroes, written as data (-S 0) */
} ConvertSeg;

typedef struct ConvertJob {
    uint64_t offset;
    size_t len;
    uint64_t seq;
    /* Zeroes to write (the target does not read as zeroes). */
    bool zero;
    ConvertSeg segs[CONVERT_MAX_SEGS];
    unsigned nsegs;
    /* salvage: warnings, printed in the order of the jobs. */
    GString *msgs;
    /* -B: its blocks that hold what the backing file holds. */
    bool *same;
    uint8_t *buf;
    /* The read half went well: the write half writes (else it passes). */
    bool write;
    /*
     * -c in order: the compressed writes of the write half, made by a
     * first pass of it before its turn (cz_making), stored in its turn in
     * the same order (cz_next the next one, cz_used made; the array's
     * others are left from an earlier job, for bdrv_compress() to reuse).
     */
    GPtrArray *cz;
    guint cz_used;
    guint cz_next;
    bool cz_making;
    /* What went wrong, and in which file. */
    Error *err;
    const char *err_file;
} ConvertJob;

/* The source that holds offset (which lies before the end). */
static ConvertSource *convert_select(ConvertState *s, uint64_t offset)
{
    unsigned i = 0;

    while (i + 1 < s->nsrcs && offset >= s->srcs[i + 1].start) {
        i++;
    }
    return &s->srcs[i];
}

/* A warning of the walk: now (first pass) or with the next job (copy). */
static void convert_walk_warning(ConvertState *s, const char *fmt, ...)
    G_GNUC_PRINTF(2, 3);

static void convert_walk_warning(ConvertState *s, const char *fmt, ...)
{
    g_autofree char *msg = NULL;
    va_list ap;

    if (s->quiet) {
        return;
    }
    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (s->walk_to_jobs) {
        g_string_append_printf(s->walk_msgs, "%s: warning: %s\n",
                               img_get_progname(), msg);
    } else {
        img_error(NULL, "warning: %s", msg);
    }
}

/* An error's text as qemu-img prints it: its errno's, where it has one. */
static const char *convert_strerror(Error *err)
{
    return error_get_errno(err) ? g_strerror(error_get_errno(err)) :
           error_get_pretty(err);
}

/*
 * One step of qemu-img's walk from offset: the bytes it covers (*len) and
 * what they are (returned), or -1 (the error printed). The block status
 * of a source is asked up to the end of the image (QEMU's limit per call
 * aside) and holds until it.next_status; a run of data is taken 2 MiB at
 * most at a time; with -c, whole clusters.
 */
static int convert_iteration(ConvertState *s, ConvertIter *it,
                             uint64_t offset, uint64_t *len)
{
    ConvertSource *src = convert_select(s, offset);
    uint64_t n = MIN(s->size - offset, CONVERT_STATUS_MAX);
    bool post_backing_zero = false;

    if (s->target_backing_len >= 0) {
        if (offset >= (uint64_t)s->target_backing_len) {
            post_backing_zero = true;
        } else if (offset + n > (uint64_t)s->target_backing_len) {
            /* Zeroes past the backing file's end are left alone. */
            n = s->target_backing_len - offset;
        }
    }
    if (it->next_status <= offset) {
        uint64_t local = offset - src->start, count, tail;
        BlockDriverState *base = s->target_has_backing ?
            bdrv_get_backing(bdrv_skip_filters(src->bs)) : NULL;
        int ret;

        do {
            Error *err = NULL;

            ret = bdrv_block_status_above(src->bs, base, local, n, &count,
                                          &err);
            if (ret >= 0) {
                break;
            }
            if (!s->salvage) {
                img_error(NULL, "error while reading block status at offset "
                          "%" G_GUINT64_FORMAT ": %s", local,
                          convert_strerror(err));
                error_free(err);
                return -1;
            }
            if (n == BDRV_SECTOR_SIZE) {
                convert_walk_warning(s, "error while reading block status "
                                     "at offset %" G_GUINT64_FORMAT ": %s",
                                     local, convert_strerror(err));
                /* Read it, then. */
                ret = BDRV_BLOCK_DATA;
                count = BDRV_SECTOR_SIZE;
            } else {
                /* Again over a quarter (qemu-img's steps). */
                n = (n / BDRV_SECTOR_SIZE + 3) / 4 * BDRV_SECTOR_SIZE;
            }
            error_free(err);
        } while (ret < 0);

        n = ROUND_UP(MAX(count, 1), BDRV_SECTOR_SIZE);
        /* Runs end on the source's clusters, where they can. */
        tail = (local + n) % src->align;
        if (n > tail) {
            n -= tail;
        }
        if (ret & BDRV_BLOCK_ZERO) {
            it->status = post_backing_zero ? CONVERT_BACKING : CONVERT_ZERO;
        } else if (ret & BDRV_BLOCK_DATA) {
            it->status = CONVERT_DATA;
        } else {
            it->status = s->target_has_backing ? CONVERT_BACKING :
                         CONVERT_DATA;
        }
        it->next_status = offset + n;
    }
    n = MIN(n, it->next_status - offset);
    if (it->status == CONVERT_DATA) {
        n = MIN(n, s->step);
    }
    /* -c: whole clusters; a short run is a cluster of data. */
    if (s->compress) {
        if (n < s->cluster) {
            n = MIN(s->cluster, s->size - offset);
            it->status = CONVERT_DATA;
        } else {
            n = ROUND_DOWN(n, s->cluster);
        }
    }
    *len = n;
    return it->status;
}

/* Whether a step of the walk is written as data (and counted by -p). */
static bool convert_written_as_data(ConvertState *s, ConvertStatus status)
{
    return status == CONVERT_DATA ||
           (status == CONVERT_ZERO && !s->min_sparse);
}

/*
 * The first pass: the bytes the copy will write as data, which -p counts
 * (qemu-img's allocated_sectors). -1 on error (printed).
 */
static int convert_count_data(ConvertState *s, uint64_t *total)
{
    ConvertIter it = { 0 };
    uint64_t offset = 0, n;
    int status;

    *total = 0;
    while (offset < s->size && !img_interrupted) {
        status = convert_iteration(s, &it, offset, &n);
        if (status < 0) {
            return -1;
        }
        if (convert_written_as_data(s, status)) {
            *total += n;
        }
        offset += n;
    }
    return 0;
}

/*
 * Read [offset, offset + len) of the sources (a job may run from one into
 * the next). *err_file: the source that failed.
 */
static int convert_read(ConvertState *s, ConvertJob *job, uint64_t offset,
                        uint8_t *buf, uint64_t len, const char **err_file,
                        Error **errp);

/* Blocks of -B's comparison: qemu-img's default qcow2 cluster. */
#define CONVERT_BACKING_BLOCK (64 * 1024)

static int convert_write_1(ConvertState *s, ConvertJob *job,
                           uint64_t offset, uint8_t *buf, size_t len,
                           Error **errp);

/*
 * -B, in the job's read half: which of its blocks hold what the backing
 * file holds (job->same, one per block of CONVERT_BACKING_BLOCK from the
 * job's offset rounded down), so that the write half, which may wait for
 * its turn, reads nothing.
 */
static int convert_compare_backing(ConvertState *s, ConvertJob *job,
                                   Error **errp)
{
    g_autofree uint8_t *old = g_malloc(CONVERT_BACKING_BLOCK);
    uint64_t first = ROUND_DOWN(job->offset, CONVERT_BACKING_BLOCK);
    size_t pos = 0;

    job->same = g_new0(bool, (job->offset + job->len - first +
                              CONVERT_BACKING_BLOCK - 1) /
                             CONVERT_BACKING_BLOCK);
    while (pos < job->len) {
        uint64_t at = job->offset + pos;
        size_t n = MIN(CONVERT_BACKING_BLOCK - at % CONVERT_BACKING_BLOCK,
                       job->len - pos);
        size_t in = at < s->backing_len ? MIN(n, s->backing_len - at) : 0;

        memset(old, 0, n);
        if (in && bdrv_pread(s->backing, at, old, in, errp) < 0) {
            return -1;
        }
        job->same[(at - first) / CONVERT_BACKING_BLOCK] =
            memcmp(old, job->buf + pos, n) == 0;
        pos += n;
    }
    return 0;
}

/*
 * -B: only the blocks that differ from the backing file are written
 * (zeroes included: they are written as zeroes, zero clusters).
 */
static int convert_write(ConvertState *s, ConvertJob *job, Error **errp)
{
    uint64_t first = ROUND_DOWN(job->offset, CONVERT_BACKING_BLOCK);
    size_t pos = 0, start = 0;     /* [start, pos): differing, unwritten */

    if (!job->same) {
        return convert_write_1(s, job, job->offset, job->buf, job->len,
                               errp);
    }
    while (pos < job->len) {
        uint64_t at = job->offset + pos;
        size_t n = MIN(CONVERT_BACKING_BLOCK - at % CONVERT_BACKING_BLOCK,
                       job->len - pos);

        if (job->same[(at - first) / CONVERT_BACKING_BLOCK]) {
            /* Equal: write the run of differing blocks before it. */
            if (pos > start &&
                convert_write_1(s, job, job->offset + start,
                                job->buf + start, pos - start, errp) < 0) {
                return -1;
            }
            start = pos + n;
        }
        pos += n;
    }
    if (pos > start &&
        convert_write_1(s, job, job->offset + start, job->buf + start,
                        pos - start, errp) < 0) {
        return -1;
    }
    return 0;
}

/*
 * Zeroes, where the target does not read as zeroes: its own way (a hole
 * punched in a file, zero clusters) where it has one, as qemu-img's
 * write_zeroes with MAY_UNMAP; else buf (len bytes at most) as data.
 */
static int convert_write_zeroes(ConvertState *s, uint64_t offset,
                                uint8_t *buf, size_t len, Error **errp)
{
    if (bdrv_can_write_zeroes(s->dst)) {
        return bdrv_pwrite_zeroes(s->dst, offset, len,
                                  BDRV_REQ_MAY_UNMAP | BDRV_REQ_EXPLICIT_ZERO,
                                  errp);
    }
    memset(buf, 0, len);
    return bdrv_pwrite(s->dst, offset, buf, len, BDRV_REQ_MAY_CLOBBER, errp);
}

/*
 * qemu-img's is_allocated_sectors(): whether the run of sectors that
 * starts buf (n of them) is data; *pnum its length, its end moved to an
 * alignment boundary where that saves a read-modify-write.
 */
static bool convert_sectors_are_data(const uint8_t *buf, uint64_t n,
                                     uint64_t *pnum, uint64_t sector,
                                     uint64_t align)
{
    bool is_zero = buffer_is_zero(buf, BDRV_SECTOR_SIZE);
    uint64_t i, tail;

    for (i = 1; i < n; i++) {
        buf += BDRV_SECTOR_SIZE;
        if (is_zero != buffer_is_zero(buf, BDRV_SECTOR_SIZE)) {
            break;
        }
    }
    if (i == n) {
        *pnum = i;
        return !is_zero;
    }
    tail = (sector + i) & (align - 1);
    if (tail) {
        if (is_zero && i <= tail) {
            /* The data after it rewrites this block anyway. */
            is_zero = false;
        }
        if (!is_zero) {
            i = MIN(i + align - tail, n);
        } else {
            i -= tail;
        }
    }
    *pnum = i;
    return !is_zero;
}

/*
 * qemu-img's is_allocated_sectors_min(): data runs absorb runs of zeroes
 * shorter than min sectors, so that small holes do not split writes.
 */
static bool convert_sectors_are_data_min(const uint8_t *buf, uint64_t n,
                                         uint64_t *pnum, uint64_t min,
                                         uint64_t sector, uint64_t align)
{
    uint64_t checked, used;

    min = MIN(min, n);
    if (!convert_sectors_are_data(buf, n, pnum, sector, align)) {
        return false;
    }
    used = checked = *pnum;
    while (checked < n) {
        bool data = convert_sectors_are_data(
            buf + checked * BDRV_SECTOR_SIZE, n - checked, pnum,
            sector + checked, align);

        checked += *pnum;
        if (data) {
            used = checked;
        } else if (*pnum >= min) {
            break;
        }
    }
    *pnum = used;
    return true;
}

/*
 * One compressed write of a job. In order, the write half runs twice: a
 * first pass (job->cz_making), before the job's turn and in parallel with
 * the other threads, only compresses; the second, in the turn, stores
 * what the first made, write for write (the same walk over the job).
 * Otherwise (-W) both at once.
 */
static int convert_pwrite_compressed(ConvertState *s, ConvertJob *job,
                                     uint64_t offset, uint8_t *buf,
                                     size_t len, int flags, Error **errp)
{
    BdrvCompressed *c;

    if (!job->cz) {
        return bdrv_pwrite_compressed(s->dst, offset, buf, len, flags, errp);
    }
    if (job->cz_making) {
        BdrvCompressed *reuse = job->cz_used < job->cz->len ?
                                g_ptr_array_index(job->cz, job->cz_used) :
                                NULL;

        c = bdrv_compress(s->dst, offset, buf, len, flags, reuse, errp);
        if (!c) {
            return -1;
        }
        if (!reuse) {
            g_ptr_array_add(job->cz, c);
        }
        job->cz_used++;
        return 0;
    }
    /* (The same walk over the same buffer: the same writes.) */
    g_assert(job->cz_next < job->cz_used);
    c = g_ptr_array_index(job->cz, job->cz_next++);
    return bdrv_store_compressed(s->dst, c, errp);
}

/*
 * -c: each cluster compressed (the driver stores one that does not shrink
 * as it is), but a cluster of zeroes goes the way of zeroes, as in
 * qemu-img: left out (a target that reads as zeroes) or written as zeroes
 * (in the write half's second pass, with the stores); with -S 0 it is
 * compressed like the others.
 */
static int convert_write_compressed(ConvertState *s, ConvertJob *job,
                                    uint64_t offset, uint8_t *buf,
                                    size_t len, Error **errp)
{
    size_t pos = 0, start = 0;     /* [start, pos): clusters of data */

    while (pos < len) {
        size_t n = MIN(s->cluster - (offset + pos) % s->cluster, len - pos);

        if (s->min_sparse && buffer_is_zero(buf + pos, n)) {
            if ((pos > start &&
                 convert_pwrite_compressed(s, job, offset + start,
                                           buf + start, pos - start, 0,
                                           errp) < 0) ||
                (!s->has_zero_init && !job->cz_making &&
                 convert_write_zeroes(s, offset + pos, buf + pos, n,
                                      errp) < 0)) {
                return -1;
            }
            start = pos + n;
        }
        pos += n;
    }
    if (pos > start &&
        convert_pwrite_compressed(s, job, offset + start, buf + start,
                                  pos - start,
                                  s->min_sparse ? 0 : BDRV_REQ_ALLOCATE,
                                  errp) < 0) {
        return -1;
    }
    return 0;
}

/*
 * Data to the target as qemu-img writes it: compressed (-c), or all of
 * it (-S 0), or its data runs, its runs of zeroes left out (a target that
 * reads as zeroes) or written as zeroes (convert_write_zeroes()).
 */
static int convert_write_1(ConvertState *s, ConvertJob *job,
                           uint64_t offset, uint8_t *buf, size_t len,
                           Error **errp)
{
    uint64_t sector = offset / BDRV_SECTOR_SIZE, n = len / BDRV_SECTOR_SIZE;
    uint64_t min = s->min_sparse / BDRV_SECTOR_SIZE;

    if (s->compress) {
        return convert_write_compressed(s, job, offset, buf, len, errp);
    }
    /*
     * What is written here is written as data, zeroes included (the
     * format does not look for zero clusters of its own: the runs of
     * zeroes were found here, as qemu-img finds them).
     */
    if (!s->min_sparse) {
        return bdrv_pwrite(s->dst, offset, buf, len,
                           BDRV_REQ_MAY_CLOBBER | BDRV_REQ_ALLOCATE, errp);
    }
    /* Zeroes the target would write as data anyway: the buffer at once. */
    if (!s->has_zero_init && !bdrv_can_write_zeroes(s->dst)) {
        return bdrv_pwrite(s->dst, offset, buf, len,
                           BDRV_REQ_MAY_CLOBBER | BDRV_REQ_ALLOCATE, errp);
    }
    while (n) {
        uint64_t run;
        size_t bytes;
        int r = 0;

        if (convert_sectors_are_data_min(buf, n, &run, min, sector,
                                         s->sparse_align)) {
            bytes = run * BDRV_SECTOR_SIZE;
            r = bdrv_pwrite(s->dst, sector * BDRV_SECTOR_SIZE, buf, bytes,
                            BDRV_REQ_MAY_CLOBBER | BDRV_REQ_ALLOCATE, errp);
        } else {
            bytes = run * BDRV_SECTOR_SIZE;
            if (!s->has_zero_init) {
                r = convert_write_zeroes(s, sector * BDRV_SECTOR_SIZE, buf,
                                         bytes, errp);
            }
        }
        if (r < 0) {
            return -1;
        }
        buf += bytes;
        sector += run;
        n -= run;
    }
    return 0;
}

/*
 * --salvage: the read of [offset, offset + len) of src failed; read it
 * again one logical block at a time (512 bytes for a file, as qemu-img, a
 * block device's own block size, a LUKS sector), and let each block that
 * still fails read as zeroes, with a warning: only the blocks that cannot
 * be read are lost, never the rest of the chunk.
 */
static void convert_read_salvage(ConvertState *s, ConvertJob *job,
                                 ConvertSource *src, uint64_t offset,
                                 uint8_t *buf, size_t len)
{
    uint32_t unit = MAX(bdrv_get_logical_block_size(src->bs), 1);

    for (size_t pos = 0; pos < len;) {
        /* Pieces end on block boundaries (the first may be a part). */
        size_t n = MIN(unit - (offset + pos) % unit, len - pos);
        Error *err = NULL;

        if (bdrv_pread(src->bs, offset + pos, buf + pos, n, &err) < 0) {
            memset(buf + pos, 0, n);
            /* qemu-img's line: the errno's text where there is one */
            if (!s->quiet) {
                g_string_append_printf(job->msgs, "%s: warning: error while "
                                       "reading offset %" G_GUINT64_FORMAT
                                       ": %s\n", img_get_progname(),
                                       offset + pos, convert_strerror(err));
            }
            error_free(err);
        }
        pos += n;
    }
}

static int convert_read(ConvertState *s, ConvertJob *job, uint64_t offset,
                        uint8_t *buf, uint64_t len, const char **err_file,
                        Error **errp)
{
    while (len) {
        ConvertSource *src = convert_select(s, offset);
        uint64_t local = offset - src->start;
        uint64_t n = MIN(len, src->size - local);
        Error *err = NULL;

        *err_file = src->name;
        if (bdrv_pread(src->bs, local, buf, n, &err) < 0) {
            if (!s->salvage) {
                error_propagate(errp, err);
                return -1;
            }
            error_free(err);
            convert_read_salvage(s, job, src, local, buf, n);
        }
        offset += n;
        buf += n;
        len -= n;
    }
    return 0;
}

/*
 * -C: offload the copy of a job to the file system. False (and offloading
 * off from then on, as in qemu-img) when it cannot: the job is then
 * copied the usual way.
 */
static bool convert_chunk_offload(ConvertState *s, ConvertJob *job)
{
    ConvertSource *src = convert_select(s, job->offset);
    Error *err = NULL;

    if (!g_atomic_int_get(&s->copy_range) || job->zero ||
        job->offset + job->len > src->start + src->size) {
        return false;
    }
    for (unsigned i = 0; i < job->nsegs; i++) {
        if (!job->segs[i].read) {
            return false;
        }
    }
    if (bdrv_copy_range(src->bs, job->offset - src->start, s->dst,
                        job->offset, job->len, &err) == 0) {
        return true;
    }
    error_free(err);
    g_atomic_int_set(&s->copy_range, 0);
    return false;
}

/*
 * One job, its first half: read what the source holds as data, zero the
 * runs written as data (-S 0). *offloaded: -C copied it all already.
 */
static int convert_job_read(ConvertState *s, ConvertJob *job,
                            bool *offloaded, const char **err_file,
                            Error **errp)
{
    uint64_t pos = 0;

    *offloaded = false;
    if (job->zero) {
        return 0;
    }
    if (convert_chunk_offload(s, job)) {
        *offloaded = true;
        return 0;
    }
    for (unsigned i = 0; i < job->nsegs; i++) {
        ConvertSeg *seg = &job->segs[i];

        if (!seg->read) {
            memset(job->buf + pos, 0, seg->len);
        } else if (convert_read(s, job, job->offset + pos, job->buf + pos,
                                seg->len, err_file, errp) < 0) {
            return -1;
        }
        pos += seg->len;
    }
    *err_file = s->dst_name;
    if (s->backing && convert_compare_backing(s, job, errp) < 0) {
        return -1;
    }
    return 0;
}

/* Its second half: write it all at once (a LUKS target needs sectors). */
static int convert_job_write(ConvertState *s, ConvertJob *job,
                             const char **err_file, Error **errp)
{
    *err_file = s->dst_name;
    if (!job->len) {
        return 0;
    }
    if (job->zero) {
        return convert_write_zeroes(s, job->offset, job->buf, job->len,
                                    errp);
    }
    return convert_write(s, job, errp);
}

/* salvage: the warnings of the jobs done, in the jobs' order. */
static void convert_print_msgs(ConvertState *s, ConvertJob *job)
{
    gpointer msgs;

    if (job->seq != s->print_seq) {
        g_hash_table_insert(s->done_msgs, GSIZE_TO_POINTER(job->seq + 1),
                            g_steal_pointer(&job->msgs));
        return;
    }
    fputs(job->msgs->str, stderr);
    s->print_seq++;
    while (g_hash_table_steal_extended(s->done_msgs,
                                       GSIZE_TO_POINTER(s->print_seq + 1),
                                       NULL, &msgs)) {
        fputs(((GString *)msgs)->str, stderr);
        g_string_free(msgs, TRUE);
        s->print_seq++;
    }
}

/*
 * -c in order: the write half's first pass, compressing what the second
 * will store (see convert_pwrite_compressed()).
 */
static int convert_job_compress(ConvertState *s, ConvertJob *job,
                                Error **errp)
{
    int ret;

    if (job->zero || !job->len) {
        return 0;
    }
    g_mutex_lock(&s->lock);
    job->cz = s->spare_cz->len ?
              g_ptr_array_steal_index_fast(s->spare_cz,
                                           s->spare_cz->len - 1) :
              g_ptr_array_new_with_free_func(
                  (GDestroyNotify)bdrv_compressed_free);
    g_mutex_unlock(&s->lock);
    job->cz_making = true;
    ret = convert_write(s, job, errp);
    job->cz_making = false;
    return ret;
}

/* In its turn, when the target takes turns. */
static void convert_turn_now(void *opaque)
{
}

/* A job's end (under s->lock): its buffer back, its error kept. */
static void convert_job_done(ConvertState *s, ConvertJob *job)
{
    if (job->msgs) {
        /* (Kept for later, or printed: then freed here.) */
        convert_print_msgs(s, job);
        if (job->msgs) {
            g_string_free(job->msgs, TRUE);
        }
    }
    if (job->err && !s->err) {
        s->err = job->err;
        s->err_file = job->err_file;
    } else if (job->err) {
        error_free(job->err);
    }
    g_ptr_array_add(s->free_bufs, job->buf);
    g_cond_signal(&s->cond);
    if (job->cz) {
        g_ptr_array_add(s->spare_cz, job->cz);
    }
    g_free(job->same);
    g_free(job);
}

/*
 * A job: its read half (and -c's compression) in parallel with the other
 * threads; its write half at once, or, in order (qcow2), in its turn:
 * a job read before its turn waits in s->waiting, and the thread whose
 * turn it is writes it after its own, so that no thread ever waits for
 * another's turn (it reads the next job meanwhile). Under an uneven load
 * (clusters that compress slowly next to fast ones, other processes on
 * the CPUs) a thread that waited for its turn left its CPU idle: -c took
 * twice the time of the unordered copy.
 */
static void convert_worker(gpointer data, gpointer user_data)
{
    ConvertJob *job = data;
    ConvertState *s = user_data;
    bool failed, offloaded = false;

    g_mutex_lock(&s->lock);
    failed = s->err != NULL;
    g_mutex_unlock(&s->lock);
    /* After a failure, queued jobs are dropped: the copy is abandoned. */
    if (!failed && !img_interrupted) {
        job->write = convert_job_read(s, job, &offloaded, &job->err_file,
                                      &job->err) == 0 && !offloaded;
    }
    if (!s->in_order) {
        if (job->write && !img_interrupted) {
            convert_job_write(s, job, &job->err_file, &job->err);
        }
        g_mutex_lock(&s->lock);
        convert_job_done(s, job);
        g_mutex_unlock(&s->lock);
        return;
    }
    if (job->write && s->compress && !img_interrupted) {
        job->err_file = s->dst_name;
        job->write = convert_job_compress(s, job, &job->err) == 0;
    }

    g_mutex_lock(&s->lock);
    if (job->seq != s->write_seq) {
        /* Written by the thread whose turn it is, after its own job. */
        g_hash_table_insert(s->waiting, GSIZE_TO_POINTER(job->seq + 1), job);
        g_mutex_unlock(&s->lock);
        return;
    }
    while (job) {
        /* A failure before it: the copy is abandoned, nothing written. */
        bool write = job->write && !s->err && !img_interrupted;

        g_mutex_unlock(&s->lock);
        if (write) {
            /* The format's turn (bdrv_write_turn()): now. */
            bdrv_set_write_turn(convert_turn_now, NULL);
            convert_job_write(s, job, &job->err_file, &job->err);
            bdrv_set_write_turn(NULL, NULL);
        }
        g_mutex_lock(&s->lock);
        s->write_seq++;
        convert_job_done(s, job);
        job = g_hash_table_lookup(s->waiting,
                                  GSIZE_TO_POINTER(s->write_seq + 1));
        if (job) {
            g_hash_table_remove(s->waiting,
                                GSIZE_TO_POINTER(s->write_seq + 1));
        }
    }
    g_mutex_unlock(&s->lock);
}

static unsigned convert_threads(int requested, ConvertState *s)
{
    unsigned network = bdrv_parallel_requests(s->dst);

    for (unsigned i = 0; i < s->nsrcs; i++) {
        network = MAX(network, bdrv_parallel_requests(s->srcs[i].bs));
    }
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
 * Bytes per job: CONVERT_CHUNK, or more where a protocol below a source
 * or the target serves larger requests best (a network's round trips:
 * RBD), up to CONVERT_MAX_CHUNK.
 */
static size_t convert_job_size(ConvertState *s)
{
    size_t want = bdrv_request_size(s->dst);

    for (unsigned i = 0; i < s->nsrcs; i++) {
        want = MAX(want, bdrv_request_size(s->srcs[i].bs));
    }
    return CLAMP(want, CONVERT_CHUNK, CONVERT_MAX_CHUNK);
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

/* The scheduler's side of the copy. */
typedef struct ConvertSched {
    ConvertState *s;
    GThreadPool *pool;
    gint64 start;
    uint64_t queued;
    ConvertJob *cur;            /* runs of data being gathered */
} ConvertSched;

/*
 * A new job at offset: waits for a free buffer. NULL when the copy stops
 * (a job failed, ^C).
 */
static ConvertJob *convert_new_job(ConvertSched *q, uint64_t offset)
{
    ConvertState *s = q->s;
    ConvertJob *job;

    g_mutex_lock(&s->lock);
    while (s->free_bufs->len == 0 && !s->err && !img_interrupted) {
        g_cond_wait(&s->cond, &s->lock);
    }
    if (s->err || img_interrupted) {
        g_mutex_unlock(&s->lock);
        return NULL;
    }
    job = g_new0(ConvertJob, 1);
    job->offset = offset;
    job->buf = g_ptr_array_steal_index_fast(s->free_bufs,
                                            s->free_bufs->len - 1);
    g_mutex_unlock(&s->lock);
    return job;
}

static void convert_dispatch(ConvertSched *q, ConvertJob *job)
{
    ConvertState *s = q->s;

    job->seq = s->next_seq++;
    if (s->salvage && !job->msgs) {
        job->msgs = g_string_new(NULL);
    }
    convert_throttle(s, q->start, q->queued);
    q->queued += job->len;
    g_thread_pool_push(q->pool, job, NULL);
}

/* The job being gathered, if any, goes. */
static void convert_flush(ConvertSched *q)
{
    if (q->cur) {
        convert_dispatch(q, q->cur);
        q->cur = NULL;
    }
}

/*
 * One step of the walk into jobs: runs written as data are gathered into
 * jobs of up to a chunk (one job may take several steps: data next to
 * data, whatever the walk's cuts; with step_jobs, one step is one job),
 * zeroes to write go as jobs of their own, the rest is jumped over. -1:
 * the copy stops.
 */
static int convert_schedule(ConvertSched *q, uint64_t offset, uint64_t n,
                            ConvertStatus status)
{
    ConvertState *s = q->s;

    if (s->walk_msgs->len) {
        /* Warnings of the walk: with the job that starts here. */
        convert_flush(q);
        q->cur = convert_new_job(q, offset);
        if (!q->cur) {
            return -1;
        }
        q->cur->msgs = g_string_new(s->walk_msgs->str);
        g_string_truncate(s->walk_msgs, 0);
    }
    if (convert_written_as_data(s, status)) {
        bool read = status == CONVERT_DATA;

        /* (A job of its own, its warnings kept: see convert_step_jobs().) */
        if (s->step_jobs && q->cur && q->cur->len) {
            convert_flush(q);
        }
        while (n) {
            ConvertJob *job = q->cur;
            uint64_t take;

            if (job && (job->offset + job->len != offset ||
                        job->len == s->chunk ||
                        (job->nsegs == CONVERT_MAX_SEGS &&
                         job->segs[job->nsegs - 1].read != read))) {
                convert_flush(q);
                job = NULL;
            }
            if (!job) {
                job = q->cur = convert_new_job(q, offset);
                if (!job) {
                    return -1;
                }
            }
            take = MIN(n, s->chunk - job->len);
            if (job->nsegs && job->segs[job->nsegs - 1].read == read) {
                job->segs[job->nsegs - 1].len += take;
            } else {
                job->segs[job->nsegs].len = take;
                job->segs[job->nsegs].read = read;
                job->nsegs++;
            }
            job->len += take;
            offset += take;
            n -= take;
        }
        if (s->step_jobs) {
            convert_flush(q);
        }
        return 0;
    }
    convert_flush(q);
    if (status == CONVERT_ZERO && !s->has_zero_init) {
        uint64_t max = bdrv_can_write_zeroes(s->dst) ? CONVERT_ZERO_JOB :
                       s->chunk;

        while (n) {
            ConvertJob *job = convert_new_job(q, offset);

            if (!job) {
                return -1;
            }
            job->zero = true;
            job->len = MIN(n, max);
            offset += job->len;
            n -= job->len;
            convert_dispatch(q, job);
        }
    }
    return 0;
}

/*
 * Whether jobs are the walk's steps (2 MiB of data at most) rather than
 * 256 KiB pieces of them: where what the target allocates depends on how
 * the data is cut into writes, and it is to be what qemu-img allocates.
 * A qcow2 target written in order takes its refcount blocks after the
 * clusters of the write that needs them; runs of zeroes shorter than -S
 * go with the data around them when it is in the same write (with -S
 * above 4k, on a target that leaves zeroes out or writes them its own
 * way, a hole of a raw file, a cluster of 1 KiB, can show it). Not with
 * -c (whole clusters, one write each, however jobs are cut).
 */
static bool convert_step_jobs(ConvertState *s)
{
    return !s->compress &&
           (s->in_order ||
            (s->min_sparse > CONVERT_SPARSE_DEFAULT &&
             (s->has_zero_init || bdrv_can_write_zeroes(s->dst))));
}

/* The copy. Returns 0, or -1 with the error printed. */
static int convert_copy(ConvertState *s, unsigned nthreads, bool progress)
{
    /*
     * One spare buffer per thread: a job waits in the queue, ready. -c in
     * order: a few more per thread (256 KiB jobs), so that a thread can
     * compress ahead while jobs it finished wait for their turn with
     * their buffers (clusters compress at very different speeds). Not
     * for the 2 MiB steps of an uncompressed copy in order, whose jobs
     * cost alike: no faster with four per thread (raw to qcow2, 1 GiB).
     */
    unsigned nbufs = (s->in_order && s->compress ? CONVERT_ORDER_BUFS : 2) *
                     nthreads;
    g_autoptr(GError) gerr = NULL;
    ConvertSched q = { .s = s };
    ConvertIter it = { 0 };
    ImgProgress prog;
    uint64_t offset = 0, total, done = 0;
    int ret = 0;

    g_mutex_init(&s->lock);
    g_cond_init(&s->cond);
    s->waiting = g_hash_table_new(NULL, NULL);
    s->spare_cz = g_ptr_array_new_with_free_func(
        (GDestroyNotify)g_ptr_array_unref);
    s->walk_msgs = g_string_new(NULL);
    s->done_msgs = g_hash_table_new(NULL, NULL);
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

    /* The first pass: what -p counts (qemu-img prints 0% before it). */
    img_progress_init(&prog, progress);
    if (convert_count_data(s, &total) < 0) {
        ret = -1;
        goto out_prog;
    }

    q.pool = g_thread_pool_new(convert_worker, s, nthreads, TRUE, &gerr);
    if (!q.pool) {
        img_error(NULL, "Cannot start threads: %s", gerr->message);
        ret = -1;
        goto out_prog;
    }
    q.start = g_get_monotonic_time();
    s->walk_to_jobs = true;
    while (offset < s->size && !img_interrupted) {
        uint64_t n;
        /* Block status is asked outside the lock: the workers go on. */
        int status = convert_iteration(s, &it, offset, &n);

        if (status < 0) {
            ret = -1;
            break;
        }
        if (status == CONVERT_ZERO && !s->min_sparse) {
            n = MIN(n, s->step);
        }
        /* qemu-img's line as a step is taken up, before its copy. */
        if (convert_written_as_data(s, status)) {
            done += n;
            img_progress_print(&prog, 100.0 * done / total);
        }
        if (convert_schedule(&q, offset, n, status) < 0) {
            break;
        }
        offset += n;
    }
    if (!ret && s->walk_msgs->len) {
        /* (Cannot happen: a warning comes with a step of data.) */
        fputs(s->walk_msgs->str, stderr);
    }
    convert_flush(&q);
    /* Wait for every job: all buffers back home. */
    g_mutex_lock(&s->lock);
    while (s->free_bufs->len < nbufs) {
        g_cond_wait(&s->cond, &s->lock);
    }
    g_mutex_unlock(&s->lock);
    g_thread_pool_free(q.pool, FALSE, TRUE);

    if (s->err) {
        img_error_free(s->err_file, s->err);
        s->err = NULL;
        ret = -1;
    } else if (!ret && img_interrupted) {
        img_error(NULL, "Interrupted");
        ret = -1;
    } else if (!ret && s->compress) {
        Error *err = NULL;

        /* The end, as qemu-img marks it: the file ends on a sector. */
        if (bdrv_pwrite_compressed(s->dst, 0, NULL, 0, 0, &err) < 0) {
            img_error_free(s->dst_name, err);
            ret = -1;
        }
    }
out_prog:
    if (!ret) {
        img_progress_print(&prog, 100);
    }
    img_progress_end(&prog);

    g_ptr_array_unref(s->free_bufs);
    g_hash_table_unref(s->done_msgs);
    g_string_free(s->walk_msgs, TRUE);
    g_hash_table_unref(s->waiting);
    g_ptr_array_unref(s->spare_cz);
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
    g_autofree ConvertSource *srcs = NULL;
    unsigned nsrcs = 0;
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
          "let writes into a qcow2 target reach it in any order (its "
          "clusters are then laid out in the order the copying threads "
          "write them)", NULL },
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
    const char *dst_name;
    g_autofree char *dst_path = NULL;
    int dst_flags = BDRV_O_RDWR, src_flags = 0;
    bool created = false, flush, direct, src_direct, src_flush;
    bool with_backing = false, target_has_backing;
    uint64_t sparse_size = CONVERT_SPARSE_DEFAULT, rate_limit = 0;
    uint64_t len = 0;
    Error *err = NULL;
    int r, ret = 1;

    if (img_parse_args(&argc, &argv, "SRC [SRC2 ...] DST",
                       "Convert the image SRC into DST, between raw, luks "
                       "and qcow2 (luks -> luks re-encrypts); several "
                       "sources are copied one after another.",
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
                             argc >= 3 ? argv[argc - 1] : NULL);
    if (r) {
        ret = r < 0;
        goto out;
    }
    if (argc < 3) {
        img_error(NULL, "Expecting a source and a target image");
        goto out;
    }
    nsrcs = argc - 2;
    dst_name = argv[argc - 1];
    if (target_image_opts && !no_create) {
        img_error(NULL, "--target-image-opts requires use of -n flag");
        goto out;
    }
    if (no_create) {
        /* -o key-secret=ID unlocks a LUKS target: our only -n option. */
        g_autofree char *secret = qemu_opt_take(opts, "key-secret");
        g_autofree char *unknown = qemu_opts_first_key(opts);

        if (unknown) {
            img_error(NULL, "-o has no effect when skipping image creation");
            goto out;
        }
        if (secret) {
            g_hash_table_insert(opts, g_strdup("key-secret"),
                                g_steal_pointer(&secret));
        }
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
    /*
     * With -n, -B only says that the target has a backing file, as in
     * qemu-img: what the source's backing file holds is not copied.
     */
    target_has_backing = backing != NULL;
    if (target_has_backing && target_is_zero) {
        img_error(NULL, "Cannot use --target-is-zero when the destination "
                  "image has a backing file");
        goto out;
    }
    if (target_has_backing && nsrcs > 1) {
        img_error(NULL, "Having a backing file for the target makes no "
                  "sense when concatenating multiple input images");
        goto out;
    }
    if (backing && !no_create) {
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

    /* snapshot.id=/snapshot.name= is taken for the first source only. */
    if (snapshot && nsrcs > 1 && !g_str_has_prefix(snapshot, "snapshot.")) {
        img_error(NULL, "No support for concatenating multiple snapshot");
        goto out;
    }
    /* The sources are opened read-only: they are never written. */
    srcs = g_new0(ConvertSource, nsrcs);
    for (unsigned i = 0; i < nsrcs; i++) {
        ConvertSource *src = &srcs[i];
        g_autoptr(BlockImageInfo) info = NULL;
        int64_t n;

        src->name = argv[1 + i];
        src->bs = img_open(src->name, fmt, image_opts, src_flags);
        if (!src->bs) {
            goto out;
        }
        if (i == 0 && snapshot &&
            img_load_snapshot(src->bs, snapshot, sn_id, sn_name) < 0) {
            goto out;
        }
        n = bdrv_getlength(src->bs, &err);
        if (n < 0) {
            img_error_free(src->name, err);
            goto out;
        }
        src->start = len;
        src->size = n;
        len += n;
        /* Runs are cut on its clusters (qemu-img's src_alignment). */
        info = bdrv_get_image_info(bdrv_skip_filters(src->bs), NULL);
        src->align = MAX(src_direct ? BDRV_DIRECT_ALIGN : BDRV_SECTOR_SIZE,
                         info && info->cluster_size > 0 ?
                         (uint64_t)info->cluster_size : 0);
    }
    if (bitmaps && nsrcs > 1) {
        img_error(NULL, "Copying bitmaps only possible with single source");
        goto out;
    }
    if (bitmaps && convert_check_bitmaps(srcs[0].bs, skip_broken) < 0) {
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
        if ((uint64_t)dst_len < len) {
            img_error(dst_name, "The target image is smaller than the "
                      "source (%" G_GINT64_FORMAT " < %" G_GUINT64_FORMAT
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
                            g_strdup_printf("%" G_GUINT64_FORMAT, len));
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

        s.cluster = info && info->cluster_size > 0 ? info->cluster_size : 0;
        if (!s.cluster) {
            img_error(NULL, "invalid cluster size");
            goto out;
        }
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
    s.srcs = srcs;
    s.nsrcs = nsrcs;
    s.dst = dst;
    s.dst_name = dst_name;
    s.size = len;
    s.chunk = convert_job_size(&s);
    /* -c: a job holds whole clusters. */
    s.chunk = MAX(s.chunk, s.cluster);
    s.step = compress ? s.cluster : CONVERT_STEP;
    s.min_sparse = sparse_size;
    /* qemu-img's alignment of zero runs: -S, or the target's blocks. */
    s.sparse_align = 1;
    while (s.sparse_align * 2 <= sparse_size / BDRV_SECTOR_SIZE) {
        s.sparse_align *= 2;
    }
    if (direct) {
        s.sparse_align = MAX(s.sparse_align,
                             BDRV_DIRECT_ALIGN / BDRV_SECTOR_SIZE);
    }
    /*
     * Only a target we made ourselves is known to read as zeroes (when it
     * has no backing file), or one the user vouches for
     * (--target-is-zero); -S 0 writes zeroes all the same.
     */
    s.has_zero_init = target_is_zero ||
        (sparse_size && created && !target_has_backing &&
         bdrv_has_zero_init(dst));
    s.target_has_backing = target_has_backing;
    s.target_backing_len = -1;
    if (with_backing && bdrv_get_backing(dst)) {
        /* Unknown (an error) is only an optimization lost, as qemu-img. */
        s.target_backing_len = bdrv_getlength(bdrv_get_backing(dst), NULL);
    }
    /*
     * Writes into a qcow2 image in order: its clusters are then allocated
     * in the order of the guest offsets, as qemu-img allocates them (its
     * default; -W lifts it). The threads still read and compress (-c) in
     * parallel: the image waits for the turn only to take clusters. Not
     * when encrypted (LUKS inside the image): the threads encrypt in the
     * write, where the clusters' offsets are known, and that would be in
     * turn too.
     */
    {
        /* A format with clusters takes them as it writes (qcow2). */
        g_autoptr(BlockImageInfo) info = bdrv_get_image_info(dst, NULL);

        s.in_order = !out_of_order && !bdrv_is_encrypted(dst) && info &&
                     info->cluster_size > 0;
    }
    s.step_jobs = convert_step_jobs(&s);
    if (s.step_jobs) {
        s.chunk = MAX(s.chunk, s.step);
    }
    s.salvage = salvage;
    s.quiet = common.quiet;
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
    if (bitmaps && convert_copy_bitmaps(srcs[0].bs, dst, skip_broken) < 0) {
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
    for (unsigned i = 0; srcs && i < nsrcs; i++) {
        bdrv_close(srcs[i].bs);
    }
    img_common_opts_clear(&common);
    return ret;
}
