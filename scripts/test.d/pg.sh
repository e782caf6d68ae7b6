# A real PostgreSQL 15 for a deployment test (sourced after lib.sh): initdb'd into $tmp/pg by the
# unprivileged `postgres` user (initdb refuses root), listening on a Unix socket in that folder
# only, trusting that socket; stopped on exit whatever happens (never left running).
pgbin=/usr/lib/postgresql/15/bin
[[ -x $pgbin/initdb && -x $pgbin/pg_ctl ]] || skip "PostgreSQL 15 is missing (scripts/setup installs postgresql)"
id postgres >/dev/null 2>&1 || skip "the postgres user is missing (the postgresql package makes it)"
pgdir="$tmp/pg"

pg_ctl_() { runuser -u postgres -- "$pgbin/pg_ctl" -D "$pgdir/data" "$@"; }
pg_start_again() { pg_ctl_ -o "-k $pgdir -c listen_addresses=''" -l "$pgdir/log" -w start >/dev/null || fail "PostgreSQL did not start: $(tail -5 "$pgdir/log")"; }
pg_stop() { pg_ctl_ -m fast -w stop >/dev/null || fail "PostgreSQL did not stop"; }
pg_restart() { pg_ctl_ -m fast -o "-k $pgdir -c listen_addresses=''" -l "$pgdir/log" -w restart >/dev/null || fail "PostgreSQL did not restart"; }
pg_sql() { runuser -u postgres -- /usr/bin/psql -h "$pgdir" -U postgres -d photos -At -c "$1"; }
pg_url() { echo "postgresql:///photos?host=$pgdir&user=postgres"; }

pg_start() {
    mkdir -p "$pgdir"
    chown postgres "$pgdir"
    runuser -u postgres -- "$pgbin/initdb" -D "$pgdir/data" -A trust -U postgres -E UTF8 --no-sync >/dev/null || fail "initdb"
    on_exit "runuser -u postgres -- '$pgbin/pg_ctl' -D '$pgdir/data' -m immediate -w stop"
    pg_start_again
    runuser -u postgres -- /usr/bin/psql -h "$pgdir" -U postgres -d postgres -Atq -c "CREATE DATABASE photos" || fail "createdb"
}

# Commits wait for a synchronous standby named $1 (which never comes) after their log is written;
# '' lets them through again. `committing`: a commit is waiting so now.
sync_standby() {
    pg_sql "ALTER SYSTEM SET synchronous_standby_names = '$1'" >/dev/null
    pg_sql "SELECT pg_reload_conf()" >/dev/null
}
committing() { [[ -n $(pg_sql "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'") ]]; }

# Two hosts, A and B, sharing only the server and $tmp/shared (pa and pb run photogate as each),
# and the demo photos imported from A.
pg_two_hosts() {
    url=$(pg_url)
    A="$tmp/hostA"
    B="$tmp/hostB"
    pa() { PHOTOGATE_LIBRARY="$A" "$PHOTOGATE_BIN" "$@"; }
    pb() { PHOTOGATE_LIBRARY="$B" "$PHOTOGATE_BIN" "$@"; }
    pa init --catalog "$url" --store "$tmp/shared" >/dev/null || fail "init of host A"
    pb init --catalog "$url" --store "$tmp/shared" >/dev/null || fail "init of host B"
    pa import "$root/scripts/demo-photos" >/dev/null || fail "import"
}

# The answer to a COMMIT lost for good: every other process of this server is stopped (this
# server's only, never another test's), so nobody can ask it; then the backend committing for
# CLIENT (a child of the test, waiting on a standby: `committing`) ends, its commit in the log,
# and the client runs on to its end. Its exit status is left in $lost_rc.
lose_commit_answer() {
    local client=$1 postmaster backend others
    postmaster=$(head -1 "$pgdir/data/postmaster.pid")
    [[ $postmaster =~ ^[0-9]+$ ]] || fail "no postmaster pid"
    backend=$(pg_sql "SELECT pid FROM pg_stat_activity WHERE wait_event = 'SyncRep'" | head -1)
    [[ $backend =~ ^[0-9]+$ ]] || fail "no committing backend: $backend"
    others=$( (echo "$postmaster"; pgrep -P "$postmaster") | grep -vx "$backend" | tr '\n' ' ')
    on_exit "kill -CONT $others 2>/dev/null"
    kill -STOP $others
    kill -TERM "$backend"
    set +e; wait "$client"; lost_rc=$?; set -e
    kill -CONT $others
}
