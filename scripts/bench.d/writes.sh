# scripts/bench's durable-write rows (issues 13 and 15), sourced by scripts/bench (BENCH_ONLY=writes
# runs only these). photogate makes every file durable at close (one fsync), so each row's native
# side is a copy that is durable too: `pgbench cpsync` opens, writes, fsyncs and closes each file
# (a plain `cp` never syncs; the `cp ... in` row above compares with that).
#   - cp of BENCH_REAL_PHOTOS photos into an add-only mount (`cp`) against `pgbench cpsync` into a
#     local folder;
#   - the same with BENCH_WRITERS writers in parallel (each copies every WRITERS-th photo; the
#     mount side runs that many `cp` processes);
#   - saving an edit of a BENCH_EDIT_MB MB JPEG through a read-write mount (app authorized, its
#     edit-any option on) against the same save in a local folder, and against that save with an
#     fsync. The save is `pgbench save` (open O_TRUNC, write new bytes, close);
#     BENCH_EDIT_SAVE=exiftool makes it `exiftool -overwrite_original -Artist=...` (temp file, then
#     rename). If the mount refuses the save with EACCES (a photogate without edits through
#     mounts), its cell reads "n/a (EACCES)" and the plain-folder sides are still measured.
# Mount sides run in the default mount (passthrough: writes are photogate's either way).

wlib="$lib"
"$PG" authorize --library "$wlib" org.bench.Writer --access add-only --status authorized >/dev/null
wmnt="$work/mnt/writer"
pg_mount "$wlib" org.bench.Writer "$wmnt" --access add-only
mkdir -p "$work/wr-native"
ls "$work/real" | sed "s|^|$work/real/|" >"$work/list-write"
# Splits of the list for the parallel mount side: writer i copies lines i, i + WRITERS, ...
for ((i = 0; i < WRITERS; i++)); do
    awk -v n="$WRITERS" -v i="$i" '(NR - 1) % n == i' "$work/list-write" >"$work/list-write.$i"
done
cat >"$work/par-cp" <<EOF
#!/usr/bin/env bash
# $WRITERS cp processes in parallel, one per list; fails if any fails.
pids=()
for ((i = 0; i < $WRITERS; i++)); do
    xargs -a "$work/list-write.\$i" -d '\n' cp --sparse=never -t "$wmnt" & pids+=(\$!)
done
rc=0
for p in "\${pids[@]}"; do wait "\$p" || rc=1; done
exit \$rc
EOF
chmod +x "$work/par-cp"
# Between runs: empty the native folder; remount the add-only mount (it refuses a name it created
# itself earlier, EEXIST) after forgetting the writer's assets (rows and files), so every run
# writes $REAL new files and the disk does not fill up. Not timed (hyperfine --prepare).
cat >"$work/wr-reset-native" <<EOF
#!/bin/sh
rm -rf '$work/wr-native'/*
sync
EOF
cat >"$work/wr-reset-mount" <<EOF
#!/bin/sh
set -e
'$PG' unmount --library '$wlib' '$wmnt' >/dev/null
sqlite3 '$wlib/photogate.sqlite' "SELECT store_path FROM assets WHERE owner_app = 'org.bench.Writer'" | sed 's|^|$wlib/store/|' | xargs -r rm -f
sqlite3 '$wlib/photogate.sqlite' "DELETE FROM assets WHERE owner_app = 'org.bench.Writer'"
'$PG' mount --library '$wlib' org.bench.Writer '$wmnt' --access add-only >/dev/null
sync
EOF
chmod +x "$work/wr-reset-native" "$work/wr-reset-mount"
# ratio_note WORKLOAD: the mount's time over the durable native time, as a note on the row.
ratio_note() {
    python3 - "$results" "$1" <<'EOF' >&2
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
m = {r["variant"]: r["median"] for r in rows if r["workload"] == sys.argv[2]}
n, p = m.get("native"), m.get("passthrough")
if n and p:
    print(f"bench: {sys.argv[2]}: mount {p:.3f} s, durable native {n:.3f} s, mount/native time {p / n:.2f}x")
EOF
}

wl="cp $REAL photos in, native fsyncs each"
measure_time cp-durable "$wl" native "$work/wr-reset-native" 0 "$tool" cpsync "$work/list-write" "$work/wr-native" 1
measure_time cp-durable "$wl" passthrough "$work/wr-reset-mount" 0 sh -c "cp --sparse=never $work/real/*.jpg $wmnt/"
ratio_note cp-durable
wl="cp $REAL photos in, $WRITERS writers, native fsyncs"
measure_time cp-durable-par "$wl" native "$work/wr-reset-native" 0 "$tool" cpsync "$work/list-write" "$work/wr-native" "$WRITERS"
measure_time cp-durable-par "$wl" passthrough "$work/wr-reset-mount" 0 "$work/par-cp"
ratio_note cp-durable-par
"$work/wr-reset-mount"; "$work/wr-reset-native"
pg_unmount "$wlib" "$wmnt"

# --- saving an edit through a read-write mount ----------------------------------------------
mkdir -p "$work/edit-src" "$work/edit-native"
"$tool" gen-photos "$work/edit-src" 1 $((EDIT_MB * 1000000)) $((EDIT_MB * 1000000)) "$template" 5
mv "$work/edit-src/IMG_000000.jpg" "$work/edit-src/EDIT_000000.jpg"
esrc="$work/edit-src/EDIT_000000.jpg"
"$PG" import --library "$wlib" "$esrc" >/dev/null
cp "$esrc" "$work/edit-native/"
"$PG" authorize --library "$wlib" org.bench.Editor --access read-write --status authorized >/dev/null
"$PG" options --library "$wlib" org.bench.Editor --edit-any on >/dev/null
emnt="$work/mnt/editor"
pg_mount "$wlib" org.bench.Editor "$emnt"
declare -A efile=([native]="$work/edit-native/EDIT_000000.jpg" [passthrough]="$emnt/EDIT_000000.jpg")
edit_save() {  # VARIANT [fsync]: sets `ecmd`
    if [[ ${BENCH_EDIT_SAVE:-truncate} == exiftool ]]; then
        # A different Artist each save ($$), so every save is new content.
        ecmd=(sh -c "exiftool -q -overwrite_original -Artist=x\$\$ '${efile[$1]}'${2:+ && sync '${efile[$1]}'}")
    else
        ecmd=("$tool" save "${efile[$1]}" "$esrc" ${2:-})
    fi
}
if [[ ${BENCH_EDIT_SAVE:-truncate} == exiftool ]]; then ehow="exiftool -Artist"; else ehow="O_TRUNC write"; fi
el="save edit of $EDIT_MB MB JPEG ($ehow)"
eld="save edit of $EDIT_MB MB JPEG ($ehow), native + fsync"
edit_save native; measure_time edit-save "$el" native "" 1 "${ecmd[@]}"
edit_save native fsync; measure_time edit-save-durable "$eld" native "" 1 "${ecmd[@]}"
# One save through the mount first: EACCES means this photogate does not take edits through a
# mount yet; the row then says so instead of failing.
edit_save passthrough
if "${ecmd[@]}" >/dev/null 2>"$work/edit-try.log"; then
    measure_time edit-save "$el" passthrough "" 0 "${ecmd[@]}"
    # The same samples against the durable native save (the mount's save is durable at close).
    python3 - "$results" >>"$results" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = [r for r in rows if r["workload"] == "edit-save" and r["variant"] == "passthrough"][-1]
d = [r for r in rows if r["workload"] == "edit-save-durable"][-1]
r.update(workload="edit-save-durable", label=d["label"], note="same samples as the row above")
print(json.dumps(r))
EOF
    ratio_note edit-save; ratio_note edit-save-durable
    echo "bench: versions in the library after the saves: $(sqlq "$wlib" "SELECT count(*) FROM versions" 2>/dev/null || echo '?') (original included)" >&2
elif grep -q -i 'permission denied' "$work/edit-try.log"; then
    record edit-save "$el" passthrough s lower null "" "n/a (EACCES)"
    record edit-save-durable "$eld" passthrough s lower null "" "n/a (EACCES)"
else
    record edit-save "$el" passthrough s lower null "" "failed: $(tail -1 "$work/edit-try.log" | cut -c1-120)"
fi
pg_unmount "$wlib" "$emnt"
