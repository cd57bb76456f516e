#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# Smoke test of the cipher benchmark (make check): it runs, --json gives one
# object per configuration and direction with the documented keys, and bad
# options exit with status 2. Timing is not judged here: see make bench.
#
# Usage: bench-smoke.sh path/to/benchmark-crypto-cipher
set -u
bench=$1
tiny="--alg aes-128 --mode xts --chunk 512 --bytes 65536 --runs 2 --warmup 0"
fail=0

say() { echo "$*" >&2; }

# --json: two lines (enc, dec) per backend, each one object with every key.
out=$("$bench" $tiny --json) || { say "FAIL: --json run exited $?"; exit 1; }
lines=$(printf '%s\n' "$out" | wc -l)
if [ "$lines" -lt 2 ] || [ $((lines % 2)) -ne 0 ]; then
    say "FAIL: --json gave $lines lines, expected 2 per backend:"
    say "$out"; fail=1
fi
for key in backend impl alg mode chunk sector_size dir mib_s min max cv \
           runs bytes limit_pct; do
    n=$(printf '%s\n' "$out" | grep -c "\"$key\":")
    if [ "$n" -ne "$lines" ]; then
        say "FAIL: key \"$key\" missing from some --json line"; fail=1
    fi
done
if printf '%s\n' "$out" | grep -v '^{.*}$' >/dev/null; then
    say "FAIL: a --json line is not one object:"; say "$out"; fail=1
fi
printf '%s\n' "$out" | grep -q '"dir":"enc"' || { say "FAIL: no enc"; fail=1; }
printf '%s\n' "$out" | grep -q '"dir":"dec"' || { say "FAIL: no dec"; fail=1; }
printf '%s\n' "$out" | grep -q '"bytes":65536,' || { say "FAIL: bytes"; fail=1; }

# Sectors smaller than the chunk, --seconds, and --pin on the first CPU
# we may run on.
cpu=$(taskset -pc $$ 2>/dev/null | sed 's/.*: *//; s/[-,].*//')
"$bench" --alg aes-256 --mode cbc --chunk 4096 --sector-size 512 \
    --seconds 0.01 --runs 2 --warmup 0 --dir dec ${cpu:+--pin $cpu} \
    >/dev/null || { say "FAIL: --sector-size/--seconds run exited $?"; fail=1; }

# --limit alone: the AES units' limit table and nothing else; every width
# it lists has a positive rate (none on a CPU without AES-NI).
out=$("$bench" --limit --runs 2) || { say "FAIL: --limit exited $?"; fail=1; }
printf '%s\n' "$out" | grep -q '^instruction  *path  *rounds/s' ||
    { say "FAIL: --limit printed no table:"; say "$out"; fail=1; }
if printf '%s\n' "$out" | grep -q 'xts\|MiB/s of thread CPU'; then
    say "FAIL: --limit alone measured ciphers too"; fail=1
fi
if printf '%s\n' "$out" | awk '/AESENC/ && !($3 > 0) { bad = 1 } END { exit !bad }'; then
    say "FAIL: --limit: a width without a positive rate:"; say "$out"; fail=1
fi

# With --limit, an AES line on a path with a limit gets its lim% from
# limit samples paired with its runs ("limit_paired":true); without, from
# the limit measured at the start (false). A path without one: null.
out=$("$bench" $tiny --limit --json) || { say "FAIL: --limit --json exited $?"; fail=1; }
if printf '%s\n' "$out" | grep '"kind":"cipher"' |
       grep '"limit_pct":[0-9]' | grep -qv '"limit_paired":true'; then
    say "FAIL: --limit: a lim% not paired with its runs:"; say "$out"; fail=1
fi
out=$("$bench" $tiny --json) || fail=1
if printf '%s\n' "$out" | grep '"limit_pct":[0-9]' |
       grep -qv '"limit_paired":false'; then
    say "FAIL: a lim% paired without --limit:"; say "$out"; fail=1
fi

# Each bad option: status 2 and a message.
bad() {
    msg=$("$bench" "$@" 2>&1 >/dev/null)
    rc=$?
    if [ $rc -ne 2 ] || [ -z "$msg" ]; then
        say "FAIL: '$*' exited $rc (want 2) with message '$msg'"; fail=1
    fi
}
bad --frobnicate
bad --alg rot13
bad --mode ofb
bad --chunk 100
bad --chunk 0
bad --chunk 4096 --sector-size 1000
bad --chunk 4096 --sector-size 3072
bad --dir sideways
bad --runs 0
bad --warmup -1
bad --bytes 4096 --seconds 1
bad --bytes lots
bad --alg 3des --mode xts
bad --backend no-such-backend
bad --pin 100000
bad stray-argument
exit $fail
