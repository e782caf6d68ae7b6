#!/bin/bash
# A sidecar's close whose COMMIT stays unanswered past every wait of the client (issue 41): the
# server has the commit in its log but holds it for a synchronous standby that does not come (a
# replica down), for longer than the statement's timeout (30 s) and the 10 s the client then asks
# pg_xact_status (which says "in progress" all along). The client gives up: not known. A
# caller that then deletes its temp (a sidecar's close does) leaves, once the server lets the
# commit through, a catalog naming a file the store lacks. Whatever the close says, verify must
# be clean once the server lets go; told saved, the bytes must be in the store.
PG_PRIVATE_MOUNTS=1
source "$(dirname "$0")/lib.sh"
need_fuse
source "$(dirname "$0")/pg.sh"
pg_start

source "$(dirname "$0")/pg-cut.sh"
on_exit "sync_standby ''"

sync_standby nobody
python3 - "$mnt/mine.jpg.xmp" >"$tmp/close.out" 2>"$tmp/close.err" <<'EOF' &
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"<?xpacket begin=?><x:xmpmeta><rdf:RDF></rdf:RDF></x:xmpmeta><!-- photogate-commit-unknown-long -->")
try:
    os.close(fd)
    print("0")
except OSError as e:
    print(e.errno)
EOF
writer=$!
wait_until 30 committing || { sync_standby ''; wait $writer; fail "no commit waited for the standby: $(cat "$tmp/close.out" "$tmp/close.err")"; }
# The standby stays away until the close has its answer, whatever it is (the client's waits: 30 s
# for the statement, 10 s asking).
wait $writer || true
rc=$(cat "$tmp/close.out")
[[ -n $rc ]] || fail "the writer failed: $(cat "$tmp/close.err")"
sync_standby ''
not_committing() { ! committing; }
wait_until 30 not_committing || fail "the commit still waits for the standby"
pl unmount "$mnt" >/dev/null 2>&1 || fail "unmount"
set +e; v=$(pl verify 2>&1); vrc=$?; set -e
n=$(grep -rl "photogate-commit-unknown-long" "$shared/store" | wc -l || true)
if [[ $rc == 0 ]]; then
    (( n == 1 )) || fail "the sidecar mine.jpg.xmp, whose close returned 0, is not in the store; verify says: $v"
fi
[[ $vrc == 0 ]] || fail "the sidecar's close returned '$rc' and the catalog names a file the store lacks: $v"
say "ok (the close returned $rc)"
