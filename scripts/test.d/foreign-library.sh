#!/usr/bin/env bash
# root refuses a library that another user owns (exit 74, naming the owner and how to run the
# command as them), before reading or writing anything in it, whatever that user put there: here
# what the red team's reproductions put in (a catalog row whose store path leads out of the store,
# with its "committed" file waiting in a dead temp folder for crash recovery to move; run/bell and
# a daemon log turned into symlinks to root's files). Nothing in the library and nothing outside
# changes, and nothing is mounted. Its owner still uses it. A library of root's with one part given
# to the user (tmp/ chowned, run/ a symlink to the user's folder) is refused too, naming that part.
source "$(dirname "$0")/lib.sh"
[[ $(id -u) == 0 ]] || skip "needs root (to add a second local user and act as root on their library)"
command -v python3 >/dev/null || skip "python3 is missing (it writes the user's catalog row)"
second_user pgf
chown "$user:" "$home"
runuser -u "$user" -- "$PHOTOGATE_BIN" --version >/dev/null || skip "$PHOTOGATE_BIN cannot be run by another user (its folders are private)"
lib="$home/library"
as_user() { runuser -u "$user" -- env -u XDG_STATE_HOME HOME="$home" PHOTOGATE_LIBRARY="$lib" "$PHOTOGATE_BIN" "$@"; }
install -o "$user" -m 644 "$corpus/exif.jpg" "$home/a.jpg"
as_user init >/dev/null
as_user import "$home/a.jpg" >/dev/null
as_user authorize org.example.Frame --access read-write --status authorized >/dev/null

# root's files the user aims at, and a file recovery would make: outside the library.
victim_bell="$tmp/victim-bell" victim_log="$tmp/victim-log" target="$tmp/proof-recover"
echo "root's own bytes" >"$victim_bell"
echo "root's own bytes" >"$victim_log"
chmod 644 "$victim_bell" "$victim_log"
runuser -u "$user" -- python3 - "$lib" "$target" <<'PY' || fail "the user could not write the catalog row"
import os, sqlite3, sys
lib, target = sys.argv[1], sys.argv[2]
db = sqlite3.connect(lib + "/photogate.sqlite")
db.execute("""INSERT INTO assets (id, display_name, media_kind, media_class, byte_size, capture_date, added_at,
              has_location, content_hash, store_path)
              VALUES ('1111111111111111', 'x.jpg', 'jpeg', 'photo', 10, 0, 0, 0, 'sha256:00', ?)""",
           (os.path.relpath(target, lib + "/store"),))
db.commit()
db.close()
os.makedirs(lib + "/tmp/import-999999-dead")
with open(lib + "/tmp/import-999999-dead/1111111111111111.jpg", "w") as f:
    f.write("the user's bytes\n")
os.makedirs(lib + "/run/logs", exist_ok=True)
PY
runuser -u "$user" -- ln -sfn "$victim_bell" "$lib/run/bell"
runuser -u "$user" -- ln -sfn "$victim_log" "$lib/run/logs/org.example.Frame.read-write.log"

# Everything about the library that a write, a chmod or a new file would change.
snapshot() { (cd "$lib" && find . -printf '%p %y %s %m %u %T@ %l\n' | sort && sha256sum photogate.sqlite*); }
before=$(snapshot)
mkdir -p "$tmp/mnt"
on_exit "force_unmount '$tmp/mnt'"

# refused ARGS...: root's `photogate ARGS` exits 74 and says whose the library is and what to do.
refused() {
    local out status
    set +e
    out=$(timeout -s TERM 30 "$PHOTOGATE_BIN" "$@" 2>&1 >/dev/null)
    status=$?
    set -e
    [[ $status == 74 ]] || fail "root's photogate $*: exit $status, expected 74 (the library is $user's): $out"
    has "belongs to $user (uid $(id -u "$user"))" "$out" || fail "photogate $*: the error does not name the owner: $out"
    has "runuser -u $user -- photogate" "$out" || fail "photogate $*: the error does not say how to run it as the owner: $out"
    has "nothing was changed" "$out" || fail "photogate $*: $out"
}
refused import --library "$lib" "$corpus/exif.jpg"
refused grant --library "$lib" org.example.Frame a.jpg
refused revoke --library "$lib" org.example.Frame a.jpg
refused authorize --library "$lib" org.example.Other --access read-write --status authorized
refused assets --library "$lib"
refused verify --repair --library "$lib"
refused mount org.example.Frame "$tmp/mnt" --library "$lib"
# As photogate-shared@.service runs it (PHOTOGATE_LIBRARY, --foreground, a view for every user).
PHOTOGATE_LIBRARY="$lib" refused mount org.example.Frame "$tmp/mnt" --foreground -o allow_other,default_permissions,rw
refused init "$lib"
! is_mounted "$tmp/mnt" || fail "root mounted the user's library"
after=$(snapshot)
[[ $after == "$before" ]] || fail "root's refused commands changed the library: $(diff <(echo "$before") <(echo "$after"))"
[[ ! -e $target ]] || fail "crash recovery moved the user's file out of the store, to $target"
[[ $(cat "$victim_bell") == "root's own bytes" ]] || fail "root wrote through the user's run/bell symlink"
[[ $(cat "$victim_log") == "root's own bytes" ]] || fail "root wrote through the user's log symlink"

# The owner still uses it.
as_user assets >/dev/null || fail "the owner cannot use their own library"

# A library of root's with a part the user owns: refused, naming the part.
rootlib="$tmp/rootlib"
"$PHOTOGATE_BIN" init "$rootlib" >/dev/null
"$PHOTOGATE_BIN" assets --library "$rootlib" >/dev/null || fail "root cannot use its own library"
chown "$user:" "$rootlib/tmp"
refused assets --library "$rootlib"
has "$rootlib/tmp in the library at $rootlib" "$(timeout 30 "$PHOTOGATE_BIN" assets --library "$rootlib" 2>&1)" || fail "the refusal does not name tmp/"
chown root: "$rootlib/tmp"
# run/ a symlink (root's own) to a folder of the user's: what it leads to counts.
mkdir "$home/run" && chown "$user:" "$home/run"
mv "$rootlib/run" "$rootlib/run.root"
ln -s "$home/run" "$rootlib/run"
refused grant --new-app --library "$rootlib" org.example.Frame a.jpg
[[ -z $(ls -A "$home/run") ]] || fail "root wrote into the user's folder through run/: $(ls -A "$home/run")"
rm "$rootlib/run" && mv "$rootlib/run.root" "$rootlib/run"
"$PHOTOGATE_BIN" assets --library "$rootlib" >/dev/null || fail "root cannot use its own library once it is its own again"
say "ok"
