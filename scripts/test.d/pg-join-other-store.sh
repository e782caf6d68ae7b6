#!/bin/bash
# `init --catalog URL --store PATH` on a second host joins the catalog another host made (issue
# 41). A --store that is not that catalog's shared folder (a typo, a different mount point, an
# empty folder on the host's own disk) must be refused: joined, the host writes its originals
# where no other host looks (every other host's verify reports them missing, and this host's
# reports every other photo missing), and its views serve nothing of the library's. The shared
# folder's CATALOG file names the catalog it belongs to, which holds that name too.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pg.sh"
pg_start

pa() { PHOTOGATE_LIBRARY="$tmp/hostA" "$PHOTOGATE_BIN" "$@"; }
pb() { PHOTOGATE_LIBRARY="$tmp/hostB" "$PHOTOGATE_BIN" "$@"; }
out=$(pa init --catalog "$(pg_url)" --store "$tmp/shared" 2>&1) || fail "init on A: $out"
pa import "$root/scripts/demo-photos" >/dev/null || fail "import on A"
pa verify >/dev/null 2>&1 || fail "verify on A before B joins: $(pa verify 2>&1)"

set +e; out=$(pb init --catalog "$(pg_url)" --store "$tmp/elsewhere" 2>&1); rc=$?; set -e
if [[ $rc == 0 ]]; then
    set +e; vb=$(pb verify 2>&1); set -e
    fail "init on B joined A's catalog with a store that is not its shared folder (exit 0); B's verify then says: $(head -3 <<<"$vb")"
fi
[[ ! -e $tmp/hostB/catalog.conf ]] || fail "the refused init left $tmp/hostB/catalog.conf"
# The same store joins.
out=$(pb init --catalog "$(pg_url)" --store "$tmp/shared" 2>&1) || fail "init on B with A's store: $out"
pb verify >/dev/null 2>&1 || fail "verify on B: $(pb verify 2>&1)"
# The share not mounted on a host (an empty folder at its path): every command refuses it, rather
# than writing originals where no other host looks.
mv "$tmp/shared" "$tmp/shared.real"
mkdir -m 700 "$tmp/shared"
set +e; out=$(pb assets 2>&1); rc=$?; set -e
mv "$tmp/shared" "$tmp/shared.empty" && mv "$tmp/shared.real" "$tmp/shared"
[[ $rc == 1 ]] || fail "a command with an empty folder in place of the shared one: exit $rc, not 1 ($out)"
has "is not the one of the catalog" "$out" && has "mounted" "$out" || fail "the message does not say why: $out"
[[ -z $(ls -A "$tmp/shared.empty") ]] || fail "the refused command wrote into the folder that is not the share: $(ls -A "$tmp/shared.empty")"
pb assets >/dev/null || fail "B with its share back"
# A catalog that lost its identity (a restore without comments) while its folder keeps its
# marker: refused, with the statement that names it again.
id=$(cat "$tmp/shared/CATALOG")
pg_sql "COMMENT ON TABLE photogate_schema IS NULL" >/dev/null
set +e; out=$(pa assets 2>&1); rc=$?; set -e
[[ $rc == 1 ]] && has "COMMENT ON TABLE photogate_schema IS 'photogate catalog $id'" "$out" \
    || fail "a catalog without its identity, its folder marked: exit $rc, $out"
# A marker being written (empty: a crash between its creation and its write, as it was made) is
# not a marker: said so, never taken for another catalog's.
mv "$tmp/shared/CATALOG" "$tmp/CATALOG.kept"
: > "$tmp/shared/CATALOG"
set +e; out=$(pa assets 2>&1); rc=$?; set -e
[[ $rc == 1 ]] && has "is not a catalog marker" "$out" || fail "an empty marker: exit $rc, $out"
rm "$tmp/shared/CATALOG"
# A catalog made before catalogs had an identity (no comment, no marker) is named by the first
# command that opens it, and its folder marked; but not by a host whose share is not mounted
# (an empty folder there), which every host with the real share would then be refused for.
mv "$tmp/shared" "$tmp/shared.real"
mkdir -m 700 "$tmp/shared"
set +e; out=$(pb assets 2>&1); rc=$?; set -e
rm -rf "$tmp/shared" && mv "$tmp/shared.real" "$tmp/shared"
[[ $rc == 1 ]] && has "none of the catalog's originals" "$out" || fail "an unnamed catalog named from an empty folder: exit $rc, $out"
pa assets >/dev/null || fail "A on a catalog without an identity"
[[ -s $tmp/shared/CATALOG ]] || fail "the shared folder was not marked"
has "$(cat "$tmp/shared/CATALOG")" "$(pg_sql "SELECT obj_description('photogate_schema'::regclass, 'pg_class')")" \
    || fail "the marker does not name the catalog"
pb verify >/dev/null 2>&1 || fail "verify on B after the catalog was named: $(pb verify 2>&1)"
say "ok"
