#!/bin/sh
# Session 34's fifth call, the same H200 as calls 3-4: the small rows of the hot loop again (64 KiB-
# 1 MiB, each way, 8 rounds), then call by call (cmt-lab-registered: pinned, registered by the
# program, the driver's async+sync, cmt's hot path, pageable; median of 3000, modes rotating).
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
CMT_CONFIGS_DIR= CMT_REGISTER=hot timeout 100 build-gpu/cmt run -- build-gpu/cmt bench copy --threads 1 --stream own \
  --sizes 64K,256K,1M --patterns h2d,d2h --seconds 0.2 --rounds 8 --json $o/hot-small.json > $o/hot-small.txt 2>&1
echo "hot small rc $?"; grep -E "threads, |cmt/" $o/hot-small.txt; pack
CMT_CONFIGS_DIR= CMT_REGISTER=hot timeout 120 build-gpu/cmt run -- build-gpu/cmt-lab-registered --reps 3000 > $o/registered.txt 2>&1
echo "registered rc $?"; cat $o/registered.txt | tail -12
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
