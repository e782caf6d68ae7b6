#!/bin/bash
# photogate migrate (issue 41): an SQLite library with photos, references, apps, grants, picks,
# set grants, an album, an edit, an app's own file with a sidecar, refusals and a trashed photo,
# copied into a library whose catalog is on a real PostgreSQL 15 and whose originals are in a
# shared folder. Refused while the library has a mount running; killed (SIGKILL) in the middle of
# its transaction it leaves the catalog empty, and the same command run again completes it;
# refused into a catalog that is not empty, changing nothing. Afterwards every listing of both
# libraries is the same, and a mount of each shows the same files with the same bytes. And back:
# `backup` of the new library is an SQLite library of its own with the same listings again.
PG_PRIVATE_MOUNTS=1
source "$(dirname "$0")/lib.sh"
need_fuse
command -v exiftran >/dev/null || skip "exiftran is missing (scripts/setup installs it)"
source "$(dirname "$0")/pg.sh"
pg_start

url=$(pg_url)
src="$tmp/library"
dest="$tmp/migrated"
shared="$tmp/shared"
sqlite_lib() { PHOTOGATE_LIBRARY="$src" "$PHOTOGATE_BIN" "$@"; }
pg_lib() { PHOTOGATE_LIBRARY="$dest" "$PHOTOGATE_BIN" "$@"; }
migrate() { PHOTOGATE_LIBRARY="$src" "$PHOTOGATE_BIN" migrate "$@"; }

editor=org.example.Editor
viewer=org.example.Viewer
uploader=org.example.Uploader

# --- The SQLite library.
sqlite_lib init >/dev/null
sqlite_lib import "$root/scripts/demo-photos" >/dev/null
mkdir -p "$tmp/files" "$tmp/refs"
cp "$corpus/exif.jpg" "$tmp/files/exif.jpg"
cp "$corpus/xmp.jpg" "$tmp/refs/referenced.jpg"
sqlite_lib import --shared Family "$tmp/files" >/dev/null
sqlite_lib import --reference "$tmp/refs/referenced.jpg" >/dev/null
sqlite_lib authorize $editor --access read-write --status limited >/dev/null
sqlite_lib authorize $viewer --access read-write --status authorized >/dev/null
sqlite_lib authorize $uploader --access add-only --status authorized >/dev/null
sqlite_lib grant $editor beach.jpg cat.jpg harbour.jpg referenced.jpg >/dev/null
sqlite_lib grant $editor --strip-location cat.jpg >/dev/null
sqlite_lib grant $editor --edit beach.jpg >/dev/null
sqlite_lib revoke $editor harbour.jpg >/dev/null
sqlite_lib grant $editor --picked market.jpg >/dev/null
sqlite_lib album create Holidays >/dev/null
sqlite_lib album add Holidays mountain.jpg market.jpg >/dev/null
sqlite_lib grant $viewer --album Holidays >/dev/null
sqlite_lib delete receipt.jpg >/dev/null

# Through a mount: an edit of the person's photo (a version), the app's own file with a sidecar,
# a refused file, and reads (the access report).
m="$tmp/m"
mkdir -p "$m"
sqlite_lib mount $editor "$m" >/dev/null || fail "mount of the SQLite library"
on_exit "force_unmount '$m'"
exiftran -9 -i "$m/beach.jpg" 2>/dev/null || fail "exiftran through the mount"
cp "$corpus/exif.jpg" "$m/own.jpg"
cat >"$tmp/own.jpg.xmp" <<'XMP'
<?xpacket begin="" id="W5M0MpCehiHzreSzNTczkc9d"?>
<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">
<rdf:Description rdf:about="" xmlns:xmp="http://ns.adobe.com/xap/1.0/" xmp:Rating="5"/></rdf:RDF></x:xmpmeta>
<?xpacket end="w"?>
XMP
cp "$tmp/own.jpg.xmp" "$m/own.jpg.xmp" || fail "a sidecar through the mount"
printf 'not a photo' >"$m/notes.jpg" 2>/dev/null || true
cat "$m"/*.jpg >/dev/null

# Refused while that mount runs: nothing is made, in the folder, the store or the database.
set +e; out=$(migrate "$dest" --catalog "$url" --store "$shared" 2>&1); status=$?; set -e
[[ $status == 68 ]] || fail "migrate with a mount running exited $status: $out"
has "mounts running" "$out" || fail "migrate with a mount running said: $out"
[[ ! -e $dest && ! -e $shared ]] || fail "a refused migrate made $dest or $shared"
[[ $(pg_sql "SELECT to_regclass('photogate_schema') IS NULL") == t ]] || fail "a refused migrate made a catalog"
sqlite_lib unmount "$m" >/dev/null || fail "unmount"

[[ $(sqlite_lib versions beach.jpg --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))') == 2 ]] \
    || fail "the edit made no version: $(sqlite_lib versions beach.jpg)"
[[ -n $(sqlite_lib refused --json | python3 -c 'import json,sys; print(json.load(sys.stdin) or "")') ]] || fail "no refusal recorded"

# What the SQLite library is, before.
snapshot() {   # snapshot LIBRARY-COMMAND: every listing, in JSON, paths of the library left out
    local p=$1
    for app in $editor $viewer $uploader; do
        echo "== assets --app $app"; $p assets --app $app --json
        echo "== grants $app"; $p grants $app --json
        echo "== grants --sets $app"; $p grants $app --sets --json
        echo "== changes $app"; $p changes $app --json
        echo "== refused $app"; $p refused $app --json
        echo "== report $app"; $p report $app --json
    done
    echo "== assets"; $p assets --json
    echo "== albums"; $p albums --json
    echo "== apps"; $p apps --json
    echo "== trash"; $p trash --json
    echo "== requests"; $p requests --json
    echo "== versions"; $p versions beach.jpg --json
    echo "== versions own"; $p versions own.jpg --json
}
back="$tmp/back"
normalize() { sed -e "s#$src/store#STORE#g" -e "s#$shared/store#STORE#g" -e "s#$back/store#STORE#g" -e "s#$src#LIB#g" -e "s#$dest#LIB#g" -e "s#$back#LIB#g"; }
before=$(snapshot sqlite_lib | normalize)
has '"own.jpg"' "$before" || fail "the app's own file is not an asset"
src_store=$(cd "$src/store" && find . -type f | sort | xargs md5sum)
src_catalog=$(md5sum "$src/photogate.sqlite")

# --- Killed in the middle of its transaction. The catalog made first (by another folder
# joining the database: what `init --catalog` on a second host does) so that a session can hold
# trash_settings, which migrate fills after the apps, assets, albums, grants and history: it
# waits there, inside its transaction, until killed.
PHOTOGATE_LIBRARY="$tmp/other-host" "$PHOTOGATE_BIN" init --catalog "$url" --store "$shared" >/dev/null || fail "init of an empty catalog"
mkfifo "$tmp/lock.in"
runuser -u postgres -- /usr/bin/psql -h "$pgdir" -U postgres -d photos -Atq <"$tmp/lock.in" >/dev/null 2>&1 &
locker=$!
exec 7>"$tmp/lock.in"
on_exit "exec 7>&-"   # (its end of input ends that session)
echo "BEGIN; LOCK TABLE trash_settings IN SHARE MODE;" >&7
locked() { [[ $(pg_sql "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'trash_settings' AND l.mode = 'ShareLock' AND l.granted") == 1 ]]; }
wait_until 10 locked || fail "the test's session did not lock trash_settings"
# (A simple command, not the function: $! is then photogate's own pid.)
PHOTOGATE_LIBRARY="$src" "$PHOTOGATE_BIN" migrate "$dest" --catalog "$url" --store "$shared" >"$tmp/killed.out" 2>&1 &
migrator=$!
# Waiting for that lock, having written the tables before it in its transaction (which then
# has a transaction id).
waiting() { [[ $(pg_sql "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%trash_settings%'") == 1 ]]; }
wait_until 30 waiting || fail "migrate never reached trash_settings: $(cat "$tmp/killed.out")"
wrote=$(pg_sql "SELECT backend_xid IS NOT NULL FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%trash_settings%'")
status=0; { kill -KILL $migrator; wait $migrator; } 2>/dev/null || status=$?
[[ $status == 137 ]] || fail "migrate was not killed in its transaction: it exited $status: $(cat "$tmp/killed.out")"
echo "COMMIT;" >&7
exec 7>&-
wait $locker || true
backends() { pg_sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"; }
wait_until 20 test "$(backends)" == 0 || fail "the killed migrate's session is still there"
for t in apps assets albums album_assets selections picks requests changes app_changes versions sidecars set_grants refusals; do
    n=$(pg_sql "SELECT count(*) FROM $t")
    [[ $n == 0 ]] || fail "a migrate killed in its transaction left $n rows in $t"
done
[[ $(pg_sql "SELECT count(*) FROM trash_settings") == 1 ]] || fail "trash_settings lost its row"
[[ $wrote == t ]] || fail "migrate had written nothing in its transaction when it was killed"
[[ -f $dest/catalog.conf ]] || fail "the killed migrate had not made $dest"
# The library it copies is as it was.
[[ $(md5sum "$src/photogate.sqlite") == "$src_catalog" ]] || fail "the SQLite catalog changed"

# --- Run again: completes, keeps the files the killed run had copied, and verifies both.
out=$(migrate "$dest" --catalog "$url" --store "$shared" 2>&1) || fail "migrate run again: $out"
has "there already from an earlier run" "$out" || fail "the second run copied every file again: $out"
[[ $(grep -c ": [0-9]* assets, [0-9]* files hashed, no problems" <<<"$out") == 2 ]] || fail "migrate did not verify both clean: $out"
[[ $(ls -A "$shared/tmp") == "" ]] || fail "temp folders left in the shared folder: $(ls -A "$shared/tmp")"
[[ ! -e $dest/photogate.sqlite && ! -e $dest/store ]] || fail "the new library has a catalog or a store of its own"
out=$(pg_lib verify 2>&1) || fail "verify of the new library: $out"
out=$(sqlite_lib verify 2>&1) || fail "verify of the SQLite library: $out"

# Every table's rows are on the server, keys as they were.
for t in assets versions sidecars app_changes changes refusals selections picks album_assets set_grants; do
    a=$(cd "$src" && python3 -c "import sqlite3,sys; print(sqlite3.connect('file:photogate.sqlite?mode=ro', uri=True).execute('SELECT count(*) FROM $t').fetchone()[0])")
    b=$(pg_sql "SELECT count(*) FROM $t")
    [[ $a == "$b" ]] || fail "$t: $a rows in SQLite, $b on PostgreSQL"
done
[[ $(pg_sql "SELECT count(*) FROM sidecars") -ge 1 && $(pg_sql "SELECT count(*) FROM versions") -ge 2 ]] || fail "no sidecar or no version copied"
[[ $(pg_sql "SELECT count(*) FROM assets WHERE reference_path IS NOT NULL") == 1 ]] || fail "the referenced original is not a reference"

# The same listings, JSON for JSON.
after=$(snapshot pg_lib | normalize)
diff <(echo "$before") <(echo "$after") >"$tmp/diff" || fail "the listings differ after migrate:
$(head -40 "$tmp/diff")"
# The SQLite library is unchanged by it.
[[ $(snapshot sqlite_lib | normalize) == "$before" ]] || fail "the SQLite library's listings changed"
[[ $(cd "$src/store" && find . -type f | sort | xargs md5sum) == "$src_store" ]] || fail "the SQLite library's store changed"
[[ $(cd "$shared/store" && find . -type f | sort | xargs md5sum) == "$src_store" ]] || fail "the shared store is not the library's store"

# A mount of each shows the same: names, modes, sizes, times, and bytes.
view() {   # view LIBRARY-COMMAND APP OUT: the listing and checksums of a fresh mount, into OUT
    local p=$1 app=$2 mp="$tmp/v-$1-$2"
    mkdir -p "$mp"
    on_exit "force_unmount '$mp'"
    $p mount "$app" "$mp" >/dev/null || fail "mount of $app ($p)"
    # Folders' times are the view's (when it was made), not the library's: left out, as is the
    # mount point's parent ("..", a folder of this test).
    (cd "$mp" && ls -laR --time-style=+%s . | grep -v ' \.\.$' | awk '/^d/ { $6 = "-" } { print }' && find . -type f | sort | xargs -r md5sum) >"$3"
    $p unmount "$mp" >/dev/null || fail "unmount of $app ($p)"
}
for app in $editor $viewer; do
    view sqlite_lib $app "$tmp/view-sqlite"
    view pg_lib $app "$tmp/view-pg"
    [[ $(grep -c '\.jpg$' "$tmp/view-sqlite") -ge 3 ]] || fail "the view of $app shows too little to compare: $(cat "$tmp/view-sqlite")"
    diff "$tmp/view-sqlite" "$tmp/view-pg" >"$tmp/diff" || fail "a mount of $app shows otherwise after migrate:
$(head -40 "$tmp/diff")"
done

# The new library is a library: a change to it works, and the SQLite one is still usable.
# Numbered on from where the SQLite library was: an app's change tokens go on the same.
tokens() { $1 changes $editor --json | python3 -c 'import json,sys; print([(c["token"], c["kind"], c.get("id")) for c in json.load(sys.stdin)["changes"]])'; }
earlier=$(tokens pg_lib)
pg_lib grant $editor mountain.jpg >/dev/null || fail "a grant in the new library"
sqlite_lib grant $editor mountain.jpg >/dev/null || fail "a grant in the SQLite library after migrate"
[[ $(tokens pg_lib) != "$earlier" ]] || fail "a grant made no change for the app: $earlier"
[[ $(tokens pg_lib) == "$(tokens sqlite_lib)" ]] || fail "the change tokens after migrate differ: $(tokens pg_lib) against $(tokens sqlite_lib)"

# --- And back (issue 41, "every command works on both"): `backup` of the new library is an
# SQLite library of its own (no link to the server or the shared folder) whose listings are the
# same again (every table through PostgreSQL and back), with the shared folder's files it names,
# that verifies, and that numbers on as the server does.
back_lib() { PHOTOGATE_LIBRARY="$back" "$PHOTOGATE_BIN" "$@"; }
out=$(pg_lib backup "$back" 2>&1) || fail "backup of the new library: $out"
has "1 referenced original" "$out" || fail "backup did not count the referenced original: $out"
[[ $(ls -A "$back" | tr '\n' ' ') == "LIBRARY photogate.sqlite run store tmp " ]] || fail "the backup is not an SQLite library of its own: $(ls -A "$back")"
diff <(snapshot pg_lib | normalize) <(snapshot back_lib | normalize) >"$tmp/diff" || fail "the backup's listings differ from the library's:
$(head -40 "$tmp/diff")"
out=$(back_lib verify 2>&1) || fail "verify of the backup: $out"
[[ $(cd "$back/store" && find . -type f | sort | xargs md5sum) == "$(cd "$shared/store" && find . -type f | sort | xargs md5sum)" ]] \
    || fail "the backup's store is not the shared folder's"
pg_lib grant $editor harbour.jpg >/dev/null || fail "a grant in the new library after its backup"
back_lib grant $editor harbour.jpg >/dev/null || fail "a grant in the backup"
[[ $(tokens back_lib) == "$(tokens pg_lib)" ]] || fail "the change tokens after backup differ: $(tokens back_lib) against $(tokens pg_lib)"

# --- Into a catalog that is not empty: refused, and nothing changes anywhere.
tables="apps assets albums album_assets selections picks requests changes app_changes versions sidecars set_grants refusals trash_settings report_settings asset_rowid_high"
catalog_sum() { for t in $tables; do pg_sql "SELECT md5(COALESCE(string_agg(x::text, ',' ORDER BY x::text), '')) FROM $t x"; done; }
sum=$(catalog_sum)
files=$(cd "$shared" && find . | sort)
set +e; out=$(migrate "$tmp/again" --catalog "$url" --store "$shared" 2>&1); status=$?; set -e
[[ $status == 68 ]] || fail "migrate into a catalog that is not empty exited $status: $out"
has "is not empty" "$out" || fail "migrate into a catalog that is not empty said: $out"
[[ ! -e $tmp/again ]] || fail "a refused migrate made its folder"
[[ $(catalog_sum) == "$sum" ]] || fail "a refused migrate changed the catalog"
[[ $(cd "$shared" && find . | sort) == "$files" ]] || fail "a refused migrate changed the shared folder"
# Its own folder again (the interrupted run's way back in): refused all the same.
set +e; out=$(migrate "$dest" --catalog "$url" --store "$shared" 2>&1); status=$?; set -e
[[ $status == 68 ]] && has "is not empty" "$out" || fail "migrate into its completed folder again exited $status: $out"
[[ $(catalog_sum) == "$sum" ]] || fail "migrate run a third time changed the catalog"

say "ok"
