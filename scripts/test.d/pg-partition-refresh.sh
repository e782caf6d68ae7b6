#!/bin/bash
# Fail closed when the partition comes while the mount is reading the catalog (issue 41): as
# pg-partition.sh (every process of the server stopped, fail-closed delay 2 s), but the mount's
# doorbell rings as the partition starts (a change made just before it on another host, or a
# command of this host's), so its refresh is inside a statement the server will not answer for
# 30 s. The view must still show nothing within the delay: blanking it must not wait for that
# statement's timeout.
PG_PRIVATE_MOUNTS=1
source "$(dirname "$0")/lib.sh"
need_fuse
source "$(dirname "$0")/pg.sh"
pg_start

lib="$tmp/host"
pl() { PHOTOGATE_LIBRARY="$lib" "$PHOTOGATE_BIN" "$@"; }
out=$(pl init --catalog "$(pg_url)" --store "$tmp/shared" 2>&1) || fail "init: $out"
pl import "$root/scripts/demo-photos" >/dev/null || fail "import"
app=org.example.Viewer
pl authorize $app --access read-write --status limited >/dev/null
pl grant $app beach.jpg >/dev/null
mnt="$tmp/mnt"
mkdir -p "$mnt"
PHOTOGATE_FAIL_CLOSED_SECONDS=2 pl mount $app "$mnt" >/dev/null 2>&1 || fail "mount"
on_exit "force_unmount '$mnt'"
shows() { [[ $(ls "$mnt" | tr '\n' ' ') == "$1" ]]; }
shows "beach.jpg " || fail "the view shows '$(ls "$mnt")' before the partition"

server_pids() { local pm; pm=$(head -1 "$pgdir/data/postmaster.pid"); echo "$pm" $(pgrep -P "$pm"); }
pids=$(server_pids)
on_exit "kill -CONT $pids"
kill -STOP $pids
# The doorbell rings (what the host's listener, or a command, does): the mount refreshes.
printf '!' > "$lib/run/bell"
wait_until 10 shows "" || fail "10 s into a partition (fail-closed delay 2 s) that began during a refresh, the view still shows '$(ls "$mnt" | tr '\n' ' ')'"
if cat "$mnt/beach.jpg" >/dev/null 2>&1; then fail "a photo was read during the partition"; fi

kill -CONT $pids
wait_until 60 shows "beach.jpg " || fail "after the partition the view shows '$(ls "$mnt" | tr '\n' ' ')'"
pl unmount "$mnt" >/dev/null || fail "unmount"
say "ok"
