#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-or-later
# Time serving an image over NBD: nbdcopy from an export to a local file,
# the export being
#   - qemu-nbd-lite serving a LUKS2 image (ours),
#   - qemu-nbd serving the same data as LUKS1 (qemu-nbd has no LUKS2),
#   - nbdkit's file plugin serving the plain raw file (no decryption: the
#     limit of this path),
# each with one connection (-e 1, qemu-nbd's default) and with multi-conn
# (-e 8; nbdkit's file plugin always offers it), over a unix socket; and
# `dd bs=256K` of the raw file as the yardstick of a user-space copy. Then
# the server's peak memory (VmHWM) with 8 nbdcopy clients at once.
#
#   scripts/bench-nbd-server.sh [BUILD] [SIZE_MIB] [RUNS]
#
# Environment: BENCH_DIR (default /var/tmp; run it again with /dev/shm for
# tmpfs). Needs 4 x SIZE free there. Each figure is the minimum of RUNS
# runs with a sync before each (scripts/bench-lib.sh).
set -euo pipefail
source "$(dirname "$0")/bench-lib.sh"

BUILD=${1:-build}
SIZE_MIB=${2:-1024}
RUNS=${3:-5}
QIL=$(realpath "$BUILD/qemu-img-lite/qemu-img-lite")
QNL=$(realpath "$BUILD/qemu-nbd-lite/qemu-nbd-lite")
DIR=$(mktemp -d "${BENCH_DIR:-/var/tmp}/bench-nbd.XXXXXX")
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT

for t in nbdcopy nbdkit qemu-nbd qemu-img; do
    command -v "$t" >/dev/null || { echo "needs $t" >&2; exit 1; }
done

SECRET="secret,id=s0,data=benchmark passphrase"
RAW=$DIR/plain.raw
head -c $((SIZE_MIB << 20)) /dev/urandom > "$RAW"
"$QIL" convert --object "$SECRET" -f raw -O luks \
    -o key-secret=s0,luks-version=2,kdf=pbkdf2,iter-time=10 "$RAW" "$DIR/l2.luks"
retry qemu-img convert --object "$SECRET" -f raw -O luks \
    -o key-secret=s0,iter-time=10 "$RAW" "$DIR/l1.luks"
OUT=$DIR/out.raw

# serve NAME CMD...: start a server on $DIR/NAME.sock, wait for it.
serve() {
    local sock=$DIR/$1.sock; shift
    rm -f "$sock"
    "$@" &
    PIDS+=($!)
    for _ in $(seq 200); do [ -S "$sock" ] && return 0; sleep 0.05; done
    echo "server $1 did not start" >&2; exit 1
}
stop() { kill "${PIDS[-1]}"; wait "${PIDS[-1]}" 2>/dev/null || true; unset 'PIDS[-1]'; }
uri() { echo "nbd+unix:///?socket=$DIR/$1.sock"; }

luks_opts() { echo "driver=luks,key-secret=s0,file.filename=$1"; }

echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) CPUs"
echo "# $SIZE_MIB MiB, minimum of $RUNS runs, in $(df -T "$DIR" | awk 'NR==2 {print $2}') $DIR"
DD=$(best "$OUT" dd if="$RAW" of="$OUT" bs=256K)
printf '%-40s %7.3f s\n' "dd bs=256K (raw file)" "$DD"

declare -A T
for e in 1 8; do
    serve qnl "$QNL" -t -e $e -k "$DIR/qnl.sock" --object "$SECRET" \
        --image-opts "$(luks_opts "$DIR/l2.luks")"
    T[ours$e]=$(best "$OUT" nbdcopy "$(uri qnl)" "$OUT")
    stop
    serve qemu "qemu-nbd" -t -e $e -k "$DIR/qemu.sock" --object "$SECRET" \
        --image-opts "$(luks_opts "$DIR/l1.luks")"
    T[qemu$e]=$(best "$OUT" nbdcopy "$(uri qemu)" "$OUT")
    stop
done
serve kit nbdkit -f -U "$DIR/kit.sock" file "$RAW"
T[kit]=$(best "$OUT" nbdcopy "$(uri kit)" "$OUT")
stop
cmp "$RAW" "$OUT"

for e in 1 8; do
    printf '%-40s %7.3f s   qemu-nbd LUKS1 %7.3f s (%.2fx ours)\n' \
        "qemu-nbd-lite LUKS2 -e $e" "${T[ours$e]}" "${T[qemu$e]}" \
        "$(awk "BEGIN{print ${T[qemu$e]} / ${T[ours$e]}}")"
done
printf '%-40s %7.3f s   ours -e 8 / it: %.2fx\n' "nbdkit file plugin (raw)" \
    "${T[kit]}" "$(awk "BEGIN{print ${T[ours8]} / ${T[kit]}}")"

# Peak memory of the server with 8 clients copying at once (each with
# nbdcopy's 4 connections: -e 0, no limit).
serve qnl "$QNL" -t -e 0 -k "$DIR/qnl.sock" --object "$SECRET" \
    --image-opts "$(luks_opts "$DIR/l2.luks")"
pids=()
for i in $(seq 8); do
    nbdcopy "$(uri qnl)" null: & pids+=($!)
done
wait "${pids[@]}"
server=$(pgrep -n -f "nbdkit.*$DIR/qnl.sock")
printf '%-40s %s\n' "server peak RSS, 8 clients" \
    "$(awk '/VmHWM/ {print $2, $3}' /proc/"$server"/status) (32 connections)"
stop
