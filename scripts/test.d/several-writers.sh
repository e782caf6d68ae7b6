#!/bin/bash
# Several hosts writing into one store at once (issue 41): the catalog on a real PostgreSQL 15, the
# originals and temp files in one shared folder, two library folders linked to both (hosts A and
# B), each with add-only mounts of two apps. Host B runs in namespaces of its own (pid, mount,
# host name): it sees none of A's processes or mounts, so nothing can tell a live writer from a
# dead one by its pid there. Both hosts copy files in at once (unique bytes, and some identical on
# both hosts, for the reuse of an app's asset with the same bytes); host B is cut off from the
# catalog for a while (its closes still succeed, the files kept marked to be committed later),
# and its daemon of the first app is SIGKILLed then; host B recovers (verify --repair, a new
# mount) while host A goes on writing, a file half written on A held open across it. Then: every copy that returned
# 0 is an asset with its bytes, read back through new mounts on both hosts; verify is clean on
# both; no app has two assets of the same bytes, no store file is named by two rows and none by
# no row; nothing of A's failed.
PG_PRIVATE_MOUNTS=1
source "$(dirname "$0")/lib.sh"
need_fuse
command -v nsenter >/dev/null || skip "nsenter is missing (util-linux)"
source "$(dirname "$0")/pg.sh"
pg_start

url=$(pg_url)
shared="$tmp/shared"
A="$tmp/hostA"
B="$tmp/hostB"
acks="$tmp/acks"
mkdir -p "$tmp/mnt/A1" "$tmp/mnt/A2" "$tmp/mnt/B1" "$tmp/mnt/B2" "$tmp/mnt/AC" "$tmp/mnt/BC" "$acks"
for m in A1 A2 AC; do on_exit "force_unmount '$tmp/mnt/$m'"; done

# Host B: an init of its own namespaces (it reaps what is reparented to it, and is killed at the
# end of this script, taking every process of B and, with the last of them, B's mounts).
unshare --pid --mount --uts --propagation private --mount-proc --kill-child python3 -c '
import os, signal, socket, sys
socket.sethostname("photogate-host-b")
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
open(sys.argv[1], "w").close()
while True:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
    signal.sigwait([signal.SIGCHLD])' "$tmp/hostB.ready" &
hostB=$!
on_exit "kill -KILL $hostB"   # (unshare ignores SIGTERM while its child runs)
wait_until 10 test -e "$tmp/hostB.ready" || fail "host B's namespaces did not start"
binit=$(pgrep -P $hostB) || fail "no init of host B"
on_exit "kill -KILL $binit"   # and every process of host B with it
inB() { nsenter -t "$binit" -p -m -u -- "$@"; }
[[ $(inB hostname) == photogate-host-b ]] || fail "host B's host name is $(inB hostname)"

pa() { PHOTOGATE_LIBRARY="$A" "$PHOTOGATE_BIN" "$@"; }
pb() { inB env PHOTOGATE_LIBRARY="$B" "$PHOTOGATE_BIN" "$@"; }
out=$(pa init --catalog "$url" --store "$shared" 2>&1) || fail "init of host A: $out"
# (Host B's connections are named, to be told from A's on the server.)
out=$(pb init --catalog "$url&application_name=photogate-host-b" --store "$shared" 2>&1) || fail "init of host B: $out"

cam=org.example.Camera
scan=org.example.Scanner
check=org.example.Checker
for app in $cam $scan; do pa authorize $app --access add-only --status authorized >/dev/null; done
pa authorize $check --access read-write --status authorized >/dev/null

# The files: small JPEGs, each made unique by a comment segment (COM) after its SOI, some 30 KB
# long, so that a copy takes several writes. A* and B* are each host's own; S* have the same
# bytes on both hosts (both copy them, for both apps); X is the one host A holds open.
src="$tmp/src"
python3 - "$root/scripts/demo-photos" "$src" <<'PY'
import os, sys, random
demo, out = sys.argv[1], sys.argv[2]
bases = [open(os.path.join(demo, n), 'rb').read() for n in ('cat.jpg', 'market.jpg', 'receipt.jpg')]
rng = random.Random(41)
for group, n in (('A1', 70), ('A2', 50), ('B1', 70), ('B2', 50), ('S', 12), ('X', 1)):
    os.makedirs(os.path.join(out, group), exist_ok=True)
    for i in range(n):
        base = bases[i % len(bases)]
        text = ('%s-%03d ' % (group, i)).encode() + bytes(rng.choice(b'abcdefghij') for _ in range(rng.choice((200, 30000))))
        seg = b'\xff\xfe' + (len(text) + 2).to_bytes(2, 'big') + text
        open(os.path.join(out, group, '%s-%03d.jpg' % (group.lower(), i)), 'wb').write(base[:2] + seg + base[2:])
PY

pa mount $cam "$tmp/mnt/A1" --access add-only >/dev/null || fail "mount A1"
pa mount $scan "$tmp/mnt/A2" --access add-only >/dev/null || fail "mount A2"
pb mount $cam "$tmp/mnt/B1" --access add-only >/dev/null || fail "mount B1"
pb mount $scan "$tmp/mnt/B2" --access add-only >/dev/null || fail "mount B2"
is_mounted "$tmp/mnt/B1" && fail "host B's mount shows in host A's mount namespace"

# The pid of B1's daemon, as host B numbers it.
pidB1=$(pb mounts --json | python3 -c '
import json, sys
for m in json.load(sys.stdin):
    if m["mountpoint"] == sys.argv[1]: print(m["pid"])' "$tmp/mnt/B1")
[[ -n $pidB1 ]] || fail "no daemon for B1"

# copier NAME MOUNT FILES...: copies each file in, noting the ones whose cp returned 0 (its close
# said saved: acknowledged) in acks/NAME as "name<TAB>source"; stops at the first failure. A
# copier whose name starts with A waits at its 40th file until host B's daemon is killed (the
# flag acks/killed), so that A writes before, and most likely while, B recovers.
copier='
name=$1 mnt=$2 i=0; shift 2
: >"$ACKS/$name"
for f in "$@"; do
    if [[ $name == A* && $i == 40 ]]; then
        until [[ -e $ACKS/killed ]]; do sleep 0.02; done
    fi
    i=$((i + 1))
    if cp "$f" "$mnt/$(basename "$f")" 2>>"$ACKS/$name.err"; then
        printf "%s\t%s\n" "$(basename "$f")" "$f" >>"$ACKS/$name"
    else
        echo "stopped at $(basename "$f")" >>"$ACKS/$name.err"
        exit 0
    fi
done
echo done >"$ACKS/$name.done"'
# The shared files interleaved with each host's own, for both apps.
mix() { python3 -c 'import sys; a, s = sys.argv[1].split(), sys.argv[2].split(); step = max(1, len(a) // (len(s) + 1)); out = []
for i, f in enumerate(a):
    out.append(f)
    if i % step == step - 1 and s: out.append(s.pop(0))
print("\n".join(out + s))' "$(echo "$1"/*)" "$(echo "$src"/S/*)"; }
mapfile -t filesA1 < <(mix "$src/A1")
mapfile -t filesA2 < <(mix "$src/A2")
mapfile -t filesB1 < <(mix "$src/B1")
mapfile -t filesB2 < <(mix "$src/B2")

# A file half written on host A, held open across B's kill and recovery, written in full and
# closed only after it (its close must succeed, and the file be whole): its exit status is its close's.
python3 - "$src/X/x-000.jpg" "$tmp/mnt/A1/slow.jpg" "$acks" <<'PY' &
import os, sys, time
data = open(sys.argv[1], 'rb').read()
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
os.write(fd, data[:1000])
open(os.path.join(sys.argv[3], 'slow.open'), 'w').close()
while not os.path.exists(os.path.join(sys.argv[3], 'recovered')):
    time.sleep(0.02)
os.write(fd, data[1000:])
os.close(fd)
PY
slow=$!
on_exit "touch '$acks/recovered' '$acks/killed'; kill $slow"
wait_until 30 test -e "$acks/slow.open" || fail "host A's slow file was not opened"

ACKS=$acks bash -c "$copier" copier A1 "$tmp/mnt/A1" "${filesA1[@]}" & pids=($!)
ACKS=$acks bash -c "$copier" copier A2 "$tmp/mnt/A2" "${filesA2[@]}" & pids+=($!)
inB env ACKS="$acks" bash -c "$copier" copier B1 "$tmp/mnt/B1" "${filesB1[@]}" & pids+=($!)
inB env ACKS="$acks" bash -c "$copier" copier B2 "$tmp/mnt/B2" "${filesB2[@]}" & pids+=($!)
on_exit "kill ${pids[*]}"

acked() { [[ -f $acks/$1 ]] && wc -l <"$acks/$1" || echo 0; }
acked_at_least() { (($(acked "$1") >= $2)); }
# Host B cut off from the catalog in the middle of its stream (the server's socket hidden in B's
# mount namespace, its connections ended): its closes still succeed, each file kept in its temp
# folder, marked, to be committed later. Then its first daemon is killed with such files in hand.
wait_until 120 acked_at_least B1 15 || fail "host B's copier stalled at $(acked B1) files: $(cat "$acks/B1.err")"
mkdir -p "$tmp/nodb"
inB mount --bind "$tmp/nodb" "$pgdir" || fail "cannot hide the server from host B"
pg_sql "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'photogate-host-b'" >/dev/null
cutAt=$(acked B1)
wait_until 120 acked_at_least B1 $((cutAt + 8)) || fail "host B's copier stalled at $(acked B1) files while cut off: $(cat "$acks/B1.err")"
inB kill -KILL "$pidB1"
touch "$acks/killed"
wait_until 30 test -s "$acks/B1.err" || fail "host B's copier went on after its daemon was killed"
inB umount "$pgdir" || fail "cannot give the server back to host B"
nA=$(find "$shared/tmp" -mindepth 1 -maxdepth 1 | wc -l)   # (for the log: temp folders at B's recovery)
# Host B's recovery while host A writes: verify --repair settles the dead daemon's temp folder,
# and takes nothing of host A's live ones (nor of B's second daemon).
out=$(pb verify --repair 2>&1) || fail "verify --repair on B: $out"
has "on host photogate-host-b is gone" "$out" || fail "verify does not say which host's process died: $out"
say "host B's repair: $(grep dead-temp <<<"$out")"
marked=$(grep -oE "[0-9]+ to commit as an app's asset" <<<"$out" | cut -d' ' -f1)
((${marked:-0} > 0)) || fail "the killed daemon left no file whose close had succeeded to commit: $out"
out=$(pb verify 2>&1) || fail "verify on B right after its repair, host A writing: $out"
out=$(pa verify 2>&1) || fail "verify on A, host A writing: $out"
# A new mount of the killed app on B (its start recovers too).
pb mount $cam "$tmp/mnt/B1" --access add-only >/dev/null || fail "remount B1"
touch "$acks/recovered"
wait $slow || fail "the close of host A's file held open across B's recovery failed"
printf 'slow.jpg\t%s\n' "$src/X/x-000.jpg" >>"$acks/A1"
wait "${pids[@]}"
for c in A1 A2 B2; do [[ -f $acks/$c.done ]] || fail "copier $c stopped: $(cat "$acks/$c.err")"; done
[[ ! -f $acks/B1.done ]] || fail "host B's copier finished: its daemon was killed too late (after $(acked B1) files)"
say "acknowledged: A1 $(acked A1), A2 $(acked A2), B1 $(acked B1) (killed), B2 $(acked B2); $nA entries in tmp/ at B's recovery"

# Nothing of host A's failed: every copy of A's returned 0 and its daemons logged no failure.
[[ $(acked A1) == $((${#filesA1[@]} + 1)) && $(acked A2) == ${#filesA2[@]} ]] || fail "host A lost copies: $(cat "$acks/A1.err" "$acks/A2.err")"
if grep -rhE "was not added|could not add|kept to be committed later|refused" "$A/run/logs" 2>/dev/null; then fail "host A's daemons logged failures"; fi

pa unmount "$tmp/mnt/A1" >/dev/null || fail "unmount A1"
pa unmount "$tmp/mnt/A2" >/dev/null || fail "unmount A2"
pb unmount "$tmp/mnt/B1" >/dev/null || fail "unmount B1"
pb unmount "$tmp/mnt/B2" >/dev/null || fail "unmount B2"
[[ -z $(ls -A "$shared/tmp") ]] || fail "tmp/ is not empty once every writer is gone: $(ls -A "$shared/tmp")"

# Verify is clean on both hosts.
out=$(pa verify 2>&1) || fail "verify on A: $out"
out=$(pb verify 2>&1) || fail "verify on B: $out"

# The catalog: one asset per app and bytes (the shared files copied by both hosts are one asset
# of each app), no store path named twice, every store file named, none missing.
dups=$(pg_sql "SELECT owner_app, content_hash FROM assets GROUP BY 1, 2 HAVING count(*) > 1")
[[ -z $dups ]] || fail "an app has two assets of the same bytes: $dups"
twice=$(pg_sql "SELECT p FROM (SELECT store_path p FROM assets WHERE store_path IS NOT NULL UNION ALL
    SELECT store_path FROM versions WHERE store_path IS NOT NULL AND file_id IS NOT NULL UNION ALL
    SELECT store_path FROM sidecars WHERE store_path IS NOT NULL) s GROUP BY p HAVING count(*) > 1")
[[ -z $twice ]] || fail "store files named by two rows: $twice"
rows=$(pg_sql "SELECT count(*) FROM assets")
files=$(find "$shared/store" -type f | wc -l)
[[ $rows == "$files" ]] || fail "$rows assets, $files store files"
for p in $(pg_sql "SELECT store_path FROM assets"); do [[ -f $shared/store/$p ]] || fail "store/$p is missing"; done

# Every acknowledged copy is its app's asset, read back with its bytes through new mounts of a
# read-write app on both hosts.
pg_sql "SELECT owner_app || chr(9) || content_hash || chr(9) || display_name FROM assets" >"$tmp/catalog.tsv"
cat >"$tmp/readback.py" <<'PY'
import hashlib, os, sys
tmp, mnt, cam, scan = sys.argv[1:5]
catalog = {}
for line in open(os.path.join(tmp, 'catalog.tsv')):
    owner, h, name = line.rstrip('\n').split('\t')
    catalog[(owner, h)] = name
bad = checked = 0
for copier, app in (('A1', cam), ('A2', scan), ('B1', cam), ('B2', scan)):
    for line in open(os.path.join(tmp, 'acks', copier)):
        name, src = line.rstrip('\n').split('\t')
        data = open(src, 'rb').read()
        in_catalog = catalog.get((app, 'sha256:' + hashlib.sha256(data).hexdigest()))
        if in_catalog is None:
            print('lost: %s from %s (%s)' % (name, copier, src)); bad += 1; continue
        try:
            got = open(os.path.join(mnt, in_catalog), 'rb').read()
        except OSError as e:
            print('cannot read %s through %s: %s' % (in_catalog, mnt, e)); bad += 1; continue
        if got != data:
            print('%s reads differently through %s' % (in_catalog, mnt)); bad += 1
        checked += 1
print('%s: %d acknowledged copies read back' % (mnt, checked), file=sys.stderr)
sys.exit(1 if bad else 0)
PY
pa mount $check "$tmp/mnt/AC" >/dev/null || fail "mount AC"
pb mount $check "$tmp/mnt/BC" >/dev/null || fail "mount BC"
python3 "$tmp/readback.py" "$tmp" "$tmp/mnt/AC" $cam $scan || fail "acknowledged copies lost or changed (host A)"
inB python3 "$tmp/readback.py" "$tmp" "$tmp/mnt/BC" $cam $scan || fail "acknowledged copies lost or changed (host B)"
pa unmount "$tmp/mnt/AC" >/dev/null
pb unmount "$tmp/mnt/BC" >/dev/null
say "ok"
