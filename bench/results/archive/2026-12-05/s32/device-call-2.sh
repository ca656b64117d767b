#!/bin/sh
# Session 32's second device call, on the machine call 1 left warm: the whole concurrent
# benchmark, 4a410b7 (before session 31's pool fix) against this tree, 2 rounds, processes
# alternating.
# Run under a 330 s device limit (the budget left), shorter than the script's own 560 s: it was
# killed before it packed, and of its runs only the first 8 files (all of this tree's) came back
# (call2/); its old-build runs were lost, so call 3 ran the benchmark again, one round.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
[ -x build-old/cmt ] && [ -x build-gpu/cmt ] || { echo "no builds: call 1 first"; exit 1; }
timeout 560 python3 bench/versus_concurrent.py build-old/cmt build-gpu/cmt --rounds 2 \
  --out $o/versus --json $o/versus.json > $o/versus.txt 2>&1
[ -f $o/versus.json ] || python3 bench/versus_concurrent.py --runs $o/versus --json $o/versus.json > $o/versus.txt 2>&1
cat $o/versus.txt
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
