#!/usr/bin/env bash
# The README's quick start, run as it is written (issue 40): the fenced block between the
# `<!-- quick-start` and `<!-- /quick-start -->` markers, under `set -e`, from a stand-in checkout
# (scripts/demo-photos, and .build/debug/photogate being the binary under test) with a HOME of its
# own, so the default library and ~/mnt are the test's. The view must show the two granted photos,
# then only the one the revoke left, and be unmounted at the end; whatever fails, nothing stays
# mounted.
source "$(dirname "$0")/lib.sh"
need_fuse
readme="$root/README.md"

block=$(awk '
    /^<!-- quick-start/ { marked = 1; next }
    marked && !inside && /^```sh$/ { inside = 1; next }
    inside && /^```$/ { done = 1; inside = 0; next }
    inside { print }
    done && /^<!-- \/quick-start -->$/ { closed = 1; exit }
    END { if (!closed) exit 1 }' "$readme") || fail "README.md has no quick-start block between <!-- quick-start --> and <!-- /quick-start -->"
[[ -n $block ]] || fail "the quick-start block of README.md is empty"
lines=$(grep -c . <<<"$block")
say "running the README's quick start ($lines lines)"

# What a first-time reader has: the checkout (here, what the block uses of it) and a fresh home.
checkout="$tmp/checkout" home="$tmp/home"
mkdir -p "$checkout/scripts" "$checkout/.build/debug" "$home"
cp -r "$root/scripts/demo-photos" "$checkout/scripts/"
ln -s "$PHOTOGATE_BIN" "$checkout/.build/debug/photogate"

# Whatever the block did or did not do, every mount it made under $tmp goes.
unmount_all() {
    local m
    for m in $(awk -v t="$tmp/" 'index($2, t) == 1 {print $2}' /proc/mounts); do force_unmount "$m"; done
}
on_exit unmount_all

# Each `ls` of the block is recorded (one name a line, as piped), then the block runs as written.
cat >"$tmp/run.sh" <<'RUN'
set -e
ls() { command ls "$@" | tee -a "$LS_LOG"; echo -- >>"$LS_LOG"; }
cd "$CHECKOUT"
RUN
printf '%s\n' "$block" >>"$tmp/run.sh"
status=0
env -i HOME="$home" PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    XDG_STATE_HOME="$XDG_STATE_HOME" CHECKOUT="$checkout" LS_LOG="$tmp/ls.log" \
    bash -o pipefail "$tmp/run.sh" >"$tmp/out" 2>&1 || status=$?
[[ $status == 0 ]] || fail "the quick start stopped with exit $status:
$(cat "$tmp/out")"

left=$(awk -v t="$tmp/" 'index($2, t) == 1 {print $2}' /proc/mounts)
[[ -z $left ]] || fail "the quick start left a mount behind: $left"
[[ -s $home/.local/share/photogate/photogate.sqlite ]] || fail "the quick start made no library in the default place"
expected=$'beach.jpg\ncat.jpg\n--\nbeach.jpg\n--'
[[ $(cat "$tmp/ls.log" 2>/dev/null) == "$expected" ]] || fail "the view did not show the two granted photos, then the one left after the revoke:
$(cat "$tmp/ls.log" 2>/dev/null)
(output:
$(cat "$tmp/out"))"
say "ok"
