#!/usr/bin/env bash
# (hostile review of dd26560, helper) Right after a daemon's mount is made, someone detaches it
# lazily while holding it (its connection lives on, so the daemon's /dev/fuse reports nothing) and
# mounts another FUSE file system of the same type and source elsewhere: the daemon took that one,
# the only new mount of its kind in the kernel's list, for its own, and at its end aborted its
# connection and detached it. Forced here by an LD_PRELOAD shim in the daemon; the holder then
# wakes the daemon's loop after a SIGTERM. Expected: the other file system untouched.
PG_PRIVATE_MOUNTS=1
source "$(dirname "$0")/lib.sh"
need_fuse
cc=$(command -v cc || command -v clang || true)
[[ -z $cc ]] && command -v swift >/dev/null && cc=$(dirname "$(readlink -f "$(command -v swift)")")/clang
[[ -x $cc ]] || skip "no C compiler (cc, clang) to build the shim"
"$cc" -shared -fPIC -O1 -o "$tmp/shim.so" "$root/scripts/test.d/c/pin-and-detach.c" -ldl || fail "cannot build the shim"
pg=$PHOTOGATE_BIN
export PHOTOGATE_LIBRARY="$tmp/library"
mkdir -p "$tmp/src" "$tmp/mnt" "$tmp/victim"
cp "$corpus/exif.jpg" "$tmp/src/g.jpg"
"$pg" init >/dev/null
"$pg" import "$tmp/src" >/dev/null
"$pg" authorize org.example.A --access read-write --status authorized >/dev/null
log="$tmp/shim.log"
# Whatever happens: the victim's connection is aborted (a thread waiting on it would keep the
# daemon from ending), the holder and the daemon go, nothing stays mounted.
victim_abort() {
    local dev
    dev=$(sed -n 's/^victim: .* dev=0:\([0-9]*\)$/\1/p' "$log" 2>/dev/null)
    [[ -n $dev ]] && echo 1 >"/sys/fs/fuse/connections/$dev/abort" 2>/dev/null
    return 0
}
on_exit "umount -l '$tmp/victim'; force_unmount '$tmp/mnt'"
on_exit "pkill -KILL -f 'mount org.example.A $tmp/mnt '"
on_exit "victim_abort"
on_exit 'p=$(sed -n "s/^pinner: //p" "$log" 2>/dev/null); [[ -n $p ]] && kill -9 $p'
RT_MP="$tmp/mnt" RT_VICTIM="$tmp/victim" RT_LOG="$log" LD_PRELOAD="$tmp/shim.so" \
    "$pg" mount org.example.A "$tmp/mnt" >/dev/null 2>&1 || true
has "^victim: " "$(cat "$log" 2>/dev/null)" || skip "the victim could not be mounted: $(cat "$log" 2>/dev/null)"
pinner=$(sed -n 's/^pinner: //p' "$log")
daemon=$(pgrep -f "mount org.example.A $tmp/mnt " | head -1)
[[ -n $daemon ]] || fail "no daemon: $(cat "$log")"
kill -TERM "$daemon"
kill -USR1 "$pinner"
ended() { grep -q "at exit" "$log"; }
wait_until 30 ended || fail "the daemon did not end after SIGTERM and a request through its detached mount: $(cat "$log")"
say "$(tr '\n' ';' <<<"$(cat "$log")")"
has "victim connection alive" "$(cat "$log")" || fail "the daemon aborted the other file system's connection (it took that mount for its own)"
has "victim mount listed" "$(cat "$log")" || fail "the daemon detached the other file system's mount (it took that mount for its own)"
grep -q "could not be told apart" "$tmp/library/run/logs/"*.log || fail "the daemon did not say it could not identify its mount"
say ok
