#!/usr/bin/env bash
# Time converting a raw file in the page cache to LUKS (aes-256-xts-plain64)
# and back, with qemu-img-lite and with qemu-img 7.2, against cp of the same
# file. Each is run RUNS times; the best (least disturbed) run counts.
#
#   scripts/bench-convert.sh [BUILD] [SIZE_MIB] [RUNS]
#
# Needs about 4 x SIZE of free disk (and as much RAM for the page cache).
# PBKDF2 is kept at iter-time=10 for both tools so the data path is timed,
# not the key slot.
set -euo pipefail

BUILD=${1:-build}
SIZE_MIB=${2:-1024}
RUNS=${3:-3}
QIL=$(realpath "$BUILD/qemu-img-lite/qemu-img-lite")
DIR=$(mktemp -d "${BENCH_DIR:-/var/tmp}/qil-bench.XXXXXX")
trap 'rm -rf "$DIR"' EXIT
cd "$DIR"

SECRET="secret,id=s0,data=benchmark passphrase"
OPTS="key-secret=s0,iter-time=10"
LUKS_OPEN="driver=luks,key-secret=s0,file.filename="

head -c "${SIZE_MIB}M" /dev/urandom > src.raw
cat src.raw > /dev/null                 # into the page cache

# best OUT CMD...: run CMD RUNS times (successful runs only: qemu-img's
# PBKDF2 calibration fails now and then under load), removing OUT before
# each; print the fastest time in seconds.
best() {
    local out=$1; shift
    local t min= ok=0 tries=0
    while [ "$ok" -lt "$RUNS" ] && [ "$tries" -lt $((RUNS * 4)) ]; do
        tries=$((tries + 1))
        [ "$out" = none ] || rm -f "$out"
        sync
        if ! /usr/bin/time -o time.txt -f %e "$@" >/dev/null 2>&1; then
            continue
        fi
        t=$(tail -n 1 time.txt)
        ok=$((ok + 1))
        if [ -z "$min" ] || awk "BEGIN{exit !($t < $min)}"; then
            min=$t
        fi
    done
    echo "${min:-failed}"
}

echo "load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs," \
     "${SIZE_MIB} MiB, best of $RUNS"
echo "cipher backend: ${QCRYPTO_CIPHER_BACKEND:-auto}"

t_cp=$(best cp.raw cp src.raw cp.raw)
echo "cp                          ${t_cp} s"

# qemu-img-lite (the last run's output is kept: decrypt it, check it)
t_qil_enc=$(best qil.luks "$QIL" convert --object "$SECRET" -f raw -O luks \
            -o "$OPTS" src.raw qil.luks)
t_qil_dec=$(best qil.raw "$QIL" convert --object "$SECRET" --image-opts \
            "${LUKS_OPEN}qil.luks" -O raw qil.raw)
cmp src.raw qil.raw
# The data path alone: into the existing image (-n), no PBKDF2 calibration
t_qil_encn=$(best none "$QIL" convert -n --object "$SECRET" -f raw \
             --target-image-opts src.raw "${LUKS_OPEN}qil.luks")
echo "qemu-img-lite raw -> luks   ${t_qil_enc} s  (-n into it: ${t_qil_encn} s)"
echo "qemu-img-lite luks -> raw   ${t_qil_dec} s"
rm -f qil.raw cp.raw

if command -v qemu-img >/dev/null; then
    t_q_enc=$(best q.luks qemu-img convert --object "$SECRET" -f raw \
              -O luks -o "$OPTS" src.raw q.luks)
    # its last attempt may have failed (calibration): make sure of q.luks
    until [ -s q.luks ] && qemu-img info q.luks >/dev/null 2>&1; do
        rm -f q.luks
        qemu-img convert --object "$SECRET" -f raw -O luks -o "$OPTS" \
            src.raw q.luks 2>/dev/null || true
    done
    t_q_dec=$(best q.raw qemu-img convert --object "$SECRET" --image-opts \
              "${LUKS_OPEN}q.luks" -O raw q.raw)
    cmp src.raw q.raw
    t_q_encn=$(best none qemu-img convert -n --object "$SECRET" -f raw \
               --target-image-opts src.raw "${LUKS_OPEN}q.luks")
    echo "qemu-img raw -> luks        ${t_q_enc} s  (-n into it: ${t_q_encn} s)"
    echo "qemu-img luks -> raw        ${t_q_dec} s"
    awk -v a="$t_q_enc" -v b="$t_qil_enc" -v c="$t_q_dec" -v d="$t_qil_dec" \
        'BEGIN { printf "speed-up vs qemu-img: %.1fx encrypt, %.1fx decrypt\n",
                 a / b, c / d }'
fi
awk -v a="$t_qil_enc" -v b="$t_qil_dec" -v c="$t_cp" -v d="$t_qil_encn" \
    'BEGIN { printf "time vs cp: %.2fx encrypt (%.2fx with -n), %.2fx decrypt\n",
             a / c, d / c, b / c }'
