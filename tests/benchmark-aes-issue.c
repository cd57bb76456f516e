/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * benchmark-aes-issue: which vector instructions take issue slots from
 * VAESENC zmm on this CPU (docs/aes.md, "what binds zmm XTS").
 *
 * Eight independent VAESENC zmm chains, enough to hide the instruction's
 * latency, run alone and then with a few independent instructions of
 * one kind beside every eight rounds (the instructions an XTS tweak step
 * could be made of). An instruction that runs on a pipe the AES rounds do
 * not need costs nothing; one that shares the AES pipes slows the rounds.
 * The answer decides how the XTS loop of crypto/aes-x86/ advances its
 * tweaks on each microarchitecture.
 *
 * Each line: AES rounds per ns of thread CPU time (median of --runs), and
 * the cost of the extra instructions in AES rounds each (0: free; 1: each
 * takes the slot of one VAESENC zmm). Exit 2 on a CPU without VAES and
 * AVX-512 (nothing to measure).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <glib.h>

#if defined(__x86_64__)
#include <cpuid.h>

/* Loop iterations per run: about 0.1 s at 1 round per ns. */
#define ISSUE_ITERS 12000000L

#define AES8                                        \
    "vaesenc %%zmm31, %%zmm0, %%zmm0\n\t"           \
    "vaesenc %%zmm31, %%zmm1, %%zmm1\n\t"           \
    "vaesenc %%zmm31, %%zmm2, %%zmm2\n\t"           \
    "vaesenc %%zmm31, %%zmm3, %%zmm3\n\t"           \
    "vaesenc %%zmm31, %%zmm4, %%zmm4\n\t"           \
    "vaesenc %%zmm31, %%zmm5, %%zmm5\n\t"           \
    "vaesenc %%zmm31, %%zmm6, %%zmm6\n\t"           \
    "vaesenc %%zmm31, %%zmm7, %%zmm7\n\t"
#define X2(s) s s
#define X4(s) X2(s) X2(s)

/*
 * One kernel per mix: the extra instructions write registers nothing
 * reads (zmm9..zmm15), from inputs that never change, so they depend on
 * nothing and nothing depends on them.
 */
#define ISSUE_KERNEL(fn, extra)                                         \
    static __attribute__((noinline)) void fn(long iters)                \
    {                                                                   \
        for (long i = 0; i < iters; i++) {                              \
            __asm__ volatile(AES8 extra ::: "xmm0", "xmm1", "xmm2",     \
                             "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",    \
                             "xmm9", "xmm10", "xmm11", "xmm12",         \
                             "xmm13", "xmm14", "xmm15");                \
        }                                                               \
    }

ISSUE_KERNEL(k_none, "")
ISSUE_KERNEL(k_clmul_zmm, X2("vpclmulqdq $0, %%zmm30, %%zmm8, %%zmm9\n\t"))
ISSUE_KERNEL(k_clmul_ymm, X2("vpclmulqdq $0, %%ymm30, %%ymm8, %%ymm9\n\t"))
ISSUE_KERNEL(k_bsll4, X4("vpslldq $4, %%zmm8, %%zmm9\n\t"))
ISSUE_KERNEL(k_bsll6, X2("vpslldq $4, %%zmm8, %%zmm9\n\t"
                          "vpslldq $4, %%zmm8, %%zmm10\n\t"
                          "vpslldq $4, %%zmm8, %%zmm11\n\t"))
ISSUE_KERNEL(k_bsll8, X4(X2("vpslldq $4, %%zmm8, %%zmm9\n\t")))
ISSUE_KERNEL(k_sllq8, X4(X2("vpsllq $4, %%zmm8, %%zmm9\n\t")))
ISSUE_KERNEL(k_sllq12, X4("vpsllq $4, %%zmm8, %%zmm9\n\t"
                          "vpsllq $4, %%zmm8, %%zmm10\n\t"
                          "vpsllq $4, %%zmm8, %%zmm11\n\t"))
ISSUE_KERNEL(k_shufd8, X4(X2("vpshufd $0x4e, %%zmm8, %%zmm9\n\t")))
ISSUE_KERNEL(k_shufb4, X4("vpshufb %%zmm30, %%zmm8, %%zmm9\n\t"))
/* VPTERNLOGQ also reads its destination: eight of them, no chain. */
ISSUE_KERNEL(k_tern4, "vpternlogq $0x96, %%zmm30, %%zmm8, %%zmm9\n\t"
                      "vpternlogq $0x96, %%zmm30, %%zmm8, %%zmm10\n\t"
                      "vpternlogq $0x96, %%zmm30, %%zmm8, %%zmm11\n\t"
                      "vpternlogq $0x96, %%zmm30, %%zmm8, %%zmm12\n\t")
ISSUE_KERNEL(k_tern8, "vpternlogq $0x96, %%zmm30, %%zmm8, %%zmm9\n\t"
                      "vpternlogq $0x96, %%zmm30, %%zmm8, %%zmm10\n\t"
                      "vpternlogq $0x96, %%zmm30, %%zmm8, %%zmm11\n\t"
                      "vpternlogq $0x96, %%zmm30, %%zmm8, %%zmm12\n\t"
                      "vpternlogq $0x96, %%zmm30, %%zmm8, %%zmm13\n\t"
                      "vpternlogq $0x96, %%zmm30, %%zmm8, %%zmm14\n\t"
                      "vpternlogq $0x96, %%zmm30, %%zmm8, %%zmm15\n\t"
                      "vpternlogq $0x96, %%zmm30, %%zmm8, %%zmm9\n\t")
ISSUE_KERNEL(k_xor8, X4(X2("vpxorq %%zmm30, %%zmm8, %%zmm9\n\t")))
ISSUE_KERNEL(k_sllq8_tern4, "vpsllq $4, %%zmm8, %%zmm9\n\t"
                            "vpsllq $4, %%zmm8, %%zmm10\n\t"
                            "vpternlogq $0x96, %%zmm30, %%zmm8, %%zmm11\n\t"
                            "vpsllq $4, %%zmm8, %%zmm9\n\t"
                            "vpsllq $4, %%zmm8, %%zmm10\n\t"
                            "vpternlogq $0x96, %%zmm30, %%zmm8, %%zmm12\n\t"
                            "vpsllq $4, %%zmm8, %%zmm9\n\t"
                            "vpsllq $4, %%zmm8, %%zmm10\n\t"
                            "vpternlogq $0x96, %%zmm30, %%zmm8, %%zmm13\n\t"
                            "vpsllq $4, %%zmm8, %%zmm9\n\t"
                            "vpsllq $4, %%zmm8, %%zmm10\n\t"
                            "vpternlogq $0x96, %%zmm30, %%zmm8, %%zmm14\n\t")
ISSUE_KERNEL(k_add8, X4(X2("vpaddq %%zmm30, %%zmm8, %%zmm9\n\t")))
ISSUE_KERNEL(k_and8, X4(X2("vpandq %%zmm30, %%zmm8, %%zmm9\n\t")))
ISSUE_KERNEL(k_muludq4, X4("vpmuludq %%zmm30, %%zmm8, %%zmm9\n\t"))
ISSUE_KERNEL(k_sllq4, X4("vpsllq $4, %%zmm8, %%zmm9\n\t"))
ISSUE_KERNEL(k_sllq6, X2("vpsllq $4, %%zmm8, %%zmm9\n\t"
                          "vpsllq $4, %%zmm8, %%zmm10\n\t"
                          "vpsllq $4, %%zmm8, %%zmm11\n\t"))
ISSUE_KERNEL(k_gf2p8affine4, X4("vgf2p8affineqb $0, %%zmm30, %%zmm8, %%zmm9\n\t"))
ISSUE_KERNEL(k_pmullq4, X4("vpmullq %%zmm30, %%zmm8, %%zmm9\n\t"))
ISSUE_KERNEL(k_pshldq4, X4("vpshldq $4, %%zmm30, %%zmm8, %%zmm9\n\t"))

typedef struct IssueMix {
    const char *name;
    unsigned extra;             /* extra instructions per eight rounds */
    void (*fn)(long iters);
    const char *feature;        /* a CPU feature it needs beyond VAES-512 */
} IssueMix;

static const IssueMix issue_mixes[] = {
    { "VAESENC zmm alone", 0, k_none, NULL },
    { "+2 VPCLMULQDQ zmm", 2, k_clmul_zmm, NULL },
    { "+2 VPCLMULQDQ ymm", 2, k_clmul_ymm, NULL },
    { "+4 VPSLLDQ zmm (byte shift)", 4, k_bsll4, NULL },
    { "+6 VPSLLDQ zmm", 6, k_bsll6, NULL },
    { "+8 VPSLLDQ zmm", 8, k_bsll8, NULL },
    { "+4 VPSLLQ zmm (qword shift)", 4, k_sllq4, NULL },
    { "+6 VPSLLQ zmm", 6, k_sllq6, NULL },
    { "+8 VPSLLQ zmm", 8, k_sllq8, NULL },
    { "+12 VPSLLQ zmm", 12, k_sllq12, NULL },
    { "+8 VPSHUFD zmm", 8, k_shufd8, NULL },
    { "+4 VPSHUFB zmm", 4, k_shufb4, NULL },
    { "+4 VPTERNLOGQ zmm", 4, k_tern4, NULL },
    { "+8 VPTERNLOGQ zmm", 8, k_tern8, NULL },
    { "+8 VPXORQ zmm", 8, k_xor8, NULL },
    { "+8 VPSLLQ +4 VPTERNLOGQ zmm", 12, k_sllq8_tern4, NULL },
    { "+8 VPADDQ zmm", 8, k_add8, NULL },
    { "+8 VPANDQ zmm", 8, k_and8, NULL },
    { "+4 VPMULUDQ zmm", 4, k_muludq4, NULL },
    { "+4 VGF2P8AFFINEQB zmm", 4, k_gf2p8affine4, "gfni" },
    { "+4 VPMULLQ zmm", 4, k_pmullq4, "avx512dq" },
    { "+4 VPSHLDQ zmm", 4, k_pshldq4, "avx512vbmi2" },
};

static bool cpu_has(const char *feature)
{
    unsigned a, b, c, d;

    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        return false;
    }
    if (!feature) {
        /* VAES and the AVX-512 foundation, as the vaes-512 path needs. */
        return (c & bit_VAES) && (c & bit_VPCLMULQDQ) &&
            (b & bit_AVX512F) && (b & bit_AVX512BW);
    }
    if (g_str_equal(feature, "gfni")) {
        return c & bit_GFNI;
    }
    if (g_str_equal(feature, "avx512dq")) {
        return b & bit_AVX512DQ;
    }
    return c & bit_AVX512VBMI2;
}

/*
 * zmm31 (the round key), zmm30 and zmm8 (the inputs of the extra
 * instructions), set once: no compiled code of this program touches
 * zmm16-31 or (after this) zmm8.
 */
static __attribute__((noinline, target("avx512f"))) void issue_set_inputs(void)
{
    __asm__ volatile("vpternlogq $0xff, %%zmm31, %%zmm31, %%zmm31\n\t"
                     "vpxord %%zmm30, %%zmm30, %%zmm30\n\t"
                     "vpxord %%zmm8, %%zmm8, %%zmm8\n\t"
                     ::: "xmm8", "xmm30", "xmm31");
}

static double thread_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Median AES rounds per ns of thread CPU time over runs runs. */
static double issue_rate(const IssueMix *m, int runs)
{
    double rate[64];

    m->fn(ISSUE_ITERS / 10);                /* warm up, page in */
    for (int r = 0; r < runs; r++) {
        double t0 = thread_seconds();

        m->fn(ISSUE_ITERS);
        rate[r] = 8.0 * ISSUE_ITERS / ((thread_seconds() - t0) * 1e9);
    }
    qsort(rate, runs, sizeof(rate[0]), cmp_double);
    return rate[runs / 2];
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 5;
    double base;

    if (runs < 1 || runs > 64) {
        fprintf(stderr, "usage: %s [RUNS (1-64, default 5)]\n", argv[0]);
        return 2;
    }
    if (!cpu_has(NULL)) {
        fprintf(stderr, "%s: this CPU has no VAES with AVX-512: nothing to "
                "measure\n", argv[0]);
        return 2;
    }
    issue_set_inputs();
    base = issue_rate(&issue_mixes[0], runs);
    printf("%-32s %12s %22s\n", "mix (per 8 VAESENC zmm)", "rounds/ns",
           "cost (rounds each)");
    for (size_t i = 0; i < G_N_ELEMENTS(issue_mixes); i++) {
        const IssueMix *m = &issue_mixes[i];
        double rate, cost;

        if (m->feature && !cpu_has(m->feature)) {
            printf("%-32s %12s\n", m->name, "(no CPU support)");
            continue;
        }
        rate = i ? issue_rate(m, runs) : base;
        /* Extra time per iteration, in units of one round at base rate. */
        cost = m->extra ? (8.0 / rate - 8.0 / base) * base / m->extra : 0;
        printf("%-32s %12.3f %22.2f\n", m->name, rate, cost);
    }
    return 0;
}

#else
int main(void)
{
    fprintf(stderr, "benchmark-aes-issue: x86-64 only\n");
    return 2;
}
#endif
