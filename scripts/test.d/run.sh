#!/usr/bin/env bash
# photogate run: inside the bubblewrap sandbox the pictures folder is the app's view (lists and
# reads what was granted, a file saved there becomes the app's asset), and the library (database,
# store, run/) and another app's mount are unreachable by path, in /proc and in the mount
# table, even under a folder passed in (--ro-bind; a writable one holding the library is refused). The exit status is the command's; a view
# mounted for the run is unmounted after, one already mounted is reused and left.
source "$(dirname "$0")/lib.sh"
need_fuse
command -v bwrap >/dev/null || skip "bwrap is missing (apt-get install bubblewrap)"
bwrap --ro-bind / / --unshare-all true 2>/dev/null || skip "bwrap cannot make namespaces here"
pg=$PHOTOGATE_BIN
data="$tmp/data"                       # holds the library: passed with --ro-bind, must stay masked
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
[ -d /data/work ] || fail "the folder passed in is missing"
[ -z "\$(ls -A /data/library 2>/dev/null)" ] || fail "the library is visible under the folder passed in: \$(ls -A /data/library)"
[ ! -e /proc/$other_pid ] || fail "another app's daemon is visible in /proc"
! grep -q "org.example.Other" /proc/self/mountinfo || fail "another app's mount is in the mount table"
! grep -rqs "org.example.Other" /proc/*/mountinfo || fail "another app's mount is in some mount table"
# The whole sandbox, every bound folder and the view included (not -xdev: binds are mounts).
find / \( -path /proc -o -path /sys -o -path /dev -o -path /usr \) -prune -o -name photogate.sqlite -print 2>/dev/null | grep -q . && fail "a database is reachable"
exit 7
INSIDE
set +e
"$pg" run org.example.Boxed --ro-bind "$tmp/in:/in" --ro-bind "$data:/data" -- sh /in/inside.sh
status=$?
set -e
[[ $status == 7 ]] || fail "photogate run exited $status, expected the command's 7"
has new.jpg "$("$pg" assets --app org.example.Boxed)" || fail "the file saved inside is not the app's asset"
has '"owner" : "org.example.Boxed"' "$("$pg" assets --json)" || fail "new.jpg is not owned by the app"
[[ -z $(grep org.example.Boxed <<<"$("$pg" mounts)") ]] || fail "the view mounted for the run is still mounted"

# A folder holding the library is passed in read-only. Writable, the command could rename the
# folders around the library: move it out from under where the next run puts the mask, and leave
# a library of its own (a decoy, authorizing itself) where the real one was, for the next run to
# mask instead. So a writable one is refused before the command runs, and nothing moves.
deep="$tmp/deep"
mkdir -p "$deep/x"
set +e
out=$(PHOTOGATE_LIBRARY="$deep/x/library" bash -c '"$0" init >/dev/null && "$0" authorize org.example.Boxed --access read-write --status limited >/dev/null &&
    "$0" run org.example.Boxed --bind "$1:/deep" -- sh -c "mv /deep/x /deep/moved && mkdir /deep/x && exit 0; exit 65"' "$pg" "$deep" 2>&1)
status=$?
set -e
[[ $status == 64 ]] || fail "a folder holding the library passed writable: exit $status, expected 64 ($out)"
has "ro-bind" "$out" || fail "no reason given: $out"
[[ -f $deep/x/library/photogate.sqlite && ! -e $deep/moved ]] || fail "the library was moved: $(ls -R "$deep" | head)"
set +e
PHOTOGATE_LIBRARY="$deep/x/library" "$pg" run org.example.Boxed --ro-bind "$deep:/deep" -- sh -c '
    [ -d /deep/x ] || exit 66
    [ -z "$(ls -A /deep/x/library 2>/dev/null)" ] || exit 67
    mv /deep/x /deep/moved 2>/dev/null && exit 68
    exit 0'
status=$?
set -e
[[ $status == 0 ]] || fail "a folder holding the library passed read-only: exit $status (66: missing, 67: the library is visible, 68: it could be moved)"
[[ -f $deep/x/library/photogate.sqlite && ! -e $deep/moved ]] || fail "the library was moved: $(ls -R "$deep" | head)"

# A folder passed in deeper than the one holding the library, over the library's place, covers
# it: no mask is made inside it (bubblewrap would make the mask's folder in it, on the host).
mkdir -p "$tmp/wx"
set +e
PHOTOGATE_LIBRARY="$deep/x/library" "$pg" run org.example.Boxed --ro-bind "$deep:/dd" --bind "$tmp/wx:/dd/x" -- sh -c '
    [ -z "$(ls -A /dd/x)" ] || { ls -A /dd/x >&2; exit 69; }
    exit 0'
status=$?
set -e
[[ $status == 0 ]] || fail "a writable folder over the library's place: exit $status (69: something in it)"
[[ -z $(ls -A "$tmp/wx") ]] || fail "a folder was made in the folder passed in: $(ls -A "$tmp/wx")"

# The same through a symlink on the way to the library (a library moved to a bigger disk and
# linked back): the command could point the link at a library of its own. Refused writable; read
# only, the link cannot change.
mkdir -p "$tmp/big/lib-parent" "$tmp/home2/.local/share"
PHOTOGATE_LIBRARY="$tmp/big/lib-parent/photogate" "$pg" init >/dev/null
ln -s "$tmp/big/lib-parent/photogate" "$tmp/home2/.local/share/photogate"
set +e
out=$(PHOTOGATE_LIBRARY="$tmp/home2/.local/share/photogate" bash -c '"$0" authorize org.example.Boxed --access read-write --status limited >/dev/null &&
    "$0" run org.example.Boxed --bind "$1:/h" -- sh -c "mv /h/.local/share/photogate /h/.local/share/moved && exit 0; exit 65"' "$pg" "$tmp/home2" 2>&1)
status=$?
set -e
[[ $status == 64 ]] || fail "a folder holding a symlink to the library passed writable: exit $status, expected 64 ($out)"
has "a symlink on the way to the photo library" "$out" || fail "no reason given: $out"
[[ -L $tmp/home2/.local/share/photogate && ! -e $tmp/home2/.local/share/moved ]] || fail "the link was moved: $(ls -la "$tmp/home2/.local/share")"
set +e
PHOTOGATE_LIBRARY="$tmp/home2/.local/share/photogate" "$pg" run org.example.Boxed --ro-bind "$tmp/home2:/h" -- sh -c '
    [ -L /h/.local/share/photogate ] || exit 66
    mv /h/.local/share/photogate /h/.local/share/moved 2>/dev/null && exit 68
    exit 0'
status=$?
set -e
[[ $status == 0 ]] || fail "a folder holding a symlink to the library passed read-only: exit $status (66: missing, 68: it could be moved)"

# ... and through a chain of links: the spelled path's link points into another folder, where a
# second link leads to the library. A writable bind of that folder is refused as well.
mkdir -p "$tmp/chain/w" "$tmp/chain/home"
ln -s "$tmp/big/lib-parent/photogate" "$tmp/chain/w/l2"
ln -s "$tmp/chain/w/l2" "$tmp/chain/home/lib"
set +e
out=$(PHOTOGATE_LIBRARY="$tmp/chain/home/lib" "$pg" run org.example.Boxed --bind "$tmp/chain/w:/w" -- sh -c 'rm /w/l2 && exit 0; exit 65' 2>&1)
status=$?
set -e
[[ $status == 64 ]] || fail "a folder holding the second link of a chain to the library passed writable: exit $status, expected 64 ($out)"
[[ -L $tmp/chain/w/l2 ]] || fail "the second link was removed"

# The view mounted for the run is mounted in the library's run/ folder, which no sandbox gets
# writable (in /tmp, another sandbox of the same user given /tmp renamed the run's folder and left
# a symlink to the library as "view", before the mount or between it and bubblewrap's bind). And
# it is bound by a descriptor checked to be this app's view, not by its path: this racer renames
# the run's folder as soon as the mount shows, as only the user's own unsandboxed processes could
# now. The run finds its view in the folder it made, whatever that is called by then: inside, the
# pictures folder is the view; after, it is unmounted where it went, and the folder is gone.
"$pg" authorize org.example.Raced --access read-write --status limited >/dev/null
"$pg" grant org.example.Raced granted.jpg >/dev/null
cat >"$tmp/racer.py" <<'RACER'
import os, re, sys, time
target, flag = sys.argv[1:3]
open(flag + ".ready", "w").close()
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    with open("/proc/self/mountinfo", "rb") as f:
        lines = f.read().split(b"\n")
    for line in lines:
        fields = line.split(b" ")
        if len(fields) > 4 and re.fullmatch(rb".*/run/(sandbox|photogate-run)/[A-Za-z0-9]{6}/view", fields[4]) and b" photogate:org.example.Raced " in line:
            folder = os.path.dirname(fields[4])
            # Beside it (the same filesystem: /run is a tmpfs of its own).
            moved = folder + b".moved"
            os.rename(folder, moved)
            os.mkdir(folder, 0o700)
            os.symlink(target, folder + b"/view")
            with open(flag + ".moved", "w") as f:
                f.write(moved.decode())
            with open(flag, "w") as f:
                f.write(folder.decode())
            sys.exit(0)
sys.exit(2)
RACER
on_exit 'for m in $(awk '"'"'/ photogate:org.example.Raced / {print $5}'"'"' /proc/self/mountinfo); do force_unmount "$m"; done'
for round in 1 2 3; do
    rm -rf "$tmp/raced.flag" "$tmp/raced.flag.moved" "$tmp/raced.flag.ready"
    python3 "$tmp/racer.py" "$PHOTOGATE_LIBRARY" "$tmp/raced.flag" & racer=$!
    wait_until 30 test -e "$tmp/raced.flag.ready" || fail "the racer did not start"
    set +e
    out=$("$pg" run org.example.Raced -- sh -c '[ -e "$HOME/Pictures/photogate.sqlite" ] && exit 50; [ -e "$HOME/Pictures/granted.jpg" ] || exit 51; exit 0' 2>&1)
    status=$?
    wait $racer
    raced=$?
    set -e
    say "raced run $round: exit $status, $out"
    [[ $status != 50 ]] || fail "round $round: the library was bound as the view"
    [[ $raced == 0 ]] || fail "round $round: the racer never saw the mount ($raced)"
    [[ $status == 0 ]] || fail "round $round: exit $status (51: the view is not the pictures folder) $out"
    ! grep -q "photogate:org.example.Raced" /proc/self/mountinfo || fail "round $round: the view was left mounted: $(grep Raced /proc/self/mountinfo)"
    [[ -f $PHOTOGATE_LIBRARY/photogate.sqlite ]] || fail "round $round: the library is gone"
    # Root's runs mount in /run/photogate-run (their command's user passes through it), others'
    # in the library's run/sandbox/.
    runs_at="$PHOTOGATE_LIBRARY/run/sandbox/"; [[ $(id -u) == 0 ]] && runs_at=/run/photogate-run/
    [[ $(cat "$tmp/raced.flag") == "$runs_at"* ]] || fail "round $round: the view was mounted at $(cat "$tmp/raced.flag")"
    moved=$(cat "$tmp/raced.flag.moved")
    [[ ! -e $moved ]] || fail "round $round: the run's folder was left: $(ls -la "$moved")"
    folder=$(cat "$tmp/raced.flag")
    rm -f "$folder/view"; rmdir "$folder"
done

# Reused when already mounted, and left mounted.
on_exit "force_unmount '$tmp/boxed'"
mkdir -p "$tmp/boxed"
"$pg" mount org.example.Boxed "$tmp/boxed" >/dev/null
"$pg" run org.example.Boxed --pictures /view -- sh -c '[ -e /view/granted.jpg ]' || fail "run with an existing mount"
is_mounted "$tmp/boxed" || fail "the existing mount was unmounted by run"
"$pg" unmount "$tmp/boxed" >/dev/null
"$pg" unmount "$tmp/other" >/dev/null

# A run killed with SIGKILL (no chance to unmount) leaves no view mounted: the view's daemon
# holds the run's pidfd and, once the run is gone, unmounts the view lazily as the run would have,
# and removes the folder made for it when it ends. A second run that reused the view while the first ran
# keeps reading it until it ends.
"$pg" authorize org.example.Killed --access read-write --status limited >/dev/null
"$pg" grant org.example.Killed granted.jpg >/dev/null
mkdir -p "$tmp/killed"; sandbox_writable org.example.Killed "$tmp/killed"
killed_mount() { awk '$5 ~ /\/run\/(sandbox|photogate-run)\/[A-Za-z0-9]+\/view$/ && / photogate:org.example.Killed / {print $5; exit}' /proc/self/mountinfo; }
killed_gone() { [[ -z $(killed_mount) ]]; }
on_exit 'for m in $(awk '"'"'/ photogate:org.example.Killed / {print $5}'"'"' /proc/self/mountinfo); do force_unmount "$m"; done'
"$pg" run org.example.Killed --bind "$tmp/killed:/flag" -- sh -c 'touch /flag/in; exec sleep 600' & runner=$!
on_exit "kill -9 $runner"
wait_until 30 test -e "$tmp/killed/in" || fail "the killed run's command did not start"
killed_view=$(killed_mount)
[[ -n $killed_view ]] || fail "the killed run's view is not mounted"
"$pg" run org.example.Killed --bind "$tmp/killed:/flag" -- sh -c '
    touch /flag/second
    while [ ! -e /flag/go ]; do sleep 0.02; done
    cmp -s /flag/granted.jpg "$HOME/Pictures/granted.jpg" || exit 61
    exit 0' & second=$!
on_exit "kill -9 $second"
cp "$tmp/src/granted.jpg" "$tmp/killed/granted.jpg"
wait_until 30 test -e "$tmp/killed/second" || fail "the second run's command did not start"
kill -9 "$runner"
wait "$runner" 2>/dev/null || true
wait_until 20 killed_gone || fail "a run killed with SIGKILL left its view mounted at $killed_view"
touch "$tmp/killed/go"
set +e; wait "$second"; status=$?; set -e
[[ $status == 0 ]] || fail "a run reusing the killed run's view lost it: exit $status (61: reading the view)"
killed_daemon_gone() { [[ -z $(grep org.example.Killed <<<"$("$pg" mounts)") ]]; }
wait_until 20 killed_daemon_gone || fail "the killed run's view is still registered: $("$pg" mounts)"
wait_until 20 test ! -e "${killed_view%/view}" || fail "the killed run's folder was left: ${killed_view%/view}"
# A mount for a process already gone is refused, not left for no one.
true & gone=$!; wait $gone
mkdir -p "$tmp/kmp"; on_exit "force_unmount '$tmp/kmp'"
set +e; out=$("$pg" mount org.example.Killed "$tmp/kmp" --while-pid $gone 2>&1); status=$?; set -e
[[ $status == 72 ]] || fail "a mount for an ended process: exit $status ($out)"
has "is not running" "$out" || fail "a mount for an ended process says: $out"
! is_mounted "$tmp/kmp" || fail "a mount for an ended process was made"

# Termination signals sent to `run` reach the command, which may handle them; run waits for it
# and unmounts after. A SIGTERM to run (timeout(1), a supervisor) was ignored and the command ran
# on; a ^C at the terminal (SIGINT to run's process group) ended bubblewrap, which killed the
# sandbox without running the command's handler.
"$pg" authorize org.example.Signalled --access read-write --status limited >/dev/null
signalled() { grep -q " photogate:org.example.Signalled " /proc/self/mountinfo; }
on_exit 'for m in $(awk '"'"'/ photogate:org.example.Signalled / {print $5}'"'"' /proc/self/mountinfo); do force_unmount "$m"; done'
# (30 s: without the relay, a SIGTERM is ignored and the run ends only when the command does.)
trapping='trap "touch /flag/caught-\$1; kill \$s 2>/dev/null; exit 3" "$1"; touch /flag/in; sleep 30 & s=$!; wait $s'
# (BLOCKED: run started with the signals blocked, as a test runner or supervisor may leave them;
# the mask survives exec, and blocked they were never relayed.)
blocked=(python3 -c 'import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT})
os.execvp(sys.argv[1], sys.argv[1:])')
# (FOREGROUND: as a terminal's foreground job, with SIGINT and SIGQUIT at their defaults; this
# script's background jobs start with them ignored, which run leaves as they are, below.)
foreground=(python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL); signal.signal(signal.SIGQUIT, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])')
for variant in TERM INT HUP TERM-BLOCKED; do
    sig=${variant%-BLOCKED}
    wrap=("${foreground[@]}"); [[ $variant == *-BLOCKED ]] && wrap+=("${blocked[@]}")
    rm -rf "$tmp/signalled"; mkdir -p "$tmp/signalled"; sandbox_writable org.example.Signalled "$tmp/signalled"
    # In a session of its own, as a shell's foreground job is: its process group is run's.
    setsid "${wrap[@]}" "$pg" run org.example.Signalled --bind "$tmp/signalled:/flag" -- sh -c "$trapping" sh $sig & runner=$!
    on_exit "kill -9 $runner 2>/dev/null"
    wait_until 30 test -e "$tmp/signalled/in" || fail "the command did not start (SIG$sig)"
    if [[ $sig == TERM ]]; then kill -TERM "$runner"; else kill -$sig -- -"$runner"; fi
    set +e; wait "$runner"; status=$?; set -e
    [[ -e $tmp/signalled/caught-$sig ]] || fail "SIG$sig to run did not reach the command's handler (exit $status)"
    [[ $status == 3 ]] || fail "run exits with the command's status after SIG$sig: $status"
    ! signalled || fail "the view stayed mounted after SIG$sig: $(grep Signalled /proc/self/mountinfo)"
done

# A signal ignored when run starts (a shell's background job ignores SIGINT: a ^C at the terminal
# is not for it) stays ignored: run does not catch it, and the command inherits it ignored.
rm -rf "$tmp/signalled"; mkdir -p "$tmp/signalled"; sandbox_writable org.example.Signalled "$tmp/signalled"
setsid sh -c 'trap "" INT; exec "$@"' sh "$pg" run org.example.Signalled --bind "$tmp/signalled:/flag" -- \
    sh -c 'trap "touch /flag/caught-INT" INT; trap "touch /flag/caught-TERM; exit 3" TERM; touch /flag/in; sleep 30 & s=$!; wait $s; wait $s; exit 0' & runner=$!
on_exit "kill -9 $runner 2>/dev/null"
wait_until 30 test -e "$tmp/signalled/in" || fail "the command did not start (ignored SIGINT)"
kill -INT -- -"$runner"
# Then a SIGTERM, which is relayed after it (in order) and ends the command: had the SIGINT been
# relayed, the command's INT trap would have run first.
kill -TERM "$runner"
set +e; wait "$runner"; status=$?; set -e
[[ -e $tmp/signalled/caught-TERM && $status == 3 ]] || fail "run with SIGINT ignored: the SIGTERM after it was not relayed (exit $status)"
[[ ! -e $tmp/signalled/caught-INT ]] || fail "a SIGINT ignored when run started reached the command"

# Nothing but stdin, stdout and stderr comes in (photogate's own descriptors and the caller's: a
# socket among them would reach the host's network), no capabilities even as root (with them the
# command could unmount a mask), and of the environment only the allow-list (PATH, LANG, LC_*,
# TERM, TZ, ...), what --env names, HOME and PHOTOGATE_APP: not the library's location, nor the
# caller's tokens, agent sockets or D-Bus address.
# Started by root, the command does not run as root (as uid 0 without capabilities it could still
# write the host's /proc/sys: kernel.core_pattern runs a program of its choosing as root), and
# nothing in /proc/sys is writable to it, with its own network or the host's.
core_uses_pid=$(cat /proc/sys/kernel/core_uses_pid)
# (Written back should the sandbox manage to change it.)
on_exit "echo $core_uses_pid >/proc/sys/kernel/core_uses_pid"
for net in "" --share-net; do
    set +e
    SSH_AUTH_SOCK=/tmp/agent.sock DBUS_SESSION_BUS_ADDRESS=unix:path=/tmp/bus GITHUB_TOKEN=ghp_secret PASSED_ON=yes LC_TIME=C.UTF-8 \
    "$pg" run org.example.Boxed $net --env PASSED_ON --env SET_HERE=1 -- sh -c '
        fds=$(ls /proc/self/fd | sort -n | tr "\n" " ")
        [ "$fds" = "0 1 2 3 " ] || { echo "inherited descriptors: $fds" >&2; exit 81; }
        grep -q "^CapEff:[[:space:]]*0000000000000000$" /proc/self/status || { grep Cap /proc/self/status >&2; exit 82; }
        env | grep -E "^(PHOTOGATE_LIBRARY|SSH_AUTH_SOCK|DBUS_SESSION_BUS_ADDRESS|GITHUB_TOKEN)=" >&2 && exit 83
        [ "$PHOTOGATE_APP" = org.example.Boxed ] || exit 84
        [ "$PASSED_ON" = yes ] && [ "$SET_HERE" = 1 ] && [ "$LC_TIME" = C.UTF-8 ] && [ -n "$PATH" ] || { env >&2; exit 85; }
        [ "$(id -u)" != 0 ] && [ "$(id -g)" != 0 ] || { id >&2; exit 86; }
        ! grep -qE "^(Uid|Gid):[[:space:]]+0[[:space:]]" /proc/self/status || exit 86
        w=$(find /proc/sys -writable 2>/dev/null | head -5)
        [ -z "$w" ] || { echo "writable: $w" >&2; exit 87; }
        { echo 1 >/proc/sys/kernel/core_uses_pid; } 2>/dev/null && exit 88
        exit 0' 9</dev/null
    status=$?
    set -e
    [[ $status == 0 ]] || fail "the sandbox's start ${net:-(own network)}: exit $status (81: descriptors, 82: capabilities, 83: environment, 84: PHOTOGATE_APP, 85: the allow-list or --env, 86: runs as root, 87/88: /proc/sys is writable)"
done
# Started by root (a hostile review of the first version): the command's environment reaches only
# the command (an LD_PRELOAD passed for the app loaded into setpriv, still root); each app's
# runs have a uid of their own (one for all let a set-user-id program left by one app into every
# root run's view); the caller's session keyring does not come in; another user cannot pass
# through a root run's view even to names the kernel has cached.
if [[ $(id -u) == 0 ]]; then
    mkdir -p "$tmp/tools" "$tmp/uidlog"; chmod 1777 "$tmp/uidlog"
    cc=$(command -v cc || command -v clang || true)
    if [[ -n $cc ]]; then
        "$cc" -shared -fPIC -O1 -o "$tmp/tools/uid-log.so" "$root/scripts/test.d/c/uid-log.c" || fail "cannot build uid-log.so"
        "$cc" -O1 -o "$tmp/tools/keyring" "$root/scripts/test.d/c/keyring.c" || fail "cannot build keyring"
        chmod 755 "$tmp/tools" "$tmp/tools/"*
        # (The same paths inside and out: a process outside that got the variable loads it too.)
        "$pg" run org.example.Boxed --ro-bind "$tmp/tools:$tmp/tools" --bind "$tmp/uidlog:$tmp/uidlog" \
            --env LD_PRELOAD="$tmp/tools/uid-log.so" --env UID_LOG_FILE="$tmp/uidlog/log" -- true || fail "run with --env LD_PRELOAD: exit $?"
        has "uid=" "$(cat "$tmp/uidlog/log" 2>/dev/null)" || fail "the preload never reached the command"
        ! grep -q "^uid=0$" "$tmp/uidlog/log" || fail "an LD_PRELOAD passed with --env was loaded by a process running as root: $(sort "$tmp/uidlog/log" | uniq -c)"
        set +e
        "$tmp/tools/keyring" plant "$pg" run org.example.Boxed --ro-bind "$tmp/tools:/tools" -- /tools/keyring find; status=$?
        set -e
        [[ $status == 0 ]] || fail "the caller's session keyring reached the command (exit $status; 3: the key was found)"
    else
        say "no C compiler: the --env LD_PRELOAD and keyring checks were not run"
    fi
    a_uid=$("$pg" run org.example.Boxed -- id -u)
    "$pg" authorize org.example.Second --access read-write --status authorized >/dev/null
    b_uid=$("$pg" run org.example.Second -- id -u)
    [[ $a_uid != "$b_uid" ]] || fail "two apps' runs share uid $a_uid"
    [[ $("$pg" run org.example.Boxed -- id -u) == "$a_uid" ]] || fail "an app's runs do not keep their uid"
    # However the library's path is spelled, and as --show-user says (uid and gid the app's own).
    [[ $(PHOTOGATE_LIBRARY="$(dirname "$PHOTOGATE_LIBRARY")/./$(basename "$PHOTOGATE_LIBRARY")/" "$pg" run org.example.Boxed --show-user) == "$a_uid:$a_uid" ]] \
        || fail "--show-user with the library spelled another way: $(PHOTOGATE_LIBRARY="$PHOTOGATE_LIBRARY/" "$pg" run org.example.Boxed --show-user), the command ran as $a_uid"
    # Another user, knowing the view's path from the mount table, gets nothing, cached or not.
    second_user pgrun
    mkdir -p "$tmp/vsig"; sandbox_writable org.example.Boxed "$tmp/vsig"
    "$pg" run org.example.Boxed --bind "$tmp/vsig:/sig" -- sh -c 'ls -l "$HOME/Pictures" >/dev/null; touch /sig/in; while [ ! -e /sig/go ]; do sleep 0.02; done' & viewer=$!
    on_exit "touch '$tmp/vsig/go'; kill -9 $viewer 2>/dev/null"
    wait_until 30 test -e "$tmp/vsig/in" || fail "the viewing run did not start"
    view=$(awk '/ photogate:org.example.Boxed / && $5 ~ /photogate-run/ {print $5; exit}' /proc/self/mountinfo)
    [[ -n $view ]] || fail "the root run's view is not in the mount table"
    set +e
    runuser -u "$user" -- stat "$view/granted.jpg" >/dev/null 2>&1; cached=$?
    runuser -u "$user" -- ls "$view" >/dev/null 2>&1; listed=$?
    set -e
    touch "$tmp/vsig/go"; wait $viewer || true
    [[ $cached != 0 && $listed != 0 ]] || fail "another user reached a root run's view (stat of a cached name: $cached, ls: $listed)"
fi

# A folder the command's user cannot reach (root's 0700) is refused before the command starts,
# with what to do (bubblewrap said only "Can't find source path /proc/self/fd/3").
mkdir -p "$tmp/closed/inner"; chmod 700 "$tmp/closed"
set +e; out=$("$pg" run org.example.Boxed --ro-bind "$tmp/closed/inner:/c" -- true 2>&1); status=$?; set -e
[[ $status == 64 ]] || fail "a folder closed to the command's user: exit $status ($out)"
has "cannot pass through $tmp/closed" "$out" || fail "a folder closed to the command's user says: $out"
# --env cannot set what run sets, and --user is root's alone to choose, never root.
set +e
out=$("$pg" run org.example.Boxed --env PHOTOGATE_LIBRARY=/x -- true 2>&1); status=$?
[[ $status == 64 ]] || fail "--env PHOTOGATE_LIBRARY: exit $status ($out)"
out=$("$pg" run org.example.Boxed --user root -- true 2>&1); status=$?
[[ $status == 64 ]] || fail "--user root: exit $status ($out)"
out=$("$pg" run org.example.Boxed --user 0:5 -- true 2>&1); status=$?
[[ $status == 64 ]] || fail "--user 0:5: exit $status ($out)"
"$pg" run org.example.Boxed --user 4242:4243 -- sh -c '[ "$(id -u):$(id -g)" = 4242:4243 ]'; status=$?
[[ $status == 0 ]] || fail "--user 4242:4243: exit $status"
set -e

# Hidden places are found by where they are, not how the bound folder is spelled: "//", ".",
# "..", a symlink, /proc/self/root, a bind mount of the folder elsewhere; /proc under a bound
# folder is masked too (/proc/PID/root reaches everything).
ln -s "$data" "$tmp/datalink"
# (Not --ro-bind /: with any other photogate view mounted anywhere, as while the suite runs, that
# is refused; /proc comes in here through a bind mount of it.)
mkdir -p "$tmp/alias" "$tmp/hostlike/proc"
on_exit "umount -l '$tmp/alias'"
on_exit "umount -l '$tmp/hostlike/proc'"
mount --bind "$data" "$tmp/alias"
mount --bind /proc "$tmp/hostlike/proc"
set +e
"$pg" run org.example.Boxed --ro-bind "$tmp//data:/d1" --ro-bind "$data/.:/d2" --ro-bind "$data/work/..:/d3" \
    --ro-bind "$tmp/datalink:/d4" --ro-bind "/proc/self/root$data:/d5" --ro-bind "$tmp/alias:/d6" --ro-bind "$tmp/hostlike:/host" -- sh -c '
    for d in /d1 /d2 /d3 /d4 /d5 /d6; do
        [ -d $d/work ] || exit 85
        [ -z "$(ls -A $d/library 2>/dev/null)" ] || { echo "$d/library: $(ls -A $d/library)" >&2; exit 86; }
    done
    [ -z "$(ls -A /host/proc 2>/dev/null)" ] || exit 87
    ! find / \( -path /proc -o -path /sys -o -path /dev -o -path /usr \) -prune -o -name photogate.sqlite -print 2>/dev/null | grep -q . || exit 93
    # The folders came in by descriptor (--bind-fd): none is left open in the sandbox.
    [ "$(ls /proc/self/fd | sort -n | tr "\n" " ")" = "0 1 2 3 " ] || { ls -l /proc/self/fd >&2; exit 89; }
    exit 0' sh "$PHOTOGATE_LIBRARY"
status=$?
set -e
umount -l "$tmp/alias"
umount -l "$tmp/hostlike/proc"
[[ $status == 0 ]] || fail "other spellings of a bound folder: exit $status (86, 93: the library is visible inside; 87: the host's /proc; 89: a bound folder's descriptor is open inside)"

# Where a place really is comes from the kernel, not from reading paths as text: a part of the
# library on a mount of its own, shown elsewhere by a bind mount; aliases under mount points whose
# names are not UTF-8 (\xff) or end in U+0600 (which joins the next character as a String); a
# second proc mount; a store moved to another disk behind a symlink; /dev/fd/3, which is
# photogate's descriptor 3 here and would be another in bubblewrap.
mkdir -p "$PHOTOGATE_LIBRARY/extra" "$tmp/pub/alias" "$tmp/pub/al$(printf '\xff')" "$tmp/pub/q$(printf '\xd8\x80')" "$tmp/chroot/proc"
on_exit "umount -l '$PHOTOGATE_LIBRARY/extra'"
mount -t tmpfs -o size=64k pgextra "$PHOTOGATE_LIBRARY/extra"
echo private >"$PHOTOGATE_LIBRARY/extra/marker"
for m in "$tmp/pub/alias" "$tmp/pub/al$(printf '\xff')" "$tmp/pub/q$(printf '\xd8\x80')" "$tmp/chroot/proc"; do
    on_exit "umount -l '$m'"
done
mount --bind "$PHOTOGATE_LIBRARY/extra" "$tmp/pub/alias"
mount --bind "$data" "$tmp/pub/al$(printf '\xff')"
mount --bind "$data" "$tmp/pub/q$(printf '\xd8\x80')"
mount -t proc proc "$tmp/chroot/proc"
moved="$tmp/moved-library"
( export PHOTOGATE_LIBRARY="$moved"
  "$pg" init >/dev/null
  "$pg" import "$tmp/src" >/dev/null
  "$pg" authorize org.example.Boxed --access read-write --status limited >/dev/null )
mkdir -p "$tmp/disk"
mv "$moved/store" "$tmp/disk/store"
ln -s "$tmp/disk/store" "$moved/store"
set +e
"$pg" run org.example.Boxed --ro-bind "$tmp/pub:/pub" --ro-bind "$tmp/chroot:/c" --ro-bind /dev/fd/3:/hp -- sh -c '
    [ -z "$(ls -A /pub/alias 2>/dev/null)" ] || { echo "alias: $(ls -A /pub/alias)" >&2; exit 71; }
    for d in /pub/*/; do [ -z "$(ls -A "$d/library" 2>/dev/null)" ] || { echo "$d: $(ls -A "$d/library")" >&2; exit 72; }; done
    [ -z "$(ls -A /c/proc 2>/dev/null)" ] || exit 73
    [ -c /hp ] || { ls -ld /hp >&2; exit 74; }
    exit 0' 3</dev/null
status=$?
[[ $status == 0 ]] || fail "places found by the kernel: exit $status (71: a part of the library on its own mount, 72: an alias under an odd name, 73: a second proc mount, 74: /dev/fd/3 read as bubblewrap's)"
PHOTOGATE_LIBRARY="$moved" "$pg" run org.example.Boxed --ro-bind "$tmp/disk:/disk" -- sh -c '
    [ -d /disk ] && [ -z "$(ls -A /disk/store 2>/dev/null)" ] || exit 75'
status=$?
[[ $status == 0 ]] || fail "a store moved behind a symlink: exit $status (75: visible under the folder passed in)"
# A folder put at or around the pictures folder is refused: a mask there would be made in the view.
out=$("$pg" run org.example.Boxed --ro-bind "$data:$HOME/Pictures/x" -- sh -c 'exit 0' 2>&1)
status=$?
set -e
[[ $status == 64 ]] || fail "a folder passed in under the pictures folder: exit $status, expected 64 ($out)"
has "inside the pictures folder" "$out" || fail "no reason given: $out"
for m in "$tmp/pub/alias" "$tmp/pub/al$(printf '\xff')" "$tmp/pub/q$(printf '\xd8\x80')" "$tmp/chroot/proc" "$PHOTOGATE_LIBRARY/extra"; do
    umount -l "$m"
done

# As root, mounts made on the host after the command started do not reach it, even where the
# host's mounts are shared (systemd's default; here a mount namespace of the test's own, private
# from the real host's and then made shared inside).
set +e
later_mount_check "$tmp" "$data" org.example.Boxed
status=$?
set -e
[[ $status == 0 ]] || fail "a mount made after the start: exit $status (76: it reached the sandbox)"

# An overlay shows its layers merged (a container's root built on the host's folders): one with a
# layer holding the library, or inside it, is masked whole when passed read-only (a rename inside
# it shows the library under any name) and refused writable. A library on an overlay is hidden in
# the overlay's layers, whole. An unrelated overlay, and one whose layers cannot be placed (a
# container's root, its layers named as the host sees them), pass in as they are.
o="$tmp/ovl"
mkdir -p "$o/m" "$o/lo" "$o/dx" "$o/d:a,t" "$o/d\\x"
touch "$o/lo/mine"
on_exit "umount -l '$o/m' '$o/d:a,t' '$o/d\\x' 2>/dev/null; true"
# $1: what; $2: mount options; $3: 1 if the overlay must pass in unmasked (its file "mine" shows);
# $4: a command run once it is mounted
ov_case() {
    (cd "$o" && mount -t overlay overlay -o "$2" "$o/m") || fail "$1: cannot mount the overlay ($2)"   # relative to $o
    eval "${4:-}"
    set +e
    "$pg" run org.example.Boxed --ro-bind "$o/m:/ov" -- sh -c '
        find /ov \( -name "*.jpg" -o -name "photogate.sqlite*" \) | grep -q . && { find /ov | head >&2; exit 72; }
        [ "$0" = 1 ] && [ ! -e /ov/mine ] && exit 71
        exit 0' "$3"
    local status=$?
    out=$("$pg" run org.example.Boxed --bind "$o/m:/ov" -- true 2>&1)
    local wstatus=$?
    set -e
    umount "$o/m"
    [[ $status == 0 ]] || fail "$1: exit $status (72: the library shows, 71: the overlay is hidden)"
    if [[ $3 == 1 ]]; then
        [[ $wstatus == 0 ]] || fail "$1, passed writable: exit $wstatus ($out)"
    else
        [[ $wstatus == 64 ]] || fail "$1, passed writable: exit $wstatus, expected 64 ($out)"
    fi
}
if mount -t overlay overlay -o "lowerdir=$o/lo:$o/dx" "$o/m" 2>/dev/null; then
    umount "$o/m"
    ov_case "an unrelated overlay" "lowerdir=$o/lo:$o/dx" 1
    # Layers named with ':' and ',' (escaped in the mount's options), here a bind mount of the
    # folder holding the library; the library renamed inside the overlay before the run.
    mount --bind "$data" "$o/d:a,t"
    mkdir -p "$o/up" "$o/wk"
    mount -t overlay overlay -o "lowerdir=$o/lo:$o/d\\:a\\,t,upperdir=$o/up,workdir=$o/wk,redirect_dir=on" "$o/m"
    grep -q 'd\\134:a\\134\\054t' /proc/self/mountinfo || fail "the layer is not named as expected: $(grep ovl /proc/self/mountinfo)"
    mv "$o/m/library" "$o/m/renamed"
    [[ -f $o/m/renamed/photogate.sqlite ]] || fail "the overlay does not show the renamed library"
    umount "$o/m"
    ov_case "an overlay of a folder holding the library, renamed inside it" "lowerdir=$o/lo:$o/d\\:a\\,t,upperdir=$o/up,workdir=$o/wk,redirect_dir=on" 0
    umount "$o/d:a,t"
    # A layer given with lowerdir+= keeps its backslash ("dx" is an empty folder beside it).
    mount --bind "$data" "$o/d\\x"
    # (lowerdir+= is Linux >= 6.8's.)
    if mount -t overlay overlay -o "lowerdir+=$o/lo,lowerdir+=$o/dx" "$o/m" 2>/dev/null; then
        umount "$o/m"
        ov_case "a layer named with a backslash (lowerdir+=)" "lowerdir+=$o/lo,lowerdir+=$o/d\\x" 0
    else
        say "lowerdir+= not checked: this kernel's overlayfs does not take it"
    fi
    umount "$o/d\\x"
    ln -s "$data" "$o/link"
    ov_case "a layer named through a symlink" "lowerdir=$o/lo:$o/link" 0
    ov_case "an overlay of the library's store" "lowerdir=$o/lo:$PHOTOGATE_LIBRARY/store" 0
    # A library on an overlay, renamed in it (redirect_dir): its files are in the layers under
    # other names, and each layer is hidden whole; passed writable, refused.
    mkdir -p "$o/l2/lo" "$o/l2/up" "$o/l2/wk" "$o/l2/m"
    PHOTOGATE_LIBRARY="$o/l2/lo/old" "$pg" init >/dev/null
    PHOTOGATE_LIBRARY="$o/l2/lo/old" "$pg" import "$tmp/src" >/dev/null
    on_exit "umount -l '$o/l2/m' 2>/dev/null; true"
    mount -t overlay overlay -o "lowerdir=$o/l2/lo,upperdir=$o/l2/up,workdir=$o/l2/wk,redirect_dir=on" "$o/l2/m"
    mv "$o/l2/m/old" "$o/l2/m/library"
    l2="$o/l2/m/library"
    PHOTOGATE_LIBRARY="$l2" "$pg" authorize org.example.Boxed --access read-write --status authorized >/dev/null
    [[ -f $o/l2/up/library/photogate.sqlite ]] || fail "the library on the overlay is not in its upper layer"
    set +e
    PHOTOGATE_LIBRARY="$l2" "$pg" run org.example.Boxed --ro-bind "$o/l2/up:/u" --ro-bind "$o/l2/lo:/l" -- sh -c '
        [ -e "$HOME/Pictures/granted.jpg" ] || exit 74
        find /u /l \( -name "*.jpg" -o -name "photogate.sqlite*" \) | grep -q . && { find /u /l | head >&2; exit 75; }
        exit 0'
    status=$?
    out=$(PHOTOGATE_LIBRARY="$l2" "$pg" run org.example.Boxed --bind "$o/l2/lo:/l" -- true 2>&1)
    wstatus=$?
    set -e
    [[ $status == 0 ]] || fail "a library on an overlay, its layers passed in: exit $status (75: the library shows)"
    [[ $wstatus == 64 ]] || fail "a library on an overlay, its lower layer passed writable: exit $wstatus, expected 64 ($out)"
    # With a bind of the overlay (another entry of it in the mount table): a folder beside the
    # library passes in, and the library is masked where the bind shows it.
    mkdir -p "$o/l2/m/beside" "$o/l2b"
    on_exit "umount -l '$o/l2b' 2>/dev/null; true"
    mount --bind "$o/l2/m" "$o/l2b"
    set +e
    out=$(PHOTOGATE_LIBRARY="$l2" "$pg" run org.example.Boxed --ro-bind "$o/l2/m/beside:/b" --ro-bind "$o/l2b:/y" -- sh -c '
        [ -d /b ] && [ -d /y/beside ] || exit 78
        find /y \( -name "*.jpg" -o -name "photogate.sqlite*" \) | grep -q . && { find /y | head >&2; exit 79; }
        exit 0' 2>&1)
    status=$?
    set -e
    umount "$o/l2b"
    [[ $status == 0 ]] || fail "a library on an overlay with a bind of it: exit $status (64: the folder beside it refused, 79: the library shows through the bind) $out"
    # An overlay mounted on its own layer (lowerdir=D mounted on D, as systemd-sysext does on
    # /usr), the library on it: the folder beneath shows through another mount of its disk (here
    # a bind of the folder above); a folder beside the library on the overlay passes in.
    mkdir -p "$o/hd/data/docs" "$o/hd/up" "$o/hd/wk" "$o/alt"
    PHOTOGATE_LIBRARY="$o/hd/data/library" "$pg" init >/dev/null
    PHOTOGATE_LIBRARY="$o/hd/data/library" "$pg" import "$tmp/src" >/dev/null
    PHOTOGATE_LIBRARY="$o/hd/data/library" "$pg" authorize org.example.Boxed --access read-write --status authorized >/dev/null
    on_exit "umount -l '$o/hd/data' '$o/alt' 2>/dev/null; true"
    mount --bind "$o/hd" "$o/alt"
    mount -t overlay overlay -o "lowerdir=$o/hd/data,upperdir=$o/hd/up,workdir=$o/hd/wk" "$o/hd/data"
    set +e
    PHOTOGATE_LIBRARY="$o/hd/data/library" "$pg" run org.example.Boxed --ro-bind "$o/alt/data:/x" --ro-bind "$o/hd/data/docs:/docs" -- sh -c '
        [ -d /docs ] || exit 76
        find /x \( -name "*.jpg" -o -name "photogate.sqlite*" \) | grep -q . && { find /x | head >&2; exit 77; }
        exit 0'
    status=$?
    set -e
    umount "$o/hd/data"
    umount "$o/alt"
    [[ $status == 0 ]] || fail "an overlay on its own layer, the library on it: exit $status (77: the folder beneath shows it, 64: the folder beside the library is refused)"
    # Under an overlay whose layers cannot be placed (a container's root, its layers named as the
    # host sees them), on a tmpfs mounted on it: a folder of the overlay passes in.
    mkdir -p "$o/l2/m/home/docs" "$o/l2/m/vol"
    umount "$o/l2/m"
    mkdir -p "$o/c"
    on_exit "umount -R -l '$o/c' 2>/dev/null; true"
    (cd "$o/l2" && mount -t overlay overlay -o "lowerdir=lo:up" "$o/c")   # read-only, named relative
    mount -t tmpfs -o size=16m none "$o/c/vol"
    l3="$o/c/vol/library"
    PHOTOGATE_LIBRARY="$l3" "$pg" init >/dev/null
    PHOTOGATE_LIBRARY="$l3" "$pg" authorize org.example.Boxed --access read-write --status authorized >/dev/null
    set +e
    out=$(PHOTOGATE_LIBRARY="$l3" "$pg" run org.example.Boxed --ro-bind "$o/c/home:/h" -- sh -c '[ -d /h/docs ]' 2>&1)
    status=$?
    set -e
    umount -R "$o/c"
    [[ $status == 0 ]] || fail "a folder of a container's root, the library on a tmpfs mounted on it: exit $status ($out)"
else
    say "overlays not checked: this kernel cannot mount one here"
fi

# A folder holding the pictures folder (a home passed in) is fine: the view is bound over it.
mkdir -p "$tmp/homelike/Pictures" "$tmp/homelike/docs"
echo doc >"$tmp/homelike/docs/d.txt"
set +e
"$pg" run org.example.Boxed --ro-bind "$tmp/homelike:$HOME" -- sh -c '
    [ "$(cat "$HOME/docs/d.txt")" = doc ] || exit 61
    [ -e "$HOME/Pictures/granted.jpg" ] || exit 62
    exit 0'
status=$?
[[ $status == 0 ]] || fail "a folder holding the pictures folder: exit $status (61: not passed in, 62: the view is not over it)"
# A folder passed writable inside one passed read-only stays writable (binds go outer first,
# whatever the flag), and a bare "~" is the home.
mkdir -p "$tmp/homelike/work"; sandbox_writable org.example.Boxed "$tmp/homelike/work"
"$pg" run org.example.Boxed --bind "$tmp/homelike/work:/hl/work" --ro-bind "$tmp/homelike:/hl" -- sh -c '
    touch /hl/work/written || exit 57
    touch /hl/docs/written 2>/dev/null && exit 58
    exit 0'
status=$?
[[ $status == 0 && -f $tmp/homelike/work/written ]] || fail "a writable folder inside a read-only one: exit $status (57: not writable, 58: the outer one is)"
HOME="$tmp/homelike" "$pg" run org.example.Boxed --ro-bind "~:/tilde" -- sh -c '[ "$(cat /tilde/docs/d.txt)" = doc ]'
status=$?
[[ $status == 0 ]] || fail "--ro-bind ~:/tilde: exit $status"
out=$("$pg" run org.example.Boxed --bind "" -- true 2>&1)
status=$?
[[ $status == 64 ]] || fail "--bind \"\": exit $status, expected 64 ($out)"
# A proc mount whose mount point is not UTF-8 is found by its bytes and masked.
odd="$tmp/pub2/c$(printf '\xff')"
mkdir -p "$odd/proc"
on_exit "umount -l '$odd/proc'"
mount -t proc proc "$odd/proc"
"$pg" run org.example.Boxed --ro-bind "$tmp/pub2:/pub2" -- sh -c '
    for d in /pub2/*/proc; do [ -z "$(ls -A "$d" 2>/dev/null)" ] || exit 63; done
    exit 0'
status=$?
umount -l "$odd/proc"
set -e
[[ $status == 0 ]] || fail "a proc mount under a non-UTF-8 name: exit $status (63: it came in)"

# A bound folder inside the library, or holding another app's view, is refused before the command
# runs (a mask of a view would leave it, with its app id, in the sandbox's mount table).
set +e
out=$("$pg" run org.example.Boxed --ro-bind "$PHOTOGATE_LIBRARY/store:/s" -- sh -c 'exit 0' 2>&1)
status=$?
set -e
[[ $status == 64 ]] || fail "a folder inside the library was passed in: exit $status, expected 64 ($out)"
has "inside the photo library" "$out" || fail "no reason given: $out"
mkdir -p "$data/work/ov"
on_exit "force_unmount '$data/work/ov'"
# A view the command could enter (allow_other) is refused ...
"$pg" mount org.example.Other "$data/work/ov" -o allow_other >/dev/null
set +e
out=$("$pg" run org.example.Boxed --ro-bind "$data:/data" -- sh -c 'exit 0' 2>&1)
status=$?
set -e
"$pg" unmount "$data/work/ov" >/dev/null
[[ $status == 64 ]] || fail "a folder holding another app's view was passed in: exit $status, expected 64 ($out)"
has "another photogate view" "$out" || fail "no reason given: $out"
# ... one it cannot (root's own, without allow_other, while root's run runs its command as
# another user; another user's, below a shared folder) does not count: it would let anyone stop
# another's run by mounting a view below /srv, /tmp or /. Inside, nothing of it shows (this
# library's own is masked; another's is closed, EACCES).
if [[ $(id -u) == 0 ]]; then
    "$pg" mount org.example.Other "$data/work/ov" >/dev/null
    set +e
    out=$("$pg" run org.example.Boxed --ro-bind "$data:/data" -- sh -c '[ -n "$(ls -A /data/work/ov 2>/dev/null)" ] && exit 61; exit 0' 2>&1)
    status=$?
    set -e
    "$pg" unmount "$data/work/ov" >/dev/null
    [[ $status == 0 ]] || fail "a folder holding a view the command cannot enter: exit $status (61: its photos show) $out"
fi

# Paths are compared byte for byte, as the kernel names files. Swift's String calls `café` and
# `cafe` + U+0301 (two folders on disk) equal, and folds a combining mark after "/" into the "/".
acute=$(printf '\xcc\x81')                 # U+0301, combining acute accent
nfc=$(printf 'caf\xc3\xa9')                 # café, precomposed: a different folder from $nfd
nfd="cafe$acute"
# 1. A library in a folder whose name starts with a combining mark, under a folder passed with
#    --ro-bind: "$tmp/marks/" + U+0301 "lib" does not start with "$tmp/marks/" to String.
export PHOTOGATE_LIBRARY="$tmp/marks/${acute}lib"
mkdir -p "$tmp/marks"
"$pg" init >/dev/null
"$pg" import "$tmp/src" >/dev/null
"$pg" authorize org.example.Boxed --access read-write --status limited >/dev/null
set +e
"$pg" run org.example.Boxed --ro-bind "$tmp/marks:/marks" -- sh -c '
    [ -d /marks ] || exit 91
    [ -z "$(ls -A "/marks/$1" 2>/dev/null)" ] || { ls -A "/marks/$1" >&2; exit 92; }
    ! find / \( -path /proc -o -path /sys -o -path /dev -o -path /usr \) -prune -o -name photogate.sqlite -print 2>/dev/null | grep -q . || exit 93
    exit 0' sh "${acute}lib"
status=$?
set -e
[[ $status == 0 ]] || fail "a library named with a leading combining mark under --ro-bind: run exited $status (92/93: the library is visible inside)"
# 2. Masks land only where the hidden path is: the library in "$tmp/eq/$nfc/lib", and the user's
#    own "$tmp/eq/$nfd/lib" beside it, passed with --bind, must stay visible, not be covered as if
#    it held the library.
export PHOTOGATE_LIBRARY="$tmp/eq/$nfc/lib"
mkdir -p "$tmp/eq/$nfc" "$tmp/eq/$nfd/lib"
echo mine >"$tmp/eq/$nfd/lib/notes.txt"
"$pg" init >/dev/null
"$pg" import "$tmp/src" >/dev/null
"$pg" authorize org.example.Boxed --access read-write --status limited >/dev/null
# 3. ... and one mask is left out only when it is inside another by bytes: the library's folder
#    passed as /x/$nfd (masked whole) must not stand in for the mask of /x/$nfc/lib.
set +e
"$pg" run org.example.Boxed --bind "$tmp/eq/$nfd:/nfd" --ro-bind "$tmp/eq/$nfc:/x/$nfc" \
    --ro-bind "$PHOTOGATE_LIBRARY:/x/$nfd" -- sh -c '
    [ "$(cat /nfd/lib/notes.txt 2>/dev/null)" = mine ] || exit 94
    [ -z "$(ls -A "/x/$1/lib" 2>/dev/null)" ] || { ls -A "/x/$1/lib" >&2; exit 95; }
    [ -z "$(ls -A "/x/$2" 2>/dev/null)" ] || exit 96
    ! find / \( -path /proc -o -path /sys -o -path /dev -o -path /usr \) -prune -o -name photogate.sqlite -print 2>/dev/null | grep -q . || exit 93
    exit 0' sh "$nfc" "$nfd"
status=$?
set -e
[[ $status == 0 ]] || fail "canonically equivalent folder names: run exited $status (94: the user's folder was masked; 93/95/96: the library is visible inside)"
[[ $(cat "$tmp/eq/$nfd/lib/notes.txt") == mine ]] || fail "the user's file changed"
say "ok"
