# The set-up of the tests of a COMMIT whose answer was cut (pg-commit-unknown*.sh; sourced after
# pg.sh and pg_start): one linked library, a read-write mount of an authorized app with a photo of
# its own (mine.jpg), and close_cut, which closes a file while its commit's answer is cut.
lib="$tmp/host"
shared="$tmp/shared"
pl() { PHOTOGATE_LIBRARY="$lib" "$PHOTOGATE_BIN" "$@"; }
out=$(pl init --catalog "$(pg_url)" --store "$shared" 2>&1) || fail "init: $out"
app=org.example.Writer
pl authorize $app --access read-write --status authorized >/dev/null
mnt="$tmp/mnt"
mkdir -p "$mnt"
pl mount $app "$mnt" >/dev/null 2>&1 || fail "mount"
on_exit "force_unmount '$mnt'"
# A photo of the app's own, to edit below.
cp "$corpus/exif.jpg" "$mnt/mine.jpg" || fail "writing mine.jpg"


# close_cut FILE HOLD PYTHON-WRITE: runs the write, then closes the file, while every commit waits
# for the standby; cuts the committing connection once the server has the commit in its log;
# lets commits through again. Prints what the close returned. HOLD (True/False): a copy of the
# descriptor is closed last, once the view shows the commit (the last release comes then).
close_cut() {
    local file=$1 hold=$2 code=$3
    sync_standby nobody
    python3 - "$file" "$corpus/exif.jpg" >"$tmp/close.out" 2>"$tmp/close.err" <<EOF &
import os, sys, time
path, src = sys.argv[1], sys.argv[2]
hold = $hold
$code
ino = os.fstat(fd).st_ino
held = os.dup(fd) if hold else None
try:
    os.close(fd)
    print("0")
except OSError as e:
    print(e.errno)
sys.stdout.flush()
if held is not None:
    # The last release comes once the view shows what the cut commit saved (a new version is a
    # new inode), as it may whenever the view hears of the commit before that release.
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            if os.stat(path).st_ino != ino: break
        except OSError:
            pass
        time.sleep(0.02)
    try:
        os.close(held)
    except OSError as e:
        print("the close of the copy: %s" % e, file=sys.stderr)
EOF
    local writer=$!
    wait_until 30 committing || { sync_standby ''; wait $writer; fail "no commit waited for the standby: $(cat "$tmp/close.out" "$tmp/close.err")"; }
    pg_sql "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE wait_event = 'SyncRep'" >/dev/null
    sync_standby ''
    wait $writer || true
    cat "$tmp/close.out"
}

