#!/bin/bash
# Two photogate binaries alternated on one machine, for a change to the write path: `cp` of
# PHOTOS photos (2-4 MB, real random content) into a fresh add-only mount, by one `cp` and by 8 at
# once, ROUNDS rounds, each round every binary once. Prints each binary's times, medians, and the
# median per-round ratio (old time / new time: above 1, the new binary is faster).
#
#   scripts/bench.d/ab-writes.sh OLD_BINARY NEW_BINARY [ROUNDS=6] [PHOTOS=200]
#
# AB_APPS=K: the library knows K other apps (limited, read-write) and an authorized viewer, as the
# bench's main library does by its write rows (13 apps): a commit's per-app work shows. Each
# binary's closes are traced (PHOTOGATE_TRACE_CLOSES) and the mean of each phase printed.
#
# Needs fusermount3 and cc (pgbench.c generates the photos). Work folder: $AB_DIR or a new one
# under /tmp, removed after unless AB_KEEP=1. Mounts are unmounted on exit, also on failure.
set -euo pipefail
old=$(readlink -f "$1"); new=$(readlink -f "$2"); rounds=${3:-6}; photos=${4:-200}
here=$(cd "$(dirname "$0")" && pwd)
work=${AB_DIR:-$(mktemp -d /tmp/photogate-ab.XXXXXX)}
mnt="$work/mnt"
cleanup() {
    fusermount3 -u "$mnt" 2>/dev/null || true
    [ "${AB_KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/real" "$mnt"
cc -O2 -o "$work/pgbench" "$here/pgbench.c"
"$work/pgbench" gen-photos "$work/real" "$photos" 2000000 4000000 "$here/../demo-photos/beach.jpg" 3 >/dev/null
ls "$work"/real/*.jpg > "$work/all.list"
cat "$work"/real/*.jpg > /dev/null

# One measurement: a fresh library and add-only mount, then `cp` by WRITERS processes.
measure() {
    local pg=$1 writers=$2
    fusermount3 -u "$mnt" 2>/dev/null || true
    rm -rf "$work/lib"
    "$pg" init --library "$work/lib" >/dev/null
    "$pg" authorize --library "$work/lib" org.bench.Camera --access add-only --status authorized >/dev/null
    if [ "${AB_APPS:-0}" -gt 0 ]; then
        for ((a = 0; a < AB_APPS; a++)); do
            "$pg" authorize --library "$work/lib" "org.bench.Other$a" --access read-write --status limited >/dev/null
        done
        "$pg" authorize --library "$work/lib" org.bench.Viewer --access read-write --status authorized >/dev/null
    fi
    PHOTOGATE_TRACE_CLOSES="$work/trace.$3.$writers" "$pg" mount org.bench.Camera "$mnt" --access add-only --library "$work/lib" >/dev/null
    sync
    local s e
    s=$(date +%s.%N)
    for ((i = 0; i < writers; i++)); do
        awk -v i="$i" -v n="$writers" 'NR % n == i' "$work/all.list" | xargs -d '\n' cp --sparse=never -t "$mnt" &
    done
    wait
    e=$(date +%s.%N)
    "$pg" unmount "$mnt" --library "$work/lib" >/dev/null 2>&1 || fusermount3 -u "$mnt"
    echo "$e - $s" | bc
}

out="$work/ab.out"
: > "$out"
for ((r = 1; r <= rounds; r++)); do
    for writers in 1 8; do
        # Rotating order: the old binary first in odd rounds, the new one in even rounds.
        if ((r % 2)); then order="old new"; else order="new old"; fi
        for v in $order; do
            pg=$old; [ "$v" = new ] && pg=$new
            echo "$writers $v $r $(measure "$pg" "$writers" "$v")" >> "$out"
        done
    done
done
python3 - "$out" "$photos" "$work" "$here" <<'EOF'
import collections, os, statistics, sys
sys.path.insert(0, sys.argv[4])
from closetrace import phase_means
d = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    w, v, r, t = line.split()
    d[(w, v)][int(r)] = float(t)
for w in ("1", "8"):
    o, n = d[(w, "old")], d[(w, "new")]
    ratios = [o[r] / n[r] for r in sorted(o) if r in n]
    print(f"cp of {sys.argv[2]} photos, {w} writer{'s' if w != '1' else ''}: "
          f"old median {statistics.median(o.values()):.3f} s {[round(o[r], 2) for r in sorted(o)]}, "
          f"new median {statistics.median(n.values()):.3f} s {[round(n[r], 2) for r in sorted(n)]}, "
          f"old/new round by round {statistics.median(ratios):.2f}")
    for v in ("old", "new"):
        # Every round's closes of this binary: the mean of each phase, in the order they come.
        closes, means = phase_means(os.path.join(sys.argv[3], f"trace.{v}.{w}"))
        if closes:
            print(f"  {v}, {closes} closes (ms): " + " ".join(f"{k} {ms:.2f}" for k, ms in means)
                  + f", in all {sum(ms for _, ms in means):.2f}")
EOF
