"""The close trace a mount daemon writes under PHOTOGATE_TRACE_CLOSES (docs/admin.md, "Limits and
settings"): one line per committing close, `close KIND phase=ms ...`. Read by the bench's write
rows (benchlib.close_profile) and by ab-writes.sh."""


def phase_means(path, kind="new", since=0):
    """The closes of kind `kind` ("new" photos, "edit" saves, "rename" saves over a photo) in the
    trace at `path` after byte `since`: (how many, [(phase, mean ms)] in the order a close passes
    them). (0, []) when there is none, or no file."""
    sums, order, n = {}, [], 0
    try:
        with open(path, "rb") as f:
            f.seek(since)
            for line in f.read().decode("utf-8", "replace").splitlines():
                parts = line.split()
                if len(parts) < 3 or parts[0] != "close" or parts[1] != kind:
                    continue
                n += 1
                for kv in parts[2:]:
                    k, _, v = kv.partition("=")
                    if k not in sums:
                        sums[k] = 0.0
                        order.append(k)
                    sums[k] += float(v)
    except (FileNotFoundError, ValueError):
        return 0, []
    return n, [(k, sums[k] / n) for k in order] if n else []
