#!/usr/bin/env python3
"""Builds the results page: one self-contained HTML file (no scripts, no external files, readable
offline) with, for each copy benchmark result in bench/results/, its GB/s-against-size curves and
table, and for each shared profile in configs/, its machine, knobs and what the tuner measured.

usage: bench/site.py OUT.html [RESULTS_DIR] [CONFIGS_DIR]
"""
import glob
import html
import json
import os
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import plot  # noqa: E402  (bench/plot.py, beside this file)

CSS = """
body { font-family: sans-serif; max-width: 960px; margin: 2em auto; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1em; }
td, th { border: 1px solid #ddd; padding: 2px 8px; text-align: right; }
th { background: #f4f4f4; } td.l, th.l { text-align: left; }
.meta { color: #555; font-size: 0.9em; }
"""


def size(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def result_section(path, r):
    m = r["machine"]
    cases = {"plain": "", "fresh": " (fresh pages)", "mmap": " (mmap'd file)"}
    rows = "".join(
        f"<tr><td>{size(x['bytes'])}</td><td class=l>{x['direction']}{cases.get(x.get('case', 'plain'), '')}</td>"
        + "".join(f"<td>{x[k]['median_gbps']:.1f}</td>" for k in ("default", "cmt", "pinned"))
        + f"<td>{x['cmt_over_default']:.2f}x</td><td>{x['cmt_over_pinned']:.2f}</td></tr>"
        for x in r["results"])
    env = ", ".join(f"{k}={v}" for k, v in r.get("env", {}).items()) or "cmt's configuration for the machine"
    has_plain = any(x.get("case", "plain") == "plain" for x in r["results"])
    return (f'<section class="machine" id="{html.escape(os.path.basename(path))}">'
            f"<h2>{html.escape(m['gpu'])} &middot; {html.escape(m['cpu'])} ({m['cores']} cores)</h2>"
            f'<p class="meta">{html.escape(r["date"])} &middot; driver {m["driver"]} &middot; '
            f"{r['reps']} repetitions, median GB/s &middot; wrong copies: {r['wrong_copies']} &middot; "
            f"{html.escape(env)} &middot; <code>{html.escape(os.path.basename(path))}</code></p>"
            + (plot.svg_for(r) if has_plain else "")
            + "<table><tr><th>size</th><th class=l>direction</th><th>CUDA default</th><th>cmt</th>"
            "<th>pinned</th><th>cmt / default</th><th>cmt / pinned</th></tr>"
            f"{rows}</table></section>")


def profile_section(path, p):
    m = p.get("machine", {})
    knobs = "".join(f"<tr><td class=l>{html.escape(k)}</td><td class=l>{html.escape(str(v))}</td></tr>"
                    for k, v in sorted(p.get("cmt", {}).items()))
    meas = p.get("measured", {})
    copies = "".join(
        f"<tr><td>{html.escape(str(c.get('bytes')))}</td><td class=l>{html.escape(str(c.get('direction')))}</td>"
        + "".join(f"<td>{c.get(k, 0):.1f}</td>" for k in ("cuda_gbps", "builtin_gbps", "tuned_gbps", "pinned_gbps"))
        + "</tr>" for c in meas.get("copies", []))
    return (f'<section class="profile"><h2>Profile {html.escape(os.path.basename(path))}</h2>'
            f'<p class="meta">{html.escape(str(m.get("cpu", "?")))}, {m.get("cpus", "?")} CPUs, GPUs '
            f'{html.escape(", ".join(m.get("gpus", [])))}, {html.escape(str(m.get("pcie", "")))}, '
            f'driver {html.escape(str(m.get("driver", "?")))} &middot; cmt {html.escape(str(p.get("cmt_version", "?")))}'
            f' &middot; search {html.escape(str(meas.get("search", "?")))} on {html.escape(str(meas.get("date", "?")))}'
            f' ({meas.get("seconds", "?")} s)</p>'
            f"<table><tr><th class=l>knob</th><th class=l>value</th></tr>{knobs}</table>"
            + ("<table><tr><th>size</th><th class=l>direction</th><th>CUDA</th><th>cmt defaults</th>"
               f"<th>tuned</th><th>pinned</th></tr>{copies}</table>" if copies else "")
            + "</section>")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    results_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "results")
    configs_dir = sys.argv[3] if len(sys.argv) > 3 else os.path.join(os.path.dirname(HERE), "configs")
    sections = []
    for path in sorted(glob.glob(os.path.join(results_dir, "**", "*.json"), recursive=True)):
        try:
            r = json.load(open(path))
        except ValueError:
            continue
        if r.get("benchmark") == "cmt-bench-copy" and r.get("results"):
            sections.append(result_section(path, r))
    profiles = []
    for path in sorted(glob.glob(os.path.join(configs_dir, "*.toml"))):
        with open(path, "rb") as f:
            profiles.append(profile_section(path, tomllib.load(f)))
    page = ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>cmt results</title>"
            f"<style>{CSS}</style></head><body><h1>cmt: pageable host &harr; GPU copies</h1>"
            "<p>GB/s against copy size for CUDA's default pageable path, cmt and pinned memory, "
            "measured by <code>cmt bench copy</code> on each machine; then the tuned profiles "
            "shared in <code>configs/</code>. Generated by <code>bench/site.py</code> from the "
            "files in the repository.</p>"
            + "".join(sections) + "".join(profiles) + "</body></html>\n")
    open(out, "w").write(page)
    print(f"{out}: {len(sections)} results, {len(profiles)} profiles")


if __name__ == "__main__":
    main()
