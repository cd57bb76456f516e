/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * PBKDF2 (RFC 8018 section 5.2) with HMAC over any QCryptoHashAlgo, and the
 * iteration-count calibration LUKS uses to turn "iter-time" into a count.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "crypto/pbkdf.h"
#include "hmacpriv.h"
#include "qemu/bswap.h"

bool qcrypto_pbkdf2_supports(QCryptoHashAlgo hash)
{
    return qcrypto_hash_supports(hash);
}

/*
 * T_i = U_1 ^ U_2 ^ ... ^ U_c, U_1 = PRF(P, S || INT(i)), U_j = PRF(P,
 * U_{j-1}) (RFC 8018 section 5.2 step 3). The key is processed once, by
 * qcrypto_hmac_new; each U_j is then copy + update + digest, twice, on
 * stack buffers.
 */
static void pbkdf2_block(QCryptoHmac *hmac, size_t hlen,
                         const uint8_t *salt, size_t nsalt,
                         uint32_t index, uint64_t iterations, uint8_t *t)
{
    uint8_t u[QCRYPTO_HASH_MAX_DIGEST_LEN];
    uint8_t int_i[4];

    stl_be_p(int_i, index);             /* INT(i): 32-bit big-endian */

    qcrypto_hash_update_fast(hmac->msg, salt, nsalt);
    qcrypto_hash_update_fast(hmac->msg, int_i, sizeof(int_i));
    qcrypto_hmac_finalize_fast(hmac, u);
    memcpy(t, u, hlen);

    for (uint64_t j = 1; j < iterations; j++) {
        qcrypto_hash_update_fast(hmac->msg, u, hlen);
        qcrypto_hmac_finalize_fast(hmac, u);
        for (size_t k = 0; k < hlen; k++) {
            t[k] ^= u[k];
        }
    }
    explicit_bzero(u, sizeof(u));
}

/*
 * The blocks T_1, T_2, ... are independent chains, so one derivation runs
 * them on threads of their own: a key of two digests (AES-256-XTS's 64
 * bytes with SHA-256, the most common LUKS key slot) unlocks in half the
 * time on two CPUs. The iteration count means what it always did: the
 * calibration below times one chain, as cryptsetup and QEMU do, so an
 * image's key slots are as costly to attack as theirs.
 */
#define PBKDF2_MAX_THREADS        8
/* Below this, starting a thread (tens of microseconds) saves nothing. */
#define PBKDF2_PARALLEL_MIN_ITERS 1024

typedef struct {
    QCryptoHmac *hmac;          /* the worker's own: its state is mutable */
    size_t hlen;
    const uint8_t *salt;
    size_t nsalt;
    uint64_t iterations;
    uint8_t *out;
    size_t nout;
    uint64_t first, step;       /* blocks first, first + step, ... (from 1) */
} Pbkdf2Worker;

static gpointer pbkdf2_worker_run(gpointer opaque)
{
    Pbkdf2Worker *w = opaque;
    uint8_t t[QCRYPTO_HASH_MAX_DIGEST_LEN];

    for (uint64_t i = w->first; (i - 1) * w->hlen < w->nout; i += w->step) {
        size_t off = (i - 1) * w->hlen;

        pbkdf2_block(w->hmac, w->hlen, w->salt, w->nsalt, (uint32_t)i,
                     w->iterations, t);
        memcpy(w->out + off, t, MIN(w->nout - off, w->hlen));
    }
    explicit_bzero(t, sizeof(t));
    return NULL;
}

/* RFC 8018 PBKDF2 on up to max_threads threads (1: this one alone). */
static int pbkdf2_derive(QCryptoHashAlgo hash,
                         const uint8_t *key, size_t nkey,
                         const uint8_t *salt, size_t nsalt,
                         uint64_t iterations, uint8_t *out, size_t nout,
                         unsigned max_threads, Error **errp)
{
    QCryptoHmac *hmac[PBKDF2_MAX_THREADS] = { NULL };
    Pbkdf2Worker w[PBKDF2_MAX_THREADS];
    GThread *thread[PBKDF2_MAX_THREADS] = { NULL };
    size_t hlen;
    uint64_t blocks;
    unsigned n;
    int ret = -1;

    if (!qcrypto_pbkdf2_supports(hash)) {
        error_setg(errp, "PBKDF2 does not support hash algorithm %d",
                   (int)hash);
        return -1;
    }
    if (iterations == 0) {
        error_setg(errp, "PBKDF2 needs at least one iteration");
        return -1;
    }
    hlen = qcrypto_hash_digest_len(hash);
    /* RFC 8018 section 5.2 step 1: dkLen <= (2^32 - 1) * hLen. */
    if (nout / hlen > UINT32_MAX - 1) {
        error_setg(errp, "PBKDF2 output of %zu bytes is too long", nout);
        return -1;
    }
    blocks = (nout + hlen - 1) / hlen;
    n = iterations < PBKDF2_PARALLEL_MIN_ITERS ? 1 :
        (unsigned)MIN(MIN(blocks, max_threads), PBKDF2_MAX_THREADS);
    n = MAX(n, 1);

    for (unsigned k = 0; k < n; k++) {
        hmac[k] = qcrypto_hmac_new(hash, key, nkey, errp);
        if (!hmac[k]) {
            goto out;
        }
        w[k] = (Pbkdf2Worker) {
            .hmac = hmac[k], .hlen = hlen, .salt = salt, .nsalt = nsalt,
            .iterations = iterations, .out = out, .nout = nout,
            .first = k + 1, .step = n,
        };
    }
    /* Worker 0 is this thread; a worker whose thread cannot start too. */
    for (unsigned k = 1; k < n; k++) {
        thread[k] = g_thread_try_new("pbkdf2", pbkdf2_worker_run, &w[k],
                                     NULL);
    }
    pbkdf2_worker_run(&w[0]);
    for (unsigned k = 1; k < n; k++) {
        if (thread[k]) {
            g_thread_join(thread[k]);
        } else {
            pbkdf2_worker_run(&w[k]);
        }
    }
    ret = 0;
out:
    for (unsigned k = 0; k < n; k++) {
        if (hmac[k]) {
            qcrypto_hmac_free(hmac[k]);
        }
    }
    return ret;
}

int qcrypto_pbkdf2(QCryptoHashAlgo hash,
                   const uint8_t *key, size_t nkey,
                   const uint8_t *salt, size_t nsalt,
                   uint64_t iterations,
                   uint8_t *out, size_t nout,
                   Error **errp)
{
    return pbkdf2_derive(hash, key, nkey, salt, nsalt, iterations, out,
                         nout, PBKDF2_MAX_THREADS, errp);
}

/*
 * Calibration: how many iterations one second of this thread's CPU time
 * buys, deriving nout bytes.
 *
 * QEMU reads the thread's CPU time through getrusage(RUSAGE_THREAD), in
 * whole milliseconds and advanced by the kernel's accounting, takes a
 * single sample, and gives up with "Unable to get accurate CPU usage" when
 * a run reads as no time at all. We avoid each way that can go wrong:
 *  - CLOCK_THREAD_CPUTIME_ID counts only the time this thread ran, so a
 *    busy machine that preempts us stretches the wall time, not the
 *    measurement;
 *  - a sample counts only once it took at least CALIBRATE_MIN_NS of CPU
 *    time; shorter ones just make the next one longer (16x while they are
 *    too short to scale from, else scaled to aim at CALIBRATE_TARGET_NS).
 *    Linux reads this clock in nanoseconds from the scheduler's clock, so
 *    25 ms is far beyond its resolution, and a zero reading is never an
 *    error, only a reason to run longer. Short samples matter:
 *    every LUKS create and key-slot change pays for the calibration, and
 *    QEMU's spends half a second or more;
 *  - the sample length follows what the count is for: a count for an
 *    iter-time of ms milliseconds needs its rate to a few percent only
 *    over ms, so samples of ms/8 (at least CALIBRATE_FLOOR_NS) do, and a
 *    LUKS create with iter-time=10 spends ~5 ms calibrating, not 120
 *    (it was most of the cost of converting a small image to LUKS);
 *  - we keep the fastest of CALIBRATE_SAMPLES samples: interference
 *    (a busy SMT sibling, cache eviction, frequency dips) only ever slows
 *    a sample down, so the fastest is the steadiest estimate of what this
 *    CPU can do.
 * The only failures are real ones: the clock cannot be read, or it stays
 * still over so much work that it cannot be a CPU clock.
 */
#define CALIBRATE_START_ITERS  1024    /* HMAC pairs in the first sample */
#define CALIBRATE_MIN_NS       (25 * 1000 * 1000ull)  /* the longest kind */
#define CALIBRATE_FLOOR_NS     (1000 * 1000ull)       /* the shortest kind */
#define CALIBRATE_SAMPLES      3
/*
 * 2^22 HMAC pairs in under CALIBRATE_FLOOR_NS / 16 would be over 67 billion
 * a second, thousands of times the fastest HMAC pair (SHA-1 with SHA-NI)
 * any CPU does: a clock that reads so little over so much work is broken.
 */
#define CALIBRATE_STUCK_ITERS  (1ull << 22)

static int thread_cpu_ns(uint64_t *ns, Error **errp)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0) {
        error_setg_errno(errp, errno, "Unable to read the thread CPU clock");
        return -1;
    }
    *ns = (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
    return 0;
}

/*
 * The measuring loop, with samples of at least min_ns of CPU time; out
 * (nout bytes) is scratch. 0 on failure.
 */
static uint64_t pbkdf2_calibrate(QCryptoHashAlgo hash,
                                 const uint8_t *key, size_t nkey,
                                 const uint8_t *salt, size_t nsalt,
                                 uint8_t *out, size_t nout, uint64_t min_ns,
                                 Error **errp)
{
    uint64_t target_ns = min_ns + min_ns / 2 + min_ns / 8; /* x1.6 */
    /* Each iteration costs one HMAC pair per digest-sized output block. */
    size_t hlen = qcrypto_hash_digest_len(hash);
    uint64_t blocks = (nout + hlen - 1) / hlen;
    uint64_t iters = MAX(CALIBRATE_START_ITERS / blocks, 1);
    double best_rate = 0;

    for (int samples = 0; samples < CALIBRATE_SAMPLES;) {
        uint64_t start, end, elapsed;

        /* One thread: the rate of one chain, as cryptsetup's. */
        if (thread_cpu_ns(&start, errp) < 0 ||
            pbkdf2_derive(hash, key, nkey, salt, nsalt, iters,
                          out, nout, 1, errp) < 0 ||
            thread_cpu_ns(&end, errp) < 0) {
            return 0;
        }
        elapsed = end > start ? end - start : 0;

        if (elapsed >= min_ns) {
            best_rate = MAX(best_rate, iters * 1e9 / elapsed);
            samples++;
        } else if (elapsed < min_ns / 16) {
            if (iters * blocks >= CALIBRATE_STUCK_ITERS) {
                error_setg(errp, "The thread CPU clock does not advance "
                           "(%" PRIu64 " ns for %" PRIu64 " iterations)",
                           elapsed, iters);
                return 0;
            }
            iters *= 16;
        } else {
            iters = (double)iters * target_ns / elapsed + 1;
        }
    }
    return MAX((uint64_t)best_rate, 1);
}

uint64_t qcrypto_pbkdf2_count_iters(QCryptoHashAlgo hash,
                                    const uint8_t *key, size_t nkey,
                                    const uint8_t *salt, size_t nsalt,
                                    size_t nout,
                                    Error **errp)
{
    g_autofree uint8_t *out = NULL;
    uint64_t rate;

    if (!qcrypto_pbkdf2_supports(hash)) {
        error_setg(errp, "PBKDF2 does not support hash algorithm %d",
                   (int)hash);
        return 0;
    }
    if (nout == 0) {
        error_setg(errp, "PBKDF2 calibration needs a non-empty output");
        return 0;
    }
    out = g_malloc(nout);
    rate = pbkdf2_calibrate(hash, key, nkey, salt, nsalt, out, nout,
                            CALIBRATE_MIN_NS, errp);
    explicit_bzero(out, nout);
    return rate;
}

/*
 * The salt the cached rate is measured with: zeros, as long as LUKS1's and
 * LUKS2's salts (the salt is hashed once per block, so its length barely
 * matters, but this is the length every caller uses).
 */
#define PBKDF2_RATE_SALT_LEN 32

/*
 * The rate of one HMAC pair per iteration (nout = digest length), from
 * samples of at least min_ns; cached per hash, and measured again only
 * when a caller needs longer samples than the cached rate had.
 */
static uint64_t pbkdf2_cached_rate(QCryptoHashAlgo hash, uint64_t min_ns,
                                   Error **errp)
{
    static const uint8_t salt[PBKDF2_RATE_SALT_LEN];
    static struct {
        uint64_t rate, min_ns;
    } cache[QCRYPTO_HASH_ALGO__MAX];
    /*
     * Held across the measurement: threads that ask for the same rate at
     * once wait for one measurement rather than each running their own.
     */
    static GMutex lock;
    size_t hlen;
    uint64_t rate;

    if (!qcrypto_pbkdf2_supports(hash)) {
        error_setg(errp, "PBKDF2 does not support hash algorithm %d",
                   (int)hash);
        return 0;
    }
    hlen = qcrypto_hash_digest_len(hash);
    g_mutex_lock(&lock);
    rate = cache[hash].rate;
    if (!rate || cache[hash].min_ns < min_ns) {
        g_autofree uint8_t *out = g_malloc(hlen);

        rate = pbkdf2_calibrate(hash, (const uint8_t *)"", 0, salt,
                                sizeof(salt), out, hlen, min_ns, errp);
        explicit_bzero(out, hlen);
        if (rate) {
            cache[hash].rate = rate;
            cache[hash].min_ns = min_ns;
        }
    }
    g_mutex_unlock(&lock);
    return rate;
}

/* Per nout bytes of output: one HMAC pair per digest-sized block. */
static uint64_t pbkdf2_rate_for_output(QCryptoHashAlgo hash, size_t nout,
                                       uint64_t rate)
{
    size_t hlen = qcrypto_hash_digest_len(hash);

    return MAX(rate / MAX((nout + hlen - 1) / hlen, 1), 1);
}

uint64_t qcrypto_pbkdf2_rate(QCryptoHashAlgo hash, size_t nout,
                             Error **errp)
{
    uint64_t rate = pbkdf2_cached_rate(hash, CALIBRATE_MIN_NS, errp);

    return rate ? pbkdf2_rate_for_output(hash, nout, rate) : 0;
}

int qcrypto_pbkdf2_iters_for_time(QCryptoHashAlgo hash, size_t nout,
                                  uint64_t ms, uint64_t *iters,
                                  Error **errp)
{
    /* Samples of ms/8: see "the sample length" above. */
    uint64_t min_ns = ms < CALIBRATE_MIN_NS / 125000 ?
                      MAX(ms * 125000, CALIBRATE_FLOOR_NS) : CALIBRATE_MIN_NS;
    uint64_t rate = pbkdf2_cached_rate(hash, min_ns, errp);

    if (!rate) {
        return -1;
    }
    rate = pbkdf2_rate_for_output(hash, nout, rate);
    if (ms && rate > UINT64_MAX / ms) {
        error_setg(errp, "iter-time of %" PRIu64 " ms is too long", ms);
        return -1;
    }
    *iters = rate * ms / 1000;
    return 0;
}
