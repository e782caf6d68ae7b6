#!/usr/bin/env bash
# The systemd units scripts/install installs pass `systemd-analyze verify` (as a user unit and
# as a system unit), with no warning.
source "$(dirname "$0")/lib.sh"
command -v systemd-analyze >/dev/null || skip "systemd-analyze is missing (apt-get install systemd)"
mkdir -p "$tmp/units" "$tmp/run"
bindir=$(dirname "$PHOTOGATE_BIN")
for u in photogate@.service photogate-shared@.service; do
    sed "s|@BINDIR@|$bindir|g" "$root/scripts/systemd/$u.in" >"$tmp/units/$u"
    # An instance too: verify then resolves %i/%I and %t as a start would.
    cp "$tmp/units/$u" "$tmp/units/${u/@/@org.example.Editor}"
done
check() {  # check [--user] UNIT: verify must succeed and say nothing
    local out
    if ! out=$(cd "$tmp/units" && XDG_RUNTIME_DIR="$tmp/run" systemd-analyze "$@" 2>&1) || [[ -n $out ]]; then
        fail "systemd-analyze $*: $out"
    fi
}
check verify --man=no "$tmp/units/photogate-shared@.service"
check verify --man=no "$tmp/units/photogate-shared@org.example.Editor.service"
check --user verify --man=no "$tmp/units/photogate@.service"
check --user verify --man=no "$tmp/units/photogate@org.example.Editor.service"
grep -q '^Type=notify' "$tmp/units/photogate@.service" || fail "the user unit is not Type=notify"
# The shared unit run as a user (the README's recipe: `[Service] User=alice`) must be able to
# start: its mount point is made by systemd for that user (RuntimeDirectory=), not by a command
# run as that user in root's /run (ExecStartPre=mkdir failed there), and kept at stop (systemd
# removes a runtime folder with what is inside).
shared="$tmp/units/photogate-shared@.service"
! grep -q '^ExecStartPre=.*mkdir' "$shared" || fail "the shared unit still makes its folder with ExecStartPre: $(grep ExecStartPre "$shared")"
grep -q '^RuntimeDirectory=photogate/%i$' "$shared" || fail "the shared unit has no RuntimeDirectory=photogate/%i"
grep -q '^RuntimeDirectoryPreserve=yes$' "$shared" || fail "the shared unit's runtime folder is removed at stop"
grep -q "^ExecStart=.* /run/photogate/%i " "$shared" || fail "the shared unit mounts elsewhere than its RuntimeDirectory: $(grep ExecStart= "$shared")"
mkdir -p "$tmp/units/photogate-shared@.service.d"
printf '[Service]\nUser=daemon\n' >"$tmp/units/photogate-shared@.service.d/user.conf"
check verify --man=no "$tmp/units/photogate-shared@org.example.Editor.service"
# A broken unit must fail this check (so a pass means something).
sed 's/^Type=notify/Type=notifyy/' "$tmp/units/photogate@.service" >"$tmp/units/broken@.service"
if out=$(cd "$tmp/units" && XDG_RUNTIME_DIR="$tmp/run" systemd-analyze --user verify --man=no "$tmp/units/broken@.service" 2>&1) && [[ -z $out ]]; then
    fail "systemd-analyze accepted a broken unit"
fi
say "ok"
