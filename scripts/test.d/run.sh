#!/usr/bin/env bash
# photogate run: inside the bubblewrap sandbox the pictures folder is the app's view (lists and
# reads what was granted, a file saved there becomes the app's asset), and the library (database,
# store, run/) and another app's mount are unreachable by path, in /proc and in the mount
# table, even under a folder passed with --bind. The exit status is the command's; a view
# mounted for the run is unmounted after, one already mounted is reused and left.
source "$(dirname "$0")/lib.sh"
need_fuse
command -v bwrap >/dev/null || skip "bwrap is missing (apt-get install bubblewrap)"
bwrap --ro-bind / / --unshare-all true 2>/dev/null || skip "bwrap cannot make namespaces here"
pg=$PHOTOGATE_BIN
data="$tmp/data"                       # holds the library: passed with --bind, must stay masked
export PHOTOGATE_LIBRARY="$data/library"
mkdir -p "$tmp/src" "$tmp/in" "$tmp/other" "$data/work"
cp "$corpus/exif.jpg" "$tmp/src/granted.jpg"
cp "$corpus/xmp.jpg" "$tmp/src/hidden.jpg"
cp "$corpus/le-thumb.jpg" "$tmp/in/new.jpg"
cp "$corpus/exif.jpg" "$tmp/in/granted.jpg"
"$pg" init >/dev/null
"$pg" import "$tmp/src" >/dev/null
"$pg" authorize org.example.Boxed --access read-write --status limited >/dev/null
"$pg" grant org.example.Boxed granted.jpg >/dev/null
"$pg" authorize org.example.Other --access read-write --status authorized >/dev/null
on_exit "force_unmount '$tmp/other'"
"$pg" mount org.example.Other "$tmp/other" >/dev/null
other_pid=$(awk -F'[:,]' '/"pid"/ {gsub(/ /, "", $2); print $2; exit}' <<<"$("$pg" mounts --json)")
db="$PHOTOGATE_LIBRARY/photogate.sqlite"
[[ -f $db ]] || fail "no database at $db"

cat >"$tmp/in/inside.sh" <<INSIDE
set -u
fail() { echo "inside: \$*" >&2; exit 90; }
pics="\$HOME/Pictures"
[ "\$(ls "\$pics")" = granted.jpg ] || fail "the view lists: \$(ls "\$pics")"
cmp /in/granted.jpg "\$pics/granted.jpg" || fail "granted.jpg reads differently"
cp /in/new.jpg "\$pics/new.jpg" || fail "saving into the view"
for p in "$PHOTOGATE_LIBRARY" "$db" "$PHOTOGATE_LIBRARY/store" "$PHOTOGATE_LIBRARY/run" "$tmp/other" "$tmp/src"; do
    [ ! -e "\$p" ] || fail "reachable: \$p"
done
[ -d /data/work ] || fail "the folder passed with --bind is missing"
[ -z "\$(ls -A /data/library 2>/dev/null)" ] || fail "the library is visible under the --bind folder: \$(ls -A /data/library)"
[ ! -e /proc/$other_pid ] || fail "another app's daemon is visible in /proc"
! grep -q "org.example.Other" /proc/self/mountinfo || fail "another app's mount is in the mount table"
! grep -rqs "org.example.Other" /proc/*/mountinfo || fail "another app's mount is in some mount table"
find / -xdev -name photogate.sqlite 2>/dev/null | grep -q . && fail "a database is reachable"
exit 7
INSIDE
set +e
"$pg" run org.example.Boxed --ro-bind "$tmp/in:/in" --bind "$data:/data" -- sh /in/inside.sh
status=$?
set -e
[[ $status == 7 ]] || fail "photogate run exited $status, expected the command's 7"
has new.jpg "$("$pg" assets --app org.example.Boxed)" || fail "the file saved inside is not the app's asset"
has '"owner" : "org.example.Boxed"' "$("$pg" assets --json)" || fail "new.jpg is not owned by the app"
[[ -z $(grep org.example.Boxed <<<"$("$pg" mounts)") ]] || fail "the view mounted for the run is still mounted"

# Reused when already mounted, and left mounted.
on_exit "force_unmount '$tmp/boxed'"
mkdir -p "$tmp/boxed"
"$pg" mount org.example.Boxed "$tmp/boxed" >/dev/null
"$pg" run org.example.Boxed --pictures /view -- sh -c '[ -e /view/granted.jpg ]' || fail "run with an existing mount"
is_mounted "$tmp/boxed" || fail "the existing mount was unmounted by run"
"$pg" unmount "$tmp/boxed" >/dev/null
"$pg" unmount "$tmp/other" >/dev/null
say "ok"
