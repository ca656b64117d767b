#!/bin/sh
# Session 32's third device call, typed inline on the machine still warm (H100; builds of call 1):
# the whole concurrent benchmark, 4a410b7 against this tree, one round, then the file loaders
# (default against cmt, 2 rounds, one recorded cmt round), `cmt trace show` of the trace and
# `cmt bench replay` of it back to back.
s=$(date +%s); o=$OUT/r; mkdir -p $o; pk() { (cd $OUT && tar czf r.tgz r); }
timeout 170 python3 bench/versus_concurrent.py build-old/cmt build-gpu/cmt --rounds 1 --out $o/versus --json $o/versus.json > $o/versus.txt 2>&1
[ -f $o/versus.json ] || python3 bench/versus_concurrent.py --runs $o/versus --json $o/versus.json > $o/versus.txt 2>&1
cat $o/versus.txt; pk; echo "at $(( $(date +%s) - s ))"
CMT_CONFIGS_DIR= PYTHONUNBUFFERED=1 timeout 170 python3 bench/workloads/loaders.py build-gpu/cmt --rounds 2 --files-only --record $o/rec --workdir /tmp/cmt-loaders --json $o/files.json > $o/files.txt 2>&1
grep -v "^child\|Writing" $o/files.txt | tail -14; pk
build-gpu/cmt trace show $o/rec/files-cmt.tsv > $o/rec/files-cmt.show.txt 2>&1
t=$(( 420 - ($(date +%s) - s) )); [ $t -gt 20 ] && CMT_CONFIGS_DIR= timeout $t build-gpu/cmt bench replay $o/rec/files-cmt.tsv --gap-scale 0 --rounds 2 --json $o/rec/replay-files-gap0.json > $o/rec/replay-files-gap0.txt 2>&1
tail -8 $o/rec/replay-files-gap0.txt; echo "done at $(( $(date +%s) - s ))"; pk
