"""scripts/bench's access-report rows (issue 36): what recording costs the reads it records, and
the report's size on disk."""
import os
import random
import sqlite3
import time

from benchlib import (PHOTOS, QUICK, RUNS, SMALL, SMALL_KB, TOOL, Failed, log, main_library, median, pg, pg_mount, record, row,
                      photos, small_files, timed, w, write_list, listing)


def mount_with(lib, app, mountpoint, report):
    """A passthrough mount whose daemon records (report "on") or not (PHOTOGATE_REPORT=off)."""
    old = os.environ.get("PHOTOGATE_REPORT")
    os.environ["PHOTOGATE_REPORT"] = report
    try:
        return pg_mount(lib, app, mountpoint)
    finally:
        if old is None:
            del os.environ["PHOTOGATE_REPORT"]
        else:
            os.environ["PHOTOGATE_REPORT"] = old


def daemon_cpu(pid):
    """Seconds of CPU (user + system) the process has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def on_off(workload, label, lists, runs, pids):
    """Runs the open-read-close list of each variant in rounds (off and on alternate which goes
    first), warm, and records both: the wall time, and the daemon's CPU time per run (what
    recording adds to the daemon's work, much steadier than wall time on a busy machine), each
    with its on/off ratio round by round."""
    variants = ["report-off", "report-on"]
    for v in variants:
        timed([TOOL, "orc", lists[v]])   # warm-up
    got = {v: [] for v in variants}
    cpu = {v: [] for v in variants}
    for r in range(runs):
        for v in (variants if r % 2 == 0 else variants[::-1]):
            before = daemon_cpu(pids[v])
            got[v].append(timed([TOOL, "orc", lists[v]]))
            cpu[v].append(daemon_cpu(pids[v]) - before)

    def ratio(a, b):
        per = sorted(x / y for x, y in zip(a, b) if y > 0)
        if not per:
            return None, "no samples"
        mid = per[len(per) // 2] if len(per) % 2 else (per[len(per) // 2 - 1] + per[len(per) // 2]) / 2
        return mid, f"{100 * (mid - 1):+.1f}% (on/off, median of {len(per)} rounds; per round {', '.join(f'{x:.3f}' for x in per)})"
    _, wall = ratio(got["report-on"], got["report-off"])
    _, daemon = ratio(cpu["report-on"], cpu["report-off"])
    log(f"{label}: wall time {wall}; daemon CPU {daemon}")
    record(workload, label, "report-off", "s", "lower", median(got["report-off"]), got["report-off"], paired=True)
    record(workload, label, "report-on", "s", "lower", median(got["report-on"]), got["report-on"], note=f"wall time {wall}", paired=True)
    record(workload + "-cpu", label + ": the daemon's CPU time", "report-off", "s", "lower", median(cpu["report-off"]), cpu["report-off"], paired=True)
    record(workload + "-cpu", label + ": the daemon's CPU time", "report-on", "s", "lower", median(cpu["report-on"]), cpu["report-on"],
           note=f"daemon CPU {daemon}", paired=True)


@row("report-cost", "reads")
def report_cost():
    """Recording sits on the open path (one clock read, a lock, a dictionary update): the same
    reads through two mounts of one library, one recording and one not (PHOTOGATE_REPORT=off),
    in the same rounds. Warm: the open, not the disk, is what recording could slow."""
    runs = max(RUNS, 11)
    lib = main_library()
    photos = {v: mount_with(lib, "org.bench.Viewer", w("mnt", f"rep-{v}"), "on" if v == "report-on" else "off")
              for v in ["report-on", "report-off"]}
    lists = {v: write_list(f"list-rep-{v}", listing(d, limit=PHOTOS)) for v, d in photos.items()}
    pids = {v: mount_pid(lib, d) for v, d in photos.items()}
    on_off("report-orc", f"open-read-close {PHOTOS} photos, warm, recording on vs off", lists, runs, pids)
    small = small_files()["lib"]
    dirs = {v: mount_with(small, "org.bench.Viewer", w("mnt", f"rep-small-{v}"), "on" if v == "report-on" else "off")
            for v in ["report-on", "report-off"]}
    lists = {v: write_list(f"list-rep-small-{v}", listing(d)) for v, d in dirs.items()}
    pids = {v: mount_pid(small, d) for v, d in dirs.items()}
    on_off("report-small", f"open-read-close {SMALL} files of ~{SMALL_KB} KB, warm, recording on vs off", lists, runs, pids)


def mount_pid(lib, mountpoint):
    import json
    for m in json.loads(pg("mounts", "--library", lib, "--json")):
        if m["mountpoint"] == mountpoint:
            return m["pid"]
    raise Failed(f"no daemon for {mountpoint}")


def db_bytes(lib):
    c = sqlite3.connect(f"{lib}/photogate.sqlite", timeout=30)
    try:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (pages,), (size,) = c.execute("PRAGMA page_count").fetchone(), c.execute("PRAGMA page_size").fetchone()
        return pages * size
    finally:
        c.close()


@row("report-size", "reads")
def report_size():
    """The report's size on disk for READS reads of ASSETS photos by one app over 30 days (random
    photo, random day: each (photo, day, kind) is one row, as mounts write them: the same
    statement, in batches), and the time `photogate report` takes to list it all."""
    reads = int(os.environ.get("BENCH_REPORT_READS", 100_000 if QUICK else 1_000_000))
    assets, days = int(os.environ.get("BENCH_REPORT_ASSETS", 10_000 if QUICK else 100_000)), 30
    lib = w("library-report")
    pg("init", "--library", lib)
    # One photo stands for every asset (the catalog, not the store, is what grows).
    one = os.path.join(photos(), "IMG_000000.jpg")
    pg("debug-fill-catalog", "--library", lib, "--count", assets, "--name-prefix", "R_", one)
    pg("authorize", "--library", lib, "org.bench.Reader", "--access", "read-write", "--status", "authorized")
    before = db_bytes(lib)
    rng = random.Random(36)
    c = sqlite3.connect(f"{lib}/photogate.sqlite", timeout=30)
    rowids = [r for (r,) in c.execute("SELECT rowid FROM assets")]
    today = int(time.time()) // 86400
    tallies = {}
    for _ in range(reads):
        key = (today - rng.randrange(days), rng.choice(rowids))
        t = tallies.get(key)
        tallies[key] = t + 1 if t else 1
    c.execute("INSERT OR IGNORE INTO report_apps (app_id) VALUES ('org.bench.Reader')")
    (app,) = c.execute("SELECT id FROM report_apps WHERE app_id = 'org.bench.Reader'").fetchone()
    items = sorted(tallies.items())
    for i in range(0, len(items), 20_000):   # batches, as a mount's recorder writes them
        c.executemany("""INSERT INTO access_report (app, day, asset_rowid, kind, first_at, last_at, count)
                         VALUES (?, ?, ?, 0, ?, ?, ?)
                         ON CONFLICT (app, day, asset_rowid, kind) DO UPDATE SET
                             first_at = min(first_at, excluded.first_at), last_at = max(last_at, excluded.last_at),
                             count = count + excluded.count""",
                      [(app, d, r, d * 86400 + 100, d * 86400 + 200, n) for (d, r), n in items[i:i + 20_000]])
        c.commit()
    c.close()
    after = db_bytes(lib)
    grown = after - before
    record("report-size", f"report of {reads:,} reads of {assets:,} photos over {days} days: size on disk", "report",
           "MB", "lower", grown / 1e6, [grown / 1e6], note=f"{len(tallies):,} rows, {grown / len(tallies):.0f} bytes a row")
    ts = [timed([os.environ["PG"], "report", "--library", lib, "org.bench.Reader", "--json"]) for _ in range(3)]
    record("report-list", f"photogate report --json of those {len(tallies):,} rows", "report", "s", "lower", median(ts), ts)
