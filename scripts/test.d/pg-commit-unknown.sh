#!/bin/bash
# A close whose COMMIT reached PostgreSQL but whose answer did not (issue 41): the connection cut
# while the server was committing (here: its backend terminated while it waits for a synchronous
# standby that never comes, after the commit is in its log: "the transaction has already
# committed locally"). The mount cannot know the outcome, keeps the file marked and tells the
# app its close succeeded; the retry that follows (at the last release) then finds the asset
# already there. Nothing the app was told is saved may be lost: the asset's original must be in
# the store, with the bytes the app wrote. The same for an edit of a photo (a new version).
PG_PRIVATE_MOUNTS=1
source "$(dirname "$0")/lib.sh"
need_fuse
source "$(dirname "$0")/pg.sh"
pg_start

source "$(dirname "$0")/pg-cut.sh"

# A new photo: bytes no asset has.
rc=$(close_cut "$mnt/new.jpg" False '
data = open(src, "rb").read() + b"photogate-commit-unknown-new"
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, data)')
[[ $rc == 0 ]] || fail "the close of new.jpg returned '$rc', the test needs it told saved"

# An edit of mine.jpg (its whole bytes replaced through the view).
rc2=$(close_cut "$mnt/mine.jpg" True '
data = open(src, "rb").read() + b"photogate-commit-unknown-edit"
fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
os.write(fd, data)')

# The mount lets go of everything it holds (its temp folder is settled at its end).
pl unmount "$mnt" >/dev/null 2>&1 || fail "unmount"

new_hash=$( { cat "$corpus/exif.jpg"; printf 'photogate-commit-unknown-new'; } | sha256sum | cut -d' ' -f1)
found=$(find "$shared/store" -type f -exec sha256sum {} + | awk -v h="$new_hash" '$1 == h' | wc -l)
set +e; v=$(pl verify 2>&1); vrc=$?; set -e
(( found == 1 )) || fail "new.jpg, whose close returned 0, is not in the store ($found copies); verify says: $v"
if [[ $rc2 == 0 ]]; then
    edit_hash=$( { cat "$corpus/exif.jpg"; printf 'photogate-commit-unknown-edit'; } | sha256sum | cut -d' ' -f1)
    found=$(find "$shared/store" -type f -exec sha256sum {} + | awk -v h="$edit_hash" '$1 == h' | wc -l)
    (( found == 1 )) || fail "the edit of mine.jpg, whose close returned 0, is not in the store ($found copies; $(cat "$tmp/close.err")); verify says: $v"
fi
[[ $rc2 == 0 ]] || fail "the close of the edit returned '$rc2', the test needs it told saved"
[[ $vrc == 0 ]] || fail "verify after the cut commits: $v"
say "ok"
