#!/usr/bin/env bash
# What FUSE over io_uring would give the open path (findings-readpath.md, "FUSE over io_uring").
# Not part of scripts/bench: photogate's libfuse (3.17) has no io_uring, so this measures
# libfuse's own example/passthrough_hp, built from a libfuse that has it (>= 3.18, with
# liburing), over /dev/fuse and over io_uring, against native, in rotating rounds:
# open+read+close of 1,000 files of ~100 KB, warm.
#
#   uring-probe.sh /path/to/libfuse/build/example/passthrough_hp [rounds]
#
# Needs root: it sets /sys/module/fuse/parameters/enable_uring for the io_uring variants and
# puts the old value back on exit. Each mount is unmounted on exit, even on failure.
set -euo pipefail
hp=${1:?usage: uring-probe.sh PASSTHROUGH_HP [ROUNDS]}
rounds=${2:-7}
param=/sys/module/fuse/parameters/enable_uring
[[ -w $param ]] || { echo "uring-probe: $param is missing or not writable (a kernel with FUSE io_uring, as root)" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/uring-probe.XXXXXX)
old=$(cat "$param")
cleanup() {
    echo "$old" >"$param"
    grep -q " $work/m " /proc/mounts && fusermount3 -u -z "$work/m"
    rm -rf "$work"
}
trap cleanup EXIT
cc -O2 -o "$work/pgbench" "$here/pgbench.c"
mkdir -p "$work/src" "$work/m"
python3 - "$work/src" <<'EOF'
import os, random, sys
random.seed(18)
for i in range(1000):
    with open(f"{sys.argv[1]}/f{i:04}.jpg", "wb") as f:
        f.write(os.urandom(random.randint(90_000, 110_000)))
EOF
(cd "$work/src" && ls) | sed "s|^|$work/src/|" >"$work/native.list"
sed "s|$work/src/|$work/m/|" "$work/native.list" >"$work/mount.list"

# One timing: the median of 3 warm passes (after one pass that warms the caches).
time_list() {
    "$work/pgbench" orc "$1" >/dev/null
    for _ in 1 2 3; do "$work/pgbench" orc "$1"; done |
        sed -n 's/^seconds=\([0-9.]*\).*/\1/p' | sort -n | sed -n 2p
}
one() {
    local v=$1 opts=()
    if [[ $v == native ]]; then time_list "$work/native.list"; return; fi
    case $v in
        *uring) echo Y >"$param"; opts+=(-o io_uring); export FUSE_URING_ENABLE=1 ;;
        *) echo N >"$param"; unset FUSE_URING_ENABLE ;;
    esac
    [[ $v == nopt* ]] && opts+=(--nopassthrough)
    "$hp" --foreground "${opts[@]}" "$work/src" "$work/m" 2>>"$work/daemon.log" &
    local pid=$! i
    for ((i = 0; i < 200; i++)); do grep -q " $work/m " /proc/mounts && break; sleep 0.02; done
    grep -q " $work/m " /proc/mounts || { echo "uring-probe: $v did not mount" >&2; cat "$work/daemon.log" >&2; exit 1; }
    time_list "$work/mount.list"
    fusermount3 -u "$work/m"
    wait "$pid"
}
variants=(native pt-devfuse nopt-devfuse pt-uring nopt-uring)
echo "seconds per 1,000 warm open+read+close of ~100 KB files (median of 3 passes), rounds in rotating order"
for ((r = 0; r < rounds; r++)); do
    line="round $r:"
    for ((k = 0; k < ${#variants[@]}; k++)); do
        v=${variants[$(((k + r) % ${#variants[@]}))]}
        line+=" $v=$(one "$v")"
    done
    echo "$line"
done
