#!/usr/bin/python3
"""scripts/bench's machinery: the knobs (environment), running and timing commands, statistics,
recording measurements, mounts and their cleanup, and the datasets the rows share (each made
once, on first use). The rows are in rows_*.py; bench.py runs them. Standard library only."""
import atexit
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import time

from closetrace import phase_means  # noqa: E402  (scripts/bench.d is on the path: bench.py's folder)

HERE = os.path.dirname(os.path.abspath(__file__))

VARIANTS = ["native", "passthrough", "fallback", "bindfs"]


def env_int(name, default):
    return int(os.environ.get(name, default))


QUICK = os.environ.get("BENCH_QUICK", "0") == "1"
D = (dict(runs=3, video=64, rand=5000, photos=300, real=60, list=5000, big=20000, grant=1000, mounts=3, lat=10, small=200, owned=20000)
     if QUICK else
     dict(runs=5, video=1024, rand=50000, photos=10000, real=1000, list=100000, big=1000000, grant=10000, mounts=10, lat=500, small=1000, owned=100000))
RUNS = env_int("BENCH_RUNS", D["runs"])
COLD_RUNS = env_int("BENCH_COLD_RUNS", 2 * RUNS + 1)
VIDEO_MB = env_int("BENCH_VIDEO_MB", D["video"])
RAND_READS = env_int("BENCH_RAND_READS", D["rand"])
PHOTOS = env_int("BENCH_PHOTOS", D["photos"])
REAL = env_int("BENCH_REAL_PHOTOS", D["real"])
SMALL = env_int("BENCH_SMALL", D["small"])
SMALL_KB = env_int("BENCH_SMALL_KB", 100)
PROFILE_OPENS = env_int("BENCH_PROFILE_OPENS", 200)
LIST = env_int("BENCH_LIST", D["list"])
BIG = env_int("BENCH_BIG", D["big"])
GRANT = env_int("BENCH_GRANT", D["grant"])
OWNED = env_int("BENCH_OWNED", D["owned"])
NMOUNTS = env_int("BENCH_MOUNTS", D["mounts"])
LAT = env_int("BENCH_LATENCY", D["lat"])
WRITERS = env_int("BENCH_WRITERS", 8)
EDIT_MB = env_int("BENCH_EDIT_MB", 5)
EDIT_SAVE = os.environ.get("BENCH_EDIT_SAVE", "truncate")
ONLY = os.environ.get("BENCH_ONLY", "")

PG = os.environ["PG"]
TOOL = os.environ["PGBENCH"]
FLOORFS = os.environ.get("FLOORFS", "")   # bench.d/floorfs.c, built by scripts/bench ("" if it could not be)
WORK = os.environ["BENCH_WORK"]
DROP_CACHES = os.path.join(HERE, "drop-caches")
TEMPLATE = os.path.join(HERE, "..", "demo-photos", "beach.jpg")  # a JPEG whose EXIF has GPS
RESULTS = os.path.join(WORK, "measurements.jsonl")
# Every mount daemon the bench starts writes where each close that commits a file spent its time
# (photogate's PHOTOGATE_TRACE_CLOSES, issue 39); the write rows put that under their rows.
CLOSE_TRACE = os.path.join(WORK, "closes.trace")
os.environ["PHOTOGATE_TRACE_CLOSES"] = CLOSE_TRACE


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def w(*parts):
    return os.path.join(WORK, *parts)


# --- running commands ---------------------------------------------------------------------------

class Failed(Exception):
    pass


def sh(*cmd, quiet=True, stdin=None, check=True):
    """Runs a command (no shell); returns its stdout. Failure raises Failed with its last words."""
    p = subprocess.run([str(c) for c in cmd], stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        last = (p.stderr.strip().splitlines() or p.stdout.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        raise Failed(f"{os.path.basename(str(cmd[0]))}: {last[:160]}")
    if not quiet and p.stderr:
        sys.stderr.write(p.stderr)
    return p.stdout


def pg(*args, **kw):
    return sh(PG, *args, **kw)


def timed(cmd, prepare=None):
    """Seconds one run of `cmd` takes (wall clock, process start included, as hyperfine -N);
    `prepare` (a callable) runs first, untimed."""
    if prepare:
        prepare()
    t0 = time.perf_counter()
    p = subprocess.run([str(c) for c in cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    t = time.perf_counter() - t0
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1]
        raise Failed(last[:160])
    return t


def drop_caches():
    sh(DROP_CACHES)


# --- statistics and recording -------------------------------------------------------------------

def median(xs):
    return statistics.median(xs) if xs else None


def percentile(xs, p):
    """The p-th percentile, nearest rank (as the old awk did)."""
    if not xs:
        return None
    s = sorted(xs)
    i = min(max(int(p / 100 * len(s) + 0.999999), 1), len(s))
    return s[i - 1]


def record(workload, label, variant, unit, better, value, samples=(), note="", paired=False):
    rec = dict(workload=workload, label=label, variant=variant, unit=unit, better=better, median=value,
               samples=[round(x, 6) for x in samples], note=note, paired=paired)
    with open(RESULTS, "a") as f:
        f.write(json.dumps(rec) + "\n")
    shown = "null" if value is None else f"{value:.6g}"
    log(f"{label:<34} {variant:<12} {shown} {unit}" + (f"  ({note})" if note else ""))


def close_trace_mark():
    """Where the close trace ends now (`close_profile` reads what comes after)."""
    try:
        return os.path.getsize(CLOSE_TRACE)
    except FileNotFoundError:
        return 0


def close_profile(workload, label, since, kind="new"):
    """A note under the row: where the mount's closes of kind `kind` ("new" photos, "edit" saves,
    "rename" saves over a photo) traced since `since` (`close_trace_mark`) spent their time, the
    mean of each phase in the order a close passes them (the phases: docs/admin.md, "Limits and
    settings"). None traced says so: a trace lost is seen."""
    n, means = phase_means(CLOSE_TRACE, kind, since)
    what = {"new": "a close of a new file", "edit": "a close of an edit", "rename": "a rename over the photo"}.get(kind, kind)
    if not n:
        record(workload, label, f"closes ({kind})", "s", "lower", None, note=f"no {kind} close traced ({CLOSE_TRACE})")
        return
    phases = ", ".join(f"{k} {ms:.2f}" for k, ms in means)
    note = f"where {what} through the mount spent its time, mean ms of {n}: {phases}; {sum(ms for _, ms in means):.1f} ms in all"
    record(workload, label, f"closes ({kind})", "s", "lower", None, note=note)


def measure(workload, label, variant, cmd, prepare=None, warmup=0, runs=None, rate=None, unit="s"):
    """`runs` timed runs of cmd (after `warmup` untimed ones): a time, or with `rate` (an amount)
    a rate in `unit` per second. A failure becomes the row's note."""
    runs = runs or RUNS
    try:
        for _ in range(warmup):
            timed(cmd, prepare)
        ts = [timed(cmd, prepare) for _ in range(runs)]
    except Failed as e:
        record(workload, label, variant, unit if rate else "s", "higher" if rate else "lower", None, note=f"failed: {e}")
        return None
    if rate:
        xs = [rate / t for t in ts]
        record(workload, label, variant, unit, "higher", median(xs), xs)
    else:
        record(workload, label, variant, "s", "lower", median(ts), ts)
    return ts


def interleaved(workload, label, cmd_for, variants=VARIANTS, prepare=None, warmup=1, runs=None, rate=None, unit="s"):
    """Measures the variants in rounds (each round runs every variant once, in a rotating order)
    rather than one after the other: on a busy machine a slow phase then lands on all variants
    alike, so the ratios between them hold (report.py also compares them round by round).
    `prepare` runs untimed before each run: one callable for every variant, or a dict of one per
    variant."""
    runs = runs or RUNS
    got = {v: [] for v in variants}
    failed = {}
    for v in variants:
        for _ in range(warmup):
            subprocess.run([str(c) for c in cmd_for(v)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    n = len(variants)
    for r in range(runs):
        for i in range(n):
            v = variants[(i + r) % n]
            if v in failed:
                continue
            try:
                t = timed(cmd_for(v), prepare.get(v) if isinstance(prepare, dict) else prepare)
                got[v].append(rate / t if rate else t)
            except Failed as e:
                failed[v] = f"failed (round {r + 1}): {e}"
    for v in variants:
        u, better = (unit, "higher") if rate else ("s", "lower")
        if v in failed:
            record(workload, label, v, u, better, None, got[v], failed[v])
        else:
            record(workload, label, v, u, better, median(got[v]), got[v], paired=True)


# --- mounts, and their cleanup ------------------------------------------------------------------

pg_mounts = []    # (library, mountpoint)
bind_mounts = []


def pg_mount(library, app, mountpoint, *options):
    os.makedirs(mountpoint, exist_ok=True)
    pg("mount", "--library", library, app, mountpoint, *options)
    pg_mounts.append((library, mountpoint))
    return mountpoint


def pg_unmount(library, mountpoint):
    pg("unmount", "--library", library, mountpoint)
    pg_mounts.remove((library, mountpoint))


def bind_mount(source, mountpoint):
    os.makedirs(mountpoint, exist_ok=True)
    sh("bindfs", source, mountpoint)
    bind_mounts.append(mountpoint)
    return mountpoint


def floor_mount(name, hashing):
    """floorfs (bench.d/floorfs.c: the least a FUSE file system does to take photos durably) at
    w("mnt", name), with or without SHA-256, and the prepare step that mounts it again empty.
    None when floorfs could not be built."""
    if not FLOORFS:
        return None
    backing, mp = w("floor-" + name), w("mnt", name)
    os.makedirs(mp, exist_ok=True)
    env = dict(os.environ, HASH="1" if hashing else "0")

    def stop():
        if mp in bind_mounts:
            subprocess.run(["fusermount3", "-u", mp], capture_output=True)
            bind_mounts.remove(mp)
        shutil.rmtree(backing, ignore_errors=True)

    def reset():
        stop()
        os.makedirs(backing)
        subprocess.run([FLOORFS, backing, mp], env=env, check=True)
        bind_mounts.append(mp)
        os.sync()
    reset()
    return dict(mp=mp, reset=reset, stop=stop)


def cleanup():
    for lib, mp in list(pg_mounts):
        if subprocess.run([PG, "unmount", "--library", lib, mp], capture_output=True).returncode != 0:
            subprocess.run(["fusermount3", "-u", "-z", mp], capture_output=True)
    for mp in bind_mounts:
        for cmd in (["fusermount3", "-u", "-z", mp], ["fusermount", "-u", "-z", mp], ["umount", "-l", mp]):
            if subprocess.run(cmd, capture_output=True).returncode == 0:
                break


atexit.register(cleanup)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))


def mount_info(library, mountpoint):
    for m in json.loads(pg("mounts", "--library", library, "--json")):
        if m["mountpoint"] == mountpoint:
            return m
    raise Failed(f"no mount at {mountpoint}")


def wait_until(what, cond, timeout=10.0):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise Failed(f"timed out waiting for {what}")
        time.sleep(0.02)


# --- datasets (each made once, on first use) ----------------------------------------------------

_made = {}


def dataset(fn):
    def get():
        if fn.__name__ not in _made:
            _made[fn.__name__] = fn()
        return _made[fn.__name__]
    return get


def listing(folder, prefix="IMG_", limit=None):
    names = sorted(n for n in os.listdir(folder) if n.startswith(prefix))[:limit]
    return [os.path.join(folder, n) for n in names]


def write_list(name, paths):
    path = w(name)
    with open(path, "w") as f:
        f.write("".join(p + "\n" for p in paths))
    return path


@dataset
def real_photos():
    """Photos with real random content: cp, import, redaction, the durable writes."""
    os.makedirs(w("real"), exist_ok=True)
    sh(TOOL, "gen-photos", w("real"), REAL, 2000000, 4000000, TEMPLATE, 3)
    return w("real")


@dataset
def photos():
    """The PHOTOS photos (2-4 MB; after a unique 64 KiB head they are sparse, so a pass reads from
    memory, not the disk). The main, list and big libraries index them in place."""
    os.makedirs(w("photos"), exist_ok=True)
    sh(TOOL, "gen-photos", w("photos"), PHOTOS, 2000000, 4000000, TEMPLATE, 2, "sparse")
    return w("photos")


@dataset
def main_library():
    """The video and the PHOTOS photos (`photos`: sparse after their head, so a pass reads from
    memory, not the disk: the per-file and per-byte costs of each path), in a library; the
    photos indexed in place by debug-fill-catalog (hashing 20-40 GB would take
    minutes; import is measured by its own row)."""
    lib = w("library")
    pg("init", "--library", lib)
    os.makedirs(w("src"), exist_ok=True)
    sh(TOOL, "gen-video", w("src", "video.mp4"), VIDEO_MB << 20, 1)
    pg("import", "--library", lib, w("src", "video.mp4"))
    pg("debug-fill-catalog", "--library", lib, photos())
    pg("authorize", "--library", lib, "org.bench.Viewer", "--access", "read-write", "--status", "authorized")
    return lib


def store_path(lib, name):
    """Where the store keeps an imported asset (read only; the catalog is photogate's)."""
    c = sqlite3.connect(f"file:{lib}/photogate.sqlite?mode=ro", uri=True)
    try:
        (rel,) = c.execute("SELECT store_path FROM assets WHERE display_name = ?", (name,)).fetchone()
    finally:
        c.close()
    return os.path.join(lib, "store", rel)


@dataset
def read_mounts():
    lib = main_library()
    video = store_path(lib, "video.mp4")
    pt = pg_mount(lib, "org.bench.Viewer", w("mnt", "pt"))
    fb = pg_mount(lib, "org.bench.Viewer", w("mnt", "fb"), "--no-passthrough")
    bv = bind_mount(os.path.dirname(video), w("mnt", "bind-video"))
    bp = bind_mount(w("photos"), w("mnt", "bind-photos"))
    paths = {"passthrough": mount_info(lib, pt)["readPath"], "fallback": mount_info(lib, fb)["readPath"]}
    _made["read_paths"] = paths
    log(f"photogate read paths: {paths['passthrough']} (default mount), {paths['fallback']} (--no-passthrough)")
    return dict(video={"native": video, "passthrough": f"{pt}/video.mp4", "fallback": f"{fb}/video.mp4",
                       "bindfs": f"{bv}/{os.path.basename(video)}"},
                photos={"native": w("photos"), "passthrough": pt, "fallback": fb, "bindfs": bp})


@dataset
def small_files():
    """SMALL files of about SMALL_KB KB (thumbnails, small PNGs), imported with `photogate
    import` into a library of their own, mounted both ways and through bindfs."""
    src, lib = w("small"), w("library-small")
    os.makedirs(src, exist_ok=True)
    b = SMALL_KB * 1000
    sh(TOOL, "gen-photos", src, SMALL, b * 9 // 10, b * 11 // 10, TEMPLATE, 4)
    pg("init", "--library", lib)
    pg("import", "--library", lib, src)
    pg("authorize", "--library", lib, "org.bench.Viewer", "--access", "read-write", "--status", "authorized")
    pt = pg_mount(lib, "org.bench.Viewer", w("mnt", "small-pt"))
    fb = pg_mount(lib, "org.bench.Viewer", w("mnt", "small-fb"), "--no-passthrough")
    bd = bind_mount(src, w("mnt", "small-bind"))
    # A no-open mount (read-only; the kernel opens files without asking the daemon).
    no = pg_mount(lib, "org.bench.Viewer", w("mnt", "small-noopen"), "--no-open")
    dirs = {"native": src, "passthrough": pt, "fallback": fb, "bindfs": bd, "no-open": no}
    return dict(lib=lib, dirs=dirs, lists={v: write_list(f"list-small-{v}", listing(d)) for v, d in dirs.items()})


@dataset
def list_library():
    """LIST assets, all reading one photo, for ls -l and find -newer (and the mount-time row)."""
    lib = w("library-list")
    src = photos()   # first: a BENCH_ONLY of these rows alone made no photos, and failed
    pg("init", "--library", lib)
    one = os.path.join(src, "IMG_000000.jpg")
    pg("debug-fill-catalog", "--library", lib, "--count", LIST, "--name-prefix", "A_", one)
    pg("authorize", "--library", lib, "org.bench.Viewer", "--access", "read-write", "--status", "authorized")
    # The native side: hard links to copies of that photo (ext4 allows 65,000 links per file).
    # Not to the photos themselves: a link changes a file's ctime, and the main library, whose
    # assets reference them, then refused them as changed after import (EACCES in the rows that
    # read through it after these, report-cost in the full run of 2026-11-29).
    os.makedirs(w("listdir"), exist_ok=True)
    os.makedirs(w("listdir-src"), exist_ok=True)
    per = 60000
    copies = []
    for k in range((LIST + per - 1) // per):
        copies.append(w("listdir-src", f"one-{k}.jpg"))
        shutil.copyfile(one, copies[-1])
    for i in range(LIST):
        os.link(copies[i // per], w("listdir", f"A_{i:07d}.jpg"))
    return lib


@dataset
def big_library():
    """BIG assets reading the PHOTOS photos in turn: mount time, memory, grants at scale."""
    lib = w("library-big")
    src = photos()
    pg("init", "--library", lib)
    t0 = time.perf_counter()
    pg("debug-fill-catalog", "--library", lib, "--count", BIG, "--name-prefix", "B_", src)
    log(f"debug-fill-catalog of {BIG} assets: {time.perf_counter() - t0:.1f} s")
    pg("authorize", "--library", lib, "org.bench.Viewer", "--access", "read-write", "--status", "authorized")
    pg("authorize", "--library", lib, "org.bench.Limited", "--access", "read-write", "--status", "limited")
    return lib


# --- write rows' resets ----------------------------------------------------------------------

def forget_app_files(lib, app):
    """Between runs of a write row: the app's assets go (rows and files), so every run writes
    new files and the disk does not fill up. photogate has no command that deletes assets for
    good (Recently Deleted keeps them), so this edits the catalog; nothing else here does."""
    c = sqlite3.connect(f"{lib}/photogate.sqlite")
    try:
        # Only files it wrote: the assets debug-fill-catalog made it own are references.
        for (rel,) in c.execute("SELECT store_path FROM assets WHERE owner_app = ? AND store_path IS NOT NULL", (app,)).fetchall():
            try:
                os.unlink(os.path.join(lib, "store", rel))
            except FileNotFoundError:
                pass
        c.execute("DELETE FROM assets WHERE owner_app = ? AND store_path IS NOT NULL", (app,))
        c.commit()
    finally:
        c.close()


def empty_folder(d):
    for n in os.listdir(d):
        os.unlink(os.path.join(d, n))


def remounting(lib, app, mp, *options):
    """A prepare step for write rows: remount the add-only mount (it refuses a name it created
    itself earlier, EEXIST) after forgetting the app's files."""
    def reset():
        pg("unmount", "--library", lib, mp)
        forget_app_files(lib, app)
        pg("mount", "--library", lib, app, mp, *options, "--access", "add-only")
        os.sync()
    return reset


# --- rows (registered by rows_*.py) ---------------------------------------------------------------------------------------

ROWS = []


def row(ident, group):
    def add(fn):
        ROWS.append((ident, group, fn))
        return fn
    return add


def video_label():
    return f"{VIDEO_MB // 1024} GiB" if VIDEO_MB >= 1024 else f"{VIDEO_MB} MiB"


def gigabytes():
    return VIDEO_MB * 1048576 / 1e9


