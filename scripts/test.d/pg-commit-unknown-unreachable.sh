#!/bin/bash
# A sidecar's close whose COMMIT reached PostgreSQL but whose answer was cut, while the server can
# then not be asked whether it committed (issue 41): every process of the server but the
# committing backend stopped (SIGSTOP: the postmaster, so no new connection is answered, and the
# backends of the daemon's idle connections) before that backend is ended.
# Saved or not is not known then: the close fails (EIO), but its temp file must stay for recovery,
# which moves it into the store once the catalog says its row is there. (The temp was deleted: the
# catalog named a sidecar version whose file was gone.)
PG_PRIVATE_MOUNTS=1
source "$(dirname "$0")/lib.sh"
need_fuse
source "$(dirname "$0")/pg.sh"
pg_start
source "$(dirname "$0")/pg-cut.sh"

sync_standby nobody
python3 - "$mnt/mine.jpg.xmp" >"$tmp/close.out" 2>"$tmp/close.err" <<'PY' &
import os, sys
data = b"<?xpacket begin=?><x:xmpmeta><rdf:RDF></rdf:RDF></x:xmpmeta><!-- photogate-commit-unreachable -->"
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, data)
try:
    os.close(fd)
    print("0")
except OSError as e:
    print(e.errno)
PY
writer=$!
wait_until 30 committing || { sync_standby ''; wait $writer; fail "no commit waited for the standby: $(cat "$tmp/close.out" "$tmp/close.err")"; }
# Nobody can ask the server from now on (this server's processes only: never another test's);
# then the committing backend ends (its commit is in the log: committed), and its client's answer
# is lost.
lose_commit_answer $writer
sync_standby ''
rc=$(cat "$tmp/close.out")
[[ -n $rc ]] || fail "the writer failed: $(cat "$tmp/close.err")"
pl unmount "$mnt" >/dev/null 2>&1 || fail "unmount"
set +e; v=$(pl verify 2>&1); vrc=$?; set -e
[[ $vrc == 0 ]] || fail "the sidecar's close returned '$rc' and the catalog names a file the store lacks: $v"
n=$(grep -rl "photogate-commit-unreachable" "$shared/store" | wc -l || true)
committed=$(pg_sql "SELECT count(*) FROM sidecars WHERE ext = '.xmp' AND store_path IS NOT NULL")
(( n == committed )) || fail "the catalog has $committed sidecar version(s) with a file, the store $n (close: $rc); verify: $v"
(( committed == 1 )) || fail "the commit did not go through ($committed rows): the test cut nothing"
say "ok (the close said ${rc})"
