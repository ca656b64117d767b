#!/usr/bin/env python3
"""Draws a cmt-bench-concurrent JSON result as a standalone SVG (no plotting library needed): for
each copy size and pattern, a bar per mode (default, cmt, pinned) of the aggregate GB/s, the
both-ways bars split into host-to-device (solid) and device-to-host (light). The aggregate is all
threads' bytes over the span of all their windows. A dashed line marks the staging bound (the
host's best all-CPU memcpy rate).

usage: bench/plot_concurrent.py RESULT.json OUT.svg
"""
import json
import sys

from plot import write_replacing  # the copy plot, installed beside this one

MODES = (("default", "#d62728"), ("cmt", "#1f77b4"), ("pinned", "#2ca02c"))
BAR, GAP, GROUP_GAP = 26, 4, 34
L, R, T, B, H = 60, 20, 50, 86, 376


def size_label(n):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)



def main():
    doc = json.load(open(sys.argv[1]))
    rows = doc["results"]
    several_sets = len({tuple(r.get("gpus", [0])) for r in rows}) > 1
    bound = doc.get("staging_bound_gbps", 0)
    ymax = max([bound] + [r[m]["total_gbps"] for r in rows for m, _ in MODES]) * 1.1 or 1
    group = len(MODES) * (BAR + GAP)
    width = max(620, L + R + len(rows) * (group + GROUP_GAP))
    py = lambda g: T + (1 - g / ymax) * (H - T - B)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{H}" '
           f'font-family="sans-serif" font-size="11">',
           f'<text x="{width / 2}" y="18" text-anchor="middle" font-size="13">'
           f'{doc["threads"]} threads {"per GPU " if several_sets else ""}at once, {doc["stream"]} stream(s), {doc["gpu"]}, '
           f'{doc["date"][:10]}: aggregate GB/s</text>']
    step = 10 if ymax > 40 else 5
    for g in range(0, int(ymax) + 1, step):
        out.append(f'<line x1="{L}" y1="{py(g)}" x2="{width - R}" y2="{py(g)}" stroke="#e5e5e5"/>'
                   f'<text x="{L - 6}" y="{py(g) + 4}" text-anchor="end">{g}</text>')
    for i, r in enumerate(rows):
        x0 = L + GROUP_GAP / 2 + i * (group + GROUP_GAP)
        for k, (mode, color) in enumerate(MODES):
            cell = r[mode]
            x = x0 + k * (BAR + GAP)
            fill = color
            if r["pattern"] == "both":
                h2d, d2h = cell["h2d_gbps"], cell["d2h_gbps"]
                out.append(f'<rect x="{x}" y="{py(h2d)}" width="{BAR}" height="{py(0) - py(h2d)}" fill="{fill}"/>')
                out.append(f'<rect x="{x}" y="{py(h2d + d2h)}" width="{BAR}" height="{py(h2d) - py(h2d + d2h)}" '
                           f'fill="{fill}" fill-opacity="0.45"/>')
            else:
                t = cell["total_gbps"]
                out.append(f'<rect x="{x}" y="{py(t)}" width="{BAR}" height="{py(0) - py(t)}" fill="{fill}"/>')
            out.append(f'<text x="{x + BAR / 2}" y="{py(cell["total_gbps"]) - 3}" text-anchor="middle" '
                       f'font-size="9">{cell["total_gbps"]:.0f}</text>')
        gpus = r.get("gpus", [0])
        label = f'{size_label(r["bytes"])} {r["pattern"]}'
        if several_sets:
            out.append(f'<text x="{x0 + group / 2}" y="{H - B + 30}" text-anchor="middle">'
                       f'GPU {",".join(map(str, gpus))}</text>')
        out.append(f'<text x="{x0 + group / 2}" y="{H - B + 16}" text-anchor="middle">{label}</text>')
    if bound:
        out.append(f'<line x1="{L}" y1="{py(bound)}" x2="{width - R}" y2="{py(bound)}" stroke="#555" '
                   f'stroke-dasharray="5,4"/><text x="{width - R}" y="{py(bound) - 4}" text-anchor="end">'
                   f'staging bound {bound:.0f} GB/s</text>')
    lx = L
    for mode, color in MODES:
        out.append(f'<rect x="{lx}" y="{H - 44}" width="12" height="12" fill="{color}"/>'
                   f'<text x="{lx + 16}" y="{H - 34}">{mode}</text>')
        lx += 80
    out.append(f'<text x="{L}" y="{H - 12}">both: solid host-to-device, light device-to-host; '
               f'aggregate: all bytes over the span of all windows</text>')
    out.append("</svg>")
    write_replacing(sys.argv[2], "\n".join(out) + "\n")


if __name__ == "__main__":
    main()
