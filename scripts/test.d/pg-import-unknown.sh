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

sync_standby nobody
pl import "$root/scripts/demo-photos" >"$tmp/import.out" 2>&1 &
importer=$!
wait_until 60 committing || { sync_standby ''; wait $importer; fail "no commit waited for the standby: $(cat "$tmp/import.out")"; }
lose_commit_answer $importer
irc=$lost_rc
sync_standby ''
rows=$(pg_sql "SELECT count(*) FROM assets")
(( rows > 0 )) || fail "the batch did not commit ($rows rows): the test cut nothing (import: exit $irc, $(tail -2 "$tmp/import.out"))"
# The next writer (here verify --repair) settles what the import left.
pl verify --repair >/dev/null 2>&1 || true
set +e; v=$(pl verify 2>&1); vrc=$?; set -e
[[ $vrc == 0 ]] || fail "the import (exit $irc) left rows without their files: $v"
say "ok (import exit $irc, $rows assets)"
