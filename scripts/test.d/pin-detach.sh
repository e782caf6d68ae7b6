#!/usr/bin/env bash
# (hostile reviews of dd26560 and f5fec0d, helpers) Right after a daemon's mount is made, someone
# detaches it lazily while holding it (its connection lives on, so the daemon's /dev/fuse reports
# nothing) and mounts another FUSE file system of the same type and source elsewhere: the daemon
# took that one, the only new mount of its kind in the kernel's list, for its own, and at its end
# aborted its connection and detached its mount. Forced here by an LD_PRELOAD shim in the daemon;
# the holder then wakes the daemon's loop after a SIGTERM. Two rounds: the SIGTERM after the mount
# is ready (the daemon's probe of its mount has failed by then), and while that probe is still out,
# `photogate mount` having stopped waiting for the daemon (killed here; it gives up after 20 s): the
# daemon's session has ended when the probe is over, and its "ready" then finds no reader.
# Expected in both: the other file system untouched, and the daemon ending by itself (not killed
# by that write's SIGPIPE).
PG_PRIVATE_MOUNTS=1
source "$(dirname "$0")/lib.sh"
need_fuse
shim=$(build_shim pin-and-detach)
pg=$PHOTOGATE_BIN

# Whatever happens: the victim's connection is aborted (a thread waiting on it would keep the
# daemon from ending), the holder and the daemon go, nothing stays mounted.
victim_abort() {
    local dev
    dev=$(sed -n 's/^victim: .* dev=0:\([0-9]*\)$/\1/p' "$1" 2>/dev/null)
    [[ -n $dev ]] && echo 1 >"/sys/fs/fuse/connections/$dev/abort" 2>/dev/null
    return 0
}
probing() { grep -qx fuse-probe /proc/"$1"/task/*/comm 2>/dev/null; }

# round NAME WHEN: WHEN is "ready" (SIGTERM once `photogate mount` returned) or "probe" (SIGTERM
# while the daemon's probe thread is out, `photogate mount` killed).
round() {
    local name=$1 when=$2 d="$tmp/$1"
    local log="$d/shim.log"
    mkdir -p "$d/mnt" "$d/victim"
    one_photo_library "$d" org.example.A
    on_exit "umount -l '$d/victim'; force_unmount '$d/mnt'"
    on_exit "pkill -KILL -f 'mount org.example.A $d/mnt '"
    on_exit "victim_abort '$log'"
    on_exit 'p=$(sed -n "s/^pinner: //p" "'"$log"'" 2>/dev/null); [[ -n $p ]] && kill -9 $p'
    RT_MP="$d/mnt" RT_VICTIM="$d/victim" RT_LOG="$log" LD_PRELOAD="$shim" \
        "$pg" mount org.example.A "$d/mnt" >/dev/null 2>&1 &
    local cli=$!
    wait_until 30 grep -qs "^victim: " "$log" || skip "$name: the victim could not be mounted: $(cat "$log" 2>/dev/null)"
    # As the shim logged them, before the victim: the daemon is the process that made the mount.
    # Not found by its command line: the pinner, a copy of the daemon, has the same one, and its
    # pid is the lower of the two once the kernel's pids have wrapped around.
    local pinner daemon
    pinner=$(sed -n 's/^pinner: //p' "$log")
    daemon=$(sed -n 's/^daemon: //p' "$log")
    if [[ $when == probe ]]; then
        wait_until 30 probing "$daemon" || fail "$name: the daemon never probed its mount: $(cat "$log")"
        kill -KILL "$cli"
        wait "$cli" 2>/dev/null || true
    else
        wait "$cli" || true
    fi
    kill -TERM "$daemon" || fail "$name: the daemon had ended before its SIGTERM: $(cat "$log")"
    kill -USR1 "$pinner" || fail "$name: the pinner had ended before its SIGUSR1: $(cat "$log")"
    ended() { grep -qs "at exit" "$log"; }
    wait_until 30 ended || fail "$name: the daemon did not end after SIGTERM and a request through its detached mount: $(cat "$log")"
    wait "$cli" 2>/dev/null || true
    say "$name: $(tr '\n' ';' <"$log")"
    has "victim connection alive" "$(cat "$log")" || fail "$name: the daemon aborted the other file system's connection (it took that mount for its own)"
    has "victim mount listed" "$(cat "$log")" || fail "$name: the daemon detached the other file system's mount (it took that mount for its own)"
    if [[ $when == ready ]]; then
        grep -q "could not be told apart" "$d/library/run/logs/"*.log || fail "$name: the daemon did not say it could not identify its mount: $(cat "$d/library/run/logs/"*.log)"
    fi
}
round after-ready ready
round during-probe probe
say ok
