#!/usr/bin/python3
"""scripts/bench's measurements, run by scripts/bench (which builds photogate and pgbench first and
passes their paths, PG and PGBENCH, in the environment; the knobs are described at the top of
scripts/bench).

Every workload row is one function registered with @row(ID, GROUP) in rows_*.py: it asks for
the datasets and mounts it needs (benchlib.py makes each once, on first use) and records its
measurements with `record`, `measure` or `interleaved`. To add a row, add a function there.
BENCH_ONLY=reads|writes picks groups; BENCH_ONLY=ROW,ROW... picks rows by id. The table and the
JSON are report.py's. Standard library only."""
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib  # noqa: E402
from benchlib import COLD_RUNS, ONLY, QUICK, RESULTS, ROWS, RUNS, WORK, Failed, log, record, w  # noqa: E402
import report  # noqa: E402
import rows_reads  # noqa: E402,F401  (each rows_* module registers its rows, in table order)
import rows_library  # noqa: E402,F401
import rows_writes  # noqa: E402,F401
import rows_report  # noqa: E402,F401
import rows_webui  # noqa: E402,F401
import rows_compatible  # noqa: E402,F401
import rows_hosts  # noqa: E402,F401


# --- main ---------------------------------------------------------------------------------------

def selected():
    groups = {"reads": {"reads"}, "writes": {"writes"}, "": {"reads", "metadata", "writes-mount", "writes", "ui", "hosts"}}
    if ONLY in groups:
        return [r for r in ROWS if r[1] in groups[ONLY]]
    wanted = set(ONLY.split(","))
    unknown = wanted - {r[0] for r in ROWS}
    if unknown:
        sys.exit(f"bench: BENCH_ONLY is reads, writes or a comma-separated list of rows; unknown: {', '.join(sorted(unknown))}\n"
                 f"bench: rows: {', '.join(r[0] for r in ROWS)}")
    return [r for r in ROWS if r[0] in wanted]


def main():
    started = time.monotonic()
    rows = selected()
    open(RESULTS, "w").close()
    log(f"generating data and measuring in {WORK}: {', '.join(r[0] for r in rows)}")
    failed = []
    for ident, _, fn in rows:
        try:
            fn()
        except Exception as e:  # one row's failure is its cell; the other rows still run
            if not isinstance(e, Failed):
                traceback.print_exc()
            log(f"row {ident} failed: {e}")
            failed.append(ident)
            record(ident, ident, "passthrough", "s", "lower", None, note=f"failed: {e}")
    paths = benchlib._made.get("read_paths", {})
    with open("/etc/os-release") as f:
        pretty = next((l.split("=", 1)[1].strip().strip('"') for l in f if l.startswith("PRETTY_NAME=")), "Linux")
    mem = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal"))
    meta = dict(machine=f"{pretty}, Linux {os.uname().release}, {os.cpu_count()} vCPU, {mem / 1048576:.0f} GiB",
                libfuse=os.environ.get("PHOTOGATE_LIBFUSE_VERSION", "unknown"),
                passthrough_mount_read_path=paths.get("passthrough", ""), fallback_mount_read_path=paths.get("fallback", ""),
                runs=str(RUNS), quick="1" if QUICK else "0", only=ONLY,
                date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), seconds=str(int(time.monotonic() - started)))
    print()
    print(f"photogate bench: {os.uname().release}, {os.cpu_count()} vCPU, libfuse {meta['libfuse']}; medians of {RUNS} runs "
          f"({COLD_RUNS} for the cold read); ratios are speed relative to native (higher is faster)", flush=True)
    out = w("bench-results.json")
    report.write(RESULTS, out, meta)
    print()
    print(f"bench: results in {out} (table: {w('bench-results.md')}), {int(time.monotonic() - started)} s")
    if failed:
        sys.exit(f"bench: {len(failed)} row(s) failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
