#!/usr/bin/env bash
# (hostile review of 1b59cc1, helper) A daemon reads its mount's id and device number, and opens
# its connection's fusectl folder by that number, just after mount(2). A mount unmounted before
# INIT frees both at once, and the next mount made takes them. If that happens in between (here
# forced: an LD_PRELOAD shim unmounts the daemon's mount and mounts a victim FUSE file system as
# the daemon opens the folder), the daemon took the victim's folder and identity for its own, and
# at its end aborted the victim's connection and detached its mount. Expected: both untouched.
PG_PRIVATE_MOUNTS=1
source "$(dirname "$0")/lib.sh"
need_fuse
[[ $(stat -f -c %t /sys/fs/fuse/connections 2>/dev/null) == 65735543 ]] || skip "fusectl is not mounted at /sys/fs/fuse/connections (the race is at the daemon's open of its folder there)"
shim=$(build_shim reuse-before-init)
pg=$PHOTOGATE_BIN
mkdir -p "$tmp/mnt" "$tmp/victim"
one_photo_library "$tmp" org.example.A
on_exit "force_unmount '$tmp/mnt'; umount -l '$tmp/victim'"
# The mount itself may fail or succeed (its mount went before INIT); the daemon ends either way.
RT_MP="$tmp/mnt" RT_VICTIM="$tmp/victim" RT_LOG="$tmp/shim.log" LD_PRELOAD="$shim" \
    "$pg" mount org.example.A "$tmp/mnt" >/dev/null 2>&1 || true
ended() { grep -q "at exit" "$tmp/shim.log" 2>/dev/null; }
wait_until 30 ended || fail "the daemon did not end, or the shim did not run: $(cat "$tmp/shim.log" 2>/dev/null)"
log=$(cat "$tmp/shim.log")
say "$(tr '\n' ';' <<<"$log")"
has "^victim: " "$log" || skip "the victim could not be mounted in the window: $log"
ours=$(sed -n 's/^ours: //p' <<<"$log"); theirs=$(sed -n 's/^victim: //p' <<<"$log")
[[ $ours == "$theirs" ]] || skip "the kernel gave the victim another id or device ($ours, $theirs)"
has "victim connection alive" "$log" || fail "the daemon aborted the victim's connection (it took the victim's fusectl folder for its own)"
has "victim mount listed" "$log" || fail "the daemon detached the victim's mount (it took the victim's id for its own)"
say ok
