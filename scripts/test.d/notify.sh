#!/usr/bin/env bash
# Issue 35: an app's request reaches the person as a desktop notification (freedesktop
# Notifications on the session bus), its reason as text, linking to a running `photogate ui`;
# without a session bus the request is recorded all the same, and nothing fails.
PG_PRIVATE_MOUNTS=1
source "$(dirname "$0")/lib.sh"
need_fuse
for tool in dbus-daemon dbus-monitor gdbus; do command -v "$tool" >/dev/null || skip "$tool is missing"; done
export PHOTOGATE_LIBRARY="$tmp/library"
pg() { "$PHOTOGATE_BIN" "$@"; }
pg init >/dev/null
mkdir -p "$tmp/m1" "$tmp/m2" "$tmp/m3"

# A private session bus, and a monitor of what is said to org.freedesktop.Notifications.
config="$tmp/bus.conf"
cat >"$config" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:path=$tmp/bus</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy></busconfig>
CONF
dbus-daemon --config-file="$config" --fork --print-pid=1 >"$tmp/bus.pid" || fail "no private bus"
# KILL: a test runner's children may have SIGTERM blocked, and a bus left running holds the
# runner's output open (the run then never ends).
on_exit "kill -KILL \$(cat '$tmp/bus.pid')"
export DBUS_SESSION_BUS_ADDRESS="unix:path=$tmp/bus"
wait_until 10 test -S "$tmp/bus" || fail "the bus socket never appeared"
dbus-monitor --address "$DBUS_SESSION_BUS_ADDRESS" "interface='org.freedesktop.Notifications'" >"$tmp/monitor" 2>&1 </dev/null &
monitor=$!
on_exit "kill -KILL $monitor"
wait_until 10 grep -q "NameAcquired\|signal" "$tmp/monitor" || true

# A running ui: the notification links to its Requests page.
"$PHOTOGATE_BIN" ui >"$tmp/ui.out" 2>/dev/null &
ui=$!
on_exit "kill -KILL $ui"
wait_until 20 test -s "$PHOTOGATE_LIBRARY/run/ui-port" || fail "photogate ui wrote no run/ui-port"
port=$(cut -d" " -f1 "$PHOTOGATE_LIBRARY/run/ui-port")
host=$(cut -d" " -f3 "$PHOTOGATE_LIBRARY/run/ui-port")
[[ $host == pg-*.localhost ]] || fail "run/ui-port names no host of the ui: $(cat "$PHOTOGATE_LIBRARY/run/ui-port")"

# A not-determined app touches its mount: a read-write request, and a notification.
pg mount org.example.Asker "$tmp/m1" >/dev/null
on_exit "force_unmount '$tmp/m1'"
ls "$tmp/m1" >/dev/null
wait_until 20 grep -q "org.example.Asker would like to access your photos" "$tmp/monitor" \
    || fail "no notification for the request: $(cat "$tmp/monitor")"
has "member=Notify" "$(cat "$tmp/monitor")" || fail "not a Notify call"
has "http://$host:$port/#/requests" "$(cat "$tmp/monitor")" || fail "the notification does not link to the running ui"
# A reason is the app's text: markup in it is escaped.
echo -e 'picker\n<a href="http://evil.example">click</a> & more' >"$tmp/m1/.photogate/request"
wait_until 20 grep -q "org.example.Asker asks you to choose photos" "$tmp/monitor" || fail "no notification for the picker request"
has '&lt;a href=&quot;http://evil.example&quot;&gt;click&lt;/a&gt; &amp; more' "$(cat "$tmp/monitor")" \
    || fail "the reason's markup was not escaped: $(grep -a evil "$tmp/monitor")"
! has '<a href="http://evil.example">' "$(cat "$tmp/monitor")" || fail "the app's link reached the notification"
kill -INT $ui; wait $ui 2>/dev/null || true
test ! -e "$PHOTOGATE_LIBRARY/run/ui-port" || fail "run/ui-port stays after the ui ended"
# A ui killed with SIGKILL leaves its port file: a port anyone may hold by now is not linked.
# Left by a ui that died (its pid is gone), or a bare port written by anyone: neither is linked.
sh -c 'exit 0' & dead=$!; wait $dead
n=0
for stale in "$port $dead $host" "$port"; do
    n=$((n + 1))
    echo "$stale" >"$PHOTOGATE_LIBRARY/run/ui-port"
    mkdir -p "$tmp/late$n"
    pg mount "org.example.Late$n" "$tmp/late$n" >/dev/null   # a daemon of its own: its own quiet time
    on_exit "force_unmount '$tmp/late$n'"
    echo -e "add-only\nafter the ui died ($stale)" >"$tmp/late$n/.photogate/request"
    wait_until 40 grep -q "after the ui died ($stale)" "$tmp/monitor" || fail "no notification for the add-only request ($stale)"
    late=$(grep -a -A6 "after the ui died ($stale)" "$tmp/monitor")
    ! has ":$port/#/requests" "$late" || fail "a stale port file ($stale) was linked: $late"
    has "Answer with photogate ui" "$late" || fail "the notification names no way to answer: $late"
    pg unmount "$tmp/late$n" >/dev/null
done
pg unmount "$tmp/m1" >/dev/null

# No session bus: the request is recorded, the mount works, nothing fails.
(
    unset DBUS_SESSION_BUS_ADDRESS
    export XDG_RUNTIME_DIR="$tmp/nowhere"
    pg mount org.example.Quiet "$tmp/m2" >/dev/null
    ls "$tmp/m2" >/dev/null
    wait_until 20 sh -c '"$0" requests | grep -q org.example.Quiet' "$PHOTOGATE_BIN" || exit 1
    pg unmount "$tmp/m2" >/dev/null
) || fail "without a session bus the request was not recorded"
! has "org.example.Quiet" "$(cat "$tmp/monitor")" || fail "a notification went out without a bus"
say "passed"
