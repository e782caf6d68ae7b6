# A PostgreSQL 15 for the suites' run on PostgreSQL catalogs (sourced by scripts/test): initdb'd
# by the unprivileged `postgres` user into a folder of the run, on a Unix socket there only,
# trusting it, without fsync (a test server: what it holds is thrown away). Stopped on exit.
pg_test_server_start() {
    local dir=$1 bin=/usr/lib/postgresql/15/bin
    [[ -x $bin/initdb ]] && id postgres >/dev/null 2>&1 || { echo "test: PostgreSQL 15 is missing (scripts/setup installs it)" >&2; return 1; }
    mkdir -p "$dir"
    chown postgres "$dir"
    runuser -u postgres -- "$bin/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --no-sync >/dev/null || return 1
    runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
        -o "-k $dir -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400" start >/dev/null || return 1
}
pg_test_server_stop() {
    runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$1/data" -m immediate -w stop >/dev/null 2>&1 || true
}
