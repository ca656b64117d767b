#!/bin/sh
# session 20's second device call: this tree (lane_split_from) and the tree before the fair lane
# hand-over (6dd387b^, in .old-src) built side by side; the loaders (copies, from_pretrained):
# default / cmt / split0 (CMT_LANE_SPLIT_FROM=0: every copy may open a lane, as before), 2 rounds,
# one recorded round of each cmt mode, then replays of the recorded traces; 8 threads at 16-256 MiB
# with each lane rule
set -x
o=$OUT/r; mkdir -p $o; git log --oneline -1 > $o/commit.txt; git status --short > $o/status.txt
conf="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
cmake -S . -B build-gpu $conf >/dev/null && cmake -S .old-src -B /tmp/old-build $conf > /dev/null || exit 1
(cmake --build build-gpu 2>&1 | tail -1) & (cmake --build /tmp/old-build 2>&1 | tail -1) & wait
ls build-gpu/cmt /tmp/old-build/cmt || exit 1
date
timeout 330 python3 bench/workloads/loaders.py build-gpu/cmt --rounds 2 --mode split0:CMT_LANE_SPLIT_FROM=0 --hf --record $o/rec --workdir /tmp/w --json $o/loaders.json > $o/loaders.txt 2>&1; tail -16 $o/loaders.txt
date
for t in loaders-cmt hf-cmt; do
  build-gpu/cmt trace show $o/rec/$t.tsv > $o/rec/$t.show.txt 2>&1
  timeout 60 build-gpu/cmt bench replay $o/rec/$t.tsv --rounds 3 --json $o/rec/replay-$t.json > $o/rec/replay-$t.txt 2>&1; cat $o/rec/replay-$t.txt
done
date
for v in split0:CMT_LANE_SPLIT_FROM=0 cmt:CMT_LANE_SPLIT_FROM=64M lanes1:CMT_LANES=1; do
  n=${v%%:*}; e=${v#*:}
  env $e CMT_CONFIGS_DIR= timeout 60 build-gpu/cmt bench copy --threads 8 --sizes 16M,64M,256M --patterns h2d,both --seconds 0.7 --rounds 2 --json $o/x8-$n.json > $o/x8-$n.txt 2>&1; echo "== $n"; grep -E "cmt|pinned|default" $o/x8-$n.txt | tail -20
done
date
cd $OUT && tar czf r.tgz r && rm -rf r
