#!/usr/bin/env python3
"""scripts/bench's report: reads the measurements (JSON lines), prints the table of medians and
ratios, and writes the results as one JSON document.

Ratios are speeds relative to native (1.00 = as fast as native, 0.50 = half as fast), whatever
the unit; `fb/bindfs` is the fallback's speed relative to bindfs (>= 1.00: at least as fast)."""
import json
import sys

VARIANTS = ["native", "passthrough", "fallback", "bindfs"]


def speed(rec):
    """A number that is larger when faster."""
    v = rec.get("median")
    if v is None or v == 0:
        return None
    return v if rec["better"] == "higher" else 1.0 / v


def fmt(v, unit):
    if v is None:
        return "-"
    if unit in ("s",):
        return f"{v * 1000:.1f} ms" if v < 1 else f"{v:.2f} s"
    if unit == "ms":
        return f"{v:.1f} ms"
    if unit == "GB/s":
        return f"{v:.2f} GB/s"
    if unit == "reads/s":
        return f"{v / 1000:.1f}k/s"
    if unit == "MB":
        return f"{v:.0f} MB"
    if unit == "req":
        return f"{v:.2f} req"
    return f"{v:.3g} {unit}"


def ratio(a, b):
    if a is None or b is None:
        return "-"
    return f"{a / b:.2f}"


def write(src, out_json, meta):
    """Prints the table of the measurements in `src` (JSON lines) and writes `out_json` and the
    table beside it (.md)."""
    records = [json.loads(line) for line in open(src) if line.strip()]
    order, rows = [], {}
    for r in records:
        key = r["workload"]
        if key not in rows:
            order.append(key)
            rows[key] = {"label": r["label"], "unit": r["unit"], "better": r["better"], "variants": {}, "notes": []}
        rows[key]["variants"][r["variant"]] = r
        # A column variant's note stands alone; another variant's is printed with its value below.
        if r.get("note") and (r["variant"] in VARIANTS or r.get("median") is None):
            rows[key]["notes"].append(f'{r["variant"]}: {r["note"]}')

    header = ["workload", "native", "passthrough", "fallback", "bindfs", "pt/native", "fb/native", "bindfs/native", "fb/bindfs"]
    table = []
    for key in order:
        row = rows[key]
        v = row["variants"]
        cells = [row["label"]]
        for name in VARIANTS:
            rec = v.get(name)
            if rec and rec.get("median") is None and (rec.get("note") or "").startswith("n/a"):
                cells.append(rec["note"])  # e.g. "n/a (EACCES)": not measurable on this build
            else:
                cells.append(fmt(rec.get("median"), row["unit"]) if rec else "")
        s = {name: speed(v[name]) if name in v else None for name in VARIANTS}
        cells += [ratio(s["passthrough"], s["native"]), ratio(s["fallback"], s["native"]),
                  ratio(s["bindfs"], s["native"]), ratio(s["fallback"], s["bindfs"])]
        table.append(cells)
        for name, sp in s.items():
            if name in v:
                v[name]["speed_vs_native"] = (sp / s["native"]) if sp and s["native"] else None

    # Interleaved rows: passthrough against native and the fallback against bindfs, round by
    # round (both ran in the same round, so a slow phase of the machine lands on both). On a
    # noisy disk this says more than a ratio of two medians.
    for key in order:
        row = rows[key]
        pairs = [("passthrough", "native", "pt/native"), ("fallback", "bindfs", "fb/bindfs")]
        if "bindfs" not in row["variants"]:   # rows without bindfs: the fallback against native
            pairs.append(("fallback", "native", "fb/native"))
        for a_name, b_name, label in pairs:
            a_rec, b_rec = row["variants"].get(a_name), row["variants"].get(b_name)
            if not (a_rec and b_rec and a_rec.get("paired") and b_rec.get("paired")):
                continue
            a, b = a_rec.get("samples") or [], b_rec.get("samples") or []
            if len(a) != len(b) or len(a) < 3 or any(x <= 0 for x in a + b):
                continue
            per = sorted((x / y) if row["better"] == "higher" else (y / x) for x, y in zip(a, b))
            mid = per[len(per) // 2] if len(per) % 2 else (per[len(per) // 2 - 1] + per[len(per) // 2]) / 2
            wins = sum(1 for r in per if r >= 1.0)
            row.setdefault("per_round", {})[label] = {"median": mid, "wins": wins, "rounds": len(per)}
            row["notes"].append(f"{label} round by round: median {mid:.2f}, {a_name} at least as fast in {wins} of {len(per)} rounds")

    # Variants outside the table's columns (the no-open mount): a note each, with its ratio to
    # native, round by round where both ran in the same rounds.
    for key in order:
        row = rows[key]
        nat = row["variants"].get("native")
        for name, rec in row["variants"].items():
            if name in VARIANTS or rec.get("median") is None:   # a note says it already
                continue
            sp, sn = speed(rec), (speed(nat) if nat else None)
            text = f"{name}: {fmt(rec.get('median'), row['unit'])}" + (f", {sp / sn:.2f} of native" if sp and sn else "")
            if rec.get("note"):
                text += f" ({rec['note']})"
            a, b = rec.get("samples") or [], (nat or {}).get("samples") or []
            if rec.get("paired") and nat and nat.get("paired") and len(a) == len(b) >= 3 and all(x > 0 for x in a + b):
                per = sorted((x / y) if row["better"] == "higher" else (y / x) for x, y in zip(a, b))
                mid = per[len(per) // 2] if len(per) % 2 else (per[len(per) // 2 - 1] + per[len(per) // 2]) / 2
                text += f" (round by round: median {mid:.2f})"
                row.setdefault("per_round", {})[f"{name}/native"] = {"median": mid, "rounds": len(per)}
            row["notes"].append(text)
            if nat:
                rec["speed_vs_native"] = (sp / sn) if sp and sn else None

    widths = [max(len(str(c[i])) for c in [header] + table) for i in range(len(header))]
    lines = ["| " + " | ".join(h.ljust(widths[i]) for i, h in enumerate(header)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    for c in table:
        lines.append("| " + " | ".join(str(x).ljust(widths[i]) for i, x in enumerate(c)) + " |")
    notes = [f"- {rows[k]['label']}: {n}" for k in order for n in rows[k]["notes"]]
    text = "\n".join(lines)
    if notes:
        text += "\n\nNotes:\n" + "\n".join(notes)
    print(text)
    with open(out_json, "w") as f:
        json.dump({"meta": meta, "workloads": [dict(workload=k, **rows[k]) for k in order]}, f, indent=2)
    with open(out_json.rsplit(".", 1)[0] + ".md", "w") as f:
        f.write(text + "\n")


def main():
    write(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]) if len(sys.argv) > 3 else {})


if __name__ == "__main__":
    main()
