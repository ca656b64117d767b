#!/usr/bin/env python3
"""The file children's 16 MiB staging scenarios, child by child, from loaders.py --json (session 45,
call 2): GB/s, the setup (GPU tensor and pinned buffer), the reads' and the copies' sums, medians
and largest, the copies' time in tenths of the run, and the context switches of each thread
name's threads (voluntary, involuntary). usage: staging_rows.py LOADERS.json"""
import json
import sys


def main():
    doc = json.load(open(sys.argv[1]))
    for mode, children in doc.get("file_children", {}).items():
        for k, child in enumerate(children):
            for name, st in child.get("staging", {}).items():
                if "16M" not in name:
                    continue
                r, c = st.get("read", {}), st.get("copy", {})
                print(f"{mode:7s} {k} {name:17s} {child['gbps'][name]:5.1f} GB/s setup "
                      f"{st.get('setup_ms')} ms  reads {r.get('sum_ms')} (med {r.get('median_ms')}"
                      f" top {r.get('top_ms', [])[:3]})  copies {c.get('sum_ms')} (med "
                      f"{c.get('median_ms')} top {c.get('top_ms', [])[:3]})  tenths "
                      f"{st.get('copy_tenths_ms')}  switches "
                      f"{child.get('threads_switches', {}).get(name)}")


if __name__ == "__main__":
    main()
