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

from benchlib import (EDIT_MB, EDIT_SAVE, OWNED, REAL, RESULTS, TEMPLATE, TOOL, WRITERS, dataset, empty_folder,
                      listing, log, main_library, measure, pg, pg_mount, pg_unmount, photos, real_photos, record,
                      remounting, row, sh, w, write_list)


def ratio_note(workload):
    """The mount's time over the durable native time, on stderr."""
    m = {}
    for line in open(RESULTS):
        r = json.loads(line)
        if r["workload"] == workload:
            m[r["variant"]] = r["median"]
    n, p = m.get("native"), m.get("passthrough")
    if n and p:
        log(f"{workload}: mount {p:.3f} s, durable native {n:.3f} s, mount/native time {p / n:.2f}x")


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
    m = writer_mount()
    label = f"cp {REAL} photos in, native fsyncs each"
    measure("cp-durable", label, "native", [TOOL, "cpsync", m["list"], m["native"], 1], prepare=m["reset_native"])
    measure("cp-durable", label, "passthrough", ["cp", "--sparse=never", *m["files"], m["mp"] + "/"], prepare=m["reset_mount"])
    ratio_note("cp-durable")


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
    measure("cp-owner-large", label, "passthrough", ["cp", "--sparse=never", *files, mp + "/"],
            prepare=remounting(lib, "org.bench.Camera", mp))
    ratio_note("cp-owner-large")
    pg_unmount(lib, mp)
    reset_native()


@row("cp-durable-par", "writes")
def cp_durable_par():
    m = writer_mount()
    # Writer i copies files i, i + WRITERS, ...; the mount side runs that many cp processes.
    parts = [write_list(f"list-write.{i}", m["files"][i::WRITERS]) for i in range(WRITERS)]
    script = w("par-cp")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n# WRITERS cp processes in parallel, one per list; fails if any fails.\nrc=0\n")
        for p in parts:
            f.write(f"xargs -a '{p}' -d '\\n' cp --sparse=never -t '{m['mp']}' & \n")
        f.write("for p in $(jobs -p); do wait $p || rc=1; done\nexit $rc\n")
    os.chmod(script, 0o755)
    label = f"cp {REAL} photos in, {WRITERS} writers, native fsyncs"
    measure("cp-durable-par", label, "native", [TOOL, "cpsync", m["list"], m["native"], WRITERS], prepare=m["reset_native"])
    measure("cp-durable-par", label, "passthrough", [script], prepare=m["reset_mount"])
    ratio_note("cp-durable-par")
    m["reset_mount"]()
    m["reset_native"]()


@row("edit-save", "writes")
def edit_save():
    """Saving an edit through a read-write mount."""
    lib = main_library()
    src, native = w("edit-src"), w("edit-native")
    os.makedirs(src, exist_ok=True)
    os.makedirs(native, exist_ok=True)
    sh(TOOL, "gen-photos", src, 1, EDIT_MB * 1000000, EDIT_MB * 1000000, TEMPLATE, 5)
    esrc = os.path.join(src, "EDIT_000000.jpg")
    os.rename(os.path.join(src, "IMG_000000.jpg"), esrc)
    pg("import", "--library", lib, esrc)
    sh("cp", esrc, native + "/")
    pg("authorize", "--library", lib, "org.bench.Editor", "--access", "read-write", "--status", "authorized")
    pg("options", "--library", lib, "org.bench.Editor", "--edit-any", "on")
    emnt = pg_mount(lib, "org.bench.Editor", w("mnt", "editor"))
    efile = {"native": os.path.join(native, "EDIT_000000.jpg"), "passthrough": os.path.join(emnt, "EDIT_000000.jpg")}

    def save(v, fsync=False):
        if EDIT_SAVE == "exiftool":
            # A different Artist each save ($$), so every save is new content.
            return ["sh", "-c", f"exiftool -q -overwrite_original -Artist=x$$ '{efile[v]}'" + (f" && sync '{efile[v]}'" if fsync else "")]
        return [TOOL, "save", efile[v], esrc] + (["fsync"] if fsync else [])
    how = "exiftool -Artist" if EDIT_SAVE == "exiftool" else "O_TRUNC write"
    label, dlabel = f"save edit of {EDIT_MB} MB JPEG ({how})", f"save edit of {EDIT_MB} MB JPEG ({how}), native + fsync"
    measure("edit-save", label, "native", save("native"), warmup=1)
    measure("edit-save-durable", dlabel, "native", save("native", True), warmup=1)
    # One save through the mount first: EACCES means this photogate does not take edits through
    # a mount yet; the row then says so instead of failing.
    p = subprocess.run(save("passthrough"), capture_output=True, text=True)
    if p.returncode == 0:
        ts = measure("edit-save", label, "passthrough", save("passthrough"))
        if ts:
            # The same samples against the durable native save (the mount's save is durable at close).
            record("edit-save-durable", dlabel, "passthrough", "s", "lower", sorted(ts)[len(ts) // 2] if len(ts) % 2
                   else (sorted(ts)[len(ts) // 2 - 1] + sorted(ts)[len(ts) // 2]) / 2, ts, note="same samples as the row above")
        ratio_note("edit-save")
        ratio_note("edit-save-durable")
        c = sqlite3.connect(f"file:{lib}/photogate.sqlite?mode=ro", uri=True)
        log(f"versions in the library after the saves: {c.execute('SELECT count(*) FROM versions').fetchone()[0]} (original included)")
        c.close()
    elif "permission denied" in p.stderr.lower():
        record("edit-save", label, "passthrough", "s", "lower", None, note="n/a (EACCES)")
        record("edit-save-durable", dlabel, "passthrough", "s", "lower", None, note="n/a (EACCES)")
    else:
        record("edit-save", label, "passthrough", "s", "lower", None, note=f"failed: {(p.stderr.strip().splitlines() or ['?'])[-1][:120]}")
    pg_unmount(lib, emnt)
