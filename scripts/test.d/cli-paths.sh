#!/usr/bin/env bash
# (hostile review of the CLI's paths) The places root's `photogate mount`, `unmount` and
# `run --bind` act on are resolved following no symbolic link of another user, and (mount, run)
# through no folder another user owns or may change: exit 74, as for the library's own folders.
# A second user ("mallory", protected_symlinks=0 assumed: the link is hers to plant)
#   1. moves aside the folder holding a view root mounted for her and leaves a link at its name:
#      root's `photogate unmount` must not unmount what the link leads to (a tmpfs), nor any
#      mount that is not a photogate view of its library; the view itself is still unmounted
#      by root, wherever it is (found by its mount id, through her folders);
#   2. leaves a link to a folder of root's where root will mount: the mount goes nowhere;
#   4. leaves /tmp/.../m-work -> a folder of root's for root's `run --bind`: not bound in.
# 3. A mount point inside the library (its store reached through a link, the store itself, the
#    library folder, tmp/, run/, a bind mount of the store), or one holding it, is refused
#    (exit 72): a view over its own store hangs its daemon and every reader.
# The ordinary cases still work: root's own links and folders, `run --bind` of root's folder.
PG_PRIVATE_MOUNTS=1
source "$(dirname "$0")/lib.sh"
need_fuse
command -v fusermount3 >/dev/null || skip "fusermount3 is missing"
pg=$PHOTOGATE_BIN
second_user pgm
mallory=$user
as_mallory() { runuser -u "$mallory" -- "$@"; }
one_photo_library "$tmp" org.example.Frame
lib=$PHOTOGATE_LIBRARY
shared=$(mktemp -d /tmp/photogate-cli-paths-shared.XXXXXX)   # as /tmp is: sticky, open to all
chmod 1777 "$shared"
on_exit "rm -rf '$shared'"

# abort_at MP: what a failing photogate mounted at MP goes, even a view hung on itself: its
# connection is aborted (fusectl), then it is detached.
abort_at() {
    local dev
    dev=$(awk -v m="$1" '$5 == m {print $3}' /proc/self/mountinfo | tail -1)
    [[ -n $dev ]] || return 0
    echo 1 >"/sys/fs/fuse/connections/${dev#*:}/abort" 2>/dev/null || true
    umount -l "$1" 2>/dev/null || true
}
# expect CODE COMMAND...: runs it (30 s at most), fails unless it exits CODE; prints its output.
expect() {
    local want=$1 out status
    shift
    set +e
    out=$(timeout -s KILL 30 "$@" 2>&1)
    status=$?
    set -e
    [[ $status == "$want" ]] || fail "$*: exit $status, expected $want: $out"
    echo "$out"
}

# PG_CLI_PATHS_PARTS: which holes to check (default all; each part stands alone).
parts=" ${PG_CLI_PATHS_PARTS:-1 2 3 4} "
part() { [[ $parts == *" $1 "* ]]; }

# --- 1. unmount -----------------------------------------------------------------------------
if part 1; then
# A view root mounted for her, with allow_other, in a folder that is hers (given to her after).
mkdir -p "$home/mnt2/frame"
chown "$mallory:" "$home/mnt2/frame"
on_exit "abort_at '$home/mnt2/frame'; abort_at '$home/mnt2.old/frame'"
"$pg" mount org.example.Frame "$home/mnt2/frame" -o allow_other >/dev/null || fail "root's mount for her"
chown "$mallory:" "$home" "$home/mnt2"
mkdir "$tmp/victim"
mount -t tmpfs pgvictim "$tmp/victim"
on_exit "umount -l '$tmp/victim'"
as_mallory mv "$home/mnt2" "$home/mnt2.old"
as_mallory mkdir "$home/mnt2"
as_mallory ln -s "$tmp/victim" "$home/mnt2/frame"
out=$(expect 74 "$pg" unmount "$home/mnt2/frame")
has "symbolic link that belongs to $mallory" "$out" || fail "the refusal does not name her link: $out"
is_mounted "$tmp/victim" || fail "root's photogate unmount took down the tmpfs her link leads to"
is_mounted "$home/mnt2.old/frame" || fail "the view is gone"
# Her folder a link itself: the same.
as_mallory rm -r "$home/mnt2"
as_mallory ln -s "$tmp" "$home/mnt2"
ln -s "$tmp/victim" "$tmp/frame"
expect 74 "$pg" unmount "$home/mnt2/frame" >/dev/null
is_mounted "$tmp/victim" || fail "root's photogate unmount took down the tmpfs through her folder link"
# Only this library's photogate views: not a tmpfs named directly, nor through root's own link.
out=$(expect 66 "$pg" unmount "$tmp/victim")
has "not a photogate view" "$out" || fail "unclear refusal: $out"
expect 66 "$pg" unmount "$tmp/frame" >/dev/null
is_mounted "$tmp/victim" || fail "photogate unmount took down a tmpfs"
# The view itself: unmounted by root where it is now, through her folders.
as_mallory rm "$home/mnt2"
"$pg" unmount "$home/mnt2.old/frame" >/dev/null || fail "root cannot unmount the view where it is now"
! is_mounted "$home/mnt2.old/frame" || fail "the view is still mounted"
fi

# --- 2. mount ---------------------------------------------------------------------------------
if part 2; then
mkdir "$tmp/etc-like"   # a folder of root's (/etc/pam.d, /opt/app)
on_exit "abort_at '$tmp/etc-like'"
as_mallory ln -s "$tmp/etc-like" "$shared/m"
out=$(expect 74 "$pg" mount org.example.Frame "$shared/m" -o allow_other)
has "symbolic link that belongs to $mallory" "$out" || fail "the refusal does not name her link: $out"
! is_mounted "$tmp/etc-like" || fail "root mounted over its own folder through her link"
# A folder of hers on the way (she could swap it for a link at any moment).
as_mallory mkdir -p "$shared/plain/frame"
on_exit "abort_at '$shared/plain/frame'"
out=$(expect 74 "$pg" mount org.example.Frame "$shared/plain/frame")
has "belongs to $mallory" "$out" || fail "the refusal does not name her folder: $out"
! is_mounted "$shared/plain/frame" || fail "root mounted in her folder"
# A folder anyone may rename in (not sticky).
mkdir -p "$tmp/open/frame" && chmod 777 "$tmp/open"
on_exit "abort_at '$tmp/open/frame'"
expect 74 "$pg" mount org.example.Frame "$tmp/open/frame" >/dev/null
! is_mounted "$tmp/open/frame" || fail "root mounted under a folder anyone may change"
# root's own link and folder: mounted where the link leads, unmounted through it.
mkdir "$tmp/ok" && ln -s "$tmp/ok" "$tmp/oklink"
on_exit "abort_at '$tmp/ok'"
"$pg" mount org.example.Frame "$tmp/oklink" >/dev/null || fail "mount through root's own link"
is_mounted "$tmp/ok" || fail "not mounted where root's link leads"
cmp "$tmp/src/g.jpg" "$tmp/ok/g.jpg" || fail "reading the view"
"$pg" unmount "$tmp/oklink" >/dev/null || fail "unmount through root's own link"
! is_mounted "$tmp/ok" || fail "still mounted"
fi

# --- 3. a mount point inside the library ------------------------------------------------------
if part 3; then
ln -s "$lib/store" "$tmp/into"
mkdir "$tmp/storebind"
mount --bind "$lib/store" "$tmp/storebind"
on_exit "umount -l '$tmp/storebind'"
mkdir -p "$lib/run/elsewhere" "$lib/store/zz"
for place in "$tmp/into" "$lib/store" "$tmp/storebind/zz" "$lib" "$lib/tmp" "$lib/run" "$lib/run/elsewhere" "$tmp"; do
    real=$(realpath "$place")
    on_exit "abort_at '$real'"
    out=$(expect 72 "$pg" mount org.example.Frame "$place")
    has "library" "$out" || fail "mount on $place: the refusal does not say why: $out"
    ! is_mounted "$real" || fail "mounted over the library at $real (through $place)"
done
timeout -s KILL 30 "$pg" mounts >/dev/null || fail "photogate mounts hangs or fails"
fi

# --- 4. run --bind ----------------------------------------------------------------------------
if ! part 4; then
    :
elif ! command -v bwrap >/dev/null; then
    say "bwrap is missing: run --bind not checked"
else
    mkdir "$tmp/secret" && echo "root's key" >"$tmp/secret/id"
    as_mallory ln -s "$tmp/secret" "$shared/m-work"
    out=$(expect 74 "$pg" run org.example.Frame --bind "$shared/m-work:/work" -- sh -c 'echo pwned >/work/pwned')
    has "symbolic link that belongs to $mallory" "$out" || fail "the refusal does not name her link: $out"
    [[ ! -e $tmp/secret/pwned ]] || fail "run --bind gave the sandbox root's folder through her link"
    expect 74 "$pg" run org.example.Frame --ro-bind "$shared/m-work:/work" -- cat /work/id >/dev/null
    # root's own folder: bound in, writable (to the user root's runs run their command as).
    mkdir "$tmp/mine"; sandbox_writable org.example.Frame "$tmp/mine"
    "$pg" run org.example.Frame --bind "$tmp/mine:/work" -- sh -c 'echo ok >/work/ok' || fail "run --bind of root's folder: exit $?"
    [[ $(cat "$tmp/mine/ok") == ok ]] || fail "run --bind of root's folder did not write there"
fi
say "ok"
