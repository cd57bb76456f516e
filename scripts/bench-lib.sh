# SPDX-License-Identifier: GPL-2.0-or-later
# Timing helpers shared by the convert benchmarks (sourced, not run).
# The caller sets RUNS. The noise on a shared machine only ever adds time,
# so each figure is the minimum of RUNS successful runs.

# best OUT CMD...: run CMD RUNS times (successful runs only: qemu-img's
# PBKDF2 calibration fails now and then under load), removing OUT (unless
# "none") and syncing before each; print the fastest time in seconds.
best() {
    local out=$1; shift
    local t start end min='' ok=0 tries=0
    while [ "$ok" -lt "$RUNS" ] && [ "$tries" -lt $((RUNS * 4)) ]; do
        tries=$((tries + 1))
        [ "$out" = none ] || rm -f "$out"
        sync
        start=$(date +%s%N)
        if ! "$@" >/dev/null 2>&1; then
            continue
        fi
        end=$(date +%s%N)
        t=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
        ok=$((ok + 1))
        if [ -z "$min" ] || awk "BEGIN{exit !($t < $min)}"; then
            min=$t
        fi
    done
    echo "${min:-failed}"
}

# retry CMD...: run a set-up command up to 5 times. qemu-img's LUKS
# create calibrates PBKDF2 by CPU time and fails with "Unable to get
# accurate CPU usage" when its first round measures 0 ms, which a fast CPU
# does about one time in three; that is qemu-img's flaw, not a result.
retry() {
    local i
    for i in 1 2 3 4 5; do
        "$@" && return 0
        echo "retrying: $1 failed ($i of 5)" >&2
    done
    return 1
}

# row NAME TIME DD [QEMU_IMG_TIME]: one line of the table, with ratios.
row() {
    awk -v n="$1" -v t="$2" -v d="$3" -v q="${4:-}" 'BEGIN {
        line = sprintf("%-24s %7.3f s  %5.2fx dd", n, t, t / d)
        if (q != "" && q != "failed")
            line = line sprintf("   qemu-img %7.3f s (%.1fx ours)", q, q / t)
        print line
    }'
}
