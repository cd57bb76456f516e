#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# AES-XTS against the AES units' limit (issue 25), the way docs/aes.md
# measures it: the vaes-512 path's two XTS loops (the template's,
# "generic", which Intel runs, and the assembly one, "zen", which AMD
# runs) side by side in interleaved rounds, one sector per call, AES-128
# and AES-256, encryption and decryption; each figure is the median of
# the rounds' medians (CPU-bound: medians, not minimums), in MiB/s and as
# a percentage of the limit, which `--limit` measures right before and
# after each run (the percentage is the run's own, then the median).
#
#   scripts/bench-aes-xts.sh [BUILD] [ROUNDS] [CHUNKS]
#
# CHUNKS defaults to "512 4096 65536". The issue's targets: 4 KiB >= 90%
# and 64 KiB >= 97% of the limit, on the loop this CPU runs. The first
# lines name the CPU (vendor, family, model): put them in every note.
# Run it on a quiet machine; `nice -n -19` is used when allowed.
#
# On a CPU without AVX-512 (no vaes-512 path) it measures the best path
# there is, once per round, with no loop to compare.
set -euo pipefail

BUILD=${1:-build}
ROUNDS=${2:-3}
CHUNKS=${3:-"512 4096 65536"}
BENCH=$BUILD/tests/benchmark-crypto-cipher
[ -x "$BENCH" ] || { echo "no $BENCH: build first (make)" >&2; exit 1; }

cpu_field() {
    awk -F': *' -v k="$1" '$1 ~ "^" k "[ \t]*$" { print $2; exit }' /proc/cpuinfo
}
echo "# CPU: $(cpu_field 'model name'), vendor $(cpu_field vendor_id)," \
     "family $(cpu_field 'cpu family'), model $(cpu_field model)," \
     "$(nproc) CPUs"

NICE=()
if nice -n -19 true 2>/dev/null; then
    NICE=(nice -n -19)
fi

args=()
for c in $CHUNKS; do
    args+=(-c "$c")
done

# --limit alone lists the paths this CPU has, with their limits.
echo "# the limit: instruction, path, rounds/s, MiB/s for AES-128, -192, -256"
limits=$("$BENCH" --limit 2>/dev/null | grep -E '^(AESENC|VAESENC)')
while IFS= read -r line; do
    echo "# $line"
done <<<"$limits"
if echo "$limits" | grep -qw vaes-512; then
    PATH_NAME=vaes-512
    LOOPS="generic zen"
else
    PATH_NAME=auto
    LOOPS=auto
fi

raw=$(mktemp)
trap 'rm -f "$raw"' EXIT

for r in $(seq "$ROUNDS"); do
    for key in aes-128 aes-256; do
        for loop in $LOOPS; do
            env_loop=()
            [ "$loop" = auto ] || env_loop=(env QCRYPTO_AES_XTS_LOOP="$loop")
            # Lines: path impl algorithm mode chunk sector dir MiB/s min
            # max cv% wall cyc/B lim% [noisy]: lim% is field 14, paired
            # with the line's runs (--limit, docs/benchmarking.md).
            "${env_loop[@]}" "${NICE[@]}" "$BENCH" -a "$key" -m xts \
                "${args[@]}" -b "$PATH_NAME" -r 5 --limit 2>/dev/null |
                awk -v loop="$loop" -v key="$key" '
                    $4 == "xts" && $7 ~ /^(enc|dec)$/ {
                        print key, loop, $5, $7, $8, $14
                    }' >>"$raw"
        done
    done
    echo "# round $r of $ROUNDS done" >&2
done

# key loop chunk dir MiB/s lim% -> one row per key and chunk.
sort -k1,1 -k3,3n -k2,2 -k4,4 "$raw" | awk -v loops="$LOOPS" '
    function median(list,    n, a, i, j, t) {
        n = split(list, a, " ")
        for (i = 2; i <= n; i++)
            for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
                t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
            }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    {
        k = $1 SUBSEP $3
        if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
        mib[k, $2, $4] = mib[k, $2, $4] " " $5
        lim[k, $2, $4] = lim[k, $2, $4] " " $6
    }
    END {
        nl = split(loops, L, " ")
        printf "| XTS, one sector per call |"
        for (i = 1; i <= nl; i++) printf " %s: dec / enc MiB/s (%% of limit) |", L[i]
        printf "\n| --- |"
        for (i = 1; i <= nl; i++) printf " ---: |"
        printf "\n"
        for (o = 1; o <= nk; o++) {
            split(order[o], kc, SUBSEP)
            printf "| %s, %s B |", kc[1], kc[2]
            for (i = 1; i <= nl; i++) {
                printf " %.0f / %.0f (%.1f / %.1f%%) |",
                    median(mib[order[o], L[i], "dec"]),
                    median(mib[order[o], L[i], "enc"]),
                    median(lim[order[o], L[i], "dec"]),
                    median(lim[order[o], L[i], "enc"])
            }
            printf "\n"
        }
    }'
echo "# medians of $ROUNDS interleaved rounds (each round: median of 5 runs);" \
     "targets: 4096 B >= 90%, 65536 B >= 97%"
