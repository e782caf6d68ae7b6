#!/usr/bin/env bash
# (hostile review of 5e928cc, helper) A root daemon records its mount's identity by opening the mount point's
# path again right after fuse_session_mount. A process that can rename a folder on that path
# (the user owning it) swaps it with a symlink meanwhile (renameat2 RENAME_EXCHANGE in a loop):
# the mount lands on one folder and the identity is taken from another, e.g. the filesystem that
# holds the mount point. On SIGTERM the daemon then pokes that other mount (its own loop is never
# woken: it ignores SIGTERM until some request comes) and detaches it with root's rights.
# Expected: only the daemon's own mount is ever unmounted; SIGTERM ends the daemon.
# Racy: up to $PG_RACE_TRIES tries (default 20); typically hits within 10.
PG_PRIVATE_MOUNTS=1
source "$(dirname "$0")/lib.sh"
need_fuse
command -v python3 >/dev/null || skip "python3 is missing"
pg=$PHOTOGATE_BIN
mkdir -p "$tmp/race"
one_photo_library "$tmp" org.example.A
cat >"$tmp/xchg.py" <<'PY'
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = sys.argv[1].encode(), sys.argv[2].encode()
libc.syscall(316, -100, a, -100, b, 2); open(sys.argv[3], "w").close()   # renameat2(RENAME_EXCHANGE), x86_64
import time
deadline = time.monotonic() + 20   # never spins on if the test is gone
while time.monotonic() < deadline: libc.syscall(316, -100, a, -100, b, 2)
PY
R=$tmp/race
on_exit "for m in \$(awk '\$5 ~ /photogate-mount-identity-race/ {print \$5}' /proc/self/mountinfo | sort -r); do umount -l \"\$m\"; done"
restore() { if [[ -L $R/d ]]; then mv "$R/d" "$R/t"; mv "$R/s" "$R/d"; mv "$R/t" "$R/s"; fi; }
for try in $(seq "${PG_RACE_TRIES:-20}"); do
    mountpoint -q "$R" || mount -t tmpfs pgrace "$R"
    mkdir -p "$R/d/view" "$R/victim/view"; [[ -e $R/s ]] || ln -s "$R/victim" "$R/s"
    restore
    mountpoint -q "$R/victim/view" || mount -t tmpfs pgvictim "$R/victim/view"
    rm -f "$tmp/ready"; python3 "$tmp/xchg.py" "$R/d" "$R/s" "$tmp/ready" & x=$!
    wait_until 10 test -e "$tmp/ready" || fail "the swapper did not start"
    "$pg" mount org.example.A "$R/d/view" >/dev/null 2>&1 || true
    kill -9 "$x"; wait "$x" 2>/dev/null || true   # -9: a test runner may leave SIGTERM ignored
    restore
    grep -q " photogate:org.example.A " /proc/self/mountinfo || continue
    daemon=$(pgrep -f "mount org.example.A $R/d/view" | head -1)
    before=$(awk '$9 ~ /^pg(race|victim)$/ {print $1}' /proc/self/mountinfo | sort | tr '\n' ' ')
    kill -TERM "$daemon"
    gone() { ! kill -0 "$daemon" 2>/dev/null; }
    if ! wait_until 5 gone; then
        where=$(awk '/ photogate:org.example.A / {print $5; exit}' /proc/self/mountinfo)
        say "try $try: the daemon ignored SIGTERM for 5 s (its wake-up went to another mount); waking it with a statfs of $where"
        stat -f "$where" >/dev/null 2>&1 || true
        wait_until 5 gone || fail "the daemon does not end"
        hung=1
    fi
    after=$(awk '$9 ~ /^pg(race|victim)$/ {print $1}' /proc/self/mountinfo | sort | tr '\n' ' ')
    [[ $before == "$after" ]] || fail "try $try: the daemon's end unmounted other mounts (ids before: $before; after: $after)"
    [[ -z ${hung:-} ]] || fail "try $try: SIGTERM did not end the daemon"
    for m in $(awk '/ photogate:org.example.A / {print $5}' /proc/self/mountinfo); do umount -l "$m"; done
done
say "ok (no hit in ${PG_RACE_TRIES:-20} tries)"
