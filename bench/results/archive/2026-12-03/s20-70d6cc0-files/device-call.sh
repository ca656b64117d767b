#!/bin/sh
# session 20's third device call: the programs' targets of this tree and of the tree before the
# fair lane hand-over (6dd387b^) built side by side; the checkpoint and staging loaders, 2
# rounds, one recorded round, its trace shown and replayed; then the concurrent benchmark of the
# two builds, alternating processes (per-run JSONs kept even if cut short)
set -x
o=$OUT/r; mkdir -p $o; git log --oneline -1 > $o/commit.txt
conf="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
tg="--target cmt_cli cmt cmt_engine_library cmt_host cmt_host_avx2 cmt-bench-copy cmt-bench-concurrent cmt-bench-replay"
cmake -S . -B build-gpu $conf >/dev/null && cmake -S .old-src -B /tmp/old-build $conf > /dev/null || exit 1
(cmake --build build-gpu $tg 2>&1 | tail -1) & (cmake --build /tmp/old-build $tg 2>&1 | tail -1) & wait
ls build-gpu/cmt /tmp/old-build/cmt || exit 1
date
timeout 170 python3 bench/workloads/loaders.py build-gpu/cmt --rounds 2 --files-only --record $o/rec --workdir /tmp/w --json $o/files.json > $o/files.txt 2>&1; tail -12 $o/files.txt
date
build-gpu/cmt trace show $o/rec/files-cmt.tsv > $o/rec/files-cmt.show.txt 2>&1
timeout 40 build-gpu/cmt bench replay $o/rec/files-cmt.tsv --rounds 3 --json $o/rec/replay-files-cmt.json > $o/rec/replay-files-cmt.txt 2>&1; cat $o/rec/replay-files-cmt.txt
date
timeout 290 python3 bench/versus_concurrent.py /tmp/old-build/cmt build-gpu/cmt --rounds 2 --out $o/vc --json $o/versus-concurrent.json > $o/versus-concurrent.txt 2>&1; cat $o/versus-concurrent.txt
date
cd $OUT && tar czf r.tgz r && rm -rf r
