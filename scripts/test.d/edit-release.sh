#!/usr/bin/env bash
# An app at its mount's write limit closes an edit unchanged and opens another: the kernel sends
# the first edit's release after close(2) has returned, and another daemon thread may serve the
# open first. That open failed with EDQUOT (seen in CI, ResourceTests' editOpensCount...). Here
# an LD_PRELOAD shim in the daemon holds that release until the open has been answered (or 2 s):
# the open must wait for the release and succeed. An edit the app still holds is no reason to
# wait: an open past the limit then fails at once.
source "$(dirname "$0")/lib.sh"
need_fuse
shim=$(build_shim hold-release)
pg=$PHOTOGATE_BIN
d=$tmp/lib
app=org.example.EditRelease
padded_edit_library "$d" "$app" 3
on_exit "force_unmount '$d/mnt'"
on_exit "'$pg' unmount '$d/mnt' >/dev/null 2>&1"
# Two edits of just over 1 MiB fit in 3 MiB, three do not.
PHOTOGATE_WRITE_LIMIT_MB=3 RT_ARM="$d/arm" RT_LOG="$d/shim.log" LD_PRELOAD="$shim" \
    "$pg" mount "$app" "$d/mnt" >/dev/null || fail "mount"
out=$(python3 - "$d/mnt" "$d/arm" <<'PY'
import errno, os, sys
mp, arm = sys.argv[1], sys.argv[2]
def edit(n):
    try: return os.open(f"{mp}/{n}", os.O_RDWR)
    except OSError as e: return -e.errno
a, b = edit("p0.jpg"), edit("p1.jpg")
assert a >= 0 and b >= 0, f"two edits within the limit: {a} {b}"
third = edit("p2.jpg")
print("held past the limit:", "EDQUOT" if third == -errno.EDQUOT else third)
open(arm, "w").close()
os.close(a)
c = edit("p2.jpg")
print("after a close:", "opened" if c >= 0 else os.strerror(-c))
PY
) || fail "python: $out"
say "$(tr '\n' ';' <<<"$out") shim: $(tr '\n' ';' <"$d/shim.log" 2>/dev/null)"
has "held past the limit: EDQUOT" "$out" || fail "an edit open past the limit, the others held, was not refused: $out"
has "release held" "$(cat "$d/shim.log" 2>/dev/null)" || fail "the shim held no release (it cannot test the order): $(cat "$d/shim.log" 2>/dev/null)"
has "after a close: opened" "$out" || fail "an edit open after another was closed unchanged failed while that close's release was not yet served: $out"
say ok
