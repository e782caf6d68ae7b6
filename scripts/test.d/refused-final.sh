#!/usr/bin/env bash
# A close refused at its opener's close is final (issue 34): the opener's close got EINVAL and
# .photogate/refused listed the file, then a forked child (or a process the descriptor was passed
# to) wrote the rest, closed with 0, and the file was committed at the last release, after that
# close returned. Now the later writer's close fails too, and nothing is added.
source "$(dirname "$0")/lib.sh"
need_fuse
pg=$PHOTOGATE_BIN
export PHOTOGATE_LIBRARY="$tmp/library"
"$pg" init >/dev/null
"$pg" authorize org.example.Writer --access read-write --status authorized >/dev/null
mkdir -p "$tmp/m"
on_exit "force_unmount '$tmp/m'"
"$pg" mount org.example.Writer "$tmp/m" >/dev/null
# Two refusals: a file that is not media yet (hidden, kept for its opener to mend), and one
# dropped at once (a valid photo followed by a hole: mostly holes). A later close fails either way.
for mode in incomplete holes; do
set +e
python3 - "$tmp/m/late-$mode.jpg" "$corpus/exif.jpg" "$mode" <<'PY'
import errno, os, sys
path, photo, mode = sys.argv[1], open(sys.argv[2], "rb").read(), sys.argv[3]
fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
if mode == "incomplete":
    os.write(fd, b"not a photo, not yet")
else:
    os.write(fd, photo)
    os.ftruncate(fd, 8 << 20)          # mostly holes: refused and dropped at the close
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(w)
    os.read(r, 1)                      # the parent's close was refused
    try:
        os.pwrite(fd, photo, 0)        # the rest: a whole photo now
        os.ftruncate(fd, len(photo))
    except OSError:
        pass                           # a dropped file may refuse the writes too
    try:
        os.close(fd)
    except OSError as e:
        os._exit(10 if e.errno == errno.EINVAL else 11)
    os._exit(0)                        # closed with 0: the hole
os.close(r)
try:
    os.close(fd)
    sys.exit(3)                        # the opener's close must be refused
except OSError as e:
    if e.errno != errno.EINVAL:
        sys.exit(4)
os.write(w, b"x")
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
PY
status=$?
set -e
[[ $status != 3 && $status != 4 ]] || fail "$mode: the opener's close was not refused with EINVAL (status $status)"
[[ $status == 10 ]] || fail "$mode: the later writer's close of a refused file: status $status (0: closed fine; 11: another errno)"
done
"$pg" unmount "$tmp/m" >/dev/null
! has "late-" "$("$pg" assets)" || fail "a file refused at its opener's close was added after all"
say "ok"
