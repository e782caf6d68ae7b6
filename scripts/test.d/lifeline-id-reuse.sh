#!/usr/bin/env bash
# (hostile review of 5e928cc, helper) The lifeline's detach by (mount id, device) after the daemon's own mount
# is gone: both numbers are handed out lowest-free, so the next mount made takes them at once. A
# daemon whose view was unmounted, still ending (here: held stopped, as a busy or descheduled
# process would be) when its --while-pid process ends, detaches whichever mount has that id and
# device now: another view. Expected: the other view stays mounted.
PG_PRIVATE_MOUNTS=1
source "$(dirname "$0")/lib.sh"
need_fuse
command -v python3 >/dev/null || skip "python3 is missing"
pg=$PHOTOGATE_BIN
mkdir -p "$tmp/a" "$tmp/b"
one_photo_library "$tmp" org.example.A org.example.B
on_exit "force_unmount '$tmp/a'; force_unmount '$tmp/b'"
sleep 600 & life=$!
on_exit "kill -9 $life"
"$pg" mount org.example.A "$tmp/a" --while-pid "$life" >/dev/null
daemon=$(pgrep -f "mount org.example.A $tmp/a " | head -1)
[[ -n $daemon ]] || fail "no daemon for view A"
on_exit "kill -CONT $daemon"
idA=$(awk -v m="$tmp/a" '$5 == m {print $1, $3}' /proc/self/mountinfo)
kill -STOP "$daemon"
# umount(8) would stat the stopped daemon's root; the syscall does not.
python3 -c 'import ctypes,sys; l=ctypes.CDLL(None,use_errno=True); sys.exit(l.umount2(sys.argv[1].encode(),0) != 0)' "$tmp/a" || fail "cannot unmount view A"
"$pg" mount org.example.B "$tmp/b" >/dev/null
idB=$(awk -v m="$tmp/b" '$5 == m {print $1, $3}' /proc/self/mountinfo)
say "view A was (id dev) $idA; view B is $idB"
[[ $idA == "$idB" ]] || skip "the kernel gave view B another id or device"
kill -9 "$life"; wait "$life" 2>/dev/null || true
kill -CONT "$daemon"
gone() { ! kill -0 "$daemon" 2>/dev/null; }
wait_until 20 gone || fail "daemon A did not end"
is_mounted "$tmp/b" || fail "daemon A's lifeline unmounted view B (it took B's id and device for its own mount)"
"$pg" unmount "$tmp/b" >/dev/null
say ok
