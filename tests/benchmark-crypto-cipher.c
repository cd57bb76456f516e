/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * benchmark-crypto-cipher: cipher throughput through the block layer's
 * entry point, with numbers meant to repeat. See docs/benchmarking.md.
 *
 * How a number is made:
 * - Each call encrypts (or decrypts) one chunk in place with
 *   qcrypto_sector_cipher_encrypt(): chunk / sector-size sectors with
 *   consecutive plain64 IVs, as the LUKS driver calls it.
 * - A run is a fixed amount of work (--bytes, or by default an amount
 *   calibrated to take about 0.25 s), timed on the thread's CPU clock:
 *   time the scheduler gives to other tasks does not count, so a busy
 *   machine slows the benchmark down but does not change its answer.
 *   The same amount is repeated --runs times; the median of those runs is
 *   the figure, min / max / cv show how far to trust it.
 * - --seconds S instead runs for S seconds of CPU time per run (the work
 *   then varies from run to run, which suits a quick look, not perf stat).
 * - An AES line's lim% is its share of what the AES units can do at all
 *   (--limit); with --limit, every run is paired with that limit
 *   measured just before and just after it (bench_paired_limit()).
 *
 * Exit status: 0 done, 1 a cipher failed, 2 bad options (including a
 * choice of algorithm, mode and backend that leaves nothing to measure).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#define HAVE_TSC 1
#endif

#include "crypto/cipher.h"
#include "crypto/pbkdf.h"
#include "crypto/sector.h"

#define EXIT_BAD_OPTIONS 2
#define MiB (1024.0 * 1024.0)

/* Default amount of CPU time per run when calibrating (the 0.25 s). */
#define DEFAULT_RUN_SECONDS 0.25
/* A configuration whose runs spread more than this is flagged. */
#define NOISY_CV 0.05

static const size_t default_chunks[] = { 512, 4096, 16384, 65536 };

/* Options, as GOptionContext fills them. */
static struct {
    char **algs;
    char **modes;
    char **backends;
    GArray *chunks;             /* size_t */
    guint64 sector_size;        /* 0: = chunk */
    char *dir;
    gint runs;
    gint warmup;
    guint64 bytes;              /* 0: calibrate or --seconds */
    gdouble seconds;            /* 0: fixed work */
    gboolean json;
    gint pin;                   /* -1: none */
    gboolean limit;
} opts = {
    .runs = 7,
    .warmup = 1,
    .pin = -1,
};

/* One thing to measure. */
typedef struct {
    const char *backend;        /* as forced: "nettle", "aesni", "auto" */
    QCryptoCipherAlgo alg;
    QCryptoCipherMode mode;
    size_t chunk;
    size_t sector_size;
    bool encrypt;
} BenchConfig;

typedef struct {
    BenchConfig cfg;
    const char *impl;           /* what actually ran */
    guint runs;
    guint64 bytes;              /* per run (the mean, with --seconds) */
    double median, min, max, cv;    /* MiB/s of CPU time */
    double wall_median;             /* MiB/s of wall-clock time */
    double cycles_per_byte;         /* < 0: no usable TSC */
    /* --limit: median of the runs' paired percentages, and their cv. */
    double paired_pct;              /* < 0: not paired */
    double paired_cv;
} BenchResult;

/* The state a timed loop works on. */
typedef struct {
    QCryptoSectorCipher *sc;
    uint8_t *buf;
    size_t chunk;
    size_t sector_size;
    bool encrypt;
    uint64_t sector;            /* the next call's first sector */
} BenchLoop;

typedef struct {
    double cpu;                 /* seconds */
    double wall;
    guint64 bytes;
} RunTime;

/* ------------------------------------------------------------------ */
/* Option parsing                                                     */

/* "4096", "64K", "1M", "2G" (binary multiples). */
static bool parse_size(const char *str, guint64 *out)
{
    char *end;
    guint64 v;
    unsigned shift = 0;

    if (!g_ascii_isdigit(*str)) {
        return false;
    }
    errno = 0;
    v = g_ascii_strtoull(str, &end, 10);
    if (errno) {
        return false;
    }
    switch (g_ascii_toupper(*end)) {
    case 'K': shift = 10; end++; break;
    case 'M': shift = 20; end++; break;
    case 'G': shift = 30; end++; break;
    }
    if (*end || v == 0 || v > (G_MAXUINT64 >> shift)) {
        return false;
    }
    *out = v << shift;
    return true;
}

static gboolean opt_size(const char *name, const char *value, guint64 *out,
                         GError **error)
{
    if (!parse_size(value, out)) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "%s: '%s' is not a size in bytes (e.g. 4096, 64K, 1M)",
                    name, value);
        return FALSE;
    }
    return TRUE;
}

static gboolean opt_chunk(const char *name, const char *value,
                          gpointer data, GError **error)
{
    guint64 v;

    if (!opt_size(name, value, &v, error)) {
        return FALSE;
    }
    g_array_append_val(opts.chunks, (size_t){ v });
    return TRUE;
}

static gboolean opt_sector_size(const char *name, const char *value,
                                gpointer data, GError **error)
{
    return opt_size(name, value, &opts.sector_size, error);
}

static gboolean opt_bytes(const char *name, const char *value,
                          gpointer data, GError **error)
{
    return opt_size(name, value, &opts.bytes, error);
}

static const GOptionEntry option_entries[] = {
    { "alg", 'a', 0, G_OPTION_ARG_STRING_ARRAY, &opts.algs,
      "Algorithm (repeatable; default: all)", "aes-256" },
    { "mode", 'm', 0, G_OPTION_ARG_STRING_ARRAY, &opts.modes,
      "Mode: ecb, cbc, ctr, xts, lrw (repeatable; default: all)", "xts" },
    { "chunk", 'c', 0, G_OPTION_ARG_CALLBACK, opt_chunk,
      "Bytes per call (repeatable; default: 512, 4096, 16384, 65536)", "N" },
    { "sector-size", 's', 0, G_OPTION_ARG_CALLBACK, opt_sector_size,
      "Sector size: each call covers chunk/N sectors with consecutive "
      "plain64 IVs (default: the chunk)", "N" },
    { "dir", 'd', 0, G_OPTION_ARG_STRING, &opts.dir,
      "Direction: enc, dec or both (default: both)", "enc|dec|both" },
    { "backend", 'b', 0, G_OPTION_ARG_STRING_ARRAY, &opts.backends,
      "auto, nettle or an AES path name (repeatable; default: every "
      "backend this CPU can run)", "NAME" },
    { "runs", 'r', 0, G_OPTION_ARG_INT, &opts.runs,
      "Timed runs per configuration (default: 7)", "N" },
    { "warmup", 'w', 0, G_OPTION_ARG_INT, &opts.warmup,
      "Untimed runs first (default: 1)", "N" },
    { "bytes", 'n', 0, G_OPTION_ARG_CALLBACK, opt_bytes,
      "Fixed work per run (default: calibrated to about 0.25 s)", "N" },
    { "seconds", 't', 0, G_OPTION_ARG_DOUBLE, &opts.seconds,
      "Fixed CPU time per run instead of fixed work", "S" },
    { "json", 'j', 0, G_OPTION_ARG_NONE, &opts.json,
      "One JSON object per configuration and direction, one per line",
      NULL },
    { "pin", 'p', 0, G_OPTION_ARG_INT, &opts.pin,
      "Run on this CPU only (sched_setaffinity)", "CPU" },
    { "limit", 'l', 0, G_OPTION_ARG_NONE, &opts.limit,
      "Print the AES units' limit per vector width first (alone, without "
      "--alg or --mode: only that)", NULL },
    { NULL }
};

_Noreturn static void G_GNUC_PRINTF(1, 2) bad_option(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "benchmark-crypto-cipher: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry --help.\n");
    exit(EXIT_BAD_OPTIONS);
}

static char *join_names(const char *(*name)(int), int n)
{
    GString *s = g_string_new(NULL);

    for (int i = 0; i < n; i++) {
        g_string_append_printf(s, "%s%s", i ? ", " : "", name(i));
    }
    return g_string_free(s, FALSE);
}

static const char *algo_name_int(int i) { return qcrypto_cipher_algo_name(i); }
static const char *mode_name_int(int i) { return qcrypto_cipher_mode_name(i); }

/* Check every option; a bad one ends the program with status 2. */
static void check_options(GArray *algs, GArray *modes, GPtrArray *backends)
{
    const char *const *usable = qcrypto_cipher_backend_list();

    if (opts.algs) {
        for (char **a = opts.algs; *a; a++) {
            int alg = qcrypto_cipher_algo_parse(*a);
            if (alg < 0) {
                g_autofree char *known =
                    join_names(algo_name_int, QCRYPTO_CIPHER_ALGO__MAX);
                bad_option("unknown algorithm '%s' (known: %s)", *a, known);
            }
            g_array_append_val(algs, alg);
        }
    } else {
        for (int alg = 0; alg < QCRYPTO_CIPHER_ALGO__MAX; alg++) {
            g_array_append_val(algs, alg);
        }
    }

    if (opts.modes) {
        for (char **m = opts.modes; *m; m++) {
            int mode = qcrypto_cipher_mode_parse(*m);
            if (mode < 0) {
                g_autofree char *known =
                    join_names(mode_name_int, QCRYPTO_CIPHER_MODE__MAX);
                bad_option("unknown mode '%s' (known: %s)", *m, known);
            }
            g_array_append_val(modes, mode);
        }
    } else {
        for (int mode = 0; mode < QCRYPTO_CIPHER_MODE__MAX; mode++) {
            g_array_append_val(modes, mode);
        }
    }

    if (opts.backends) {
        for (char **b = opts.backends; *b; b++) {
            g_autoptr(Error) err = NULL;

            /* Let the cipher layer say whether it knows the name. */
            if (qcrypto_cipher_set_backend(*b, &err) < 0) {
                g_autofree char *list = g_strjoinv(", ", (char **)usable);
                bad_option("--backend: %s (this CPU has: auto, %s)",
                           error_get_pretty(err), list);
            }
            g_ptr_array_add(backends, *b);
        }
        qcrypto_cipher_set_backend("auto", NULL);
    } else {
        for (size_t i = 0; usable[i]; i++) {
            g_ptr_array_add(backends, (char *)usable[i]);
        }
    }

    /*
     * Sizes in whole 16-byte blocks: every block length we have (8, 16)
     * divides them, and XTS ciphertext stealing is not what we measure.
     */
    if (opts.sector_size % 16) {
        bad_option("--sector-size %" G_GUINT64_FORMAT " is not a multiple "
                   "of 16", opts.sector_size);
    }
    if (opts.chunks->len == 0) {
        /* The defaults that hold whole sectors: --sector-size 4096 alone
         * measures 4096, 16384 and 65536. */
        for (size_t i = 0; i < G_N_ELEMENTS(default_chunks); i++) {
            if (!opts.sector_size ||
                default_chunks[i] % opts.sector_size == 0) {
                g_array_append_val(opts.chunks, default_chunks[i]);
            }
        }
        if (opts.chunks->len == 0) {
            bad_option("--sector-size %" G_GUINT64_FORMAT " fits none of "
                       "the default chunks: give --chunk", opts.sector_size);
        }
    }
    for (guint i = 0; i < opts.chunks->len; i++) {
        size_t chunk = g_array_index(opts.chunks, size_t, i);

        if (chunk % 16 || chunk > (1u << 30)) {
            bad_option("--chunk %zu must be a multiple of 16 and at most 1G",
                       chunk);
        }
        if (opts.sector_size && chunk % opts.sector_size) {
            bad_option("--chunk %zu is not a whole number of %" G_GUINT64_FORMAT
                       "-byte sectors", chunk, opts.sector_size);
        }
    }

    if (opts.dir && !g_str_equal(opts.dir, "enc") &&
        !g_str_equal(opts.dir, "dec") && !g_str_equal(opts.dir, "both")) {
        bad_option("--dir must be enc, dec or both, not '%s'", opts.dir);
    }
    if (opts.runs < 1 || opts.runs > 10000) {
        bad_option("--runs must be from 1 to 10000, not %d", opts.runs);
    }
    if (opts.warmup < 0 || opts.warmup > 10000) {
        bad_option("--warmup must be from 0 to 10000, not %d", opts.warmup);
    }
    if (opts.bytes && opts.seconds != 0) {
        bad_option("--bytes and --seconds exclude each other");
    }
    if (opts.seconds < 0 || opts.seconds > 3600 || isnan(opts.seconds)) {
        bad_option("--seconds must be from 0 to 3600, not %g", opts.seconds);
    }
}

static void pin_cpu(int cpu)
{
    cpu_set_t set;

    if (cpu < 0 || cpu >= CPU_SETSIZE) {
        bad_option("--pin %d: no such CPU", cpu);
    }
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) < 0) {
        bad_option("--pin %d: %s", cpu, g_strerror(errno));
    }
}

/* ------------------------------------------------------------------ */
/* Clocks                                                             */

static double clock_seconds(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * TSC frequency for cycles per byte, or 0 when there is no usable TSC.
 *
 * The TSC counts at a constant rate only when CPUID says it is invariant
 * (leaf 0x80000007, EDX bit 8; Intel SDM vol. 3B 18.17.1, AMD APM vol. 2
 * 17.5): otherwise it follows frequency changes and a cycle count means
 * nothing. Its rate then comes from:
 * - CPUID leaf 0x15 when it names both the crystal frequency and the
 *   TSC/crystal ratio (Intel SDM vol. 2A, CPUID leaf 15H): exact by
 *   definition.
 * - Otherwise a calibration against CLOCK_MONOTONIC_RAW over 50 ms. Leaf
 *   0x16's "base frequency" is a rounded marketing figure that can miss
 *   the TSC by a few percent, and AMD CPUs have neither leaf; 50 ms
 *   against the raw monotonic clock is good to about 1e-4.
 * A TSC cycle is a reference cycle, not a core cycle: with turbo the core
 * runs more cycles than this counts. It is still the figure to compare
 * across runs on one machine, and the one `openssl speed` users expect.
 */
static double tsc_hz;
static const char *tsc_source = "none";

static void tsc_init(void)
{
#ifdef HAVE_TSC
    unsigned a, b, c, d;
    double t0, t1;
    uint64_t c0, c1;

    if (__get_cpuid_max(0x80000000, NULL) < 0x80000007) {
        return;
    }
    __cpuid(0x80000007, a, b, c, d);
    if (!(d & (1u << 8))) {
        return;
    }
    if (__get_cpuid_max(0, NULL) >= 0x15) {
        __cpuid(0x15, a, b, c, d);
        if (a && b && c) {
            tsc_hz = (double)c * b / a;
            tsc_source = "CPUID leaf 0x15";
            return;
        }
    }
    t0 = clock_seconds(CLOCK_MONOTONIC_RAW);
    c0 = __rdtsc();
    g_usleep(50000);
    t1 = clock_seconds(CLOCK_MONOTONIC_RAW);
    c1 = __rdtsc();
    if (t1 > t0 && c1 > c0) {
        tsc_hz = (c1 - c0) / (t1 - t0);
        tsc_source = "calibrated against CLOCK_MONOTONIC_RAW";
    }
#endif
}

/* ------------------------------------------------------------------ */
/* Timed loops                                                        */

static int bench_calls(BenchLoop *loop, guint64 ncalls, Error **errp)
{
    size_t nsectors = loop->chunk / loop->sector_size;

    for (guint64 i = 0; i < ncalls; i++) {
        int ret = loop->encrypt ?
            qcrypto_sector_cipher_encrypt(loop->sc, loop->sector, loop->buf,
                                          loop->chunk, errp) :
            qcrypto_sector_cipher_decrypt(loop->sc, loop->sector, loop->buf,
                                          loop->chunk, errp);
        if (ret < 0) {
            return -1;
        }
        loop->sector += nsectors;
    }
    return 0;
}

static int bench_timed_calls(BenchLoop *loop, guint64 ncalls, RunTime *t,
                             Error **errp)
{
    double cpu0 = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
    double wall0 = clock_seconds(CLOCK_MONOTONIC);

    if (bench_calls(loop, ncalls, errp) < 0) {
        return -1;
    }
    t->wall = clock_seconds(CLOCK_MONOTONIC) - wall0;
    t->cpu = clock_seconds(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    t->bytes = ncalls * loop->chunk;
    return 0;
}

/*
 * How many calls take about `seconds` of CPU time: double from one call
 * until a sample takes 1/25 of the target (long enough that the clock's
 * resolution and the first-touch costs are noise), then scale.
 */
static int bench_calibrate(BenchLoop *loop, double seconds, guint64 *ncalls,
                           Error **errp)
{
    RunTime t;
    guint64 n = 1;

    for (;;) {
        if (bench_timed_calls(loop, n, &t, errp) < 0) {
            return -1;
        }
        if (t.cpu >= seconds / 25 || n >= (G_MAXUINT64 >> 2)) {
            break;
        }
        n *= 2;
    }
    *ncalls = MAX(1, (guint64)ceil(n * seconds / MAX(t.cpu, 1e-9)));
    return 0;
}

/*
 * One run of --seconds: batches of about 1 ms (so reading the clock costs
 * nothing next to the work) until the CPU time is spent.
 */
static int bench_timed_seconds(BenchLoop *loop, guint64 batch, double seconds,
                               RunTime *t, Error **errp)
{
    double cpu0 = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
    double wall0 = clock_seconds(CLOCK_MONOTONIC);
    double cpu;
    guint64 calls = 0;

    do {
        if (bench_calls(loop, batch, errp) < 0) {
            return -1;
        }
        calls += batch;
        cpu = clock_seconds(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    } while (cpu < seconds);
    t->wall = clock_seconds(CLOCK_MONOTONIC) - wall0;
    t->cpu = cpu;
    t->bytes = calls * loop->chunk;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Median of n values (sorts them). */
static double median(double *v, guint n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Sample standard deviation over the mean; 0 for a single value. */
static double coef_var(const double *v, guint n)
{
    double sum = 0, sq = 0, mean;

    for (guint i = 0; i < n; i++) {
        sum += v[i];
    }
    mean = sum / n;
    for (guint i = 0; i < n; i++) {
        sq += (v[i] - mean) * (v[i] - mean);
    }
    return n > 1 ? sqrt(sq / (n - 1)) / mean : 0;
}

/* A run's MiB/s of CPU time. */
static double run_mib_s(const RunTime *t)
{
    return t->bytes / MiB / MAX(t->cpu, 1e-9);
}

static void bench_stats(const RunTime *t, guint n, BenchResult *r)
{
    g_autofree double *cpu = g_new(double, n);
    g_autofree double *wall = g_new(double, n);
    guint64 bytes = 0;

    for (guint i = 0; i < n; i++) {
        cpu[i] = run_mib_s(&t[i]);
        wall[i] = t[i].bytes / MiB / MAX(t[i].wall, 1e-9);
        bytes += t[i].bytes;
    }
    r->runs = n;
    r->bytes = bytes / n;
    r->cv = coef_var(cpu, n);
    r->median = median(cpu, n);
    r->min = cpu[0];
    r->max = cpu[n - 1];
    r->wall_median = median(wall, n);
    r->cycles_per_byte = tsc_hz > 0 ? tsc_hz / (r->median * MiB) : -1;
}

/* ------------------------------------------------------------------ */
/* The AES units' limit (--limit)                                     */

/*
 * What this CPU's AES units can give, per vector width: independent
 * chains of AES rounds (VAESENC on zmm and ymm, AESENC on xmm), enough of
 * them that latency never shows, so the count per second is the issue
 * rate of the AES units alone. An AES-N block needs Nr such rounds
 * (Nr - 1 AESENC and one AESENCLAST; the first XOR is not an AES unit
 * operation), so rounds/s x blocks per vector / Nr x 16 bytes is the
 * fastest any mode can run on that width with that key size. Each AES
 * result is then printed as a percentage of the limit of the width its
 * path uses (XTS also spends rounds on its tweaks, 1 block per sector,
 * which this ignores).
 */
#define LIMIT_CHAINS 12         /* > latency x issue rate on current cores */
#define LIMIT_UNROLL 4          /* rounds per chain per loop iteration */
#define LIMIT_RUN_SECONDS 0.05

typedef enum {
    LIMIT_XMM,
    LIMIT_YMM,
    LIMIT_ZMM,
    LIMIT__MAX,
} LimitWidth;

static const struct {
    const char *insn;
    const char *path;           /* the aes-x86 path of this width */
    unsigned blocks;            /* AES blocks per instruction */
} limit_widths[LIMIT__MAX] = {
    [LIMIT_XMM] = { "AESENC xmm", "aesni", 1 },
    [LIMIT_YMM] = { "VAESENC ymm", "vaes-256", 2 },
    [LIMIT_ZMM] = { "VAESENC zmm", "vaes-512", 4 },
};

/* Median AES instructions per second of CPU time; 0: not measured. */
static double limit_rate[LIMIT__MAX];
/* The kernel's loop count for one run of about LIMIT_RUN_SECONDS. */
static uint64_t limit_iters[LIMIT__MAX];

#ifdef HAVE_TSC
/* A sink the compiler cannot prove unused. */
static volatile uint64_t limit_sink;

/*
 * iters x LIMIT_CHAINS x LIMIT_UNROLL rounds; the chains start apart and
 * the key is not a constant, so nothing folds away.
 */
#define LIMIT_KERNEL(name, tgt, VEC, set1, aesenc, lane0)             \
    static __attribute__((target(tgt), noinline))                       \
    void name(uint64_t iters, uint32_t seed)                            \
    {                                                                   \
        VEC x[LIMIT_CHAINS];                                            \
        VEC k = set1(seed);                                             \
        uint64_t acc = 0;                                               \
                                                                        \
        for (int c = 0; c < LIMIT_CHAINS; c++) {                        \
            x[c] = set1(seed + c);                                      \
        }                                                               \
        for (uint64_t i = 0; i < iters; i++) {                          \
            _Pragma("GCC unroll 4")                                     \
            for (int u = 0; u < LIMIT_UNROLL; u++) {                    \
                _Pragma("GCC unroll 12")                                \
                for (int c = 0; c < LIMIT_CHAINS; c++) {                \
                    x[c] = aesenc(x[c], k);                             \
                }                                                       \
            }                                                           \
        }                                                               \
        for (int c = 0; c < LIMIT_CHAINS; c++) {                        \
            acc += (uint64_t)_mm_cvtsi128_si64(lane0(x[c]));            \
        }                                                               \
        limit_sink = acc;                                               \
    }

LIMIT_KERNEL(limit_xmm, "aes,sse2", __m128i, _mm_set1_epi32,
             _mm_aesenc_si128, (__m128i))
LIMIT_KERNEL(limit_ymm, "aes,avx2,vaes", __m256i, _mm256_set1_epi32,
             _mm256_aesenc_epi128, _mm256_castsi256_si128)
LIMIT_KERNEL(limit_zmm, "aes,avx2,vaes,avx512f", __m512i, _mm512_set1_epi32,
             _mm512_aesenc_epi128, _mm512_castsi512_si128)

static void (*const limit_kernels[LIMIT__MAX])(uint64_t, uint32_t) = {
    [LIMIT_XMM] = limit_xmm,
    [LIMIT_YMM] = limit_ymm,
    [LIMIT_ZMM] = limit_zmm,
};

/* Whether the cipher layer lists path (it checks CPUID and XCR0). */
static bool limit_path_usable(const char *path)
{
    const char *const *list = qcrypto_cipher_backend_list();

    for (size_t i = 0; list[i]; i++) {
        if (g_str_equal(list[i], path)) {
            return true;
        }
    }
    return false;
}

/* One run of width w's kernel: rounds per second of CPU time. */
static double limit_sample(LimitWidth w, uint32_t seed)
{
    double t0 = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
    double t;

    limit_kernels[w](limit_iters[w], seed);
    t = clock_seconds(CLOCK_THREAD_CPUTIME_ID) - t0;
    return (double)limit_iters[w] * LIMIT_CHAINS * LIMIT_UNROLL /
        MAX(t, 1e-9);
}

/* Median of --runs timings of about LIMIT_RUN_SECONDS each. */
static double limit_measure(LimitWidth w)
{
    g_autofree double *rate = g_new(double, opts.runs);
    uint64_t iters = 1000;
    double t0, t;

    /* Calibrate: grow the loop until it takes a tenth of a run. */
    for (;;) {
        t0 = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
        limit_kernels[w](iters, 1);
        t = clock_seconds(CLOCK_THREAD_CPUTIME_ID) - t0;
        if (t >= LIMIT_RUN_SECONDS / 10) {
            break;
        }
        iters *= 4;
    }
    limit_iters[w] = MAX(1, iters * (LIMIT_RUN_SECONDS / t));
    for (int i = 0; i < opts.runs; i++) {
        rate[i] = limit_sample(w, i + 2);
    }
    return median(rate, opts.runs);
}
#endif

/* The limit width whose path is impl; -1: none (nettle, say). */
static int limit_width_of(const char *impl)
{
    for (int w = 0; w < LIMIT__MAX; w++) {
        if (g_str_equal(impl, limit_widths[w].path)) {
            return w;
        }
    }
    return -1;
}

/* Measure every width this CPU runs, once. */
static void limit_init(void)
{
#ifdef HAVE_TSC
    for (int w = 0; w < LIMIT__MAX; w++) {
        if (limit_path_usable(limit_widths[w].path)) {
            limit_rate[w] = limit_measure(w);
        }
    }
#endif
}

static unsigned aes_rounds(QCryptoCipherAlgo alg)
{
    switch (alg) {
    case QCRYPTO_CIPHER_ALGO_AES_128:
        return 10;
    case QCRYPTO_CIPHER_ALGO_AES_192:
        return 12;
    case QCRYPTO_CIPHER_ALGO_AES_256:
        return 14;
    default:
        return 0;
    }
}

/* MiB/s of AES-alg that rate rounds/s on width w allow; 0: not AES. */
static double rounds_mib_s(double rate, LimitWidth w, QCryptoCipherAlgo alg)
{
    unsigned nr = aes_rounds(alg);

    return nr ? rate * limit_widths[w].blocks * 16 / nr / MiB : 0;
}

/* MiB/s of AES-alg at the limit of width w; 0: no such figure. */
static double limit_mib_s(LimitWidth w, QCryptoCipherAlgo alg)
{
    return rounds_mib_s(limit_rate[w], w, alg);
}

/*
 * The result as a percentage of its width's limit; < 0 when there is none
 * (not AES, or a path of unknown width: nettle's is its own business).
 */
static double limit_percent(const BenchResult *r)
{
    int w = limit_width_of(r->impl);
    double lim;

    if (r->paired_pct >= 0) {
        return r->paired_pct;
    }
    lim = w >= 0 ? limit_mib_s(w, r->cfg.alg) : 0;
    return lim > 0 ? 100 * r->median / lim : -1;
}

static void print_limit(void)
{
    static const QCryptoCipherAlgo algs[] = {
        QCRYPTO_CIPHER_ALGO_AES_128, QCRYPTO_CIPHER_ALGO_AES_192,
        QCRYPTO_CIPHER_ALGO_AES_256,
    };

    if (!opts.json) {
        printf("# AES units' limit: independent rounds per second of CPU "
               "time (median of %d runs),\n# and the MiB/s they allow per "
               "key size\n", opts.runs);
        printf("%-12s %-9s %12s %10s %10s %10s\n", "instruction", "path",
               "rounds/s", "aes-128", "aes-192", "aes-256");
    }
    for (int w = 0; w < LIMIT__MAX; w++) {
        if (!limit_rate[w]) {
            continue;
        }
        if (opts.json) {
            printf("{\"kind\":\"aes-limit\",\"instruction\":\"%s\","
                   "\"path\":\"%s\",\"rounds_per_s\":%.4g",
                   limit_widths[w].insn, limit_widths[w].path,
                   limit_rate[w]);
            for (size_t a = 0; a < G_N_ELEMENTS(algs); a++) {
                printf(",\"aes_%u_mib_s\":%.1f", 128 + 64 * (unsigned)a,
                       limit_mib_s(w, algs[a]));
            }
            printf("}\n");
        } else {
            printf("%-12s %-9s %12.4g", limit_widths[w].insn,
                   limit_widths[w].path, limit_rate[w]);
            for (size_t a = 0; a < G_N_ELEMENTS(algs); a++) {
                printf(" %10.1f", limit_mib_s(w, algs[a]));
            }
            printf("\n");
        }
    }
    if (!opts.json) {
        printf("\n");
    }
    fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* One configuration                                                  */

static void fill_pattern(uint8_t *buf, size_t len, uint8_t seed)
{
    for (size_t i = 0; i < len; i++) {
        buf[i] = (uint8_t)(i * 131 + seed);
    }
}

/*
 * A sector cipher for cfg with plain64 IVs (NULL with errp set if the
 * backend cannot run it), as the LUKS driver builds one.
 * The key is a fixed pattern whose XTS halves differ: some XTS code
 * refuses equal halves (IEEE 1619-2018 5.1 / FIPS 140 IG A.9).
 */
static QCryptoSectorCipher *bench_cipher_new(const BenchConfig *cfg,
                                             size_t sector_size, Error **errp)
{
    QCryptoSectorCipherSpec spec = {
        .alg = cfg->alg,
        .mode = cfg->mode,
        .ivgen = QCRYPTO_IVGEN_ALGO_PLAIN64,
    };
    size_t nkey = qcrypto_cipher_get_mode_key_len(cfg->alg, cfg->mode);
    g_autofree uint8_t *key = g_malloc(nkey);

    fill_pattern(key, nkey, 7);
    if (qcrypto_cipher_set_backend(cfg->backend, errp) < 0) {
        return NULL;
    }
    return qcrypto_sector_cipher_new(&spec, key, nkey, sector_size, 0, 0,
                                     errp);
}

/*
 * Before timing anything, check that decrypt(encrypt(x)) == x and that
 * encryption changed x: a broken backend must not post a fast number.
 */
static int bench_roundtrip(BenchLoop *loop, Error **errp)
{
    g_autofree uint8_t *orig = g_malloc(loop->chunk);
    bool was_encrypt = loop->encrypt;
    uint64_t sector = loop->sector;
    int ret = -1;

    memcpy(orig, loop->buf, loop->chunk);
    loop->encrypt = true;
    if (bench_calls(loop, 1, errp) < 0) {
        goto out;
    }
    if (memcmp(orig, loop->buf, loop->chunk) == 0) {
        error_setg(errp, "encryption left the data unchanged");
        goto out;
    }
    loop->sector = sector;
    loop->encrypt = false;
    if (bench_calls(loop, 1, errp) < 0) {
        goto out;
    }
    if (memcmp(orig, loop->buf, loop->chunk) != 0) {
        error_setg(errp, "decryption did not give the plaintext back");
        goto out;
    }
    ret = 0;
out:
    loop->encrypt = was_encrypt;
    loop->sector = sector;
    return ret;
}

/*
 * --limit pairs every timed run of an AES configuration with the limit
 * of its path's width measured right before and right after it (one
 * kernel run each, about LIMIT_RUN_SECONDS): the line's lim% is then the
 * median of the runs' own percentages. On a shared host whose load
 * changes from second to second, the limit measured once at the start
 * can be off for a line measured minutes later (percentages above 100
 * were seen); a run and the samples beside it see the same host.
 */
static bool bench_paired_limit(int w, QCryptoCipherAlgo alg)
{
#ifdef HAVE_TSC
    return opts.limit && aes_rounds(alg) && w >= 0 && limit_iters[w];
#else
    return false;
#endif
}

/* MiB/s of AES-alg that one limit sample of width w allows. */
static double bench_limit_sample(int w, QCryptoCipherAlgo alg,
                                 uint32_t seed)
{
#ifdef HAVE_TSC
    return rounds_mib_s(limit_sample(w, seed), w, alg);
#else
    return 0;
#endif
}

/* The paired percentages (lim: MiB/s per run, or NULL: none). */
static void bench_paired_stats(const RunTime *t, const double *lim, guint n,
                               BenchResult *r)
{
    g_autofree double *pct = g_new(double, n);

    r->paired_pct = -1;
    r->paired_cv = 0;
    if (!lim) {
        return;
    }
    for (guint i = 0; i < n; i++) {
        pct[i] = 100 * run_mib_s(&t[i]) / MAX(lim[i], 1e-9);
    }
    r->paired_cv = coef_var(pct, n);
    r->paired_pct = median(pct, n);
}

static int bench_one(const BenchConfig *cfg, BenchResult *r, Error **errp)
{
    g_autoptr(QCryptoSectorCipher) sc = NULL;
    g_autofree RunTime *times = g_new0(RunTime, opts.runs);
    g_autofree uint8_t *raw = NULL;
    BenchLoop loop = {
        .chunk = cfg->chunk,
        .sector_size = cfg->sector_size,
        .encrypt = cfg->encrypt,
    };
    g_autofree double *lim = g_new0(double, opts.runs);
    guint64 ncalls = 0, batch = 0;
    double before = 0;
    bool paired;
    int w;
    RunTime t;

    sc = bench_cipher_new(cfg, cfg->sector_size, errp);
    if (!sc) {
        return -1;
    }
    /* Cache-line aligned, as a block layer buffer would be. */
    raw = g_malloc(cfg->chunk + 63);
    loop.buf = (uint8_t *)(((uintptr_t)raw + 63) & ~(uintptr_t)63);
    fill_pattern(loop.buf, cfg->chunk, 42);
    loop.sc = sc;
    if (bench_roundtrip(&loop, errp) < 0) {
        return -1;
    }

    if (opts.bytes) {
        ncalls = MAX(1, (opts.bytes + cfg->chunk - 1) / cfg->chunk);
    } else if (opts.seconds > 0) {
        if (bench_calibrate(&loop, 0.001, &batch, errp) < 0) {
            return -1;
        }
    } else if (bench_calibrate(&loop, DEFAULT_RUN_SECONDS, &ncalls,
                               errp) < 0) {
        return -1;
    }

    r->impl = qcrypto_sector_cipher_get_impl_name(sc);
    w = limit_width_of(r->impl);
    paired = bench_paired_limit(w, cfg->alg);
    for (int i = 0; i < opts.warmup + opts.runs; i++) {
        int ret;

        if (paired && i == opts.warmup) {
            before = bench_limit_sample(w, cfg->alg, i);
        }
        ret = batch ?
            bench_timed_seconds(&loop, batch, opts.seconds, &t, errp) :
            bench_timed_calls(&loop, ncalls, &t, errp);
        if (ret < 0) {
            return -1;
        }
        if (i >= opts.warmup) {
            times[i - opts.warmup] = t;
        }
        if (paired && i >= opts.warmup) {
            double after = bench_limit_sample(w, cfg->alg, i + 1);

            lim[i - opts.warmup] = (before + after) / 2;
            before = after;
        }
    }

    r->cfg = *cfg;
    bench_stats(times, opts.runs, r);
    bench_paired_stats(times, paired ? lim : NULL, opts.runs, r);
    /* Leave the default in place for whoever comes next. */
    qcrypto_cipher_set_backend("auto", NULL);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Output                                                             */

static void print_header(guint nconfigs)
{
    double per = opts.bytes ? 0 :
        (opts.seconds > 0 ? opts.seconds : DEFAULT_RUN_SECONDS) *
        (opts.runs + opts.warmup + 0.1);

    printf("# MiB/s of thread CPU time (CLOCK_THREAD_CPUTIME_ID): median, "
           "min and max of %d runs, cv = stddev/mean\n", opts.runs);
    printf("# wall = median MiB/s of wall-clock time; cyc/B in TSC cycles");
    if (tsc_hz > 0) {
        printf(" (%.3f GHz, %s)\n", tsc_hz / 1e9, tsc_source);
    } else {
        printf(" (no usable TSC)\n");
    }
    if (per > 0) {
        double total = nconfigs * per;

        printf("# %u configurations, about %.0f %s\n", nconfigs,
               total < 120 ? ceil(total) : ceil(total / 60),
               total < 120 ? "seconds" : "minutes");
    }
    printf("# lim%% = MiB/s as a percentage of the AES units' limit on "
           "the path's vector width (--limit)\n");
    printf("%-9s %-9s %-12s %-4s %6s %6s %-3s %9s %9s %9s %6s %9s %6s %5s\n",
           "backend", "impl", "algorithm", "mode", "chunk", "sector", "dir",
           "MiB/s", "min", "max", "cv%", "wall", "cyc/B", "lim%");
    fflush(stdout);
}

static void print_result(const BenchResult *r)
{
    const BenchConfig *c = &r->cfg;
    /* A paired lim% that moves from run to run is as little to trust. */
    bool noisy = r->cv > NOISY_CV || r->paired_cv > NOISY_CV;
    double lim = limit_percent(r);

    if (opts.json) {
        printf("{\"kind\":\"cipher\",\"backend\":\"%s\",\"impl\":\"%s\","
               "\"alg\":\"%s\",\"mode\":\"%s\",\"chunk\":%zu,"
               "\"sector_size\":%zu,\"dir\":\"%s\",\"mib_s\":%.1f,"
               "\"min\":%.1f,\"max\":%.1f,\"cv\":%.4f,\"runs\":%u,"
               "\"bytes\":%" G_GUINT64_FORMAT ",\"wall_mib_s\":%.1f,",
               c->backend, r->impl, qcrypto_cipher_algo_name(c->alg),
               qcrypto_cipher_mode_name(c->mode), c->chunk, c->sector_size,
               c->encrypt ? "enc" : "dec", r->median, r->min, r->max, r->cv,
               r->runs, r->bytes, r->wall_median);
        if (r->cycles_per_byte >= 0) {
            printf("\"cycles_per_byte\":%.3f,", r->cycles_per_byte);
        } else {
            printf("\"cycles_per_byte\":null,");
        }
        if (lim >= 0) {
            printf("\"limit_pct\":%.1f,\"limit_paired\":%s,", lim,
                   r->paired_pct >= 0 ? "true" : "false");
        } else {
            printf("\"limit_pct\":null,");
        }
        printf("\"noisy\":%s}\n", noisy ? "true" : "false");
    } else {
        printf("%-9s %-9s %-12s %-4s %6zu %6zu %-3s %9.1f %9.1f %9.1f %6.2f "
               "%9.1f ", c->backend, r->impl,
               qcrypto_cipher_algo_name(c->alg),
               qcrypto_cipher_mode_name(c->mode), c->chunk, c->sector_size,
               c->encrypt ? "enc" : "dec", r->median, r->min, r->max,
               r->cv * 100, r->wall_median);
        if (r->cycles_per_byte >= 0) {
            printf("%6.2f", r->cycles_per_byte);
        } else {
            printf("%6s", "-");
        }
        if (lim >= 0) {
            printf(" %5.1f", lim);
        } else {
            printf(" %5s", "-");
        }
        printf("%s\n", noisy ? "  noisy" : "");
    }
    fflush(stdout);
}

/* "aes-256" -> "aes", "3des" -> "3des", "cast5-128" -> "cast5" */
static char *algo_family(QCryptoCipherAlgo alg)
{
    const char *name = qcrypto_cipher_algo_name(alg);
    const char *dash = strchr(name, '-');

    return dash ? g_strndup(name, dash - name) : g_strdup(name);
}

static const BenchResult *find_best(const GArray *results, QCryptoCipherAlgo alg,
                                    QCryptoCipherMode mode, size_t chunk,
                                    bool encrypt)
{
    const BenchResult *best = NULL;

    for (guint i = 0; i < results->len; i++) {
        const BenchResult *r = &g_array_index(results, BenchResult, i);

        if (r->cfg.alg == alg && r->cfg.mode == mode &&
            r->cfg.chunk == chunk && r->cfg.encrypt == encrypt &&
            (!best || r->median > best->median)) {
            best = r;
        }
    }
    return best;
}

/*
 * cryptsetup benchmark's table: per algorithm and mode, the fastest
 * backend at the largest chunk measured (cryptsetup also times large
 * buffers), key size as cryptsetup counts it (both XTS halves).
 */
static void print_summary(const GArray *results)
{
    size_t chunk = 0;

    for (guint i = 0; i < results->len; i++) {
        chunk = MAX(chunk, g_array_index(results, BenchResult, i).cfg.chunk);
    }
    printf("\n# Summary: fastest backend at %zu-byte chunks, MiB/s of CPU "
           "time\n", chunk);
    printf("#%14s | %5s | %15s | %15s | %s\n", "Algorithm", "Key",
           "Encryption", "Decryption", "Path");
    for (int mode = 0; mode < QCRYPTO_CIPHER_MODE__MAX; mode++) {
        for (int alg = 0; alg < QCRYPTO_CIPHER_ALGO__MAX; alg++) {
            const BenchResult *e = find_best(results, alg, mode, chunk, true);
            const BenchResult *d = find_best(results, alg, mode, chunk, false);
            g_autofree char *family = algo_family(alg);
            g_autofree char *name = NULL;
            g_autofree char *path = NULL;
            char enc[32] = "-", dec[32] = "-";

            if (!e && !d) {
                continue;
            }
            name = g_strdup_printf("%s-%s", family,
                                   qcrypto_cipher_mode_name(mode));
            if (e) {
                snprintf(enc, sizeof(enc), "%.1f MiB/s", e->median);
            }
            if (d) {
                snprintf(dec, sizeof(dec), "%.1f MiB/s", d->median);
            }
            /* Name what ran; the two directions may differ. */
            if (e && d && !g_str_equal(e->impl, d->impl)) {
                path = g_strdup_printf("%s / %s", e->impl, d->impl);
            } else {
                path = g_strdup((e ? e : d)->impl);
            }
            printf("%15s | %4zub | %15s | %15s | %s\n", name,
                   qcrypto_cipher_get_mode_key_len(alg, mode) * 8, enc, dec,
                   path);
        }
    }
    /* The yardstick every AES figure above is measured against. */
    for (int w = LIMIT__MAX - 1; w >= 0; w--) {
        if (limit_rate[w]) {
            printf("# AES units' limit, %s: %.1f MiB/s AES-128, %.1f MiB/s "
                   "AES-256 (%s)\n", limit_widths[w].path,
                   limit_mib_s(w, QCRYPTO_CIPHER_ALGO_AES_128),
                   limit_mib_s(w, QCRYPTO_CIPHER_ALGO_AES_256),
                   limit_widths[w].insn);
        }
    }
}

/* PBKDF2 iterations per second, as `cryptsetup benchmark` shows them. */
static int print_pbkdf2(Error **errp)
{
    static const uint8_t password[] = "benchmark-crypto-cipher";
    uint8_t salt[32] = { 0 };
    const size_t nout = 32;     /* a 256-bit key, cryptsetup's figure */

    if (!opts.json) {
        printf("\n# PBKDF2, iterations per second of CPU time\n");
    }
    for (int h = 0; h < QCRYPTO_HASH_ALGO__MAX; h++) {
        uint64_t iters;

        if (!qcrypto_pbkdf2_supports(h)) {
            continue;
        }
        iters = qcrypto_pbkdf2_count_iters(h, password, sizeof(password) - 1,
                                           salt, sizeof(salt), nout, errp);
        if (iters == 0) {
            return -1;
        }
        if (opts.json) {
            printf("{\"kind\":\"pbkdf2\",\"hash\":\"%s\",\"key_bits\":%zu,"
                   "\"iterations_per_s\":%" PRIu64 "}\n",
                   qcrypto_hash_algo_name(h), nout * 8, iters);
        } else {
            printf("PBKDF2-%-10s %10" PRIu64 " iterations per second for "
                   "%zu-bit key\n", qcrypto_hash_algo_name(h), iters,
                   nout * 8);
        }
        fflush(stdout);
    }
    return 0;
}

/* ------------------------------------------------------------------ */

/* Every configuration the options ask for and the backends can run. */
static GArray *plan(GArray *algs, GArray *modes, GPtrArray *backends)
{
    GArray *configs = g_array_new(FALSE, TRUE, sizeof(BenchConfig));
    bool enc = !opts.dir || !g_str_equal(opts.dir, "dec");
    bool dec = !opts.dir || !g_str_equal(opts.dir, "enc");

    for (guint b = 0; b < backends->len; b++) {
        for (guint a = 0; a < algs->len; a++) {
            for (guint m = 0; m < modes->len; m++) {
                BenchConfig cfg = {
                    .backend = g_ptr_array_index(backends, b),
                    .alg = g_array_index(algs, int, a),
                    .mode = g_array_index(modes, int, m),
                };
                g_autoptr(Error) err = NULL;
                /* Any sector size the chunks allow will do to probe. */
                g_autoptr(QCryptoSectorCipher) probe =
                    bench_cipher_new(&cfg, 16, &err);

                qcrypto_cipher_set_backend("auto", NULL);
                if (!probe) {
                    /*
                     * Say why when the user narrowed the choice; in a full
                     * run, that the AES paths skip Serpent is no news.
                     */
                    if (opts.algs || opts.modes || opts.backends) {
                        fprintf(stderr, "skipped: %s\n",
                                error_get_pretty(err));
                    }
                    continue;
                }
                for (guint c = 0; c < opts.chunks->len; c++) {
                    cfg.chunk = g_array_index(opts.chunks, size_t, c);
                    cfg.sector_size = opts.sector_size ? opts.sector_size :
                        cfg.chunk;
                    if (enc) {
                        cfg.encrypt = true;
                        g_array_append_val(configs, cfg);
                    }
                    if (dec) {
                        cfg.encrypt = false;
                        g_array_append_val(configs, cfg);
                    }
                }
            }
        }
    }
    return configs;
}

int main(int argc, char **argv)
{
    g_autoptr(GOptionContext) context = NULL;
    g_autoptr(GError) gerr = NULL;
    g_autoptr(GArray) algs = g_array_new(FALSE, FALSE, sizeof(int));
    g_autoptr(GArray) modes = g_array_new(FALSE, FALSE, sizeof(int));
    g_autoptr(GPtrArray) backends = g_ptr_array_new();
    g_autoptr(GArray) configs = NULL;
    g_autoptr(GArray) results = NULL;
    bool everything;

    opts.chunks = g_array_new(FALSE, FALSE, sizeof(size_t));
    context = g_option_context_new("- cipher throughput, repeatably");
    g_option_context_set_summary(context,
        "Measures every algorithm x mode x chunk x backend asked for and "
        "ends\nwith a cryptsetup-benchmark-style table. See "
        "docs/benchmarking.md.");
    g_option_context_add_main_entries(context, option_entries, NULL);
    if (!g_option_context_parse(context, &argc, &argv, &gerr)) {
        bad_option("%s", gerr->message);
    }
    if (argc > 1) {
        bad_option("unexpected argument '%s'", argv[1]);
    }
    check_options(algs, modes, backends);
    if (opts.pin >= 0) {
        pin_cpu(opts.pin);
    } else if (opts.pin != -1) {
        bad_option("--pin %d: no such CPU", opts.pin);
    }
    everything = !opts.algs && !opts.modes;

    tsc_init();
    if (opts.limit && !opts.algs && !opts.modes) {
        limit_init();
        print_limit();
        return 0;
    }
    configs = plan(algs, modes, backends);
    for (guint i = 0; i < configs->len; i++) {
        /* Any AES configuration gets its percentage of the limit. */
        if (aes_rounds(g_array_index(configs, BenchConfig, i).alg)) {
            limit_init();
            break;
        }
    }
    if (opts.limit) {
        print_limit();
    }
    if (configs->len == 0) {
        bad_option("nothing to measure: no backend asked for runs the "
                   "algorithms and modes asked for");
    }
    if (!opts.json) {
        print_header(configs->len);
    }

    results = g_array_new(FALSE, TRUE, sizeof(BenchResult));
    for (guint i = 0; i < configs->len; i++) {
        const BenchConfig *cfg = &g_array_index(configs, BenchConfig, i);
        g_autoptr(Error) err = NULL;
        BenchResult r;

        if (bench_one(cfg, &r, &err) < 0) {
            fprintf(stderr, "benchmark-crypto-cipher: %s %s-%s %s: %s\n",
                    cfg->backend, qcrypto_cipher_algo_name(cfg->alg),
                    qcrypto_cipher_mode_name(cfg->mode),
                    cfg->encrypt ? "enc" : "dec", error_get_pretty(err));
            return 1;
        }
        print_result(&r);
        g_array_append_val(results, r);
    }

    if (!opts.json) {
        print_summary(results);
    }
    if (everything) {
        g_autoptr(Error) err = NULL;

        if (print_pbkdf2(&err) < 0) {
            fprintf(stderr, "benchmark-crypto-cipher: PBKDF2: %s\n",
                    error_get_pretty(err));
            return 1;
        }
    }
    g_array_unref(opts.chunks);
    g_strfreev(opts.algs);
    g_strfreev(opts.modes);
    g_strfreev(opts.backends);
    g_free(opts.dir);
    return 0;
}
