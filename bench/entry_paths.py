#!/usr/bin/env python3
"""Each way a program reaches CUDA, with and without cmt: taken or not, and the speed ratio.

C++ programs (bench/entry_bench.cpp built with dynamic cudart, static cudart, and static cudart
with the per-thread default stream) copy 256 MiB each way with cudaMemcpy; the Python frameworks
(PyTorch, CuPy, JAX) copy 1 GiB each way through tests/gpu_framework_test.py. Every run is its own
process; runs with and without cmt alternate; "without" is `cmt run` with CMT_DISABLE=1, so the
launcher is the same. Bytes are checked in every copy.

usage: entry_paths.py BUILD_DIR [--json FILE] [--rounds N]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))
import machine_meta  # noqa: E402
from gpu_framework_test import summarize  # noqa: E402  (the same summary as the framework rows)


def run_program(cmt, argv, with_cmt):
    stats = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    env = dict(os.environ, CMT_STATS=stats)
    if not with_cmt:
        env["CMT_DISABLE"] = "1"
    out = subprocess.run([cmt, "run", "--"] + argv, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {out.returncode}: {out.stderr[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["stats"] = json.load(open(stats))
    os.unlink(stats)
    return result


def cpp_row(cmt, program, rounds):
    runs = {"default": [], "cmt": []}
    for _ in range(rounds):
        for mode in ("default", "cmt"):
            runs[mode].append(run_program(cmt, [program], mode == "cmt"))
    row = {mode: summarize(results, results[0]["bytes"]) for mode, results in runs.items()}
    row["bytes"] = runs["cmt"][0]["bytes"]
    return row


def framework_row(cmt, name):
    out_json = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    test = os.path.join(ROOT, "tests", "gpu_framework_test.py")
    p = subprocess.run([sys.executable, test, cmt, name, "--json", out_json], capture_output=True, text=True)
    print(p.stdout, end="")
    if p.returncode == 77:
        return None
    if p.returncode != 0:
        raise RuntimeError(f"{name}: {p.stdout[-1000:]} {p.stderr[-2000:]}")
    row = json.load(open(out_json))
    row["bytes"] = 1 << 30
    return row


def main():
    p = argparse.ArgumentParser(prog="entry_paths.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("build", metavar="BUILD_DIR")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args()
    build, rounds = args.build, args.rounds
    cmt = os.path.join(build, "cmt")
    rows = {}
    for label, exe in (("dynamic cudart", "cmt-entry-bench-dynamic"),
                       ("static cudart (nvcc default)", "cmt-entry-bench-static"),
                       ("static cudart, per-thread default stream", "cmt-entry-bench-static_ptds")):
        rows[label] = cpp_row(cmt, os.path.join(build, exe), rounds)
        print(label, json.dumps(rows[label]["cmt"]["taken_via"]), flush=True)
    for name in ("torch", "cupy", "jax"):
        try:
            row = framework_row(cmt, name)
        except RuntimeError as e:
            print(f"{name}: failed: {e}", file=sys.stderr)
            row = {"error": str(e)[-500:]}
        if row is not None:
            rows[{"torch": "PyTorch", "cupy": "CuPy", "jax": "JAX"}[name]] = row

    print()
    print("| entry path | copy | taken by cmt (via) | H2D default -> cmt GB/s | ratio | D2H default -> cmt GB/s | ratio |")
    print("|---|---|---|---|---|---|---|")
    for label, r in rows.items():
        if "error" in r:
            print(f"| {label} | | failed | | | | |")
            continue
        d, c = r["default"], r["cmt"]
        via = ", ".join(f"{k} {v}" for k, v in c["taken_via"].items() if v) or "-"
        taken = f"yes, {c['taken_calls']} ({via})" if c["taken_calls"] else "no"
        print(f"| {label} | {r['bytes'] >> 20} MiB | {taken} | {d['h2d_gbps']:.1f} -> {c['h2d_gbps']:.1f} | "
              f"{c['h2d_gbps'] / d['h2d_gbps']:.2f}x | {d['d2h_gbps']:.1f} -> {c['d2h_gbps']:.1f} | "
              f"{c['d2h_gbps'] / d['d2h_gbps']:.2f}x |")
    if args.json:
        doc = dict(machine_meta.meta(cmt, sys.argv), rows=rows)
        json.dump(doc, open(args.json, "w"), indent=2)


if __name__ == "__main__":
    main()
