#!/usr/bin/env bash
# `photogate explain` says what a mount's open does, through the mount's own calls (issue 34):
#  - a --reference original changed after import: explain said "visible" while every app got
#    EACCES;
#  - redaction facts written by an older scanner: explain read them with its own SQL and said
#    "refused" (or "no location to strip") while the mount rescanned and served it stripped.
source "$(dirname "$0")/lib.sh"
need_fuse
pg=$PHOTOGATE_BIN
export PHOTOGATE_LIBRARY="$tmp/library"
"$pg" init >/dev/null
mkdir -p "$tmp/ref" "$tmp/src" "$tmp/m"
on_exit "force_unmount '$tmp/m'"
cp "$corpus/xmp.jpg" "$tmp/ref/ref.jpg"
cp "$corpus/exif.jpg" "$tmp/src/gps.jpg"
"$pg" import --reference "$tmp/ref/ref.jpg" >/dev/null
"$pg" import "$tmp/src" >/dev/null
"$pg" authorize org.example.Reader --access read-write --status authorized >/dev/null
"$pg" options org.example.Reader --strip-location on >/dev/null

# 1. The referenced original changes (same size, newer modification time).
touch -d '+1 hour' "$tmp/ref/ref.jpg"
out=$("$pg" explain org.example.Reader ref.jpg)
has "refused (EACCES)" "$out" || fail "explain of a changed referenced original: $out"
"$pg" mount org.example.Reader "$tmp/m" >/dev/null
set +e; cat "$tmp/m/ref.jpg" >/dev/null 2>"$tmp/err"; status=$?; set -e
"$pg" unmount "$tmp/m" >/dev/null
[[ $status != 0 ]] && has "Permission denied" "$(cat "$tmp/err")" || fail "the mount served a changed referenced original (explain must agree)"

# 1b. Bytes rewritten in place, same size, and the modification time set back (`touch -d`): the
# change time, which the file's owner cannot set, tells (the mount served the new bytes with the
# old redaction plan).
cp "$corpus/le-thumb.jpg" "$tmp/ref/ref2.jpg"
touch -d '2024-01-01 12:00' "$tmp/ref/ref2.jpg"
"$pg" import --reference "$tmp/ref/ref2.jpg" >/dev/null
sleep_until_next_second() { local s=$(date +%s); while [[ $(date +%s) == "$s" ]]; do :; done; }
sleep_until_next_second; sleep_until_next_second   # the change must be past the import's second + 1
python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(200); f.write(bytes(64))' "$tmp/ref/ref2.jpg"
touch -d '2024-01-01 12:00' "$tmp/ref/ref2.jpg"
out=$("$pg" explain org.example.Reader ref2.jpg)
has "refused (EACCES)" "$out" || fail "explain of a referenced original rewritten with its time set back: $out"

# 2. Facts of an older scanner (redaction_version 0, a stale refusal): the mount rescans.
python3 - "$PHOTOGATE_LIBRARY/photogate.sqlite" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("UPDATE assets SET redaction = NULL, redaction_refusal = 'stale facts of an old scanner', redaction_version = 0 WHERE display_name = 'gps.jpg'")
c.commit()
PY
out=$("$pg" explain org.example.Reader gps.jpg)
has "location stripped" "$out" || fail "explain of an asset an older scanner described: $out"
"$pg" mount org.example.Reader "$tmp/m" >/dev/null
[[ $(exiftool -s -GPSLatitude "$tmp/m/gps.jpg" 2>/dev/null | wc -l) == 0 ]] || fail "the mount served the location"
"$pg" unmount "$tmp/m" >/dev/null
say "ok"
