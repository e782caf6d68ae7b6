#!/usr/bin/env bash
# fstab lines by the mount.fuse3 convention, mounted with `mount -T FSTAB`:
#  - `photogate#APP MNT fuse.photogate access=...,library=...`: mount.fuse3 runs `photogate`
#    from the default PATH, so this part runs in a private mount namespace where /usr/local/sbin
#    holds a link to the binary under test (nothing changes for the rest of the machine);
#  - `/path/to/photogate#APP MNT fuse library=...` (type fuse: the source names the program).
source "$(dirname "$0")/lib.sh"
need_fuse
command -v mount.fuse3 >/dev/null || skip "mount.fuse3 is missing (apt-get install fuse3)"
command -v unshare >/dev/null || skip "unshare is missing"
export PHOTOGATE_LIBRARY="$tmp/library"
pg=$PHOTOGATE_BIN
mkdir -p "$tmp/src" "$tmp/mnt-rw" "$tmp/mnt-add" "$tmp/sbin"
cp "$corpus/exif.jpg" "$tmp/src/a.jpg"
"$pg" init >/dev/null
"$pg" import "$tmp/src" >/dev/null
"$pg" authorize org.example.Fstab --access read-write --status authorized >/dev/null
"$pg" authorize org.example.Fstab --access add-only --status authorized >/dev/null

# 1. Type fuse, the program's path in the source; options mount(8) keeps for itself included.
on_exit "force_unmount '$tmp/mnt-rw'"
printf '%s#org.example.Fstab %s fuse library=%s,access=read-write,noatime,nofail,x-systemd.automount 0 0\n' \
    "$pg" "$tmp/mnt-rw" "$tmp/library" >"$tmp/fstab"
out=$(env -u PHOTOGATE_LIBRARY mount -T "$tmp/fstab" "$tmp/mnt-rw" 2>&1) || fail "mount -T (type fuse): $out"
is_mounted "$tmp/mnt-rw" || fail "not mounted after mount -T"
# No set-user-id program and no device node through a view, however it was mounted: mount(8)
# hands `suid,dev` unless the line says otherwise.
opts=$(awk -v m="$tmp/mnt-rw" '$2 == m {print $4}' /proc/mounts)
[[ ,$opts, == *,nosuid,* && ,$opts, == *,nodev,* ]] || fail "the fstab mount lacks nosuid,nodev: $opts"
cmp "$tmp/src/a.jpg" "$tmp/mnt-rw/a.jpg" || fail "the file read through the fstab mount differs"
has '"access" : "read-write"' "$("$pg" mounts --json)" || fail "photogate mounts: $("$pg" mounts)"
umount "$tmp/mnt-rw" || fail "umount"
wait_until 10 bash -c "[[ -z \$('$pg' mounts --json | grep org.example.Fstab) ]]" || fail "the daemon did not go away after umount"

# 1b. A library path with a comma, quoted as libmount quotes it on an fstab line (`"a,b"`; it
# hands the quotes on) or escaped (`\,`): both name the library.
comma="$tmp/lib,comma"
PHOTOGATE_LIBRARY="$comma" "$pg" init >/dev/null
PHOTOGATE_LIBRARY="$comma" "$pg" import "$tmp/src" >/dev/null
PHOTOGATE_LIBRARY="$comma" "$pg" authorize org.example.Fstab --access read-write --status authorized >/dev/null
printf '%s#org.example.Fstab %s fuse library="%s",noatime 0 0\n' "$pg" "$tmp/mnt-rw" "$comma" >"$tmp/fstab-q"
out=$(env -u PHOTOGATE_LIBRARY mount -T "$tmp/fstab-q" "$tmp/mnt-rw" 2>&1) || fail "mount -T of library=\"a,b\": $out"
cmp "$tmp/src/a.jpg" "$tmp/mnt-rw/a.jpg" || fail "the quoted library's photo reads differently"
umount "$tmp/mnt-rw"
wait_until 10 bash -c "[[ -z \$(PHOTOGATE_LIBRARY='$comma' '$pg' mounts --json | grep org.example.Fstab) ]]" || fail "the quoted library's daemon did not go away"
mkdir -p "$tmp/mnt-esc"; on_exit "force_unmount '$tmp/mnt-esc'"
"$pg" mount org.example.Fstab "$tmp/mnt-esc" -o "library=${comma/,/\\,}" >/dev/null || fail "-o library=a\\,b"
cmp "$tmp/src/a.jpg" "$tmp/mnt-esc/a.jpg" || fail "the escaped library's photo reads differently"
PHOTOGATE_LIBRARY="$comma" "$pg" unmount "$tmp/mnt-esc" >/dev/null

# 2. Type fuse.photogate, photogate#APP, add-only; in a private mount namespace (see above).
ln -s "$pg" "$tmp/sbin/photogate"
printf 'photogate#org.example.Fstab %s fuse.photogate access=add-only,library=%s,nodev,nosuid,_netdev 0 0\n' \
    "$tmp/mnt-add" "$tmp/library" >"$tmp/fstab2"
cat >"$tmp/inside.sh" <<INSIDE
set -eu
trap 'umount -l "$tmp/mnt-add" 2>/dev/null || true' EXIT
mount --bind "$tmp/sbin" /usr/local/sbin
env -u PHOTOGATE_LIBRARY -u PATH mount -T "$tmp/fstab2" "$tmp/mnt-add"
[ "\$(awk -v m="$tmp/mnt-add" '\$2 == m {print \$3}' /proc/mounts)" = fuse.photogate ]
[ -z "\$(ls "$tmp/mnt-add")" ]                      # add-only: nothing to see
cp "$tmp/src/a.jpg" "$tmp/mnt-add/new.jpg"            # but saving works
out=\$("$pg" mounts --json); echo "\$out" | grep -q '"access" : "add-only"'
umount "$tmp/mnt-add"
INSIDE
unshare -m --propagation private bash "$tmp/inside.sh" || fail "mount -T of a fuse.photogate line (in a private namespace)"
wait_until 10 bash -c "[[ -z \$('$pg' mounts --json | grep org.example.Fstab) ]]" || fail "the add-only daemon did not go away"
has new.jpg "$("$pg" assets)" || fail "the file saved through the add-only mount is not an asset"
# 3. A view's type and source are photogate's: `subtype=` (fuse.NAME) or `fsname=` would hide it
# from every check that tells views apart (run's masks, mounts, unmount).
mkdir -p "$tmp/mnt-sub"
on_exit "force_unmount '$tmp/mnt-sub'"
for o in subtype=other fsname=other; do
    set +e; out=$("$pg" mount org.example.Fstab "$tmp/mnt-sub" -o "$o" 2>&1); status=$?; set -e
    [[ $status == 64 ]] || fail "-o $o: exit $status ($out)"
    has "refused" "$out" || fail "-o $o says: $out"
    ! is_mounted "$tmp/mnt-sub" || fail "-o $o mounted"
done
# suid/dev asked for outright are not given either.
"$pg" mount org.example.Fstab "$tmp/mnt-sub" -o suid,dev >/dev/null || fail "-o suid,dev"
opts=$(awk -v m="$tmp/mnt-sub" '$2 == m {print $4}' /proc/mounts)
"$pg" unmount "$tmp/mnt-sub" >/dev/null
[[ ,$opts, == *,nosuid,* && ,$opts, == *,nodev,* ]] || fail "-o suid,dev mounted with $opts"
say "ok"
