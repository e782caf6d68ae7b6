#!/usr/bin/env bash
# import catalogs the bytes it stores (issue 34): a source changed in place (same size) between
# the scan and the copy was stored with a location its row said it did not have ("no location"),
# so a strip-location app got the GPS. Now the stored copy is scanned (a --reference source
# written while it was read is refused by its ctime; not exercised here). A FIFO put where a file
# was found, or named, does not hang import, and the rest of the run is committed.
source "$(dirname "$0")/lib.sh"
pg=$PHOTOGATE_BIN
export PHOTOGATE_LIBRARY="$tmp/library"
"$pg" init >/dev/null
shim=$(build_shim swap-after-scan)
# The same photo twice, same size: with GPS (the corpus's exif.jpg) and without (its GPS IFD
# pointer's tag renamed, 0x8825 -> 0x8826).
python3 - "$corpus/exif.jpg" "$tmp/nogps.jpg" <<'PY'
import sys
d = bytearray(open(sys.argv[1], "rb").read())
i = d.find(b"\x88\x25\x00\x04")
assert i > 0, "no GPS IFD pointer in the corpus photo"
d[i + 1] = 0x26
open(sys.argv[2], "wb").write(d)
PY
mkdir -p "$tmp/src"
cp "$tmp/nogps.jpg" "$tmp/src/race.jpg"
[[ $(exiftool -s -GPSLatitude "$tmp/src/race.jpg" 2>/dev/null | wc -l) == 0 ]] || fail "the no-GPS variant has a location"
RT_TMPDIR="$PHOTOGATE_LIBRARY/tmp/" RT_SOURCE="$tmp/src/race.jpg" RT_WITH="$corpus/exif.jpg" RT_LOG="$tmp/shim.log" \
    LD_PRELOAD="$shim" "$pg" import "$tmp/src/race.jpg" >"$tmp/import.out" 2>&1 || true
has "swapped" "$(cat "$tmp/shim.log" 2>/dev/null)" || fail "the shim did not change the source between the scan and the copy: $(cat "$tmp/import.out")"
row=$(cd "$PHOTOGATE_LIBRARY" && python3 -c 'import sqlite3; r = sqlite3.connect("file:photogate.sqlite?mode=ro", uri=True).execute("SELECT store_path, has_location FROM assets WHERE display_name = ?", ("race.jpg",)).fetchone(); print("" if r is None else "%s %s" % r)')
if [[ -n $row ]]; then
    read -r stored located <<<"$row"
    gps=$(exiftool -s -GPSLatitude "$PHOTOGATE_LIBRARY/store/$stored" 2>/dev/null | wc -l)
    [[ $gps == 0 || $located == 1 ]] || fail "the stored copy carries GPS, and its row says no location"
    # What strip-location serves holds none, whichever bytes were stored.
    "$pg" authorize org.example.Strip --access read-write --status authorized >/dev/null
    "$pg" options org.example.Strip --strip-location on >/dev/null
    mkdir -p "$tmp/m"; on_exit "force_unmount '$tmp/m'"
    "$pg" mount org.example.Strip "$tmp/m" >/dev/null
    served=$(exiftool -s -GPSLatitude "$tmp/m/race.jpg" 2>/dev/null | wc -l)
    "$pg" unmount "$tmp/m" >/dev/null
    [[ $served == 0 ]] || fail "a strip-location app read the GPS of the raced photo"
fi
"$pg" verify >/dev/null || fail "verify after the raced import: $("$pg" verify 2>&1)"

# A FIFO where import expects a file: named on the command line, or met in a folder.
mkdir -p "$tmp/fifo-src"
cp "$corpus/xmp.jpg" "$tmp/fifo-src/fine.jpg"
mkfifo "$tmp/fifo-src/pipe.jpg" "$tmp/named.jpg"
set +e
out=$(timeout 60 "$pg" import "$tmp/named.jpg" "$tmp/fifo-src" 2>&1); status=$?
set -e
[[ $status != 124 ]] || fail "import hung on a FIFO"
has "fine.jpg" "$("$pg" assets)" || fail "the rest of the run was not committed: $out"
has "pipe.jpg" "$out" || fail "the FIFO is not reported: $out"
# ... and one swapped in between the walk's stat and the open (the walk skips a FIFO it sees).
export PHOTOGATE_LIBRARY="$tmp/library2"
"$pg" init >/dev/null
mkdir -p "$tmp/swap-src"
cp "$corpus/le-thumb.jpg" "$tmp/swap-src/a-swapped.jpg"
cp "$corpus/exif.jpg" "$tmp/swap-src/b-kept.jpg"
set +e
out=$(RT_FIFO_AT="$tmp/swap-src/a-swapped.jpg" RT_LOG="$tmp/shim2.log" LD_PRELOAD="$shim" timeout 60 "$pg" import "$tmp/swap-src/a-swapped.jpg" "$tmp/swap-src/b-kept.jpg" 2>&1); status=$?
set -e
has "FIFO" "$(cat "$tmp/shim2.log" 2>/dev/null)" || fail "the shim did not swap the file for a FIFO: $out"
[[ $status != 124 ]] || fail "import hung on a file swapped for a FIFO after the walk"
has "b-kept.jpg" "$("$pg" assets)" || fail "the rest of the run was not committed: $out"
has "not a regular file" "$out" || fail "the swapped file is not reported as what it is: $out"
# Names: one that is not UTF-8 (Latin-1 from a camera or a Windows share) was skipped with a false
# "no such file or directory"; ones starting with a combining mark, a ZWJ or a tag character with
# "the folder ... can no longer be opened" or "Invalid cross-device link". The first is refused
# with a true message; the others are imported.
export PHOTOGATE_LIBRARY="$tmp/library-names"
"$pg" init >/dev/null
mkdir -p "$tmp/names"
i=0
for n in $'caf\xe9.jpg' $'\xcc\x81accent.jpg' $'\xe2\x80\x8djoiner.jpg' $'\xf3\xa0\x81\x81tag.jpg'; do
    i=$((i + 1))
    python3 - "$corpus/exif.jpg" "$tmp/names/$n" "$i" <<'PY'
import sys
d = bytearray(open(sys.argv[1], "rb").read())
d[-3] = int(sys.argv[3])   # a different byte before the EOI marker: distinct content per file
open(sys.argv[2].encode("utf-8", "surrogateescape") if False else sys.argv[2], "wb").write(d)
PY
done
set +e; out=$("$pg" import "$tmp/names" 2>&1); status=$?; set -e
has "is not UTF-8" "$out" || fail "a Latin-1 name is not said to be what it is: $out"
! has "no such file" "$out" || fail "a false 'no such file' for a name: $out"
! has "can no longer be opened" "$out" || fail "a name was refused as unreachable: $out"
! has "cross-device" "$out" || fail "a name was refused as cross-device: $out"
listed=$("$pg" assets | wc -l)
[[ $listed == 4 ]] || fail "the three UTF-8 names were not all imported ($((listed - 1)) assets): $out"

# A copying import of bytes the library has only as a --reference asset stores them (it said
# "already in the library" and stored nothing: when the referenced file went, so did the photo
# the person had imported from a card). The asset keeps its id, and reads from the store after.
export PHOTOGATE_LIBRARY="$tmp/library3"
"$pg" init >/dev/null
mkdir -p "$tmp/downloads" "$tmp/card"
cp "$corpus/xmp.jpg" "$tmp/downloads/shared.jpg"
cp "$corpus/xmp.jpg" "$tmp/card/DSC_0001.jpg"
"$pg" import --reference "$tmp/downloads/shared.jpg" >/dev/null
id=$("$pg" assets | awk -F'\t' 'NR > 1 {print $1}')
"$pg" authorize org.example.Viewer --access read-write --status authorized >/dev/null
mkdir -p "$tmp/mv"; on_exit "force_unmount '$tmp/mv'"
"$pg" mount org.example.Viewer "$tmp/mv" >/dev/null
"$pg" import "$tmp/card" >/dev/null || fail "the copying import: exit $?"
rm "$tmp/downloads/shared.jpg"
cmp "$corpus/xmp.jpg" "$tmp/mv/shared.jpg" || fail "the photo is gone with its referenced file, though it was imported from the card"
"$pg" unmount "$tmp/mv" >/dev/null
[[ $("$pg" assets | awk -F'\t' 'NR > 1 {print $1}') == "$id" ]] || fail "the asset changed id or another was made: $("$pg" assets)"
out=$("$pg" verify 2>&1) || fail "verify after the reference got its stored copy: $out"
say "ok"
