#!/usr/bin/env bash
# The catalog survives (issue 34, "the catalog lives only in the WAL"):
#  1. once the last process lets go of a library (a command, a mount's daemon), photogate.sqlite
#     alone holds every committed change: a copy of that file is the whole catalog;
#  2. a library whose catalog is missing, empty, without its schema or damaged is said to be
#     damaged (exit 75) by every command, and nothing is made over it (init included);
#  3. `verify --repair` never moves most of the store to lost+found/ without --force, and says so
#     first; `verify --rebuild` makes every store file an asset again;
#  4. `backup DEST` copies the catalog (SQLite's online backup) and the store while a mount
#     writes, and the copy opens as a library of its own.
source "$(dirname "$0")/lib.sh"
need_fuse
pg=$PHOTOGATE_BIN
export PHOTOGATE_LIBRARY="$tmp/library"
mkdir -p "$tmp/src"
for f in exif.jpg xmp.jpg le-thumb.jpg; do cp "$corpus/$f" "$tmp/src/$f"; done
"$pg" init >/dev/null
"$pg" import "$tmp/src" >/dev/null
count() { python3 -c 'import sqlite3, sys; print(sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True).execute("SELECT count(*) FROM assets").fetchone()[0])' "$1"; }

# 1. After the import (no process left), and after a mount's daemon wrote and was unmounted.
cp "$PHOTOGATE_LIBRARY/photogate.sqlite" "$tmp/alone.sqlite"
[[ $(count "$tmp/alone.sqlite") == 3 ]] || fail "photogate.sqlite alone after an import holds $(count "$tmp/alone.sqlite") assets, not 3"
"$pg" authorize org.example.Cam --access read-write --status authorized >/dev/null
mkdir -p "$tmp/m"
on_exit "force_unmount '$tmp/m'"
"$pg" mount org.example.Cam "$tmp/m" >/dev/null
cp "$corpus/exif.jpg" "$tmp/m/from-app.jpg"
printf 'x' | dd of="$tmp/m/from-app.jpg" bs=1 seek=3000 conv=notrunc status=none 2>/dev/null || true
"$pg" unmount "$tmp/m" >/dev/null
[[ ! -s $PHOTOGATE_LIBRARY/photogate.sqlite-wal ]] || fail "the WAL still holds $(stat -c %s "$PHOTOGATE_LIBRARY/photogate.sqlite-wal") bytes after the last process let go"
cp "$PHOTOGATE_LIBRARY/photogate.sqlite" "$tmp/alone.sqlite"
[[ $(count "$tmp/alone.sqlite") == 4 ]] || fail "photogate.sqlite alone after the mount's write holds $(count "$tmp/alone.sqlite") assets, not 4"

# 1a. Also when the mount's daemon is the last to let go (unmounted from outside photogate:
# fusermount3, a SIGTERM, a shutdown): it checkpointed nothing, and the catalog was in the log.
"$pg" mount org.example.Cam "$tmp/m" >/dev/null
daemon=$(pgrep -f "photogate mount org.example.Cam $tmp/m" | head -1)
cp "$corpus/le-thumb.jpg" "$tmp/m/by-daemon.jpg"
fusermount3 -u "$tmp/m"
wait_until 20 bash -c "! kill -0 $daemon 2>/dev/null" || fail "the daemon did not end after fusermount3 -u"
[[ ! -s $PHOTOGATE_LIBRARY/photogate.sqlite-wal ]] || fail "the daemon, last to let go, left $(stat -c %s "$PHOTOGATE_LIBRARY/photogate.sqlite-wal") bytes in the log"
cp "$PHOTOGATE_LIBRARY/photogate.sqlite" "$tmp/alone.sqlite"
[[ $(count "$tmp/alone.sqlite") == 5 ]] || fail "photogate.sqlite alone after the daemon ended holds $(count "$tmp/alone.sqlite") assets, not 5"

# 1b. The log removed while a mount runs (a careless cleanup): what the app saved before and
# after is kept (the daemon checkpoints what it committed from the log it still has open into
# the database), or its close fails; never a close that returned 0 and a photo gone after.
"$pg" mount org.example.Cam "$tmp/m" >/dev/null
cp "$corpus/xmp.jpg" "$tmp/m/before-rm.jpg"
rm "$PHOTOGATE_LIBRARY/photogate.sqlite-wal"
saved=0; cp "$corpus/le-thumb.jpg" "$tmp/m/after-rm.jpg" 2>/dev/null && saved=1
"$pg" unmount "$tmp/m" >/dev/null
out=$("$pg" assets 2>&1) || fail "assets after the log was removed under a mount: $out"
has before-rm.jpg "$out" || fail "a photo whose close returned 0 before the log was removed is gone: $out"
if [[ $saved == 1 ]]; then has after-rm.jpg "$out" || fail "a photo whose close returned 0 after the log was removed is gone: $out"; fi
out=$("$pg" verify 2>&1) || fail "verify after the log was removed under a mount: $out"

# 1c. The log truncated in place under a mount: what it held is gone (that is what truncating a
# database's log does), but a close after it is not told saved (EIO), and the database is not
# overwritten with the hole's zeros at the daemon's end (the library opens as it was).
"$pg" mount org.example.Cam "$tmp/m" >/dev/null
daemon=$(pgrep -f "photogate mount org.example.Cam $tmp/m" | head -1)
cp "$corpus/xmp.jpg" "$tmp/m/before-trunc.jpg"
: >"$PHOTOGATE_LIBRARY/photogate.sqlite-wal"
saved=0; cp "$corpus/le-thumb.jpg" "$tmp/m/after-trunc.jpg" 2>/dev/null && saved=1
fusermount3 -u "$tmp/m"
wait_until 20 bash -c "! kill -0 $daemon 2>/dev/null" || fail "the daemon did not end after fusermount3 -u"
out=$("$pg" assets 2>&1) || fail "the library does not open after its log was truncated under a mount: $out"
if [[ $saved == 1 ]]; then has after-trunc.jpg "$out" || fail "a close after the log was truncated returned 0, and the photo is gone: $out"; fi

# 1d. The log or the shared index removed while a mount runs: a command then would make a new
# one beside the daemon's, and the two would write over each other's commits (a grant made so
# was reported done, then the catalog failed SQLite's checks). Every command says so (exit 69,
# naming the mount's daemon) and changes nothing; `mounts` and `unmount` still work; after the
# unmount nothing committed is lost and the catalog passes its checks.
quick_check() { python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute("PRAGMA quick_check").fetchone()[0])' "$1"; }
problems() { "$pg" verify 2>&1 | grep -c -v -e '^KIND' -e '^checked' || true; }
# Replaced too (a copy moved over it, as a sync tool or a hand "restore" does): the processes keep
# the file they opened, and a command would use the new one beside it (a red-team finding: a
# revoke that exited 0 was undone and verify said "no problems").
for gone in wal shm wal-replaced shm-replaced; do
    before=$(problems)
    "$pg" mount org.example.Cam "$tmp/m" >/dev/null
    daemon=$(pgrep -f "photogate mount org.example.Cam $tmp/m" | head -1)
    cp "$corpus/xmp.jpg" "$tmp/m/before-$gone.jpg"
    file=${gone%-replaced}
    if [[ $gone == *-replaced ]]; then
        cp "$PHOTOGATE_LIBRARY/photogate.sqlite-$file" "$tmp/copy" && mv "$tmp/copy" "$PHOTOGATE_LIBRARY/photogate.sqlite-$file"
        how="replaced"
    else
        rm "$PHOTOGATE_LIBRARY/photogate.sqlite-$file"
        how="removed"
    fi
    set +e; out=$("$pg" authorize org.example.Other --access read-write --status authorized 2>&1); status=$?; set -e
    [[ $status == 69 ]] || fail "a command after the $file file was $how under a mount: exit $status ($out)"
    has "pid $daemon" "$out" || fail "the refusal does not name the mount's daemon ($daemon): $out"
    has "photogate.sqlite-$file was $how" "$out" || fail "the refusal does not name the $how file: $out"
    cp "$corpus/le-thumb.jpg" "$tmp/m/after-$gone.jpg"
    has "$tmp/m" "$("$pg" mounts 2>&1)" || fail "mounts does not list the view after the $gone file was removed"
    "$pg" unmount "$tmp/m" >/dev/null || fail "unmount after the $gone file was removed"
    out=$("$pg" assets 2>&1) || fail "assets after the $gone file was removed and the view unmounted: $out"
    has before-$gone.jpg "$out" && has after-$gone.jpg "$out" || fail "photos saved around the $gone file are gone: $out"
    [[ $("$pg" apps) != *org.example.Other* ]] || fail "a refused command changed the catalog"
    [[ $(quick_check "$PHOTOGATE_LIBRARY/photogate.sqlite") == ok ]] || fail "the catalog fails quick_check after the $gone file was removed"
    [[ $(problems) == "$before" ]] || fail "verify after the $gone file was removed: $("$pg" verify 2>&1)"
done

# 1d'. The database itself replaced by a rename under a mount (a restore over a running view):
# commands are refused while the mount holds the old one, and a close after the swap is not told
# saved (its row would go into the file that is gone). In a library of its own: a restore over a
# running mount gives up what was committed after the copy, by design.
on_exit "force_unmount '$tmp/m2'"
(
    export PHOTOGATE_LIBRARY="$tmp/swapped"
    "$pg" init >/dev/null && "$pg" import "$tmp/src" >/dev/null
    "$pg" authorize org.example.Cam --access read-write --status authorized >/dev/null
    mkdir -p "$tmp/m2"
    "$pg" mount org.example.Cam "$tmp/m2" >/dev/null
    daemon=$(pgrep -f "photogate mount org.example.Cam $tmp/m2" | head -1)
    cp "$PHOTOGATE_LIBRARY/photogate.sqlite" "$tmp/copy.sqlite" && mv "$tmp/copy.sqlite" "$PHOTOGATE_LIBRARY/photogate.sqlite"
    set +e; out=$("$pg" apps 2>&1); status=$?; set -e
    [[ $status == 69 ]] || fail "a command after photogate.sqlite was replaced under a mount: exit $status ($out)"
    has "pid $daemon" "$out" || fail "the refusal does not name the mount's daemon: $out"
    ! cp "$corpus/exif.jpg" "$tmp/m2/after-db-swap.jpg" 2>/dev/null || fail "a close after the database was replaced was told saved"
    "$pg" unmount "$tmp/m2" >/dev/null || fail "unmount after the database was replaced"
    "$pg" apps >/dev/null || fail "the library does not open after the mount holding the old database ended: $("$pg" apps 2>&1)"
)

# 1d''. No false alarm: ordinary commands in parallel (each opening and closing the library while
# others do) never get 69 or 75 (a timing window gave 2-4% of them a false "index replaced"), and a
# copy of a library made while a mount holds it (cp -a) opens as a library of its own.
"$pg" mount org.example.Cam "$tmp/m" >/dev/null
hammer() { for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
    case $((RANDOM % 4)) in
        0) "$pg" grant org.example.Other exif.jpg >/dev/null 2>"$tmp/h.$1.err" ;;
        1) "$pg" revoke org.example.Other exif.jpg >/dev/null 2>"$tmp/h.$1.err" ;;
        2) "$pg" assets >/dev/null 2>"$tmp/h.$1.err" ;;
        3) "$pg" apps >/dev/null 2>"$tmp/h.$1.err" ;;
    esac
    status=$?
    if [[ $status == 69 || $status == 75 ]]; then echo "exit $status: $(cat "$tmp/h.$1.err")" >>"$tmp/false-alarms"; fi
done; }
"$pg" authorize org.example.Other --access read-write --status limited >/dev/null
for t in 1 2 3 4 5 6 7 8 9 10 11 12; do hammer $t & done; wait
[[ ! -s $tmp/false-alarms ]] || fail "ordinary parallel commands got a false alarm: $(head -3 "$tmp/false-alarms")"
cp -a "$PHOTOGATE_LIBRARY" "$tmp/copied"
PHOTOGATE_LIBRARY="$tmp/copied" "$pg" assets >/dev/null || fail "a copy made while a mount held the library does not open: $(PHOTOGATE_LIBRARY="$tmp/copied" "$pg" assets 2>&1)"
"$pg" unmount "$tmp/m" >/dev/null
PHOTOGATE_LIBRARY="$tmp/copied" "$pg" assets >/dev/null || fail "the copy does not open once the original's mount ended"

# 1e. The log removed under an idle mount, which is then killed: what it had committed was only
# in the log it held open; the daemon empties it into the database within seconds of the
# removal (not at its next commit), so the kill loses nothing.
"$pg" mount org.example.Cam "$tmp/m" >/dev/null
daemon=$(pgrep -f "photogate mount org.example.Cam $tmp/m" | head -1)
cp "$corpus/exif.jpg" "$tmp/m/idle-then-killed.jpg"
rm "$PHOTOGATE_LIBRARY/photogate.sqlite-wal"
in_file_alone() { cp "$PHOTOGATE_LIBRARY/photogate.sqlite" "$tmp/alone2.sqlite"; rm -f "$tmp/alone2.sqlite-wal"
    python3 -c 'import sqlite3, sys; sys.exit(0 if sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True).execute("SELECT count(*) FROM assets WHERE display_name = ?", ("idle-then-killed.jpg",)).fetchone()[0] == 1 else 1)' "$tmp/alone2.sqlite" 2>/dev/null; }
wait_until 30 in_file_alone || fail "the idle daemon did not put what it committed into the database after its log was removed"
kill -KILL "$daemon"
wait_until 20 bash -c "! kill -0 $daemon 2>/dev/null" || fail "the killed daemon did not end"
fusermount3 -u -z "$tmp/m" 2>/dev/null || true
has idle-then-killed.jpg "$("$pg" assets 2>&1)" || fail "a photo saved before the log was removed under a mount that was then killed is gone"

# 1f. The log lost after a kill, with no process left: the database file holds an older catalog
# (here: without a revoke and a photo the app saved). Every command says the changes may be lost
# (exit 75) instead of carrying on over it (the revoke silently undone); `verify
# --accept-lost-log` goes on and lists the lost photo as an orphan, `verify --rebuild` makes it an
# asset again. After a clean end there is no mark, and a log removed then costs nothing.
[[ ! -e $PHOTOGATE_LIBRARY/run/catalog-in-use ]] || fail "the in-use mark is left after every process ended cleanly"
rm "$PHOTOGATE_LIBRARY/photogate.sqlite-wal"
"$pg" assets >/dev/null 2>&1 || fail "a log removed after a clean end is taken for a loss: $("$pg" assets 2>&1)"
"$pg" authorize org.example.Lim --access read-write --status limited >/dev/null
"$pg" grant org.example.Lim exif.jpg >/dev/null
"$pg" mount org.example.Cam "$tmp/m" >/dev/null
daemon=$(pgrep -f "photogate mount org.example.Cam $tmp/m" | head -1)
cp "$corpus/exif.jpg" "$tmp/m/lost-with-log.jpg"
printf 'lost' >>"$tmp/m/lost-with-log.jpg"
"$pg" revoke org.example.Lim exif.jpg >/dev/null
kill -KILL "$daemon"
wait_until 20 bash -c "! kill -0 $daemon 2>/dev/null" || fail "the killed daemon did not end"
fusermount3 -u -z "$tmp/m" 2>/dev/null || true
rm "$PHOTOGATE_LIBRARY/photogate.sqlite-wal" "$PHOTOGATE_LIBRARY/photogate.sqlite-shm"
set +e; out=$("$pg" grants org.example.Lim 2>&1); status=$?; set -e
[[ $status == 75 ]] || fail "a command after the log was lost following a kill: exit $status ($out)"
has "may be lost" "$out" && has "--accept-lost-log" "$out" || fail "the message does not say what was lost and what to do: $out"
set +e; out=$("$pg" verify --accept-lost-log 2>&1); status=$?; set -e
has orphan "$out" || fail "verify --accept-lost-log does not list the lost photo's store file: $out"
"$pg" verify --rebuild >/dev/null || fail "verify --rebuild after the lost log: $("$pg" verify --rebuild 2>&1)"
out=$("$pg" verify 2>&1 || true)
! has orphan "$out" || fail "after --rebuild not every store file is an asset: $out"
[[ $("$pg" assets --json | python3 -c 'import json, sys; print(sum(1 for a in json.load(sys.stdin) if a["size"] == int(sys.argv[1])))' "$(( $(stat -c %s "$corpus/exif.jpg") + 4 ))") == 1 ]] \
    || fail "the photo whose asset was in the lost log is not an asset again after --rebuild: $("$pg" assets 2>&1)"
"$pg" grants org.example.Lim >/dev/null || fail "the library does not open after the loss was accepted"

# 1g. The in-use mark is written whole or not at all: on a full disk the first commit says no
# space (71) and changes nothing, and once there is room every command works (a mark truncated
# by the full disk made every later command say the catalog was damaged, for good).
mkdir -p "$tmp/full"
if mount -t tmpfs -o size=8m tmpfs "$tmp/full" 2>/dev/null; then
    on_exit "umount -l '$tmp/full'"
    PHOTOGATE_LIBRARY="$tmp/full/lib" "$pg" init >/dev/null
    PHOTOGATE_LIBRARY="$tmp/full/lib" "$pg" authorize org.example.Full --access read-write --status limited >/dev/null
    avail=$(df -B4096 --output=avail "$tmp/full" | tail -1)
    fallocate -l $(( avail * 4096 )) "$tmp/full/fill" 2>/dev/null || head -c $(( avail * 4096 )) /dev/zero > "$tmp/full/fill" 2>/dev/null || true
    set +e; out=$(PHOTOGATE_LIBRARY="$tmp/full/lib" "$pg" authorize org.example.Full2 --access read-write --status limited 2>&1); status=$?; set -e
    [[ $status == 71 || $status == 0 ]] || fail "a command on a full disk: exit $status, not 71 ($out)"
    rm -f "$tmp/full/fill"
    out=$(PHOTOGATE_LIBRARY="$tmp/full/lib" "$pg" apps 2>&1) || fail "the library does not open once the disk has room again: $out"
    [[ ! -s $tmp/full/lib/run/catalog-in-use.tmp ]] || true
fi

# 1h. A library on read-only media (a backup on a write-protected disk) is said to be that, with
# what to do, not "attempt to write a readonly database".
mkdir -p "$tmp/ro"
if mount --bind "$PHOTOGATE_LIBRARY" "$tmp/ro" 2>/dev/null; then
    on_exit "umount -l '$tmp/ro' 2>/dev/null || true"
    mount -o remount,bind,ro "$tmp/ro"
    set +e; out=$(PHOTOGATE_LIBRARY="$tmp/ro" "$pg" assets 2>&1); status=$?; set -e
    [[ $status != 0 ]] && has "read-only" "$out" && has "Copy the library" "$out" || fail "a library on read-only media: exit $status ($out)"
    umount "$tmp/ro"
fi

# 4. A backup while a mount runs and an app writes.
"$pg" mount org.example.Cam "$tmp/m" >/dev/null
( for i in $(seq 1 20); do cp "$corpus/xmp.jpg" "$tmp/m/w$i.jpg" || exit 1; done ) & writer=$!
"$pg" backup "$tmp/backup" >"$tmp/backup.out" || fail "backup: exit $? ($(cat "$tmp/backup.out"))"
wait $writer || fail "the app's writes failed during the backup: $(tail -15 "$PHOTOGATE_LIBRARY"/run/logs/*.log)"
"$pg" unmount "$tmp/m" >/dev/null
[[ $(stat -c %a "$tmp/backup") == 700 ]] || fail "the backup folder is $(stat -c %a "$tmp/backup")"
n=$(PHOTOGATE_LIBRARY="$tmp/backup" "$pg" verify 2>&1 | tail -1) || fail "verify of the backup: $n"
has "no problems" "$n" || fail "the backup does not verify: $n"
has "org.example.Cam" "$("$pg" apps --library "$tmp/backup")" || fail "the backup lost the apps"
set +e; out=$("$pg" backup "$tmp/backup" 2>&1); status=$?; set -e
[[ $status == 68 ]] || fail "a backup over an existing folder: exit $status ($out)"
set +e; out=$("$pg" backup "$PHOTOGATE_LIBRARY/inside" 2>&1); status=$?; set -e
[[ $status == 64 ]] || fail "a backup inside the library: exit $status ($out)"
# ... however it is spelled (a link to the library, "..").
ln -s "$PHOTOGATE_LIBRARY" "$tmp/liblink"
for spelled in "$tmp/liblink/inside" "$tmp/x/../library/store/inside"; do
    mkdir -p "$tmp/x"
    set +e; out=$("$pg" backup "$spelled" 2>&1); status=$?; set -e
    [[ $status == 64 ]] || fail "a backup into the library spelled $spelled: exit $status ($out)"
done
[[ -z $(ls "$PHOTOGATE_LIBRARY/store" | grep inside) ]] || fail "a backup was made in the store"
# A backup that does not finish is never a folder that opens as a library: it is made as
# DEST.partial and renamed at the end (here: no room left on a small disk).
mkdir -p "$tmp/small"
if mount -t tmpfs -o size=64k tmpfs "$tmp/small" 2>/dev/null; then
    on_exit "umount -l '$tmp/small'"
    set +e; out=$("$pg" backup "$tmp/small/bk" 2>&1); status=$?; set -e
    [[ $status != 0 ]] || fail "a backup onto a full disk: exit 0 ($out)"
    [[ ! -e $tmp/small/bk && ! -e $tmp/small/bk.partial ]] || fail "a failed backup left $(ls "$tmp/small")"
    umount "$tmp/small"
fi

# 5. A store file truncated under a running mount is EIO, not a short read that exits 0.
"$pg" mount org.example.Cam "$tmp/m" >/dev/null
victim=$(cd "$PHOTOGATE_LIBRARY" && python3 -c 'import sqlite3; print(sqlite3.connect("file:photogate.sqlite?mode=ro", uri=True).execute("SELECT store_path FROM assets WHERE display_name = ?", ("xmp.jpg",)).fetchone()[0])')
size=$(stat -c %s "$PHOTOGATE_LIBRARY/store/$victim")
cp "$PHOTOGATE_LIBRARY/store/$victim" "$tmp/victim.keep"
truncate -s $((size / 2)) "$PHOTOGATE_LIBRARY/store/$victim"
set +e; cat "$tmp/m/xmp.jpg" >"$tmp/read.out" 2>"$tmp/read.err"; status=$?; set -e
cp "$tmp/victim.keep" "$PHOTOGATE_LIBRARY/store/$victim"
"$pg" unmount "$tmp/m" >/dev/null
[[ $status != 0 ]] || fail "a truncated store file read with exit 0 ($(stat -c %s "$tmp/read.out") of $size bytes)"
has "Input/output error" "$(cat "$tmp/read.err")" || fail "a truncated store file: $(cat "$tmp/read.err")"

# 2. Damaged catalogs: every command says so (75), and nothing is made over them.
damage() {
    rm -rf "$tmp/d"; cp -a "$tmp/backup" "$tmp/d"
    case $1 in
        missing) rm "$tmp/d/photogate.sqlite" ;;
        empty) : >"$tmp/d/photogate.sqlite" ;;
        noschema) rm "$tmp/d/photogate.sqlite"; python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute("PRAGMA journal_mode=WAL"); c.close()' "$tmp/d/photogate.sqlite" ;;
        truncated) truncate -s 8192 "$tmp/d/photogate.sqlite" ;;
    esac
    sha256sum "$tmp/d/photogate.sqlite" 2>/dev/null >"$tmp/d.sum" || : >"$tmp/d.sum"
}
for kind in missing empty noschema truncated; do
    for cmd in "assets" "grants org.example.Cam" "verify" "verify --repair" "import $tmp/src" "init"; do
        damage $kind
        set +e; out=$(PHOTOGATE_LIBRARY="$tmp/d" "$pg" $cmd 2>&1); status=$?; set -e
        [[ $status == 75 ]] || fail "$kind catalog, $cmd: exit $status, expected 75 ($out)"
        has "damaged" "$out" || fail "$kind catalog, $cmd says: $out"
        [[ $(sha256sum "$tmp/d/photogate.sqlite" 2>/dev/null) == "$(cat "$tmp/d.sum")" ]] || fail "$kind catalog, $cmd: the catalog file changed"
        [[ -z $(ls "$tmp/d/lost+found" 2>/dev/null) ]] || fail "$kind catalog, $cmd: moved files to lost+found"
    done
done

# 2b. A damaged page inside a catalog that opens: verify says damaged (75) before anything else,
# and rebuild moves that catalog aside too (it rebuilt nothing: the catalog opened).
rm -rf "$tmp/d"; cp -a "$tmp/backup" "$tmp/d"
rm -f "$tmp/d/photogate.sqlite-wal" "$tmp/d/photogate.sqlite-shm"
python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(5 * 4096 + 8); f.write(b"\xff" * 200)' "$tmp/d/photogate.sqlite"
set +e; out=$(PHOTOGATE_LIBRARY="$tmp/d" "$pg" verify 2>&1); status=$?; set -e
[[ $status == 75 ]] || fail "verify of a catalog with a damaged page: exit $status ($out)"
out=$(PHOTOGATE_LIBRARY="$tmp/d" "$pg" verify --rebuild 2>&1) || fail "rebuild of a catalog with a damaged page: exit $? ($out)"
has "lost+found" "$out" || fail "rebuild kept a catalog with a damaged page: $out"
out=$(PHOTOGATE_LIBRARY="$tmp/d" "$pg" verify 2>&1) || fail "verify after the rebuild: $out"

# 3. A catalog that lost its rows (an old copy put back): repair holds back, rebuild restores.
stored=$(find "$PHOTOGATE_LIBRARY/store" -type f | wc -l)
rm -rf "$tmp/old"; mkdir "$tmp/old"
cp -a "$PHOTOGATE_LIBRARY/." "$tmp/old/"
python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute("PRAGMA foreign_keys=OFF"); c.execute("DELETE FROM versions"); c.execute("DELETE FROM assets WHERE rowid > 1"); c.commit(); c.close()' "$tmp/old/photogate.sqlite"
set +e; out=$(PHOTOGATE_LIBRARY="$tmp/old" "$pg" verify --repair 2>&1); status=$?; set -e
[[ $status == 76 ]] || fail "repair of a catalog that lost most rows: exit $status ($out)"
has "not moved" "$out" || fail "repair does not say it held back: $out"
[[ $(find "$tmp/old/store" -type f | wc -l) == "$stored" ]] || fail "repair moved store files away without --force"
out=$(PHOTOGATE_LIBRARY="$tmp/old" "$pg" verify --rebuild 2>&1) || fail "rebuild: exit $? ($out)"
has "grant again" "$out" || fail "rebuild does not say what is lost: $out"
out=$(PHOTOGATE_LIBRARY="$tmp/old" "$pg" verify 2>&1) || fail "verify after rebuild: $out"
[[ $(PHOTOGATE_LIBRARY="$tmp/old" "$pg" assets | wc -l) -ge $stored ]] || fail "after rebuild: $(PHOTOGATE_LIBRARY="$tmp/old" "$pg" assets)"
# A missing catalog: rebuild keeps what is left of the old one and makes a new one.
damage missing
out=$(PHOTOGATE_LIBRARY="$tmp/d" "$pg" verify --rebuild 2>&1) || fail "rebuild of a missing catalog: exit $? ($out)"
[[ $(PHOTOGATE_LIBRARY="$tmp/d" "$pg" assets | wc -l) -ge 4 ]] || fail "after rebuild of a missing catalog: $(PHOTOGATE_LIBRARY="$tmp/d" "$pg" assets)"
damage noschema
out=$(PHOTOGATE_LIBRARY="$tmp/d" "$pg" verify --rebuild 2>&1) || fail "rebuild of a catalog without schema: exit $? ($out)"
has "lost+found" "$out" || fail "rebuild does not say where the damaged catalog went: $out"
ls "$tmp/d/lost+found/"*/photogate.sqlite >/dev/null || fail "the damaged catalog was not kept"
say "ok"
