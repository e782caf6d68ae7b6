#!/usr/bin/env bash
# scripts/install from a copy of the tree into a temporary prefix; the copy's .build and .deps
# are deleted, the installed photogate must still init, import, mount, serve a file and
# unmount; --uninstall must leave the prefix empty. The release build goes to a scratch folder
# kept between runs (PHOTOGATE_INSTALL_TEST_CACHE, default /tmp/photogate-install-test), so only
# the first run builds from scratch.
source "$(dirname "$0")/lib.sh"
need_fuse
command -v rsync >/dev/null || skip "rsync is missing"
cache=${PHOTOGATE_INSTALL_TEST_CACHE:-/tmp/photogate-install-test}
copy="$cache/src" prefix="$tmp/prefix"
mkdir -p "$cache"
exec {lock}>"$cache/.lock"
flock "$lock"
say "copying the tree to $copy"
rsync -a --delete --exclude /.build --exclude /.deps --exclude /.git --exclude /.swiftpm "$root/" "$copy/"
# libfuse as scripts/setup built it here, so the copy does not fetch it again.
if [[ -d "$root/.deps/fuse3" ]]; then
    mkdir -p "$copy/.deps"
    rsync -a --delete "$root/.deps/fuse3/" "$copy/.deps/fuse3/"
    # Its pkg-config file names the folder it was built for: make it the copy's.
    sed -i "s|$root/.deps/fuse3|$copy/.deps/fuse3|g" "$copy"/.deps/fuse3/lib/pkgconfig/*.pc
fi
say "installing into $prefix"
PREFIX=$prefix PHOTOGATE_INSTALL_SCRATCH="$cache/scratch" "$copy/scripts/install" >&2 || fail "scripts/install failed"
on_exit "PREFIX='$prefix' '$copy/scripts/install' --uninstall"
rm -rf "$copy/.build" "$copy/.deps"
# The release stays in the cache; hide it too while the installed binary runs.
mv "$cache/scratch" "$cache/scratch.hidden"
on_exit "mv '$cache/scratch.hidden' '$cache/scratch'"

pg="$prefix/bin/photogate"
[[ -x $pg ]] || fail "no $pg"
version=$("$pg" --version) || fail "photogate --version failed"
say "installed photogate $version"
if ldd "$pg" | grep -E "not found|$copy|$cache|/opt/swift" >&2; then fail "the installed binary needs the checkout or the toolchain"; fi
if [[ -e "$prefix/lib/photogate" ]]; then
    has "=> $prefix/.*lib/photogate/libfuse3" "$(ldd "$pg")" || fail "libfuse is not the installed one: $(ldd "$pg" | grep fuse)"
fi
for f in share/man/man1/photogate.1 share/man/man1/photogate-mount.1 share/bash-completion/completions/photogate \
         share/applications/photogate.desktop \
         share/zsh/site-functions/_photogate share/fish/vendor_completions.d/photogate.fish \
         lib/systemd/user/photogate@.service lib/systemd/system/photogate-shared@.service; do
    [[ -s "$prefix/$f" ]] || fail "missing $f"
done
grep -q "ExecStart=$prefix/bin/photogate mount" "$prefix/lib/systemd/user/photogate@.service" || fail "the unit does not name the installed binary"
grep -qx "Exec=$prefix/bin/photogate ui --open" "$prefix/share/applications/photogate.desktop" || fail "the desktop entry does not open the installed web app"
if command -v man >/dev/null; then MANPATH="$prefix/share/man" man -P cat photogate-mount >/dev/null 2>&1 || fail "man photogate-mount"; fi
# The README the man pages name (issue 38), and pages with their whole NAME line, SYNOPSIS first.
# Against the copy installed from (not the tree, which may change while a run goes on).
cmp "$copy/README.md" "$prefix/share/doc/photogate/README.md" || fail "the README is not installed where the man pages say"
# docs/ beside it, as in the tree (the README's links stay relative), and every document the man
# pages' SEE ALSO names is there (issue 40).
for f in "$copy"/docs/*; do
    cmp "$f" "$prefix/share/doc/photogate/docs/${f##*/}" || fail "docs/${f##*/} is not installed in share/doc/photogate/docs/"
done
named=$(sed -n "s|^\.I \($prefix/share/doc/photogate/.*\)|\1|p" "$prefix/share/man/man1/photogate-grant.1")
has "/docs/guide.md" "$named" || fail "the man pages' SEE ALSO does not name the user's guide: $named"
for f in $named; do [[ -s $f ]] || fail "the man pages name $f, which is not installed"; done
[[ -s "$prefix/share/man/man1/photogate-album-add.1" ]] || fail "no man page for album add"
if command -v man >/dev/null; then
    page=$(MANPATH="$prefix/share/man" MANWIDTH=250 man -P cat photogate-grant 2>&1) || fail "man photogate-grant: $page"
    abstract=$("$pg" grant --help | sed -n 's/^OVERVIEW: //p')
    [[ $page == *"photogate-grant - $abstract"* ]] || fail "man photogate-grant: NAME is not the whole abstract: $(head -5 <<<"$page")"
    [[ $page == *SYNOPSIS*DESCRIPTION*"SEE ALSO"* ]] || fail "man photogate-grant: sections out of order"
    [[ $page == *"$prefix/share/doc/photogate/README.md"* ]] || fail "man photogate-grant: SEE ALSO does not name the installed README"
    [[ $page == *"$prefix/share/doc/photogate/docs/guide.md"* ]] || fail "man photogate-grant: SEE ALSO does not name the installed user's guide"
fi

export PHOTOGATE_LIBRARY="$tmp/library"
mkdir -p "$tmp/src" "$tmp/mnt"
cp "$corpus/exif.jpg" "$tmp/src/a.jpg"
"$pg" init >/dev/null
"$pg" import "$tmp/src" >/dev/null
"$pg" authorize org.example.Installed --access read-write --status authorized >/dev/null
# The installed bash completion, with the installed binary on the PATH, completes the app id and
# the photo's name from the library (issue 38).
complete_line() {
    PATH="$prefix/bin:$PATH" bash --norc --noprofile -c '
        source "$1"; shift
        COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
        COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
        _photogate photogate "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
        printf "%s\n" "${COMPREPLY[@]}"' bash "$prefix/share/bash-completion/completions/photogate" "$@"
}
[[ $(complete_line photogate grant org.example.Ins) == org.example.Installed ]] || fail "bash completion of an app id: $(complete_line photogate grant org.example.Ins)"
[[ $(complete_line photogate grant org.example.Installed "") == a.jpg ]] || fail "bash completion of an asset name: $(complete_line photogate grant org.example.Installed "")"
on_exit "force_unmount '$tmp/mnt'"
"$pg" mount org.example.Installed "$tmp/mnt" >/dev/null || fail "mount: $(cat "$tmp"/library/run/logs/*.log 2>/dev/null)"
cmp "$tmp/src/a.jpg" "$tmp/mnt/a.jpg" || fail "the file read through the mount differs"
has org.example.Installed "$("$pg" mounts)" || fail "photogate mounts does not list the mount"
"$pg" unmount "$tmp/mnt" >/dev/null || fail "unmount"
is_mounted "$tmp/mnt" && fail "still mounted"
if command -v bwrap >/dev/null; then
    "$pg" run org.example.Installed -- sh -c 'test -s "$HOME/Pictures/a.jpg"' || fail "photogate run with the installed binary"
fi

mv "$cache/scratch.hidden" "$cache/scratch"
PREFIX=$prefix "$copy/scripts/install" --uninstall >&2 || fail "uninstall"
left=$(find "$prefix" -mindepth 1 2>/dev/null || true)
[[ -z $left ]] || fail "left after --uninstall: $left"
say "ok"
