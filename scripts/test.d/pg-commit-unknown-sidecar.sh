#!/bin/bash
# A sidecar's close whose COMMIT reached PostgreSQL but whose answer did not (issue 41; as in
# pg-commit-unknown.sh). A sidecar is not kept marked for a retry: its close failed (EIO) and its
# temp was deleted while the commit had gone through, so the catalog named a new version of the
# sidecar whose file was gone. (Now the write asks the server whether its transaction committed.)
# Whatever the close says, the catalog must not be left naming a file that is not in the store
# (verify clean); and told saved, the bytes must be there.
PG_PRIVATE_MOUNTS=1
source "$(dirname "$0")/lib.sh"
need_fuse
source "$(dirname "$0")/pg.sh"
pg_start

source "$(dirname "$0")/pg-cut.sh"

# A sidecar of mine.jpg.
rc=$(close_cut "$mnt/mine.jpg.xmp" False '
data = b"<?xpacket begin=?><x:xmpmeta><rdf:RDF></rdf:RDF></x:xmpmeta><!-- photogate-commit-unknown-sidecar -->"
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, data)')

[[ -n $rc ]] || fail "the writer failed: $(cat "$tmp/close.err")"
pl unmount "$mnt" >/dev/null 2>&1 || fail "unmount"
set +e; v=$(pl verify 2>&1); vrc=$?; set -e
n=$(grep -rl "photogate-commit-unknown-sidecar" "$shared/store" | wc -l || true)
if [[ $rc == 0 ]]; then
    (( n == 1 )) || fail "the sidecar mine.jpg.xmp, whose close returned 0, is not in the store; verify says: $v"
fi
[[ $vrc == 0 ]] || fail "the sidecar's close returned '$rc' and the catalog names a file the store lacks: $v"
say "ok"
