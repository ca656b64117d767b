#!/usr/bin/env python3
"""What the preload costs a process that never copies (issue 31, finding 5): the time to start,
run and end a process, without cmt and with cmt's libraries preloaded as `cmt run` preloads them
(libcmt.so and libcmt-host.so, or its AVX2 build), measured two ways:

  true    a shell loop starting /bin/true 500 times (the shell itself started once)
  script  a shell script that starts 200 processes of eight common tools (true, cat, expr, sed,
          date, basename, wc, env), as build and launcher scripts do

Each round runs every mode once, in turn (plain, cmt, and with --versus another build's
libraries), and the rounds alternate so the machine's drift falls on all alike. Reported: the
median of the rounds, their spread, and the cost each process pays under the preload, in
milliseconds ((preloaded - plain) / processes).

usage: start_cost.py BUILD_DIR [--rounds N] [--versus OTHER_BUILD_DIR] [--json FILE]
"""
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import machine_meta  # noqa: E402

TRUE_LOOP = 'i=0; while [ $i -lt 500 ]; do /bin/true; i=$((i+1)); done'
SCRIPT = """
i=0
while [ $i -lt 25 ]; do
  /bin/true; echo x | cat > /dev/null; expr $i + 1 > /dev/null; echo abc | sed s/b/c/ > /dev/null
  date > /dev/null; basename /a/b > /dev/null; echo a b | wc -w > /dev/null; env > /dev/null
  i=$((i+1))
done
"""
# Processes each workload starts, the shell included.
PROCESSES = {"true": 501, "script": 201}


def preload_of(build):
    """As `cmt run` preloads them: the hooks' AVX2 build where this processor has AVX2."""
    host = f"{build}/libcmt-host-avx2.so"
    if not (os.path.exists(host) and " avx2" in open("/proc/cpuinfo").read()):
        host = f"{build}/libcmt-host.so"
    return f"{build}/libcmt.so:{host}"


def timed(workload, preload):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    code = TRUE_LOOP if workload == "true" else SCRIPT
    t0 = time.perf_counter()
    p = subprocess.run(["/bin/sh", "-c", code], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"start_cost.py: {workload} failed ({p.returncode}): {p.stderr[-300:]}")
    return seconds, len(p.stderr.splitlines())


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    build = os.path.abspath(args[0])
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 9
    modes = {"plain": "", "cmt": preload_of(build)}
    if "--versus" in args:
        modes["versus"] = preload_of(os.path.abspath(args[args.index("--versus") + 1]))
    doc = dict(machine_meta.meta(f"{build}/cmt", sys.argv), rounds=rounds, processes=PROCESSES)
    for workload in ("true", "script"):
        times = {m: [] for m in modes}
        noise = {m: 0 for m in modes}  # lines the processes wrote to stderr (the loader's, say)
        timed(workload, modes["cmt"])  # warm the page cache
        for _ in range(rounds):
            for m, preload in modes.items():
                seconds, lines = timed(workload, preload)
                times[m].append(seconds)
                noise[m] = max(noise[m], lines)
        n = PROCESSES[workload]
        plain = statistics.median(times["plain"])
        result = {}
        for m, v in times.items():
            med = statistics.median(v)
            result[m] = {"median_s": round(med, 4), "spread": round((max(v) - min(v)) / med, 3),
                         "per_process_ms": round(med / n * 1e3, 4),
                         "added_per_process_ms": round((med - plain) / n * 1e3, 4),
                         "stderr_lines": noise[m]}
        doc[workload] = result
        line = ", ".join(f"{m} {r['median_s']:.3f} s (spread {r['spread']:.0%}, "
                         f"+{r['added_per_process_ms']:.3f} ms a process"
                         + (f", {r['stderr_lines']} lines on stderr" if r["stderr_lines"] else "") + ")"
                         for m, r in result.items())
        print(f"{workload} ({n} processes, medians of {rounds}): {line}", flush=True)
    if "--json" in args:
        with open(args[args.index("--json") + 1], "w") as f:
            json.dump(doc, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
