"""scripts/bench's durable-write rows (issues 13 and 15); BENCH_ONLY=writes runs only these.
photogate makes every file durable at close (one fsync), so each row's native side is a copy
that is durable too: `pgbench cpsync` opens, writes, fsyncs and closes each file (a plain `cp`
never syncs; the `cp ... in` row compares with that).
  - cp of BENCH_REAL_PHOTOS photos into an add-only mount (`cp`) against `pgbench cpsync` into a
    local folder;
  - the same with BENCH_WRITERS writers in parallel (each copies every WRITERS-th photo; the
    mount side runs that many `cp` processes);
  - saving an edit of a BENCH_EDIT_MB MB JPEG through a read-write mount (app authorized, its
    edit-any option on) against the same save in a local folder, and against that save with an
    fsync. The save is `pgbench save` (open O_TRUNC, write new bytes, close);
    BENCH_EDIT_SAVE=exiftool makes it `exiftool -overwrite_original -Artist=...` (temp file, then
    rename). If the mount refuses the save with EACCES (a photogate without edits through
    mounts), its cell reads "n/a (EACCES)" and the plain-folder sides are still measured.
Mount sides run in the default mount (passthrough: writes are photogate's either way)."""
import json
import os
import sqlite3
import subprocess

from benchlib import (EDIT_MB, EDIT_SAVE, OWNED, REAL, RESULTS, TEMPLATE, TOOL, WRITERS, close_profile, close_trace_mark,
                      dataset, empty_folder, floor_mount, interleaved, listing, log, main_library, measure, pg, pg_mount, pg_unmount, photos,
                      real_photos, record, remounting, row, sh, w, write_list)


def ratio_note(workload):
    """The mount's time (and the floor's) over the durable native time, on stderr."""
    m = {}
    for line in open(RESULTS):
        r = json.loads(line)
        if r["workload"] == workload:
            m[r["variant"]] = r["median"]
    n, p = m.get("native"), m.get("passthrough")
    if n and p:
        log(f"{workload}: mount {p:.3f} s, durable native {n:.3f} s, mount/native time {p / n:.2f}x")
    for v in ("floor-sync", "floor-sha256"):
        if n and m.get(v):
            log(f"{workload}: {v} {m[v]:.3f} s, floor/native time {m[v] / n:.2f}x")


def floors():
    """The two floors of a write row (`floor_mount`): floorfs syncing each file at its close, and
    that with the SHA-256 photogate needs, hashed from the write requests. {} without floorfs."""
    out = {}
    for name, hashing in (("floor-sync", False), ("floor-sha256", True)):
        f = floor_mount(name, hashing)
        if f:
            out[name] = f
    return out


def durable_native(name):
    """A folder for a native durable copy, and the prepare step that empties it (synced)."""
    native = w(name)
    os.makedirs(native, exist_ok=True)

    def reset():
        empty_folder(native)
        os.sync()
    return native, reset


@dataset
def writer_mount():
    lib, real = main_library(), real_photos()
    pg("authorize", "--library", lib, "org.bench.Writer", "--access", "add-only", "--status", "authorized")
    mp = pg_mount(lib, "org.bench.Writer", w("mnt", "writer"), "--access", "add-only")
    native, reset_native = durable_native("wr-native")
    files = listing(real, prefix="")
    return dict(lib=lib, mp=mp, native=native, files=files, list=write_list("list-write", files),
                reset_native=reset_native, reset_mount=remounting(lib, "org.bench.Writer", mp))


@row("cp-durable", "writes")
def cp_durable():
    """In rounds, with the two floors (`floors`): what a FUSE file system that does nothing but
    take the bytes, sync them at the close (and hash them) costs on this machine, against which
    photogate's own cost (its catalog, checks and limits) is the rest."""
    m = writer_mount()
    fl = floors()
    label = f"cp {REAL} photos in, native fsyncs each"
    cmds = {"native": [TOOL, "cpsync", m["list"], m["native"], 1],
            "passthrough": ["cp", "--sparse=never", *m["files"], m["mp"] + "/"]}
    prep = {"native": m["reset_native"], "passthrough": m["reset_mount"]}
    for name, f in fl.items():
        cmds[name] = ["cp", "--sparse=never", *m["files"], f["mp"] + "/"]
        prep[name] = f["reset"]
    since = close_trace_mark()
    interleaved("cp-durable", label, lambda v: cmds[v], variants=list(cmds), prepare=prep, warmup=0)
    close_profile("cp-durable", label, since)
    ratio_note("cp-durable")
    for f in fl.values():
        f["stop"]()


@row("cp-owner-large", "writes")
def cp_owner_large():
    """`cp` into add-only for an app that owns OWNED photos already, added over the last weeks (a
    camera app after months): every close asks the catalog what the app added in the last day
    and whether it has an asset of the same content (issue 39: both read every asset of the app,
    and every version of the library, until v13's indexes)."""
    real = real_photos()
    lib = w("library-owned")
    pg("init", "--library", lib)
    pg("authorize", "--library", lib, "org.bench.Camera", "--access", "add-only", "--status", "authorized")
    pg("debug-fill-catalog", "--library", lib, "--owner", "org.bench.Camera", "--count", OWNED, "--name-prefix", "CAM_",
       "--added-step", 30, photos())
    mp = pg_mount(lib, "org.bench.Camera", w("mnt", "camera"), "--access", "add-only")
    native, reset_native = durable_native("owned-native")
    files = listing(real, prefix="")
    label = f"cp {REAL} photos in, the app owning {OWNED} photos, native fsyncs each"
    measure("cp-owner-large", label, "native", [TOOL, "cpsync", write_list("list-owned", files), native, 1], prepare=reset_native)
    since = close_trace_mark()
    measure("cp-owner-large", label, "passthrough", ["cp", "--sparse=never", *files, mp + "/"],
            prepare=remounting(lib, "org.bench.Camera", mp))
    close_profile("cp-owner-large", label, since)
    ratio_note("cp-owner-large")
    pg_unmount(lib, mp)
    reset_native()


@row("cp-durable-par", "writes")
def cp_durable_par():
    m = writer_mount()
    fl = floors()
    # Writer i copies files i, i + WRITERS, ...; each mount side runs that many cp processes.
    parts = [write_list(f"list-write.{i}", m["files"][i::WRITERS]) for i in range(WRITERS)]

    def par_script(name, mp):
        script = w(name)
        with open(script, "w") as f:
            f.write("#!/bin/sh\n# WRITERS cp processes in parallel, one per list; fails if any fails.\nrc=0\n")
            for p in parts:
                f.write(f"xargs -a '{p}' -d '\\n' cp --sparse=never -t '{mp}' & \n")
            f.write("for p in $(jobs -p); do wait $p || rc=1; done\nexit $rc\n")
        os.chmod(script, 0o755)
        return [script]
    label = f"cp {REAL} photos in, {WRITERS} writers, native fsyncs"
    cmds = {"native": [TOOL, "cpsync", m["list"], m["native"], WRITERS], "passthrough": par_script("par-cp", m["mp"])}
    prep = {"native": m["reset_native"], "passthrough": m["reset_mount"]}
    for name, f in fl.items():
        cmds[name] = par_script(f"par-cp-{name}", f["mp"])
        prep[name] = f["reset"]
    since = close_trace_mark()
    interleaved("cp-durable-par", label, lambda v: cmds[v], variants=list(cmds), prepare=prep, warmup=0)
    close_profile("cp-durable-par", label, since)
    ratio_note("cp-durable-par")
    m["reset_mount"]()
    m["reset_native"]()
    for f in fl.values():
        f["stop"]()


@row("edit-save", "writes")
def edit_save():
    """Saving an edit through a read-write mount, as BENCH_EDIT_SAVE says (an O_TRUNC write)."""
    edit_rows("edit-save", "EDIT", EDIT_SAVE, 5)


@row("edit-save-exiftool", "writes")
def edit_save_exiftool():
    """The same save made by `exiftool -overwrite_original` (a temp file, then a rename over the
    photo), which issue 39 names beside the O_TRUNC save."""
    edit_rows("edit-save-exiftool", "EDITX", "exiftool", 6)


def edit_rows(ident, stem, how_saved, seed):
    """Rows IDENT and IDENT-durable: a JPEG named STEM_000000.jpg (content from SEED) saved as
    HOW_SAVED says, natively (with and without fsync) and through a read-write mount."""
    lib = main_library()
    src, native = w(ident + "-src"), w(ident + "-native")
    os.makedirs(src, exist_ok=True)
    os.makedirs(native, exist_ok=True)
    sh(TOOL, "gen-photos", src, 1, EDIT_MB * 1000000, EDIT_MB * 1000000, TEMPLATE, seed)
    esrc = os.path.join(src, f"{stem}_000000.jpg")
    os.rename(os.path.join(src, "IMG_000000.jpg"), esrc)
    pg("import", "--library", lib, esrc)
    sh("cp", esrc, native + "/")
    pg("authorize", "--library", lib, "org.bench.Editor", "--access", "read-write", "--status", "authorized")
    pg("options", "--library", lib, "org.bench.Editor", "--edit-any", "on")
    emnt = pg_mount(lib, "org.bench.Editor", w("mnt", ident))
    efile = {"native": os.path.join(native, f"{stem}_000000.jpg"), "passthrough": os.path.join(emnt, f"{stem}_000000.jpg")}

    def save(v, fsync=False):
        if how_saved == "exiftool":
            # A different Artist each save ($$), so every save is new content.
            return ["sh", "-c", f"exiftool -q -overwrite_original -Artist=x$$ '{efile[v]}'" + (f" && sync '{efile[v]}'" if fsync else "")]
        return [TOOL, "save", efile[v], esrc] + (["fsync"] if fsync else [])
    how = "exiftool -Artist" if how_saved == "exiftool" else "O_TRUNC write"
    label, dlabel = f"save edit of {EDIT_MB} MB JPEG ({how})", f"save edit of {EDIT_MB} MB JPEG ({how}), native + fsync"
    measure(ident, label, "native", save("native"), warmup=1)
    measure(ident + "-durable", dlabel, "native", save("native", True), warmup=1)
    # One save through the mount first: EACCES means this photogate does not take edits through
    # a mount yet; the row then says so instead of failing.
    p = subprocess.run(save("passthrough"), capture_output=True, text=True)
    if p.returncode == 0:
        since = close_trace_mark()
        ts = measure(ident, label, "passthrough", save("passthrough"))
        # An O_TRUNC save is an edit's close; exiftool's is a new file's close (its temp file),
        # then a rename over the photo, which commits the version.
        for kind in (["new", "rename"] if how_saved == "exiftool" else ["edit"]):
            close_profile(ident + "-durable", dlabel, since, kind=kind)
        if ts:
            # The same samples against the durable native save (the mount's save is durable at close).
            record(ident + "-durable", dlabel, "passthrough", "s", "lower", sorted(ts)[len(ts) // 2] if len(ts) % 2
                   else (sorted(ts)[len(ts) // 2 - 1] + sorted(ts)[len(ts) // 2]) / 2, ts, note="same samples as the row above")
        ratio_note(ident)
        ratio_note(ident + "-durable")
        c = sqlite3.connect(f"file:{lib}/photogate.sqlite?mode=ro", uri=True)
        log(f"versions in the library after the saves: {c.execute('SELECT count(*) FROM versions').fetchone()[0]} (original included)")
        c.close()
        if how_saved != "exiftool":   # floorfs has no rename
            edit_floors(ident, label, dlabel, stem, esrc)
    elif "permission denied" in p.stderr.lower():
        record(ident, label, "passthrough", "s", "lower", None, note="n/a (EACCES)")
        record(ident + "-durable", dlabel, "passthrough", "s", "lower", None, note="n/a (EACCES)")
    else:
        record(ident, label, "passthrough", "s", "lower", None, note=f"failed: {(p.stderr.strip().splitlines() or ['?'])[-1][:120]}")
    pg_unmount(lib, emnt)


def edit_floors(ident, label, dlabel, stem, esrc):
    """The same save through the two floors (`floors`): floorfs takes a save of a stored file as
    a new file renamed over it at the close. Recorded in both rows, as the mount's samples are."""
    for name, f in floors().items():
        target = os.path.join(f["mp"], f"{stem}_000000.jpg")
        sh("cp", esrc, w("floor-" + name, "store") + "/")
        ts = measure(ident, label, name, [TOOL, "save", target, esrc])
        if ts:
            mid = sorted(ts)[len(ts) // 2] if len(ts) % 2 else (sorted(ts)[len(ts) // 2 - 1] + sorted(ts)[len(ts) // 2]) / 2
            record(ident + "-durable", dlabel, name, "s", "lower", mid, ts, note="same samples as the row above")
        f["stop"]()
    ratio_note(ident + "-durable")
