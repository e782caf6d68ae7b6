#!/usr/bin/env bash
# The lifeline of a view mounted for `photogate run` (its daemon holds the run's pidfd and, when
# the run ends, detaches the view as the run would have; run.sh has the plain SIGKILL case).
# Found by a hostile review of the first version (2d20668):
# 1. A second run that reused the view keeps it when the first run ends normally (not killed):
#    the first run unmounts its view and waits 10 s for the daemon, which the second run still
#    uses; once it has exited, the lifeline finds its mount gone and must not end the session
#    under the second run (it did: ENOTCONN / ECONNABORTED in the second run).
# 2. A run killed with SIGKILL whose parent has not reaped it yet (a zombie) when its view's
#    daemon ends: the folder made for the run is removed all the same (kill(pid, 0) answers 0
#    for a zombie, and the folder was left).
# 3. The lifeline detaches its own mount, by id, and nothing else: a process of the same user
#    (outside any sandbox) moves the run's folder and leaves a symlink to a folder holding another
#    view in its place; the killed run's view is detached where it went, the other view stays
#    (by path, the lifeline unmounted the other view and left the run's).
source "$(dirname "$0")/lib.sh"
need_fuse
command -v bwrap >/dev/null || skip "bwrap is missing (apt-get install bubblewrap)"
bwrap --ro-bind / / --unshare-all true 2>/dev/null || skip "bwrap cannot make namespaces here"
command -v python3 >/dev/null || skip "python3 is missing"
pg=$PHOTOGATE_BIN
export PHOTOGATE_LIBRARY="$tmp/library"
mkdir -p "$tmp/src" "$tmp/flag"
cp "$corpus/exif.jpg" "$tmp/src/granted.jpg"
cp "$corpus/exif.jpg" "$tmp/flag/granted.jpg"
"$pg" init >/dev/null
sandbox_writable org.example.Reused "$tmp/flag"
"$pg" import "$tmp/src" >/dev/null
"$pg" authorize org.example.Reused --access read-write --status limited >/dev/null
"$pg" grant org.example.Reused granted.jpg >/dev/null
on_exit 'for m in $(awk '"'"'/ photogate:org.example.(Reused|Zombie) / {print $5}'"'"' /proc/self/mountinfo); do force_unmount "$m"; done'

# 1. The first run ends on its own while the second still uses the view.
"$pg" run org.example.Reused --bind "$tmp/flag:/flag" -- sh -c '
    touch /flag/a-in
    while [ ! -e /flag/a-go ]; do sleep 0.02; done
    exit 0' & first=$!
on_exit "kill -9 $first"
wait_until 30 test -e "$tmp/flag/a-in" || fail "the first run's command did not start"
"$pg" run org.example.Reused --bind "$tmp/flag:/flag" -- sh -c '
    cmp -s /flag/granted.jpg "$HOME/Pictures/granted.jpg" || exit 60
    touch /flag/b-in
    while [ ! -e /flag/b-go ]; do sleep 0.02; done
    cmp -s /flag/granted.jpg "$HOME/Pictures/granted.jpg" || exit 61
    exit 0' & second=$!
on_exit "kill -9 $second"
wait_until 30 test -e "$tmp/flag/b-in" || fail "the second run's command did not start (or could not read the view)"
touch "$tmp/flag/a-go"
set +e; wait "$first"; status=$?; set -e
[[ $status == 0 ]] || fail "the first run exited $status"
# The first run is gone: its daemon's lifeline has fired (it logs a line), or it has not yet.
log=$(ls "$PHOTOGATE_LIBRARY"/run/logs/org.example.Reused.*.log)
wait_until 10 grep -q "is for (pid $first) ended" "$log" || true
touch "$tmp/flag/b-go"
set +e; wait "$second"; status=$?; set -e
[[ $status == 0 ]] || fail "a run reusing a view lost it when the run that mounted it ended normally: exit $status (61: reading the view after; log: $(grep -h 'ended' "$log"))"

# 2. A killed run not yet reaped when its view's daemon ends.
"$pg" authorize org.example.Zombie --access read-write --status limited >/dev/null
mkdir -p "$tmp/zflag"; sandbox_writable org.example.Zombie "$tmp/zflag"
# Root's runs make their folders in /run/photogate-run, others' in the library's run/sandbox.
runs=$PHOTOGATE_LIBRARY/run/sandbox; [[ $(id -u) == 0 ]] && runs=/run/photogate-run
set +e
python3 - "$pg" "$tmp" "$PHOTOGATE_LIBRARY" "$runs" <<'PY'
import os, signal, subprocess, sys, time
pg, tmp, lib, runs = sys.argv[1:5]
def until(seconds, f):
    deadline = time.monotonic() + seconds
    while not f():
        if time.monotonic() > deadline: return False
        time.sleep(0.02)
    return True
before = set(os.listdir(runs)) if os.path.isdir(runs) else set()
p = subprocess.Popen([pg, "run", "org.example.Zombie", "--bind", tmp + "/zflag:/flag", "--", "sh", "-c", "touch /flag/in; exec sleep 600"])
try:
    if not until(30, lambda: os.path.exists(tmp + "/zflag/in")): sys.exit("the zombie run's command did not start")
    made = set(os.listdir(runs)) - before
    os.kill(p.pid, signal.SIGKILL)      # not reaped below until the daemon has ended
    log = lib + "/run/logs/org.example.Zombie.read-write.log"
    if not until(30, lambda: "unmounted " + runs in open(log).read()): sys.exit("the zombie run's daemon did not end")
    left = made & set(os.listdir(runs))
    if left: sys.exit("a killed run not yet reaped left its folder: " + ", ".join(left))
finally:
    p.kill(); p.wait()
PY
status=$?
set -e
[[ $status == 0 ]] || fail "the zombie case failed (see above)"

# 3. The run's folder moved and a symlink to another view's folder left at its name.
"$pg" authorize org.example.Victim --access read-write --status authorized >/dev/null
"$pg" authorize org.example.Runner --access read-write --status authorized >/dev/null
mkdir -p "$tmp/other/view" "$tmp/rflag"
sandbox_writable org.example.Runner "$tmp/rflag"
on_exit "force_unmount '$tmp/other/view'"
"$pg" mount org.example.Victim "$tmp/other/view" >/dev/null
on_exit 'for m in $(awk '"'"'/ photogate:org.example.Runner / {print $5}'"'"' /proc/self/mountinfo); do force_unmount "$m"; done'
"$pg" run org.example.Runner --bind "$tmp/rflag:/flag" -- sh -c 'touch /flag/in; exec sleep 600' & runner=$!
on_exit "kill -9 $runner"
wait_until 30 test -e "$tmp/rflag/in" || fail "the runner's command did not start"
runner_view=$(awk '/ photogate:org.example.Runner / {print $5; exit}' /proc/self/mountinfo)
folder=${runner_view%/view}
[[ $folder == "$runs/"* ]] || fail "the runner's view is at $runner_view"
mv "$folder" "$folder.moved"
# (Moved, it is not the run's to remove: the daemon removes only the folder it made, by its name.)
on_exit "rmdir '$folder.moved/view' '$folder.moved'"
ln -s "$tmp/other" "$folder"
on_exit "rm -f '$folder'"
kill -9 "$runner"
wait "$runner" 2>/dev/null || true
runner_gone() { ! grep -q " photogate:org.example.Runner " /proc/self/mountinfo; }
wait_until 20 runner_gone || fail "the killed runner's moved view stayed mounted: $(grep -h 'ended' "$PHOTOGATE_LIBRARY"/run/logs/org.example.Runner.*.log)"
is_mounted "$tmp/other/view" || { cat "$PHOTOGATE_LIBRARY"/run/logs/*.log >&2; grep photogate /proc/self/mountinfo >&2; fail "the lifeline of a killed run unmounted another view (the one its folder's name now leads to)"; }
[[ -L $folder && -d $tmp/other/view ]] || fail "the symlink or the other view's folder was removed"
"$pg" unmount "$tmp/other/view" >/dev/null
say "ok"
