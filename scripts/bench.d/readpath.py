#!/usr/bin/env python3
"""The read path's per-open cost, side by side in one run (issue 18): native against a photogate
mount with passthrough (the default) and with --no-passthrough, strip-location off and on.

    scripts/bench.d/readpath.py --pg PHOTOGATE [--work DIR] [--rounds 7] [--sets small,gps,big]
                                [--trace] [--variants native,pt,fb,pt-strip,fb-strip]

Sets (generated once into --work, kept there for the next run):
  small  1,000 files of ~100 KB (90-110 KB, JPEG with GPS first): open, read all, close, warm
  gps    1,000 GPS photos of 2-4 MB with real random content (the bench's GPS-photo row), warm
  big    a 1 GiB video: sequential read warm (1 MiB reads) and 50,000 random 4 KiB preads

Every workload runs in rounds: each round runs every variant once, in a rotating order, after one
warm-up pass of each. The machine is shared and noisy: quote the medians, and the ratio to native
taken round by round (also a median), which holds better than a ratio of two medians.

--trace counts the FUSE requests of one warm pass per mount variant with the kernel's
fuse:fuse_request_send/end tracepoints (a tracefs instance of its own, filtered by the mount's
connection), and the median time from send to end per opcode (the daemon's share: queueing,
the wake-up of a worker, its work, its reply).
"""
import argparse, json, os, statistics, subprocess, sys, time

here = os.path.dirname(os.path.abspath(__file__))

def run(*a, **k):
    return subprocess.run(a, check=True, stdout=subprocess.PIPE, text=True, **k).stdout

def sh(cmd):
    subprocess.run(cmd, shell=True, check=True)

def parse_kv(line):
    return dict(p.split("=", 1) for p in line.split())

class Bench:
    def __init__(self, args):
        self.a = args
        self.pg = args.pg
        self.work = args.work
        self.tool = os.path.join(self.work, "pgbench")
        self.lib = os.path.join(self.work, "library")
        self.mounts = {}

    # --- data ---------------------------------------------------------------------------------
    def prepare(self):
        os.makedirs(self.work, exist_ok=True)
        src = os.path.join(here, "pgbench.c")
        if not os.path.exists(self.tool) or os.path.getmtime(self.tool) < os.path.getmtime(src):
            run("cc", "-O2", "-o", self.tool, src)
        template = os.path.join(here, "..", "demo-photos", "beach.jpg")
        for name, count, lo, hi, seed in (("small", self.a.small, 90_000, 110_000, 11), ("gps", self.a.gps, 2_000_000, 4_000_000, 3)):
            d = os.path.join(self.work, name)
            if not os.path.isdir(d) or len(os.listdir(d)) != count:
                sh(f"rm -rf '{d}'; mkdir -p '{d}'")
                run(self.tool, "gen-photos", d, str(count), str(lo), str(hi), template, str(seed))
                # Names unique across the sets (gen-photos names every file IMG_n.jpg).
                for f in os.listdir(d):
                    os.rename(os.path.join(d, f), os.path.join(d, f.replace("IMG_", name.upper() + "_")))
        video = os.path.join(self.work, "big", "video.mp4")
        if not os.path.exists(video):
            os.makedirs(os.path.dirname(video), exist_ok=True)
            run(self.tool, "gen-video", video, str(self.a.video_mb << 20), "1")
        if not os.path.exists(os.path.join(self.lib, "photogate.sqlite")):
            run(self.pg, "init", "--library", self.lib)
            for name in ("small", "gps", "big"):
                run(self.pg, "import", "--library", self.lib, "--reference", os.path.join(self.work, name))
            for app, strip in (("org.bench.Plain", "off"), ("org.bench.Strip", "on")):
                run(self.pg, "authorize", "--library", self.lib, app, "--access", "read-write", "--status", "authorized")
                run(self.pg, "options", "--library", self.lib, app, "--strip-location", strip)

    # --- mounts -------------------------------------------------------------------------------
    VARIANTS = {  # name: (app, extra mount options)
        "pt": ("org.bench.Plain", []),
        "fb": ("org.bench.Plain", ["--no-passthrough"]),
        "pt-strip": ("org.bench.Strip", []),
        "fb-strip": ("org.bench.Strip", ["--no-passthrough"]),
    }

    def mount_all(self, variants):
        for v in variants:
            if v == "native":
                continue
            # "pt+NAME=VALUE+...": the variant's daemon runs with these environment variables.
            base, *assignments = v.split("+")
            app, extra = self.VARIANTS[base]
            env = dict(os.environ, **dict(a.split("=", 1) for a in assignments))
            mp = os.path.join(self.work, "mnt", v.replace("=", "-"))
            os.makedirs(mp, exist_ok=True)
            run(self.pg, "mount", "--library", self.lib, app, mp, *extra, env=env)
            self.mounts[v] = mp

    def unmount_all(self):
        for v, mp in list(self.mounts.items()):
            try:
                run(self.pg, "unmount", "--library", self.lib, mp)
            except subprocess.CalledProcessError:
                subprocess.run(["fusermount3", "-u", "-z", mp])
            del self.mounts[v]

    def listing(self, variant, name):
        """The list of paths of set `name` as `variant` sees them (same order)."""
        path = os.path.join(self.work, f"list-{name}-{variant}")
        files = sorted(f for f in os.listdir(os.path.join(self.work, name)))
        base = os.path.join(self.work, name) if variant == "native" else self.mounts[variant]
        with open(path, "w") as f:
            for n in files:
                f.write(os.path.join(base, n) + "\n")
        return path

    # --- measuring ----------------------------------------------------------------------------
    def rounds(self, label, variants, cmd_for, metric, higher):
        """Runs cmd_for(variant) in rounds; returns {variant: [values]}."""
        for v in variants:           # warm-up: page caches, dentries, attributes
            subprocess.run(cmd_for(v), check=True, stdout=subprocess.DEVNULL)
        got = {v: [] for v in variants}
        for r in range(self.a.rounds):
            order = variants[r % len(variants):] + variants[:r % len(variants)]
            for v in order:
                out = parse_kv(run(*cmd_for(v)).strip())
                got[v].append(float(out[metric]))
        self.report(label, variants, got, metric, higher)
        return got

    def report(self, label, variants, got, metric, higher):
        print(f"\n{label}  ({metric}; median of {self.a.rounds} rounds; ratio = speed relative to native, "
              f"median of the per-round ratios)")
        base = got.get("native")
        for v in variants:
            vals = got[v]
            med = statistics.median(vals)
            line = f"  {v:18s} {med:12.6g}"
            if base and v != "native":
                per = [(x / b if higher else b / x) for x, b in zip(vals, base)]
                line += f"   ratio {statistics.median(per):.3f}  (rounds: {' '.join(f'{p:.2f}' for p in per)})"
            print(line)
        self.results.append({"workload": label, "metric": metric, "samples": got})

    def run_sets(self, variants):
        self.results = []
        sets = self.a.sets.split(",")
        for name in ("small", "gps"):
            if name not in sets:
                continue
            lists = {v: self.listing(v, name) for v in variants}
            n = self.a.small if name == "small" else self.a.gps
            self.rounds(f"open-read-close {n} files ({name}), warm", variants,
                        lambda v: [self.tool, "orc", lists[v]], "seconds", False)
        if "big" in sets:
            video = {v: (os.path.join(self.work, "big", "video.mp4") if v == "native" else os.path.join(self.mounts[v], "video.mp4"))
                     for v in variants}
            self.rounds("sequential read 1 GiB, warm", variants, lambda v: [self.tool, "seq", video[v]], "gbps", True)
            self.rounds(f"random 4 KiB reads, warm", variants,
                        lambda v: [self.tool, "rand", video[v], str(self.a.rand), "7"], "per_second", True)

    # --- tracing ------------------------------------------------------------------------------
    def trace(self, variants):
        t = "/sys/kernel/tracing"
        if not os.path.isdir(os.path.join(t, "events")):
            subprocess.run(["mount", "-t", "tracefs", "nodev", t])
        inst = os.path.join(t, "instances", "photogate-readpath")
        os.makedirs(inst, exist_ok=True)
        try:
            with open(os.path.join(inst, "buffer_size_kb"), "w") as f:
                f.write("65536")
            for name in [s for s in self.a.sets.split(",") if s in ("small", "gps")]:
                for v in variants:
                    if v == "native":
                        continue
                    lst = self.listing(v, name)
                    subprocess.run([self.tool, "orc", lst], check=True, stdout=subprocess.DEVNULL)  # warm
                    dev = os.stat(self.mounts[v]).st_dev
                    for ev in ("fuse_request_send", "fuse_request_end"):
                        with open(os.path.join(inst, "events", "fuse", ev, "filter"), "w") as f:
                            f.write(f"connection == {dev}")
                    with open(os.path.join(inst, "trace"), "w") as f:
                        f.write("")
                    with open(os.path.join(inst, "events", "fuse", "enable"), "w") as f:
                        f.write("1")
                    out = parse_kv(run(self.tool, "orc", lst).strip())
                    with open(os.path.join(inst, "events", "fuse", "enable"), "w") as f:
                        f.write("0")
                    # The kernel sends RELEASE in the background: wait for the daemon's answers.
                    time.sleep(0.5)
                    with open(os.path.join(inst, "trace")) as f:
                        text = f.read()
                    self.summarize_trace(f"{name} / {v}", text, int(out["files"]), float(out["seconds"]))
        finally:
            with open(os.path.join(inst, "events", "fuse", "enable"), "w") as f:
                f.write("0")
            os.rmdir(inst)

    @staticmethod
    def summarize_trace(label, text, files, seconds):
        sent, lat, count = {}, {}, {}
        for line in text.splitlines():
            if line.startswith("#") or "fuse_request_" not in line:
                continue
            head, _, rest = line.partition(": fuse_request_")
            ts = float(head.split()[-1])
            kind, _, fields = rest.partition(": ")
            parts = fields.split()
            unique = parts[parts.index("req") + 1]
            if kind == "send":
                op = parts[parts.index("opcode") + 2].strip("()")
                sent[unique] = (op, ts)
                count[op] = count.get(op, 0) + 1
            elif kind == "end" and unique in sent:
                op, t0 = sent.pop(unique)
                lat.setdefault(op, []).append((ts - t0) * 1e6)
        print(f"\nFUSE requests, one warm pass: {label}: {files} files in {seconds * 1000:.1f} ms "
              f"({seconds / files * 1e6:.1f} us per file)")
        for op in sorted(count, key=lambda o: -count[o]):
            l = lat.get(op, [])
            med = f"{statistics.median(l):7.1f} us" if l else "      -"
            print(f"  {op:18s} {count[op]:7d}  {count[op] / files:5.2f}/file  median send->end {med}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pg", required=True, help="the photogate binary (a release build)")
    p.add_argument("--work", default="/tmp/photogate-readpath")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--sets", default="small,gps,big")
    p.add_argument("--variants", default="native,pt,fb,pt-strip,fb-strip")
    p.add_argument("--small", type=int, default=1000)
    p.add_argument("--gps", type=int, default=1000)
    p.add_argument("--video-mb", type=int, default=1024)
    p.add_argument("--rand", type=int, default=50000)
    p.add_argument("--trace", action="store_true", help="count FUSE requests per open instead of timing rounds")
    p.add_argument("--json", help="write the samples here")
    a = p.parse_args()
    b = Bench(a)
    b.prepare()
    variants = a.variants.split(",")
    b.mount_all(variants)
    try:
        if a.trace:
            b.trace(variants)
        else:
            b.run_sets(variants)
            if a.json:
                with open(a.json, "w") as f:
                    json.dump(b.results, f)
    finally:
        b.unmount_all()


if __name__ == "__main__":
    main()
