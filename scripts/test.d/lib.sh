# Shared by the deployment tests (sourced). Each test is a script run by Tests/MountTests/
# DeployTests.swift: exit 0 passes, exit 77 skips (the message says why), anything else fails.
set -euo pipefail
# A script that sets PG_PRIVATE_MOUNTS=1 before sourcing this runs again, from here, in a mount
# namespace of its own (private from the host's): what it mounts never shows elsewhere, and goes
# with it.
if [[ ${PG_PRIVATE_MOUNTS:-} == 1 && ${PG_TEST_IN_NS:-} != 1 && $(id -u) == 0 ]] && command -v unshare >/dev/null; then
    PG_TEST_IN_NS=1 exec unshare -m --propagation private "$0" "$@"
fi
test_name=$(basename "$0" .sh)
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PHOTOGATE_BIN=${PHOTOGATE_BIN:-$root/.build/debug/photogate}
corpus="$root/Tests/RedactionTests/Corpus/jpeg"

say() { echo "$test_name: $*" >&2; }
fail() { say "FAILED: $*"; exit 1; }
skip() { say "SKIPPED — $*"; exit 77; }

# Cleanups run in reverse order on any exit, pass or fail.
cleanups=()
on_exit() { cleanups+=("$1"); }
run_cleanups() {
    local i
    for ((i = ${#cleanups[@]} - 1; i >= 0; i--)); do eval "${cleanups[$i]}" >/dev/null 2>&1 || true; done
}
trap run_cleanups EXIT

# A temp folder under PHOTOGATE_TEST_TMP (scripts/test checks it for leftover mounts).
tmp=$(mktemp -d "${PHOTOGATE_TEST_TMP:-/tmp}/photogate-$test_name.XXXXXX")
chmod 755 "$tmp"
on_exit "rm -rf '$tmp'"
# The mount daemons note their library here (`photogate mounts --all`), not in the home of
# whoever runs the tests.
export XDG_STATE_HOME="$tmp/state"

# has PATTERN TEXT: grep -q on a captured output (a pipe into grep -q fails under pipefail
# when the writer gets SIGPIPE).
has() { grep -q -- "$1" <<<"$2"; }
is_mounted() { awk -v m="$1" '$2 == m {f=1} END {exit !f}' /proc/mounts; }
# wait_until SECONDS COMMAND...: polls a condition (every 20 ms), fails after SECONDS.
wait_until() {
    local limit=$1; shift
    local deadline=$((SECONDS + limit))
    until "$@"; do
        ((SECONDS < deadline)) || return 1
        sleep 0.02
    done
}
# Unmounts whatever a failed test left at $1 (never hangs: lazy).
force_unmount() { is_mounted "$1" && { fusermount3 -u -z "$1" 2>/dev/null || umount -l "$1" 2>/dev/null || true; }; return 0; }

# second_user PREFIX: adds a local user named PREFIX<pid>, with a home in /tmp that the user can
# reach (not under the runner's private temp folder), removed with the home on exit; sets $user
# and $home. Skips without runuser and useradd.
second_user() {
    command -v runuser >/dev/null && command -v useradd >/dev/null || skip "runuser/useradd are missing"
    user="$1$$"
    home=$(mktemp -d "/tmp/photogate-$1-home.XXXXXX")
    chmod 755 "$home"
    on_exit "rm -rf '$home'"
    useradd -M -d "$home" -s /bin/bash "$user" || fail "useradd $user"
    on_exit "userdel '$user'"
}

need_fuse() {
    [[ -e /dev/fuse ]] || skip "/dev/fuse is missing"
    [[ $(id -u) == 0 ]] || skip "needs root"
}

# later_mount_check DIR SOURCE APP [PREFIX...]: in a mount namespace of its own (private from the
# host's, then made shared inside, as systemd makes "/"), runs `PREFIX photogate run APP` with
# DIR/prop passed in read-only at /p, and once the command is in, bind-mounts SOURCE at
# DIR/prop/later on the host side. Returns the run's status: 0 when the mount did not reach the
# command, 76 when it did, 77 when the mount could not be made. DIR/prop and DIR/sig must be
# reachable by whoever PREFIX runs the command as.
later_mount_check() {
    local dir=$1 src=$2 app=$3; shift 3
    mkdir -p "$dir/prop/later" "$dir/sig"
    rm -f "$dir/sig/ready" "$dir/sig/go"
    # Run by root (no PREFIX): the command runs as the sandbox's id.
    (($# > 0)) || sandbox_writable "$app" "$dir/sig"
    cat >"$dir/later.sh" <<'LATER'
set -u
mount --make-rshared /      # in the test's private copy: nothing reaches the host's mounts
"$@" "$PG" run "$APP" --ro-bind "$DIR/prop:/p" --bind "$DIR/sig:/sig" -- sh -c '
    touch /sig/ready
    i=0; while [ ! -e /sig/go ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i+1)); done   # 30 s at most
    [ -z "$(ls -A /p/later)" ] || { echo "later: $(ls -A /p/later)" >&2; exit 76; }
    exit 0' &
runpid=$!
# Whatever happens below, the command is let go, and the run ends before this script does.
trap 'touch "$DIR/sig/go"; wait $runpid 2>/dev/null' EXIT
i=0; until [ -e "$DIR/sig/ready" ] || ! kill -0 $runpid 2>/dev/null || [ $i -ge 1500 ]; do sleep 0.02; i=$((i+1)); done
mount --bind "$SRC" "$DIR/prop/later" || exit 77
touch "$DIR/sig/go"
wait $runpid
LATER
    local status=0
    PG="$PHOTOGATE_BIN" DIR="$dir" SRC="$src" APP="$app" unshare -m --propagation private bash "$dir/later.sh" "$@" || status=$?
    return $status
}

# build_shim NAME: builds scripts/test.d/c/NAME.c into $tmp/NAME.so (an LD_PRELOAD shim), with cc,
# clang, or the clang beside swift; skips the test without a compiler. Prints the path.
build_shim() {
    local cc
    cc=$(command -v cc || command -v clang || true)
    [[ -z $cc ]] && command -v swift >/dev/null && cc=$(dirname "$(readlink -f "$(command -v swift)")")/clang
    [[ -x $cc ]] || skip "no C compiler (cc, clang) to build the shim $1"
    "$cc" -shared -fPIC -O1 -o "$tmp/$1.so" "$root/scripts/test.d/c/$1.c" -ldl >&2 || fail "cannot build the shim $1"
    echo "$tmp/$1.so"
}

# one_photo_library DIR APP...: a library at DIR/library (exported as PHOTOGATE_LIBRARY) holding one
# photo with EXIF (g.jpg), each APP authorized read-write.
one_photo_library() {
    local dir=$1 app
    shift
    mkdir -p "$dir/src"
    cp "$corpus/exif.jpg" "$dir/src/g.jpg"
    export PHOTOGATE_LIBRARY="$dir/library"
    "$PHOTOGATE_BIN" init >/dev/null
    "$PHOTOGATE_BIN" import "$dir/src" >/dev/null
    for app in "$@"; do "$PHOTOGATE_BIN" authorize "$app" --access read-write --status authorized >/dev/null; done
}

# padded_edit_library DIR APP N: a library at DIR/library (exported as PHOTOGATE_LIBRARY) holding
# N photos p0.jpg... of just over 1 MiB each (EXIF, then random bytes), APP authorized read-write
# with edit-any on: for the write limit's tests (a 3 MiB limit takes two such edits, not three).
padded_edit_library() {
    local dir=$1 app=$2 n=$3 i
    mkdir -p "$dir/src" "$dir/mnt"
    export PHOTOGATE_LIBRARY="$dir/library"
    "$PHOTOGATE_BIN" init >/dev/null
    for ((i = 0; i < n; i++)); do { cat "$corpus/exif.jpg"; head -c $((1 << 20)) /dev/urandom; } >"$dir/src/p$i.jpg"; done
    "$PHOTOGATE_BIN" import "$dir/src" >/dev/null || fail "import"
    "$PHOTOGATE_BIN" authorize "$app" --access read-write --status authorized >/dev/null
    "$PHOTOGATE_BIN" options "$app" --edit-any on >/dev/null
}

# sandbox_writable APP DIR...: a folder the command of APP's `photogate run` started by root
# writes into (passed with --bind): that command runs as APP's own ids (`run APP --show-user`),
# not root, so the folder is made theirs (as an administrator would; `run --help`). Uses
# $PHOTOGATE_LIBRARY. A no-op for other users' runs.
sandbox_writable() {
    [[ $(id -u) == 0 ]] || return 0
    local app=$1; shift
    local ids
    ids=$("$PHOTOGATE_BIN" run "$app" --show-user) || fail "run $app --show-user"
    chown -R "$ids" "$@"
}
