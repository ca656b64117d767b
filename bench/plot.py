#!/usr/bin/env python3
"""Draws GB/s against copy size (log scale) for default, cmt and pinned, one panel per
direction, from a cmt-bench-copy JSON result, as a standalone SVG (no plotting library needed).

usage: bench/plot.py RESULT.json OUT.svg
"""
import json
import os
import tempfile
import math
import sys

MODES = (("default", "#d62728", "CUDA default (pageable)"),
         ("cmt", "#1f77b4", "cmt (pageable)"),
         ("pinned", "#2ca02c", "pinned (ceiling)"))
W, H = 440, 300          # one panel
L, R, T, B = 55, 15, 35, 45  # margins


def size_label(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift:
            return f"{n >> shift}{unit}"
    return str(n)


def panel(results, direction, x0, ymax):
    rows = sorted((r for r in results if r["direction"] == direction and r.get("case", "plain") == "plain"),
                  key=lambda r: r["bytes"])
    if not rows:
        return ""
    lo, hi = math.log2(rows[0]["bytes"]), math.log2(rows[-1]["bytes"])
    span = max(hi - lo, 1)
    px = lambda b: x0 + L + (math.log2(b) - lo) / span * (W - L - R)
    py = lambda g: T + (1 - g / ymax) * (H - T - B)
    out = [f'<text x="{x0 + W / 2}" y="20" text-anchor="middle" font-size="14">'
           f'{"host to device" if direction == "h2d" else "device to host"}</text>',
           f'<line x1="{x0 + L}" y1="{py(0)}" x2="{x0 + W - R}" y2="{py(0)}" stroke="#333"/>',
           f'<line x1="{x0 + L}" y1="{T}" x2="{x0 + L}" y2="{py(0)}" stroke="#333"/>']
    for g in range(0, int(ymax) + 1, 10):
        out.append(f'<line x1="{x0 + L}" y1="{py(g)}" x2="{x0 + W - R}" y2="{py(g)}" '
                   f'stroke="#ddd"/><text x="{x0 + L - 6}" y="{py(g) + 4}" text-anchor="end" '
                   f'font-size="11">{g}</text>')
    for r in rows:
        out.append(f'<text x="{px(r["bytes"])}" y="{py(0) + 16}" text-anchor="middle" '
                   f'font-size="11">{size_label(r["bytes"])}</text>')
    out.append(f'<text x="{x0 + 14}" y="{T + (H - T - B) / 2}" font-size="11" '
               f'transform="rotate(-90 {x0 + 14} {T + (H - T - B) / 2})" '
               f'text-anchor="middle">GB/s (median)</text>')
    for mode, color, _ in MODES:
        pts = " ".join(f"{px(r['bytes']):.1f},{py(r[mode]['median_gbps']):.1f}" for r in rows)
        out.append(f'<polyline class="curve" data-mode="{mode}" data-direction="{direction}" '
                   f'points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
        for r in rows:
            out.append(f'<circle cx="{px(r["bytes"]):.1f}" cy="{py(r[mode]["median_gbps"]):.1f}" '
                       f'r="2.5" fill="{color}"/>')
    return "\n".join(out)


def svg_for(r):
    """The SVG text for one cmt-bench-copy result (its "plain" rows)."""
    results = r["results"]
    ymax = max(x[m]["median_gbps"] for x in results for m, _, _ in MODES
               if x.get("case", "plain") == "plain")
    ymax = math.ceil(ymax / 10) * 10
    m = r["machine"]
    title = f'{m["gpu"]}, {m["cpu"]} ({m["cores"]} cores), {r["date"][:10]}'
    legend = "".join(
        f'<rect x="{60 + i * 200}" y="{H + 12}" width="14" height="4" fill="{c}"/>'
        f'<text x="{80 + i * 200}" y="{H + 18}" font-size="12">{label}</text>'
        for i, (_, c, label) in enumerate(MODES))
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * W}" height="{H + 50}" '
           f'font-family="sans-serif">\n<rect width="100%" height="100%" fill="white"/>\n'
           f'{panel(results, "h2d", 0, ymax)}\n{panel(results, "d2h", W, ymax)}\n{legend}\n'
           f'<text x="{W}" y="{H + 42}" text-anchor="middle" font-size="11" fill="#555">'
           f'{title}</text>\n</svg>\n')
    return svg



def write_replacing(path, text):
    """Writes `text` as the file at `path` through a new file beside it, renamed over it: a
    symlink or FIFO at `path` is replaced, never followed or opened (as cmt's own outputs)."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)),
                               prefix=os.path.basename(path) + ".")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise

def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    write_replacing(sys.argv[2], svg_for(json.load(open(sys.argv[1]))))


if __name__ == "__main__":
    main()
