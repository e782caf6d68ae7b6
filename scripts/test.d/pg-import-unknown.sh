#!/bin/bash
# An import whose batch COMMIT reached PostgreSQL but whose answer was cut, while the server can
# then not be asked whether it committed (issue 41; as pg-commit-unknown-unreachable.sh for a
# sidecar). The import fails, but its copies must stay for recovery: deleted, a batch that had
# committed was rows without their files. Once the server answers, the next writer's recovery
# moves them in, and verify is clean.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pg.sh"
pg_start
lib="$tmp/host"
shared="$tmp/shared"
pl() { PHOTOGATE_LIBRARY="$lib" "$PHOTOGATE_BIN" "$@"; }
out=$(pl init --catalog "$(pg_url)" --store "$shared" 2>&1) || fail "init: $out"

postmaster=$(head -1 "$pgdir/data/postmaster.pid")
[[ $postmaster =~ ^[0-9]+$ ]] || fail "no postmaster pid"
sync_standby nobody
pl import "$root/scripts/demo-photos" >"$tmp/import.out" 2>&1 &
importer=$!
wait_until 60 committing || { sync_standby ''; wait $importer; fail "no commit waited for the standby: $(cat "$tmp/import.out")"; }
backend=$(pg_sql "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'" | head -1)
[[ $backend =~ ^[0-9]+$ ]] || fail "no committing backend: $backend"
others=$( (echo "$postmaster"; pgrep -P "$postmaster") | grep -vx "$backend" | tr '\n' ' ')
on_exit "kill -CONT $others 2>/dev/null"
kill -STOP $others
kill -TERM "$backend"
set +e; wait $importer; irc=$?; set -e
kill -CONT $others
sync_standby ''
rows=$(pg_sql "SELECT count(*) FROM assets")
(( rows > 0 )) || fail "the batch did not commit ($rows rows): the test cut nothing (import: exit $irc, $(tail -2 "$tmp/import.out"))"
# The next writer (here verify --repair) settles what the import left.
pl verify --repair >/dev/null 2>&1 || true
set +e; v=$(pl verify 2>&1); vrc=$?; set -e
[[ $vrc == 0 ]] || fail "the import (exit $irc) left rows without their files: $v"
say "ok (import exit $irc, $rows assets)"
