#!/usr/bin/env bash
# Upload folders (issue 34): their number is capped like the mount's other per-app resources
# (50,000 mkdir took a daemon from 38 to 101 MB, never given back): past PHOTOGATE_MAX_FOLDERS,
# mkdir fails with EDQUOT and nothing else changes. Listings are read in batches of names sorted
# once per change (each READDIR sorted the whole folder again: one `ls -f` of 50,000 entries took
# 47.7 s): every entry is listed once, in order, in a folder and at the top, across many READDIRs.
source "$(dirname "$0")/lib.sh"
need_fuse
pg=$PHOTOGATE_BIN
export PHOTOGATE_LIBRARY="$tmp/library"
"$pg" init >/dev/null
"$pg" authorize org.example.Uploader --access read-write --status authorized >/dev/null
mkdir -p "$tmp/m"
on_exit "force_unmount '$tmp/m'"
PHOTOGATE_MAX_FOLDERS=700 "$pg" mount org.example.Uploader "$tmp/m" >/dev/null
mkdir "$tmp/m/in"
# 600 folders inside one folder and 98 at the top: 700 in all with `in` and one more at the top.
python3 - "$tmp/m" <<'PY'
import os, sys
m = sys.argv[1]
for i in range(600): os.mkdir(f"{m}/in/sub{i:04d}")
for i in range(99): os.mkdir(f"{m}/top{i:03d}")
PY
inside=$(ls -f "$tmp/m/in" | grep -c '^sub')
[[ $inside == 600 ]] || fail "the folder lists $inside of its 600 folders"
[[ $(ls -f "$tmp/m/in" | grep '^sub' | sort | uniq -d | wc -l) == 0 ]] || fail "a name is listed twice in the folder"
[[ "$(ls "$tmp/m/in" | head -1)" == sub0000 && "$(ls "$tmp/m/in" | tail -1)" == sub0599 ]] || fail "the folder's listing is not whole"
top=$(ls -f "$tmp/m" | grep -c '^top')
[[ $top == 99 ]] || fail "the top lists $top of its 99 folders"
set +e; err=$(mkdir "$tmp/m/one-too-many" 2>&1); status=$?; set -e
[[ $status != 0 ]] && has "quota" "$err" || fail "the folder past the cap: exit $status ($err)"
[[ ! -e $tmp/m/one-too-many ]] || fail "a folder past the cap was made"
# One gone, one may be made again.
rmdir "$tmp/m/top098"
mkdir "$tmp/m/again" || fail "mkdir after one was removed"
[[ $(ls -f "$tmp/m" | grep -c '^top\|^again') == 99 ]] || fail "the top lists $(ls -f "$tmp/m" | grep -c '^top\|^again') after one went and one came"
"$pg" unmount "$tmp/m" >/dev/null
say "ok"
