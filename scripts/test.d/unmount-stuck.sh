#!/usr/bin/env bash
# `photogate unmount` of a view whose daemon does not end (issue 34): it waited its 10 s, then
# said "unmounted" and exited 0 while the daemon still ran, so a script went on (moved the library,
# backed it up) while files closed through the view could still be committing. Now it exits 69
# and names the daemon, and says it is stopped when it is. Here the daemon is stopped (SIGSTOP)
# before the unmount, which the kernel completes without it; then it is let go and must end.
source "$(dirname "$0")/lib.sh"
need_fuse
pg=$PHOTOGATE_BIN
export PHOTOGATE_LIBRARY="$tmp/library"
"$pg" init >/dev/null
"$pg" authorize org.example.Stuck --access read-write --status authorized >/dev/null
mkdir -p "$tmp/m"
on_exit "force_unmount '$tmp/m'"
"$pg" mount org.example.Stuck "$tmp/m" >/dev/null
pid=$("$pg" mounts --json | python3 -c 'import json, sys; print(next(m["pid"] for m in json.load(sys.stdin) if m["mountpoint"] == sys.argv[1]))' "$tmp/m")
[[ $pid =~ ^[0-9]+$ ]] || fail "no daemon pid for $tmp/m"
# Whatever happens below, the daemon is let go (and ends: its mount is gone or goes).
on_exit "kill -CONT $pid"
kill -STOP "$pid"
wait_until 10 grep -q '^State:.*stopped' "/proc/$pid/status" || fail "the daemon did not stop"
set +e; err=$("$pg" unmount "$tmp/m" 2>&1 >/dev/null); status=$?; set -e
[[ $status == 69 ]] || fail "unmount with its daemon stopped: exit $status, not 69 ($err)"
has "has not ended" "$err" && has "pid $pid" "$err" && has "stopped" "$err" && has "kill -CONT $pid" "$err" \
    || fail "the message does not name the daemon that did not end: $err"
! is_mounted "$tmp/m" || fail "the view is still mounted"
# Let go, the daemon ends on its own: the unmount stands.
kill -CONT "$pid"
timeout 60 tail --pid="$pid" -f /dev/null || fail "the daemon did not end once resumed"
# A daemon that ends in time: exit 0, as before.
"$pg" mount org.example.Stuck "$tmp/m" >/dev/null
"$pg" unmount "$tmp/m" >/dev/null || fail "a plain unmount failed"
! is_mounted "$tmp/m" || fail "the view is still mounted after a plain unmount"
say "ok"
