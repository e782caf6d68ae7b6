#!/usr/bin/env bash
# An edit open past the write limit waits (edit-release.sh) while an edit looks closed: every
# handle flushed, none released. FUSE cannot tell a last close from close(dup(fd)), so an app can
# hold an edit that looks closed for ever; each open past its limit then held one of the daemon's
# request threads for 5 s, and opens at once held them all (the mount answered nothing meanwhile,
# not even the release they waited for). Only a couple of opens wait at once: with two waiting,
# a third open past the limit is refused at once, answered before either of them, and the two
# still get in when the edit is really closed.
source "$(dirname "$0")/lib.sh"
need_fuse
pg=$PHOTOGATE_BIN
d=$tmp/lib
app=org.example.EditWaitCap
padded_edit_library "$d" "$app" 5
on_exit "force_unmount '$d/mnt'"
on_exit "'$pg' unmount '$d/mnt' >/dev/null 2>&1"
# Two edits of just over 1 MiB fit in 3 MiB, three do not.
PHOTOGATE_WRITE_LIMIT_MB=3 "$pg" mount "$app" "$d/mnt" >/dev/null || fail "mount"
out=$(python3 - "$d/mnt" "$PHOTOGATE_LIBRARY/run/logs/$app.read-write.log" <<'PY'
import errno, os, sys, threading, time
mp, log = sys.argv[1], sys.argv[2]
def edit(n):
    try: return os.open(f"{mp}/{n}", os.O_RDWR)
    except OSError as e: return -e.errno
a, b = edit("p0.jpg"), edit("p1.jpg")
assert a >= 0 and b >= 0, f"two edits within the limit: {a} {b}"
os.close(os.dup(a))   # p0 looks closed (its one handle flushed), and the app still holds it
done = {}
def waiter(n):
    threading.current_thread().tid = threading.get_native_id()
    done[n] = edit(n)
ws = [threading.Thread(target=waiter, args=(n,)) for n in ("p2.jpg", "p3.jpg")]
for w in ws: w.start()
def in_fuse(w):   # the thread is waiting for the daemon's answer to its open
    tid = getattr(w, "tid", None)
    if tid is None: return False
    try: return open(f"/proc/self/task/{tid}/wchan").read() == "request_wait_answer"
    except OSError: return False
def holds_a_place(n):   # the daemon says so once the open holds one of the waiting places
    try: return f"{n} waits for an edit" in open(log).read()
    except OSError: return False
# Both blocked in their open, and both counted by the daemon as waiting: a thread blocked in the
# kernel is not yet a waiter the daemon counted (with three opens served at once, the third took
# one of the two places). The waits end after 5 s: past 4 s, go on and let the checks say so.
deadline = time.monotonic() + 4
while not (all(in_fuse(w) for w in ws) and all(holds_a_place(n) for n in ("p2.jpg", "p3.jpg"))):
    if done or time.monotonic() > deadline: break
    time.sleep(0.005)
print("waiting before the third:", sorted(done) or "both")
third = edit("p4.jpg")
print("third past the limit:", "EDQUOT" if third == -errno.EDQUOT else third, "answered first:", "yes" if not done else sorted(done))
os.close(a)   # really closed now: its release frees room for one of the two waiting
for w in ws: w.join()
print("after the close:", "one in" if any(v >= 0 for v in done.values()) else done)
PY
) || fail "python: $out"
say "$(tr '\n' ';' <<<"$out")"
has "waiting before the third: both" "$out" || fail "the two opens were not both waiting: $out"
has "third past the limit: EDQUOT answered first: yes" "$out" || fail "a third open past the limit waited too (every waiting open holds a request thread): $out"
has "after the close: one in" "$out" || fail "the waiting opens did not get in when the edit was closed: $out"
say ok
