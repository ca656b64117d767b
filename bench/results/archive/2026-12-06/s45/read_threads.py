#!/usr/bin/env python3
"""The file children's staging scenarios, child by child, from loaders.py --json (session 45): GB/s,
seconds inside the reads, and the CPU seconds of cmt's copy threads and of the others while the
scenario ran, to see what the 16 MiB reads' slow state (lab/NOTES.md 84) is: copy threads absent
(asleep, the issuer reading alone), present but slow, or crowded out by other threads.
usage: read_threads.py LOADERS.json"""
import json
import sys


def main():
    doc = json.load(open(sys.argv[1]))
    for mode, children in doc.get("file_children", {}).items():
        for k, child in enumerate(children):
            for name, gbps in child.get("gbps", {}).items():
                if "pinned" not in name:
                    continue
                used = child.get("threads_cpu_s", {}).get(name, {})
                copy = used.get("cmt-copy", [])
                others = sorted(((n, sum(v), len(v)) for n, v in used.items() if n != "cmt-copy"),
                                key=lambda x: -x[1])[:4]
                print(f"{mode:8s} child {k} {name:18s} {gbps:5.1f} GB/s  reads "
                      f"{child.get('read_s', {}).get(name, 0):.3f} s  cmt-copy {sum(copy):.2f} s "
                      f"in {len(copy)} (top {copy[:3]})  others "
                      + ", ".join(f"{n} {s:.2f} s/{c}" for n, s, c in others))


if __name__ == "__main__":
    main()
