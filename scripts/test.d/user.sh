#!/usr/bin/env bash
# A second, unprivileged user with a library in their home mounts and unmounts their own view
# through the setuid fusermount3; reads come from the daemon (passthrough needs CAP_SYS_ADMIN)
# and `photogate mounts` says so. Where /dev/fuse is closed to the user (0600 here), photogate
# says why and exits 72; the rest of the test then opens it to that one user with an ACL
# (removed afterwards), as an administrator would with Debian's 0666 or a group. `photogate run`
# as the user gets its view, and not a mount the host makes under a bound folder after the start.
source "$(dirname "$0")/lib.sh"
need_fuse
command -v fusermount3 >/dev/null || skip "fusermount3 is missing"
[[ -u $(command -v fusermount3) ]] || skip "fusermount3 is not setuid root"
second_user pgt
mkdir -p "$home/src" "$home/view"
cp "$corpus/exif.jpg" "$home/src/a.jpg"
chown -R "$user:" "$home"
# The binary and its libfuse must be reachable by the user.
runuser -u "$user" -- "$PHOTOGATE_BIN" --version >/dev/null || skip "$PHOTOGATE_BIN cannot be run by another user (its folders are private)"
as_user() { runuser -u "$user" -- env -u XDG_STATE_HOME HOME="$home" PHOTOGATE_LIBRARY="$home/library" "$PHOTOGATE_BIN" "$@"; }
as_user init >/dev/null
as_user import "$home/src" >/dev/null
as_user authorize org.example.Mine --access read-write --status authorized >/dev/null
on_exit "force_unmount '$home/view'"

if ! runuser -u "$user" -- test -r /dev/fuse -a -w /dev/fuse; then
    set +e
    err=$(as_user mount org.example.Mine "$home/view" 2>&1 >/dev/null); status=$?
    set -e
    [[ $status == 72 ]] || fail "mount without access to /dev/fuse: exit $status, expected 72 ($err)"
    grep -q "/dev/fuse is not open to $user" <<<"$err" || fail "unclear error: $err"
    command -v setfacl >/dev/null || skip "setfacl is missing (apt-get install acl): cannot open /dev/fuse to the test user"
    setfacl -m "u:$user:rw" /dev/fuse || skip "/dev/fuse takes no ACL here"
    on_exit "setfacl -x 'u:$user' /dev/fuse"
fi

as_user mount org.example.Mine "$home/view" >/dev/null || fail "mount as $user: $(cat "$home"/library/run/logs/*.log 2>/dev/null)"
is_mounted "$home/view" || fail "not mounted"
has "user_id=$(id -u "$user")" "$(grep " $home/view " /proc/mounts)" || fail "not a mount of $user: $(grep " $home/view " /proc/mounts)"
runuser -u "$user" -- cmp "$home/src/a.jpg" "$home/view/a.jpg" || fail "reading through the user's mount"
json=$(as_user mounts --json)
grep -q '"readPath" : "daemon"' <<<"$json" || fail "photogate mounts should say daemon reads for a user: $json"
grep -q '"state" : "live"' <<<"$json" || fail "not live: $json"
if grep -q "passthrough_open" "$home"/library/run/logs/*.log; then fail "the daemon tried passthrough: $(cat "$home"/library/run/logs/*.log)"; fi
has '"readWrite" : "authorized"' "$(runuser -u "$user" -- cat "$home/view/.photogate/status")" || fail ".photogate/status"
# A daemon killed with SIGKILL: listed dead, and the next mount clears the stale mount point.
pid=$(awk -F'[:,]' '/"pid"/ {gsub(/ /, "", $2); print $2; exit}' <<<"$json")
kill -KILL "$pid"
wait_until 10 bash -c "grep -q '\"state\" : \"dead\"' <<<\"\$(runuser -u '$user' -- env PHOTOGATE_LIBRARY='$home/library' '$PHOTOGATE_BIN' mounts --json)\"" \
    || fail "the killed daemon is not listed dead: $(as_user mounts --json)"
as_user mount org.example.Mine "$home/view" >/dev/null || fail "mount over the stale mount point as $user"
runuser -u "$user" -- cmp "$home/src/a.jpg" "$home/view/a.jpg" || fail "reading after the remount"
# Another user's view that root's run cannot enter (no allow_other) does not stop root's run of
# a folder holding it: it did ("holds another photogate view"), so any user could stop another's
# run by mounting a view below a shared folder. Nothing of it shows inside.
if command -v bwrap >/dev/null; then
    rootlib="$tmp/rootlib"
    PHOTOGATE_LIBRARY="$rootlib" "$PHOTOGATE_BIN" init >/dev/null
    PHOTOGATE_LIBRARY="$rootlib" "$PHOTOGATE_BIN" authorize org.example.Root --access read-write --status authorized >/dev/null
    on_exit 'for m in $(awk '"'"'/ photogate:org.example.Root / {print $5}'"'"' /proc/self/mountinfo); do force_unmount "$m"; done'
    set +e
    out=$(PHOTOGATE_LIBRARY="$rootlib" "$PHOTOGATE_BIN" run org.example.Root --ro-bind "$home:/h" -- sh -c '[ -n "$(ls -A /h/view 2>/dev/null)" ] && exit 61; exit 0' 2>&1)
    status=$?
    set -e
    [[ $status == 0 ]] || fail "root's run of a folder holding $user's view: exit $status (61: the view shows inside) $out"
fi
# photogate run as the user (bubblewrap without privileges): folders are handed in by
# descriptor, the library inside the bound home is masked, nothing else comes in.
if runuser -u "$user" -- bwrap --ro-bind / / --unshare-all true 2>/dev/null; then
    as_user run org.example.Mine --ro-bind "$home:/h" -- sh -c '
        cmp /h/src/a.jpg "$HOME/Pictures/a.jpg" || exit 81
        [ -d /h/src ] && [ -z "$(ls -A /h/library 2>/dev/null)" ] || exit 82
        [ "$(ls /proc/self/fd | sort -n | tr "\n" " ")" = "0 1 2 3 " ] || { ls -l /proc/self/fd >&2; exit 83; }
        exit 0' 9</dev/null || fail "photogate run as $user: exit $?"
    # A root run's view (in /run/photogate-run, root's alone, serving only that run's sandbox
    # user) never stops another user's run of a folder above it: one root run made every user's
    # --ro-bind /run (or /:/) fail, naming a view they could not unmount. Masked inside.
    if [[ -n ${rootlib:-} ]]; then
        PHOTOGATE_LIBRARY="$rootlib" "$PHOTOGATE_BIN" authorize org.example.RootRun --access read-write --status authorized >/dev/null
        on_exit "pkill -KILL -f 'run org.example.RootRun' || true"
        PHOTOGATE_LIBRARY="$rootlib" "$PHOTOGATE_BIN" run org.example.RootRun -- sleep 600 </dev/null >/dev/null 2>&1 &
        rootrun_mounted() { grep -q " photogate:org.example.RootRun " /proc/self/mountinfo; }
        wait_until 30 rootrun_mounted || fail "root's run did not mount its view"
        set +e
        out=$(as_user run org.example.Mine --ro-bind /run:/hostrun -- sh -c '[ -n "$(ls -A /hostrun/photogate-run 2>/dev/null)" ] && exit 62; exit 0' 2>&1 9</dev/null)
        status=$?
        set -e
        [[ $status == 0 ]] || fail "$user's run of /run while root's run has a view there: exit $status (62: its folder shows inside) $out"
        pkill -KILL -f 'run org.example.RootRun' || true
        wait_until 30 eval '! rootrun_mounted' || fail "root's killed run left its view mounted"
    fi
    # Passed writable, the home holding the library is refused, and the refusal names the library:
    # it named the run's own view folder (in the library's run/sandbox/, a place of the library
    # too) about every other run, as the set of places came in. Several runs: each run's order
    # was its own. An app with no view mounted: the run mounts one in run/sandbox/.
    as_user authorize org.example.Bound --access read-write --status authorized >/dev/null
    on_exit 'for m in $(awk '"'"'/ photogate:org.example.Bound / {print $5}'"'"' /proc/self/mountinfo); do force_unmount "$m"; done'
    for _ in 1 2 3 4 5 6 7 8; do
        set +e; out=$(as_user run org.example.Bound --bind "$home:/h" -- true 2>&1); status=$?; set -e
        [[ $status == 64 ]] || fail "a writable bind of a folder holding the library: exit $status ($out)"
        has "holds the photo library at $home/library;" "$out" || fail "the refusal does not name the library: $out"
        ! has "run/sandbox" "$out" || fail "the refusal names the run's own view folder: $out"
    done
    ! grep -q " photogate:org.example.Bound " /proc/self/mountinfo || fail "a refused run left its view mounted"
    # Mounts made on the host after the command started do not reach it, even where the host's
    # mounts are shared (systemd's default): bubblewrap starts in a mount namespace that shares
    # nothing, owned by a user namespace of the user's own. Here in a mount namespace of the
    # test's own, private from the real host's and then made shared inside.
    mkdir -p "$home/prop/later" "$home/sig"
    chown -R "$user:" "$home/prop" "$home/sig"
    set +e
    later_mount_check "$home" "$home/src" org.example.Mine runuser -u "$user" -- env -u XDG_STATE_HOME HOME="$home" PHOTOGATE_LIBRARY="$home/library"
    status=$?
    set -e
    [[ $status == 0 ]] || fail "photogate run as $user, a mount made after the start: exit $status (76: it reached the sandbox)"
    # A run killed with SIGKILL leaves no view mounted: its daemon, the user's, unmounts it
    # through fusermount3 once the run is gone.
    as_user authorize org.example.Gone --access read-write --status authorized >/dev/null
    rm -f "$home/sig/in"
    as_user run org.example.Gone --bind "$home/sig:/sig" -- sh -c 'touch /sig/in; exec sleep 600' & runner=$!
    on_exit "pkill -KILL -u '$user' -f 'run org.example.Gone'"
    on_exit 'for m in $(awk '"'"'/ photogate:org.example.Gone / {print $5}'"'"' /proc/self/mountinfo); do force_unmount "$m"; done'
    wait_until 30 test -e "$home/sig/in" || fail "the killed run's command did not start"
    gone_mounted() { grep -q " photogate:org.example.Gone " /proc/self/mountinfo; }
    gone_mounted || fail "the killed run's view is not mounted"
    pkill -KILL -u "$user" -f "run org.example.Gone" || fail "no run to kill"
    wait "$runner" 2>/dev/null || true
    wait_until 20 eval '! gone_mounted' || fail "a run of $user killed with SIGKILL left its view mounted: $(grep Gone /proc/self/mountinfo)"
    # SIGTERM and a ^C (SIGINT to run's process group) reach the user's command in its own user
    # namespace, which handles them; run exits with its status and unmounts the view.
    as_user authorize org.example.Stopped --access read-write --status authorized >/dev/null
    on_exit 'for m in $(awk '"'"'/ photogate:org.example.Stopped / {print $5}'"'"' /proc/self/mountinfo); do force_unmount "$m"; done'
    for sig in TERM INT; do
        rm -f "$home/sig/in" "$home/sig/caught"
        # As a terminal's foreground job: SIGINT at its default (a background job ignores it).
        setsid python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])' \
            runuser -u "$user" -- env -u XDG_STATE_HOME HOME="$home" PHOTOGATE_LIBRARY="$home/library" "$PHOTOGATE_BIN" run org.example.Stopped --bind "$home/sig:/sig" -- \
            sh -c 'trap "touch /sig/caught; kill \$s 2>/dev/null; exit 3" '$sig'; touch /sig/in; sleep 30 & s=$!; wait $s' & runner=$!
        on_exit "kill -9 $runner 2>/dev/null"
        wait_until 30 test -e "$home/sig/in" || fail "the command did not start (SIG$sig)"
        stopped_run=$(pgrep -u "$user" -f "run org.example.Stopped") || fail "no run to signal"
        if [[ $sig == TERM ]]; then kill -TERM "$stopped_run"; else kill -INT -- -"$runner"; fi
        set +e; wait "$runner"; status=$?; set -e
        [[ -e $home/sig/caught ]] || fail "SIG$sig to the run of $user did not reach the command's handler (exit $status)"
        [[ $status == 3 ]] || fail "the run of $user exits with the command's status after SIG$sig: $status"
        ! grep -q " photogate:org.example.Stopped " /proc/self/mountinfo || fail "the view of $user stayed mounted after SIG$sig"
    done
else
    say "photogate run as $user not checked: bwrap cannot make namespaces for that user here"
fi
# A user's daemon ended with SIGTERM after a folder on the way to its mount was renamed to a name
# that is not UTF-8: it still unmounts its mount (fusermount3 gets the path's bytes as they are).
as_user authorize org.example.Moved --access read-write --status authorized >/dev/null
mkdir -p "$home/moving/v" && chown -R "$user:" "$home/moving"
moved_mounted() { grep -q " photogate:org.example.Moved " /proc/self/mountinfo; }
on_exit 'for m in $(awk '"'"'/ photogate:org.example.Moved / {print $5}'"'"' /proc/self/mountinfo); do umount -l "$m"; done'
as_user mount org.example.Moved "$home/moving/v" >/dev/null || fail "mount org.example.Moved as $user"
moved_daemon=$(pgrep -u "$user" -f "mount org.example.Moved ") || fail "no daemon for org.example.Moved"
mv "$home/moving" "$home/"$'\xff'"-moved"
moved_mounted || fail "the renamed view is not mounted"
kill -TERM $moved_daemon
wait_until 20 eval '! kill -0 $moved_daemon 2>/dev/null' || fail "the daemon of $user did not end on SIGTERM"
! moved_mounted || fail "a daemon of $user left its mount behind once its path was not UTF-8: $(grep -a Moved /proc/self/mountinfo)"
as_user unmount "$home/view" >/dev/null || fail "unmount as $user"
is_mounted "$home/view" && fail "still mounted after unmount"
[[ -z $(as_user mounts --json | grep org.example.Mine) ]] || fail "still listed after unmount"
say "ok"
