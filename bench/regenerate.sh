#!/bin/sh
# Regenerates what the README shows from bench/results/: the plot of the latest copy sweep, its
# Markdown table (printed), and the results page bench/results/index.html.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
sweep=$here/results/2026-12-01-h200-bench-copy-0a63cc7-warm
python3 "$here/plot.py" "$sweep.json" "$sweep.svg"
python3 "$here/summarize.py" "$sweep.json"
python3 "$here/site.py" "$here/results/index.html"
