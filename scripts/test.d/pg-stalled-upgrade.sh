#!/bin/bash
# An upgrade of a catalog made by an earlier photogate (ServerCatalog.upgrade, issue 39/41) holds
# the write lock every host's writes wait for and, from its DROP INDEX on, a lock on `assets`
# every host's reads wait for. A process stopped inside it (Ctrl-Z, a paused VM, a host cut off)
# must not stop every other host for as long as it stays stopped: the server ends its transaction
# as it ends a stopped writer's, and another host then opens (and upgrades) the catalog. And a
# read that never ends (a process stopped inside one) must not hold the upgrade, and with it every
# host, for ever: the upgrade gives up, says why, and has changed nothing.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pg.sh"
pg_start

pg_two_hosts
pa authorize org.example.Viewer --access read-write --status limited >/dev/null

# The catalog as photogate v12 left it.
to_v12() {
    pg_sql "DROP INDEX assets_by_owner_hash, assets_by_owner_added, versions_by_app, sidecars_by_app;
            CREATE INDEX assets_by_owner ON assets(owner_app) WHERE owner_app IS NOT NULL;
            DELETE FROM photogate_schema WHERE version = 'v13-app-writes-indexed'" >/dev/null
}
schema() { pg_sql "SELECT string_agg(version, ' ' ORDER BY version) FROM photogate_schema"; }
upgraded() { [[ $(schema) == *v13-app-writes-indexed* ]]; }

# A read of another host's that stays open (idle in its transaction) until let go.
reader_fifo="$tmp/reader.fifo"
start_reader() {
    rm -f "$reader_fifo"; mkfifo "$reader_fifo"; chmod 666 "$reader_fifo"
    runuser -u postgres -- /usr/bin/psql -h "$pgdir" -U postgres -d photos -Atq <"$reader_fifo" >/dev/null 2>&1 &
    exec 7>"$reader_fifo"
    echo "SET application_name = 'reader'; BEGIN; SELECT count(*) FROM assets;" >&7
    wait_until 20 reading || fail "the reader did not start"
}
reading() { [[ $(pg_sql "SELECT state FROM pg_stat_activity WHERE application_name = 'reader'") == "idle in transaction" ]]; }
stop_reader() { echo "COMMIT;" >&7; exec 7>&-; }

# --- 1. Stopped inside its upgrade, after its DROP INDEX: another host opens the catalog all the same.
to_v12
start_reader
PHOTOGATE_LIBRARY="$A" "$PHOTOGATE_BIN" assets >/dev/null 2>&1 &
upgrader=$!   # photogate itself
on_exit "kill -CONT $upgrader; kill $upgrader"
# Its DROP INDEX waits for the reader: stopped there, then the reader lets go.
dropping() { [[ $(pg_sql "SELECT count(*) FROM pg_locks WHERE mode = 'AccessExclusiveLock' AND NOT granted") == 1 ]]; }
wait_until 30 dropping || fail "the upgrade never waited for the reader ($(schema))"
kill -STOP $upgrader
stop_reader
set +e; out=$(timeout 90 env PHOTOGATE_LIBRARY="$B" "$PHOTOGATE_BIN" grant org.example.Viewer beach.jpg 2>&1); rc=$?; set -e
kill -CONT $upgrader
wait $upgrader || true
[[ $rc == 0 ]] || fail "a grant on host B while host A is stopped inside its upgrade: exit $rc ($out)"
upgraded || fail "host B did not upgrade the catalog: $(schema)"

# --- 2. A read that never ends: the upgrade gives up, says why, and changed nothing.
to_v12
start_reader
set +e; out=$(timeout 90 env PHOTOGATE_LIBRARY="$A" "$PHOTOGATE_BIN" assets 2>&1); rc=$?; set -e
[[ $rc != 0 && $rc != 124 ]] || fail "an upgrade behind a read that does not end: exit $rc ($out)"
[[ $out == *"nothing was changed"* && $out == *"another host held"* ]] || fail "the upgrade's error: $out"
upgraded && fail "the upgrade that gave up changed the catalog: $(schema)"
[[ $(pg_sql "SELECT count(*) FROM pg_indexes WHERE indexname = 'assets_by_owner'") == 1 ]] || fail "the upgrade that gave up dropped an index"
stop_reader
pa assets >/dev/null || fail "the catalog after the read ended"
upgraded || fail "not upgraded once the read ended: $(schema)"

out=$(pb verify 2>&1) || fail "verify: $out"
say "ok"
