#!/bin/bash
# Several hosts, one library (issue 41): the catalog on a real PostgreSQL 15 (initdb'd into a temp
# folder, run by the unprivileged `postgres` user, on a Unix socket only), the originals in a
# shared folder, and two library folders linked to both, one per "host": each with its own run/
# folder, bell and mounts, sharing nothing else. Host A changes grants; host B's running mount
# follows: through the doorbell, across a killed listener and a restarted server, and it fails
# closed while the server is gone.
PG_PRIVATE_MOUNTS=1
source "$(dirname "$0")/lib.sh"
need_fuse
source "$(dirname "$0")/pg.sh"
pg_start

url=$(pg_url)
shared="$tmp/shared"
A="$tmp/hostA"
B="$tmp/hostB"
pa() { PHOTOGATE_LIBRARY="$A" "$PHOTOGATE_BIN" "$@"; }
pb() { PHOTOGATE_LIBRARY="$B" "$PHOTOGATE_BIN" "$@"; }

out=$(pa init --catalog "$url" --store "$shared" 2>&1) || fail "init of host A: $out"
has "its catalog at" "$out" || fail "init said: $out"
out=$(pb init --catalog "$url" --store "$shared" 2>&1) || fail "init of host B (joining): $out"
[[ -f "$A/catalog.conf" && -f "$B/catalog.conf" ]] || fail "no catalog.conf"
[[ $(stat -c %a "$A/catalog.conf") == 600 ]] || fail "catalog.conf is not private"
[[ ! -e "$A/photogate.sqlite" ]] || fail "a linked library made an SQLite catalog"

out=$(pa import "$root/scripts/demo-photos" 2>&1) || fail "import on A: $out"
n=$(pb assets --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
[[ $n == 6 ]] || fail "host B sees $n assets of the 6 host A imported"
# The originals are in the shared folder, not in either host's folder.
[[ $(find "$shared/store" -type f | wc -l) == 6 ]] || fail "the shared store holds $(find "$shared/store" -type f | wc -l) files"
[[ ! -e "$A/store" || -z "$(ls -A "$A/store")" ]] || fail "host A's folder holds originals"

app=org.example.Editor
pa authorize $app --access read-write --status limited >/dev/null
mnt="$tmp/mnt"
mkdir -p "$mnt"
PHOTOGATE_FAIL_CLOSED_SECONDS=3 pb mount $app "$mnt" >/dev/null 2>&1 || fail "mount on host B"
on_exit "force_unmount '$mnt'"
[[ -z $(ls -A "$mnt") ]] || fail "a limited app with no grant sees: $(ls "$mnt")"

shows() { [[ $(ls "$mnt" | tr '\n' ' ') == "$1" ]]; }

# A grant on host A reaches host B's running mount (its doorbell rings).
pa grant $app beach.jpg >/dev/null
wait_until 10 shows "beach.jpg " || fail "host B's mount shows '$(ls "$mnt")' after a grant on A"
pa revoke $app beach.jpg >/dev/null
wait_until 10 shows "" || fail "host B's mount still shows '$(ls "$mnt")' after a revoke on A"

# Exactly one doorbell listener for host B (one per host, not per mount), and none for A (no mount).
pg_listeners() { pg_sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'photogate-doorbell'"; }
wait_until 10 test "$(pg_listeners)" == 1 || fail "$(pg_listeners) doorbell listeners, not 1"

# The listener killed in the middle of a stream of grants and revokes: B ends where A is.
names=$(ls "$root/scripts/demo-photos")
for round in 1 2 3; do
    for f in $names; do
        if (( RANDOM % 2 )); then pa grant $app "$f" >/dev/null; else pa revoke $app "$f" >/dev/null 2>&1 || true; fi
    done
    [[ $round == 2 ]] && pg_sql "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'photogate-doorbell'" >/dev/null
done
expect() { pa assets --app $app --json | python3 -c 'import json,sys; print(" ".join(sorted(a["displayName"] for a in json.load(sys.stdin))) + (" " if True else ""))' ; }
want=$(expect)
[[ $want == " " ]] && want=""
wait_until 15 shows "$want" || fail "after a killed listener host B shows '$(ls "$mnt" | tr '\n' ' ')', host A's catalog says '$want'"

# A full restart of the server in the middle of the stream.
pa revoke $app $names >/dev/null
wait_until 15 shows "" || fail "host B still shows '$(ls "$mnt" | tr '\n' ' ')' after every photo was revoked"
pa grant $app beach.jpg >/dev/null
pg_restart
pa grant $app cat.jpg >/dev/null
pa revoke $app beach.jpg >/dev/null
want=$(expect)
wait_until 15 shows "$want" || fail "after a server restart host B shows '$(ls "$mnt" | tr '\n' ' ')', the catalog says '$want'"
shows "cat.jpg " || fail "the catalog should say cat.jpg only, says '$want'"

# The server gone for longer than the fail-closed delay (3 s here): B's view shows nothing it
# cannot confirm; back, it recovers without a remount.
pg_stop
wait_until 20 shows "" || fail "with the catalog gone host B still shows '$(ls "$mnt")'"
if cat "$mnt/cat.jpg" >/dev/null 2>&1; then fail "a photo was read with the catalog gone"; fi
# A command that cannot reach the catalog exits as docs/admin.md says, naming the catalog.
set +e; out=$(pb assets 2>&1); rc=$?; set -e
[[ $rc == 1 ]] || fail "a command with the catalog gone exited $rc, docs/admin.md says 1: $out"
has "cannot be reached" "$out" || fail "a command with the catalog gone says: $out"
pg_start_again
wait_until 20 shows "cat.jpg " || fail "with the catalog back host B shows '$(ls "$mnt")'"

pb unmount "$mnt" >/dev/null || fail "unmount"

# The shared folder is trusted as the library's own folder is: one that another user owns (who
# could put links in it for photogate to rename files through, or serve) is refused.
second_user pgh
chown "$user" "$shared/store"
set +e; out=$(pb assets 2>&1); rc=$?; set -e
[[ $rc == 74 ]] || fail "a shared store another user owns: exit $rc ($out)"
has "$user" "$out" || fail "the refusal does not name the owner: $out"
chown root "$shared/store"
pb assets >/dev/null || fail "the library is refused once its shared store is the owner's again"
# And so at `init`, before anything is made: a --store in a folder another user owns (who could
# turn the names below it into links at any moment) is refused as every later command refuses it.
mkdir -p "$home/nas"
chown "$user" "$home/nas"
set +e; out=$(PHOTOGATE_LIBRARY="$tmp/hostC" "$PHOTOGATE_BIN" init --catalog "$url" --store "$home/nas/photos" 2>&1); rc=$?; set -e
[[ $rc == 74 ]] || fail "init with a --store in a folder another user owns: exit $rc ($out)"
[[ ! -e "$home/nas/photos" && ! -e "$tmp/hostC/catalog.conf" ]] || fail "init made $(ls -A "$home/nas" "$tmp/hostC" 2>&1 | tr '\n' ' ') before refusing"
say "ok"
