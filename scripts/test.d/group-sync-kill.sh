#!/usr/bin/env bash
# Issue 39: closes that arrive together share one sync of the catalog's log (SyncCoalescer); each
# close returns only once a sync that began after its row was written has succeeded. Here eight
# `cp` writers copy photos into an add-only mount, an LD_PRELOAD shim holds the third log sync
# after arming for ever, and the daemon is SIGKILLed once several closes wait on that sync and
# the next: in the middle of a group commit. A kill keeps the page cache, so the log is then put
# back as the shim copied it when the last sync that completed began: what a power cut at the
# kill would have left of it (a close told "saved" by a sync that began before its row was written
# loses its row there). After a new mount's recovery, every photo whose `cp` returned 0 is an
# asset with the source's bytes (size and SHA-256), no asset is partial or unknown, none is there
# twice, nothing is left in tmp/, and `photogate verify` finds nothing wrong.
source "$(dirname "$0")/lib.sh"
need_fuse
case $(uname -m) in
    x86_64) close_nr=3 ;;
    aarch64) close_nr=57 ;;
    *) skip "the close(2) system call number of $(uname -m) is not known here" ;;
esac
shim=$(build_shim hold-log-sync)
pg=$PHOTOGATE_BIN
d=$tmp
app=org.example.GroupSync
writers=8
per_writer=6
export PHOTOGATE_LIBRARY="$d/library"
"$pg" init >/dev/null
"$pg" authorize "$app" --access add-only --status authorized >/dev/null
mkdir -p "$d/src" "$d/mnt" "$d/status" "$d/snap"
# Distinct photos: a JPEG, then bytes of its own after the image (still a whole JPEG).
for ((i = 0; i < writers * per_writer; i++)); do
    { cat "$corpus/exif.jpg"; printf 'photo %d\n' "$i"; head -c 300000 /dev/urandom; } >"$d/src/p$i.jpg"
done
on_exit "force_unmount '$d/mnt'"
on_exit "'$pg' unmount '$d/mnt' >/dev/null 2>&1"
RT_ARM="$d/arm" RT_HELD="$d/held" RT_HOLD_AT=3 RT_SNAP="$d/snap" RT_LOG="$d/shim.log" LD_PRELOAD="$shim" \
    "$pg" mount "$app" "$d/mnt" --access add-only >/dev/null || fail "mount"
daemon=$("$pg" mounts --json | python3 -c 'import json, sys; m = [x for x in json.load(sys.stdin) if x["mountpoint"] == sys.argv[1]]; print(m[0]["pid"] if m else "")' "$d/mnt")
[[ -n $daemon ]] || fail "no daemon listed for $d/mnt"
# Run first on any exit: a daemon with a held sync never ends by itself, nor do the closes on it.
on_exit "kill -KILL $daemon 2>/dev/null"
touch "$d/arm"
# Each writer copies its photos one `cp` at a time and notes which returned 0.
pids=()
for ((w = 0; w < writers; w++)); do
    (
        for ((k = 0; k < per_writer; k++)); do
            i=$((k * writers + w))
            if cp "$d/src/p$i.jpg" "$d/mnt/" 2>/dev/null; then echo "p$i.jpg" >>"$d/status/ok.$w"; else echo "p$i.jpg" >>"$d/status/failed.$w"; fi
        done
    ) &
    pids+=($!)
done
writers_of=$(IFS=,; echo "${pids[*]}")
on_exit "pkill -KILL -P $writers_of 2>/dev/null; kill -KILL ${pids[*]} 2>/dev/null"
# This test's cp processes asleep in close(2) (waiting for the daemon's answer).
closing() {
    local n=0 p nr state
    for p in $(pgrep -x cp -P "$writers_of"); do
        read -r nr _ <"/proc/$p/syscall" 2>/dev/null || continue
        state=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)
        [[ $nr == "$close_nr" && ($state == S || $state == D) ]] && n=$((n + 1))
    done
    echo "$n"
}
held_with_waiters() { [[ -e $d/held ]] && (($(closing) >= 3)); }
wait_until 60 held_with_waiters || fail "the log sync was not held with several closes waiting (held: $([[ -e $d/held ]] && echo yes || echo no), closes waiting: $(closing)); shim: $(tr '\n' ';' <"$d/shim.log" 2>/dev/null)"
waiting=$(closing)
kill -KILL "$daemon"
gone() { ! kill -0 "$daemon" 2>/dev/null; }
wait_until 20 gone || fail "the daemon outlived SIGKILL"
writers_done() { local p; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }
wait_until 60 writers_done || fail "the writers did not end after the daemon was killed"
wait "${pids[@]}" || true
force_unmount "$d/mnt"
# The log as a power cut at the kill would have left it: as it was when the last sync that
# completed began (the syncs after the mount and before arming are not counted: that copy holds
# their rows too). Its index (-shm) goes, as after a reboot.
last=$(grep -o 'log sync [0-9]* done' "$d/shim.log" | awk '{print $3}' | sort -n | tail -1)
[[ -n $last && -s $d/snap/wal.$last ]] || fail "no log sync completed after arming: $(tr '\n' ';' <"$d/shim.log")"
wal="$PHOTOGATE_LIBRARY/photogate.sqlite-wal"
cmp -s -n 32 "$d/snap/wal.$last" "$wal" || fail "the log was restarted (a checkpoint) while the photos were copied: the copy of sync $last cannot stand for what a power cut leaves"
cp "$d/snap/wal.$last" "$wal"
rm -f "$PHOTOGATE_LIBRARY/photogate.sqlite-shm"
ok=$(cat "$d"/status/ok.* 2>/dev/null | sort || true)
failed=$(cat "$d"/status/failed.* 2>/dev/null | sort || true)
say "killed with $waiting closes waiting; $(wc -w <<<"$ok") copies returned 0, $(wc -w <<<"$failed") failed; the log put back as at sync $last; shim: $(tr '\n' ';' <"$d/shim.log")"
[[ -n $ok ]] || fail "no copy returned 0 before the kill (the syncs before the held one)"
[[ -n $failed ]] || fail "no copy failed: the kill came after every close"
# A new mount recovers what the dead daemon left.
"$pg" mount "$app" "$d/mnt" --access add-only >/dev/null || fail "mount after the kill"
"$pg" unmount "$d/mnt" >/dev/null || fail "unmount after the kill"
"$pg" assets --json >"$d/assets.json" || fail "assets --json"
(cd "$d/src" && sha256sum p*.jpg) >"$d/src.sums"
printf '%s\n' $ok >"$d/ok.list"
check=$(python3 - "$d/assets.json" "$d/src.sums" "$d/src" "$d/ok.list" <<'PY'
import json, os, sys
assets = json.load(open(sys.argv[1]))
sums = {}
for line in open(sys.argv[2]):
    h, n = line.split()
    sums[n] = "sha256:" + h
src = sys.argv[3]
ok = [l.strip() for l in open(sys.argv[4]) if l.strip()]
names = [a["name"] for a in assets]
problems = []
for n in ok:
    if n not in names: problems.append(f"{n}: its cp returned 0, and it is not in the library")
for a in assets:
    n = a["name"]
    if n not in sums: problems.append(f"{n}: an asset that is none of the photos copied"); continue
    if a["hash"] != sums[n] or a["size"] != os.path.getsize(os.path.join(src, n)):
        problems.append(f"{n}: stored bytes differ from the source (partial?)")
if len(set(names)) != len(names): problems.append(f"an asset twice: {sorted(names)}")
print("\n".join(problems) if problems else f"ok: {len(assets)} assets, {len(ok)} closes that returned 0")
PY
) || fail "python: $check"
has "^ok:" "$check" || fail "$check"
say "$check"
[[ -d $d/library/tmp ]] || fail "the library has no tmp/ folder at $d/library/tmp (its layout changed?)"
left=$(find "$d/library/tmp" -type f | head -5)
[[ -z $left ]] || fail "left in the library's tmp/: $left"
v=$("$pg" verify 2>&1) || fail "verify after the kill: $v"
say ok
