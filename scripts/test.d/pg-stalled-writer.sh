#!/bin/bash
# A writer that stops in the middle of its transaction (issue 41): a process stopped (Ctrl-Z, a
# debugger, a paused VM, a host cut off from the network) while it holds the write lock every
# write transaction takes first (ServerCatalog.writeLock). The server sees an open transaction
# whose client is silent; unless it ends it, every other host's writes wait behind it for as long
# as the process stays stopped, and a `revoke` anywhere fails ("cannot be reached") while the
# photos stay visible. Another host's grant must go through while the first is stopped.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pg.sh"
pg_start

pg_two_hosts
app=org.example.Viewer
pa authorize $app --access read-write --status limited >/dev/null

# Host A imports many photos; it is stopped once it holds the write lock.
mkdir -p "$tmp/many"
for i in $(seq 1 300); do { cat "$corpus/exif.jpg"; echo "stalled-writer $i"; } >"$tmp/many/m$i.jpg"; done
holds_lock() { [[ $(pg_sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted") == 1 ]]; }
# The lock's holder, once its client is stopped: idle in its transaction (it stays so), or gone
# (the statement it had sent was its COMMIT).
holder_state() { pg_sql "SELECT a.state FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted"; }
settled() { local s; s=$(holder_state); [[ -z $s || $s == "idle in transaction" ]]; }
stopped=""
for try in $(seq 1 50); do
    PHOTOGATE_LIBRARY="$A" "$PHOTOGATE_BIN" import "$tmp/many" >/dev/null 2>&1 &
    writer=$!   # photogate itself (a function's $! would be a subshell)
    on_exit "kill -CONT $writer; kill $writer"
    wait_until 20 holds_lock || { wait $writer || true; continue; }
    kill -STOP $writer
    wait_until 10 settled || true
    if [[ $(holder_state) == "idle in transaction" ]]; then stopped=$writer; break; fi
    kill -CONT $writer
    wait $writer || true
done
[[ -n $stopped ]] || skip "the import never held the write lock when stopped"

set +e; out=$(pb grant $app beach.jpg 2>&1); rc=$?; set -e
kill -CONT "$stopped"
wait "$stopped" || true
[[ $rc == 0 ]] || fail "a grant on host B while a writer on host A is stopped in its transaction: exit $rc ($out)"

out=$(pb verify 2>&1) || fail "verify after the stopped writer: $out"
say "ok"
