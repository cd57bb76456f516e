#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# make fuzz: build the libFuzzer targets and run each for a while.
#
#   tests/fuzz/run-fuzz.sh BUILD-DIR SECONDS [TARGET...]
#
# BUILD-DIR is a -Dfuzzing=true build (clang). The targets are the
# directories of tests/fuzz/corpus/ unless named. Each runs for SECONDS
# on its committed seeds and past crashes (corpus/<t>, regress/<t>), which
# it only reads: what it finds new goes to $FUZZ_WORK/corpus/<t>
# (default BUILD-DIR/fuzz-work), a crash, leak or hang to
# $FUZZ_WORK/artifacts/<t>/, the log to $FUZZ_WORK/<t>.log. Extra
# libFuzzer options can be given in FUZZ_ARGS.
#
# Exits non-zero if any target found something; the closing lines give
# each target's executions and coverage (libFuzzer's cov and ft).
set -u

src=$(cd "$(dirname "$0")" && pwd)
build=$1
seconds=$2
shift 2
work=${FUZZ_WORK:-$build/fuzz-work}

if [ $# -eq 0 ]; then
    for d in "$src"/corpus/*/; do
        set -- "$@" "$(basename "$d")"
    done
fi

targets=
for t in "$@"; do
    targets="$targets tests/fuzz/$t"
done
# shellcheck disable=SC2086
ninja -C "$build" $targets || exit 1

status=0
summary=
for t in "$@"; do
    mkdir -p "$work/corpus/$t" "$work/artifacts/$t" "$src/regress/$t"
    # fuzz-luks2-open.dict, else the family's fuzz-luks2.dict
    dict=
    for d in "$src/$t.dict" "$src/${t%-*}.dict"; do
        if [ -f "$d" ]; then
            dict="-dict=$d"
            break
        fi
    done
    # libFuzzer cuts inputs to 1 MiB unless told: a target whose seeds
    # are larger (LUKS1 images with 8 key slots of AES-XTS key material)
    # gets its largest seed's size.
    maxlen=$(find "$src/corpus/$t" "$src/regress/$t" -type f -printf '%s\n' |
             sort -n | tail -n 1)
    lenopt=
    if [ "${maxlen:-0}" -gt 1048576 ]; then
        lenopt="-max_len=$maxlen"
    fi
    echo "== $t: ${seconds}s, log in $work/$t.log"
    # -timeout: one input running this long is a hang (the format's own
    # limits keep a valid open well under it). Leaks are reported
    # (ASan's detect_leaks, libFuzzer's -detect_leaks default).
    # shellcheck disable=SC2086
    "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=25 \
        -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$work/artifacts/$t/" $dict $lenopt ${FUZZ_ARGS:-} \
        "$work/corpus/$t" "$src/corpus/$t" "$src/regress/$t" \
        > "$work/$t.log" 2>&1
    rc=$?
    last=$(grep -E '^#[0-9]+' "$work/$t.log" | tail -n 1)
    cov=$(echo "$last" | sed -n 's/.*\(cov: [0-9]*\).*\(ft: [0-9]*\).*/\1 \2/p')
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log")
    if [ $rc -ne 0 ]; then
        status=1
        echo "!! $t FAILED (exit $rc): see $work/$t.log and" \
             "$work/artifacts/$t/; once fixed, keep the input in" \
             "tests/fuzz/regress/$t/"
        grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' \
             "$work/$t.log" | head -n 5
    fi
    summary="$summary
$t: ${execs:-?} executions, ${cov:-no coverage line}, exit $rc"
done
echo "== fuzzing summary (${seconds}s per target):$summary"
exit $status
