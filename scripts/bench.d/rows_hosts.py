"""scripts/bench's several-hosts row (issue 41): how soon a grant made on one host shows in another
host's running mount, with the catalog on PostgreSQL, beside the same on one host's SQLite
catalog. A real PostgreSQL 15 (initdb'd into a folder of its own by the `postgres` user, on a
Unix socket) and two library folders linked to it stand for the two hosts."""
import os
import shutil
import subprocess
import tempfile
import threading
import time

from benchlib import QUICK, Failed, log, percentile, median, pg, pg_mount, pg_unmount, record, row, w

PGBIN = "/usr/lib/postgresql/15/bin"
DEMO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "demo-photos")
GRANTS = int(os.environ.get("BENCH_HOST_GRANTS", "60" if QUICK else "500"))


class Server:
    """A throwaway PostgreSQL for the row; stopped whatever happens."""

    def __init__(self):
        # A folder of its own beside the bench's (which is root's, 0700: the postgres user could
        # not reach one inside it), removed at `stop`.
        self.folder = tempfile.mkdtemp(prefix="photogate-bench-pg.", dir=os.environ.get("BENCH_DIR") or "/tmp")
        folder = self.folder
        subprocess.run(["chown", "postgres", folder], check=True)
        self.as_pg(f"{PGBIN}/initdb", "-D", f"{folder}/data", "-A", "trust", "-U", "postgres", "--no-sync")
        self.as_pg(f"{PGBIN}/pg_ctl", "-D", f"{folder}/data", "-l", f"{folder}/log", "-w",
                   "-o", f"-k {folder} -c listen_addresses=''", "start")
        self.as_pg("/usr/bin/psql", "-h", folder, "-U", "postgres", "-d", "postgres", "-Atq", "-c", "CREATE DATABASE photos")

    def as_pg(self, *cmd):
        p = subprocess.run(["runuser", "-u", "postgres", "--", *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            raise Failed(f"{os.path.basename(cmd[0])} failed ({p.returncode}): {p.stderr.strip()}")

    def url(self):
        return f"postgresql:///photos?host={self.folder}&user=postgres"

    def stop(self):
        subprocess.run(["runuser", "-u", "postgres", "--", f"{PGBIN}/pg_ctl", "-D", f"{self.folder}/data", "-m", "immediate", "-w", "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.folder, ignore_errors=True)


def latencies(grant_lib, mount_lib, app, mountpoint, name, n):
    """Seconds from the start of `photogate grant` on one library to the photo showing in the
    mount of the other (and the same for its revoke), polled with stat every 0.2 ms; and how long
    each command ran (its start-up, the catalog's connection and transaction: most of the first)."""
    path = os.path.join(mountpoint, name)
    out, ran = [], []
    for i in range(n):
        for verb, want in (("grant", True), ("revoke", False)):
            t0 = time.perf_counter()
            p = subprocess.Popen([os.environ["PG"], verb, "--library", grant_lib, app, name],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = t0 + 10
            ended = None
            while os.path.exists(path) != want:
                if ended is None and p.poll() is not None:
                    ended = time.perf_counter()
                if time.perf_counter() > deadline:
                    p.wait()
                    raise Failed(f"{verb} {name} not seen in {mountpoint} after 10 s")
                time.sleep(0.0002)
            out.append(time.perf_counter() - t0)
            if p.wait() != 0:
                raise Failed(f"photogate {verb} failed: {p.stderr.read()}")
            ran.append((ended or time.perf_counter()) - t0)
    return out, ran


def side(app, grant_lib, mount_lib, init):
    """Makes the libraries (`init`: the folder's `photogate init` arguments), imports the demo
    photos on the granting one, mounts the other's view and measures."""
    for lib in dict.fromkeys((grant_lib, mount_lib)):
        pg("init", lib, *init)
    pg("import", "--library", grant_lib, DEMO)
    pg("authorize", "--library", grant_lib, app, "--status", "limited")
    mnt = pg_mount(mount_lib, app, w("mnt", os.path.basename(mount_lib)))
    try:
        return latencies(grant_lib, mount_lib, app, mnt, "beach.jpg", GRANTS)
    finally:
        pg_unmount(mount_lib, mnt)


@row("grant-across-hosts", "hosts")
def grant_across_hosts():
    if not os.path.exists(f"{PGBIN}/initdb"):
        raise Failed("PostgreSQL 15 is missing (scripts/setup installs postgresql)")
    app = "org.bench.Remote"
    server = Server()
    try:
        # Two hosts: two library folders linked to one catalog and one shared folder.
        remote = side(app, w("host-a"), w("host-b"), ["--catalog", server.url(), "--store", w("host-shared")])
    finally:
        server.stop()
    # The same on one host's SQLite catalog: the grant returns once the mount applied it.
    local = w("host-sqlite")
    same = side(app, local, local, [])
    label = f"grant (and revoke) seen in another host's mount, {len(remote[0])} changes"
    for variant, (xs, ran) in (("postgresql", remote), ("sqlite", same)):
        note = (f"p50 {1000 * median(xs):.1f} ms, p99 {1000 * percentile(xs, 99):.1f} ms, max {1000 * max(xs):.1f} ms; "
                f"the command itself ran p50 {1000 * median(ran):.1f} ms")
        record("grant-across-hosts", label, variant, "s", "lower", percentile(xs, 99), xs, note=note)
    log(f"grant across hosts: PostgreSQL p99 {1000 * percentile(remote[0], 99):.1f} ms, one host's SQLite p99 {1000 * percentile(same[0], 99):.1f} ms")
