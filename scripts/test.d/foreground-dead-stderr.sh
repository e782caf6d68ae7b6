#!/usr/bin/env bash
# (helper-33, session 26) A foreground daemon (`mount --foreground`, logs on stderr) whose stderr's
# reader has gone (a pipe closed, the terminal's multiplexer killed): unmounted, it ends cleanly,
# exit 0, with its last work done (the registry entry removed, the app's reads in the access
# report). It was killed by SIGPIPE at its first log after the session ended (libfuse gives
# SIGPIPE its default back then).
PG_PRIVATE_MOUNTS=1
source "$(dirname "$0")/lib.sh"
need_fuse
pg=$PHOTOGATE_BIN
d=$tmp/fg
mkdir -p "$d/mnt"
one_photo_library "$d" org.example.A
on_exit "force_unmount '$d/mnt'"
on_exit "pkill -KILL -f 'mount org.example.A $d/mnt '"

# The daemon's stderr is a pipe read by this script until the mount is ready, then closed.
python3 - "$pg" "$d/mnt" <<'PY' || fail "the daemon did not end cleanly (see above)"
import os, subprocess, sys, time
pg, mnt = sys.argv[1:3]
r, w = os.pipe()
p = subprocess.Popen([pg, "mount", "org.example.A", mnt, "--foreground"], stderr=w, stdout=subprocess.DEVNULL)
os.close(w)
seen, deadline = b"", time.time() + 60
while b"mounted org.example.A" not in seen:
    if time.time() > deadline or p.poll() is not None:
        sys.exit(f"foreground-dead-stderr: the mount did not come up: {seen.decode(errors='replace')[-500:]}")
    chunk = os.read(r, 65536)
    if not chunk:
        sys.exit("foreground-dead-stderr: the daemon's stderr closed before it was mounted")
    seen += chunk
with open(os.path.join(mnt, "g.jpg"), "rb") as f:
    f.read()
os.close(r)   # nobody reads the daemon's stderr any more
subprocess.run(["fusermount3", "-u", mnt], check=True)
rc = p.wait(timeout=60)
if rc != 0:
    sys.exit(f"foreground-dead-stderr: FAILED: the daemon ended with {rc} after its unmount"
             + (" (killed by SIGPIPE)" if rc == -13 else ""))
PY
mounts=$("$pg" mounts --json)
[[ $(tr -d '[:space:]' <<<"$mounts") == "[]" ]] || fail "the daemon's registry entry stayed: $mounts"
report=$("$pg" report org.example.A 2>&1) || fail "report: $report"
has "g.jpg" "$report" || fail "the app's read of g.jpg is not in the access report: $report"
say "ok"
