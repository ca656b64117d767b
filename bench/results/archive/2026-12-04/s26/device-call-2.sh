#!/bin/sh
# Session 26's second device call (issue 32): the checkpoint and staging loaders from files in the
# page cache (loaders.py --files-only), default / cmt / CMT_HOST_READS=all, 3 rounds in
# alternating processes, on the read claim (d34259e); then cmt-lab-registered at 16 bytes into a
# page (issue 33, lab/NOTES.md 57). Results tarred after each step.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build build-gpu > $o/build.txt 2>&1 || { tail -30 $o/build.txt; pack; exit 1; }
echo "built in $(( $(date +%s) - start )) s"
CMT_CONFIGS_DIR= timeout 420 python3 bench/workloads/loaders.py build-gpu/cmt --rounds 3 --files-only \
  --mode reads:CMT_HOST_READS=all --record $o/rec --workdir /tmp/cmt-loaders --json $o/files.json \
  > $o/files.txt 2>&1
tail -16 $o/files.txt
pack
echo "at $(( $(date +%s) - start )) s"
CMT_REGISTER=hot timeout 60 build-gpu/cmt run -- build-gpu/cmt-lab-registered --reps 3000 --offset 16 \
  > $o/registered-lab-offset16.txt 2>&1
cat $o/registered-lab-offset16.txt
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
