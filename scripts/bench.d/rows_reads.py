"""scripts/bench's read rows: sequential, random, open-read-close of photos and of small files, and
the FUSE request profile of an open (issue 18)."""
import os
import signal
import subprocess

from benchlib import (COLD_RUNS, PHOTOS, PROFILE_OPENS, RAND_READS, SMALL, SMALL_KB, TOOL, VARIANTS, Failed, drop_caches,
                      gigabytes, interleaved, listing, mount_info, read_mounts, record, row, sh, small_files,
                      video_label, w, wait_until, write_list)


@row("seq-warm", "reads")
def seq_warm():
    video = read_mounts()["video"]
    interleaved("seq-warm", f"sequential read {video_label()}, warm", lambda v: [TOOL, "seq", video[v]],
                rate=gigabytes(), unit="GB/s")


@row("seq-cold", "reads")
def seq_cold():
    video = read_mounts()["video"]
    # Single cold runs vary up to 2x on a busy machine, for every variant: more rounds.
    interleaved("seq-cold", f"sequential read {video_label()}, cold", lambda v: [TOOL, "seq", video[v]],
                prepare=drop_caches, warmup=0, runs=COLD_RUNS, rate=gigabytes(), unit="GB/s")


@row("seq-mount-cold", "reads")
def seq_mount_cold():
    """The store's copy cached and only the mount's cache cold: the disk's swings are out of it,
    so it measures what the FUSE path itself costs per byte (a file just imported or just read
    by another app is read this way)."""
    video = read_mounts()["video"]

    def cache_store():
        drop_caches()
        sh(TOOL, "seq", video["native"])
    interleaved("seq-mount-cold", f"sequential read {video_label()}, store cached, mount cold",
                lambda v: [TOOL, "seq", video[v]], prepare=cache_store, warmup=0, runs=COLD_RUNS,
                rate=gigabytes(), unit="GB/s")


@row("rand-4k", "reads")
def rand_4k():
    video = read_mounts()["video"]
    interleaved("rand-4k", "random 4 KiB reads, warm", lambda v: [TOOL, "rand", video[v], RAND_READS, 7],
                rate=RAND_READS, unit="reads/s")


@row("orc", "reads")
def orc():
    """Each run after dropping the caches: native and passthrough read the same backing pages,
    so without the drop whichever ran second in a round would find the photos cached."""
    photos = read_mounts()["photos"]
    lists = {v: write_list(f"list-{v}", listing(d, limit=PHOTOS)) for v, d in photos.items()}
    interleaved("orc", f"open-read-close {PHOTOS} photos", lambda v: [TOOL, "orc", lists[v]],
                prepare=drop_caches, warmup=0)


@row("small-warm", "reads")
def small_warm():
    """Issue 18: for files of ~100 KB the floor is the round trips per open, not the bytes."""
    lists = small_files()["lists"]
    interleaved("small-warm", f"open-read-close {SMALL} files of ~{SMALL_KB} KB, warm",
                lambda v: [TOOL, "orc", lists[v]], variants=VARIANTS + ["no-open"], warmup=1)


# FUSE opcodes (linux/fuse.h) the profile names; the rest are counted as "other".
OPCODES = {1: "lookup", 3: "getattr", 14: "open", 15: "read", 25: "flush", 18: "release", 2: "forget",
           42: "forget", 22: "getxattr", 34: "access", 27: "opendir", 28: "readdir", 44: "readdirplus",
           29: "releasedir", 46: "lseek", 52: "statx"}
PROFILE_KINDS = ["lookup", "getattr", "open", "read", "flush", "release"]


def fuse_requests(pid, cmd):
    """Runs `cmd` while strace follows the daemon's reads of /dev/fuse, and counts the requests
    by opcode (bytes 4-7 of each request's header, little-endian)."""
    fd_dev = next((fd for fd in os.listdir(f"/proc/{pid}/fd")
                   if os.readlink(f"/proc/{pid}/fd/{fd}") == "/dev/fuse"), None)
    if fd_dev is None:
        raise Failed("the daemon has no /dev/fuse open")
    out = w(f"strace-{pid}.txt")
    tracer = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=read", "-e", "signal=none", "-xx", "-s", "16",
                               "-o", out, "-p", str(pid)], stderr=subprocess.PIPE, text=True)
    try:
        # strace is attached once the daemon's threads show it as their tracer.
        def attached():
            return all(open(f"/proc/{pid}/task/{t}/status").read().split("TracerPid:")[1].split()[0] != "0"
                       for t in os.listdir(f"/proc/{pid}/task"))
        wait_until("strace to attach", attached, timeout=30)
        sh(*cmd)
    finally:
        tracer.send_signal(signal.SIGINT)
        tracer.wait(timeout=60)
    # Lines are "TID read(FD, "\\x..."..., N) = M", or split in two when threads interleave:
    # "TID read(FD,  <unfinished ...>" then "TID <... read resumed>"\\x..."..., N) = M".
    counts, pending = {}, {}
    for line in open(out):
        # strace pads the TID column ("9579  read(" but "12345 read("): split on the first run of blanks.
        tid, _, rest = line.partition(" ")
        rest = rest.lstrip(" ")
        if rest.startswith("read("):
            fd = rest[5:].split(",", 1)[0]
            if rest.rstrip().endswith("<unfinished ...>"):
                pending[tid] = fd
                continue
        elif rest.startswith("<... read resumed>"):
            fd = pending.pop(tid, None)
        else:
            continue
        if fd != fd_dev or '"' not in rest or rest.rstrip().endswith("= -1") or " = -1 " in rest:
            continue
        raw = rest.split('"', 2)[1]
        b = bytes(int(x, 16) for x in raw.split("\\x")[1:])
        if len(b) >= 8:
            kind = OPCODES.get(int.from_bytes(b[4:8], "little"), "other")
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def profile(workload, state, prepare):
    """FUSE requests the daemons of the small-file mounts receive per open+read+close of a
    ~100 KB file, by kind; `prepare` runs before each traced pass."""
    small = small_files()
    lib, n = small["lib"], min(PROFILE_OPENS, SMALL)
    label = f"FUSE requests per open+read+close (~{SMALL_KB} KB, {state})"
    for v in ("passthrough", "fallback", "no-open"):
        mp = small["dirs"][v]
        paths = listing(mp, limit=n)
        lst = write_list(f"list-profile-{v}", paths)
        prepare(lst)
        try:
            counts = fuse_requests(mount_info(lib, mp)["pid"], [TOOL, "orc", lst])
        except (Failed, OSError) as e:
            record(workload, label, v, "req", "lower", None, note=f"failed: {e}")
            continue
        per = {k: counts.get(k, 0) / len(paths) for k in set(PROFILE_KINDS) | set(counts)}
        note = ", ".join(f"{k} {per.get(k, 0):.2f}" for k in PROFILE_KINDS + sorted(set(per) - set(PROFILE_KINDS)))
        record(workload, label, v, "req", "lower", sum(per.values()), note=f"per open: {note}")


@row("fuse-profile", "reads")
def fuse_profile():
    """Issue 18: where an open spends its round trips, warm (the files were read just before:
    pages, entries and attributes cached)."""
    profile("fuse-profile", "warm", lambda lst: sh(TOOL, "orc", lst))


@row("fuse-profile-cold", "reads")
def fuse_profile_cold():
    """The same after dropping the caches (the kernel forgot entries, attributes and pages)."""
    profile("fuse-profile-cold", "cold", lambda lst: drop_caches())
