#!/usr/bin/env bash
# The library's run/ folder removed under a running mount (a cleanup that took it for a runtime
# folder, issue 34's red team): the mount makes it again, registers again and acknowledges again
# within seconds, so `mounts` lists it, `unmount` knows it, and a revoke returns only once the
# mount has applied it (it returned at once while the photo could still be opened for ~2 s).
source "$(dirname "$0")/lib.sh"
need_fuse
pg=$PHOTOGATE_BIN
export PHOTOGATE_LIBRARY="$tmp/library"
mkdir -p "$tmp/src" "$tmp/m"
cp "$corpus/exif.jpg" "$tmp/src/a.jpg"; cp "$corpus/xmp.jpg" "$tmp/src/b.jpg"
"$pg" init >/dev/null
"$pg" import "$tmp/src" >/dev/null
"$pg" authorize org.example.Frame --access read-write --status limited >/dev/null
"$pg" grant org.example.Frame a.jpg b.jpg >/dev/null
on_exit "force_unmount '$tmp/m'"
"$pg" mount org.example.Frame "$tmp/m" --no-passthrough >/dev/null
daemon=$(pgrep -f "photogate mount org.example.Frame $tmp/m" | head -1)
rm -rf "$PHOTOGATE_LIBRARY/run"
registered() { [[ -e $PHOTOGATE_LIBRARY/run/mounts/$daemon.json ]] && [[ -e $PHOTOGATE_LIBRARY/run/acks/$daemon ]]; }
wait_until 20 registered || fail "the mount did not register again after run/ was removed: $(ls -R "$PHOTOGATE_LIBRARY/run" 2>&1)"
[[ $(stat -c %a "$PHOTOGATE_LIBRARY/run") == 700 ]] || fail "run/ was made again with mode $(stat -c %a "$PHOTOGATE_LIBRARY/run")"
# Its in-use mark too: else a kill and a lost log after it would go untold.
wait_until 20 test -s "$PHOTOGATE_LIBRARY/run/catalog-in-use" || fail "the mount did not mark the library in use again"
has "$tmp/m" "$("$pg" mounts)" || fail "mounts does not list the view after run/ was made again"
"$pg" revoke org.example.Frame a.jpg >/dev/null
[[ ! -e $tmp/m/a.jpg ]] || fail "a revoke returned while the running mount still showed the photo"
! cat "$tmp/m/a.jpg" >/dev/null 2>&1 || fail "a revoked photo could still be opened after the revoke returned"
"$pg" unmount "$tmp/m" >/dev/null || fail "unmount after run/ was removed: $("$pg" unmount "$tmp/m" 2>&1)"
say "ok"
