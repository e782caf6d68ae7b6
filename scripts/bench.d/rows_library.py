"""scripts/bench's rows on libraries and mounts: listing a big view, cp into an add-only mount,
import, redacted reads, live grants with many mounts, mount time and memory of big libraries,
bulk grants."""
import os
import sqlite3
import subprocess
import time

from benchlib import (BIG, GRANT, LAT, LIST, NMOUNTS, PG, PHOTOS, REAL, RUNS, TOOL, VARIANTS, big_library,
                      bind_mount, dataset, empty_folder, list_library, listing, log, main_library, measure,
                      interleaved, median, mount_info, percentile, pg, pg_mount, pg_unmount, real_photos, record,
                      remounting, row, sh, w, wait_until, write_list)


@row("ls-l", "metadata")
def ls_l():
    dirs = list_mounts()
    interleaved("ls-l", f"ls -l of {LIST} entries, warm", lambda v: ["ls", "-l", dirs[v]])


@row("find-newer", "metadata")
def find_newer():
    dirs = list_mounts()
    # A reference file in the middle of the capture dates (photogate shows capture dates as mtimes).
    ref = w("newer-ref")
    open(ref, "w").close()
    t = 1500000000 + LIST // 2 * 60
    os.utime(ref, (t, t))
    interleaved("find-newer", f"find -newer over {LIST} entries, warm", lambda v: ["find", dirs[v], "-newer", ref])


@dataset
def list_mounts():
    lib = list_library()
    return {"native": w("listdir"), "passthrough": pg_mount(lib, "org.bench.Viewer", w("mnt", "list-pt")),
            "fallback": pg_mount(lib, "org.bench.Viewer", w("mnt", "list-fb"), "--no-passthrough"),
            "bindfs": bind_mount(w("listdir"), w("mnt", "list-bind"))}


@row("cp", "writes-mount")
def cp_in():
    lib, real = main_library(), real_photos()
    pg("authorize", "--library", lib, "org.bench.Camera", "--access", "add-only", "--status", "authorized")
    capt = pg_mount(lib, "org.bench.Camera", w("mnt", "camera-pt"), "--access", "add-only")
    cafb = pg_mount(lib, "org.bench.Camera", w("mnt", "camera-fb"), "--access", "add-only", "--no-passthrough")
    native, bsrc = w("cp-native"), w("cp-bind-src")
    os.makedirs(native, exist_ok=True)
    os.makedirs(bsrc, exist_ok=True)
    cabd = bind_mount(bsrc, w("mnt", "bind-cp"))
    dst = {"native": native, "passthrough": capt, "fallback": cafb, "bindfs": cabd}

    def plain(d):
        return lambda: (empty_folder(d), os.sync())
    prep = {"native": plain(native), "bindfs": plain(bsrc),
            "passthrough": remounting(lib, "org.bench.Camera", capt),
            "fallback": remounting(lib, "org.bench.Camera", cafb, "--no-passthrough")}
    files = listing(real)
    interleaved("cp", f"cp {REAL} photos (2-4 MB) in", lambda v: ["cp", "--sparse=never", *files, dst[v] + "/"],
                prepare=prep, warmup=0)
    prep["passthrough"]()
    prep["fallback"]()
    pg_unmount(lib, capt)
    pg_unmount(lib, cafb)


@row("import", "writes-mount")
def import_row():
    real = real_photos()

    def reset():
        sh("rm", "-rf", w("imp-lib"), w("imp-cp"))
        pg("init", "--library", w("imp-lib"))
        os.sync()
    # In rounds (cp, then import, then the other way round): the disk's write speed swings from
    # minute to minute here, and two phases one after the other moved the ratio by 0.1-0.2.
    cmds = {"native": ["sh", "-c", f"cp -r '{real}' '{w('imp-cp')}' && sync"],
            "passthrough": [PG, "import", "--library", w("imp-lib"), real]}
    # The sources in the page cache before the first round, as they are for every later one.
    subprocess.run(["cat", *[os.path.join(real, f) for f in sorted(os.listdir(real))]], stdout=subprocess.DEVNULL, check=True)
    interleaved("import", f"import {REAL} photos (copy)", lambda v: cmds[v], variants=["native", "passthrough"],
                prepare=reset, warmup=0)
    sh("rm", "-rf", w("imp-lib"), w("imp-cp"))


@row("redact", "writes-mount")
def redact():
    """Reads through each mount with strip-location off, then on, in rounds with native reads of
    the same files (natively nothing is stripped)."""
    real = real_photos()
    lib = w("library-redact")
    pg("init", "--library", lib)
    pg("import", "--library", lib, "--reference", real)
    pg("authorize", "--library", lib, "org.bench.Reader", "--access", "read-write", "--status", "authorized")
    mps = {"passthrough": pg_mount(lib, "org.bench.Reader", w("mnt", "redact-pt")),
           "fallback": pg_mount(lib, "org.bench.Reader", w("mnt", "redact-fb"), "--no-passthrough"),
           "no-open": pg_mount(lib, "org.bench.Reader", w("mnt", "redact-noopen"), "--no-open")}
    native = write_list("list-real-native", listing(real, prefix=""))
    for mode in ("off", "on"):
        pg("options", "--library", lib, "org.bench.Reader", "--strip-location", mode)
        # The running mounts follow the option change (new inodes for the redacted views).
        for mp in mps.values():
            want = f'"stripLocation" : {"true" if mode == "on" else "false"}'
            wait_until(f"{mp} to follow strip-location {mode}",
                       lambda: want in open(f"{mp}/.photogate/status").read())
        label = f"read {REAL} GPS photos, strip-location {mode}"
        # In rounds with native reads of the same files (plain: natively nothing is stripped), so
        # each mount's ratio to native is taken round by round; measured one variant after the
        # other, the order alone moved the passthrough and fallback mounts apart by 1.5x.
        lists = {"native": native, **{v: write_list(f"list-redact-{v}", listing(mp)) for v, mp in mps.items()}}
        interleaved(f"redact-{mode}", label, lambda v: [TOOL, "orc", lists[v]], variants=["native", *mps], warmup=1)
    pg("options", "--library", lib, "org.bench.Reader", "--strip-location", "off")
    for mp in mps.values():
        pg_unmount(lib, mp)


def grant_latencies(lib, mp, names):
    """Grants the limited app each name in turn; how long each took to appear in the mount, and
    how long `photogate grant` took (seconds)."""
    lat, cli = [], []
    for name in names:
        p = subprocess.run([TOOL, "appear", f"{mp}/{name}", "10000", "--", PG, "grant", "--library", lib, "org.bench.Limited", name],
                           capture_output=True, text=True)
        if p.returncode != 0:
            log(f"{name} never appeared: {p.stderr.strip()[-160:]}")
            continue
        kv = dict(x.split("=", 1) for x in p.stdout.split())
        lat.append(float(kv["latency_seconds"]))
        cli.append(float(kv["cli_seconds"]))
    return lat, cli


@row("live", "writes-mount")
def live():
    """grant -> stat sees the file, with NMOUNTS mounts running."""
    lib = main_library()
    pg("authorize", "--library", lib, "org.bench.Limited", "--access", "read-write", "--status", "limited")
    lim = pg_mount(lib, "org.bench.Limited", w("mnt", "limited"))
    others = []
    for i in range(1, NMOUNTS):
        pg("authorize", "--library", lib, f"org.bench.Other{i}", "--access", "read-write", "--status", "authorized")
        others.append(pg_mount(lib, f"org.bench.Other{i}", w("mnt", f"other-{i}"), *(["--no-passthrough"] if i % 2 == 0 else [])))
    lat, cli = grant_latencies(lib, lim, [f"IMG_{i * 7 % PHOTOS:06d}.jpg" for i in range(LAT)])
    record("live-p50", f"grant -> stat visible, p50 ({NMOUNTS} mounts)", "passthrough", "s", "lower", percentile(lat, 50), lat)
    record("live-p99", f"grant -> stat visible, p99 ({NMOUNTS} mounts)", "passthrough", "s", "lower", percentile(lat, 99), lat)
    record("grant-cli", "photogate grant (1 asset), CLI time", "passthrough", "s", "lower", median(cli), cli)
    for mp in others + [lim]:
        pg_unmount(lib, mp)


def mount_stats(lib, n):
    mp, times, rss = w("mnt", "big"), [], []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        pg_mount(lib, "org.bench.Viewer", mp)
        times.append(time.perf_counter() - t0)
        pid = mount_info(lib, mp)["pid"]
        kb = next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS"))
        rss.append(kb / 1024)
        pg_unmount(lib, mp)
    record(f"mount-{n}", f"photogate mount ready, {n} assets", "passthrough", "s", "lower", median(times), times)
    record(f"rss-{n}", f"daemon RSS after mount, {n} assets", "passthrough", "MB", "lower", median(rss), rss)


@row("mount-list", "writes-mount")
def mount_list():
    mount_stats(list_library(), LIST)


@row("mount-big", "writes-mount")
def mount_big():
    mount_stats(big_library(), BIG)


@row("live-big", "writes-mount")
def live_big():
    """grant -> stat on a limited mount while a mount showing the whole big library runs, and
    the CPU that mount's daemon spends per grant (it patches its view in place)."""
    lib = big_library()
    every = pg_mount(lib, "org.bench.Viewer", w("mnt", "big-all"))
    lim = pg_mount(lib, "org.bench.Limited", w("mnt", "big-limited"))
    pid = mount_info(lib, every)["pid"]

    def ticks():
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return int(f[11]) + int(f[12])
    c0 = ticks()
    lat, _ = grant_latencies(lib, lim, [f"B_{i * 7919 % BIG:07d}.jpg" for i in range(LAT)])
    c1 = ticks()
    record("live-big-p50", f"grant -> stat visible, p50 ({BIG}-asset mount running)", "passthrough", "s", "lower", percentile(lat, 50), lat)
    record("live-big-p99", f"grant -> stat visible, p99 ({BIG}-asset mount running)", "passthrough", "s", "lower", percentile(lat, 99), lat)
    record("live-big-cpu", f"CPU per grant of the daemon showing {BIG} assets", "passthrough", "ms", "lower",
           (c1 - c0) * 1000 / os.sysconf("SC_CLK_TCK") / max(LAT, 1), note=f"{c1 - c0} ticks over {LAT} grants")
    pg_unmount(lib, every)
    pg_unmount(lib, lim)


@row("grant-bulk", "writes-mount")
def grant_bulk():
    lib = big_library()
    # Ids, as scripts pass them (read from the catalog, read only).
    c = sqlite3.connect(f"file:{lib}/photogate.sqlite?mode=ro", uri=True)
    ids = [r[0] for r in c.execute("SELECT id FROM assets ORDER BY rowid LIMIT ? OFFSET 1000", (GRANT,))]
    c.close()
    names = write_list("grant-ids", ids)

    def reset():
        pg("revoke", "--library", lib, "org.bench.Limited", "--all")
    cmd = ["sh", "-c", f"exec '{PG}' grant --library '{lib}' org.bench.Limited - <'{names}'"]
    measure(f"grant-{GRANT}", f"grant {GRANT} assets from stdin ({BIG}-asset library)", "passthrough", cmd, prepare=reset)


