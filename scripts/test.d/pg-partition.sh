#!/bin/bash
# Fail closed when the catalog's server stops answering without going away (issue 41): a network
# partition, a hung server or NAS, simulated by stopping every process of the PostgreSQL server
# (SIGSTOP): connections stay open and statements get no answer, unlike a stopped server, whose
# socket refuses at once. docs/admin.md: "When it has had no answer for
# PHOTOGATE_FAIL_CLOSED_SECONDS (default 10), its view shows nothing". With 2 s here, a mount
# that still shows its photos 10 s into the partition does not fail closed as it says (it did
# only once its own statement, blocked meanwhile, timed out: 30 s). Once the server answers
# again, the view comes back without a remount.
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

# Every process of the server stopped (the postmaster and its backends, the mount's included).
server_pids() { local pm; pm=$(head -1 "$pgdir/data/postmaster.pid"); echo "$pm" $(pgrep -P "$pm"); }
pids=$(server_pids)
on_exit "kill -CONT $pids"
kill -STOP $pids
# PG_PARTITION_DURING_REFRESH=1 (pg-partition-refresh.sh): the doorbell rings now (what the
# host's listener, or a command, does), so the mount is inside a refresh the server won't answer.
during=""
if [[ ${PG_PARTITION_DURING_REFRESH:-0} == 1 ]]; then
    printf '!' > "$lib/run/bell"
    during=" that began during a refresh"
    echo "pg-partition: the doorbell rang as the partition began" >&2
fi
wait_until 10 shows "" || fail "10 s into a partition$during (fail-closed delay 2 s) the view still shows '$(ls "$mnt" | tr '\n' ' ')'"
if cat "$mnt/beach.jpg" >/dev/null 2>&1; then fail "a photo was read during the partition"; fi

kill -CONT $pids
wait_until 60 shows "beach.jpg " || fail "after the partition the view shows '$(ls "$mnt" | tr '\n' ' ')'"
pl unmount "$mnt" >/dev/null || fail "unmount"
say "ok"
