#!/bin/sh
# Session 43's second call (run inline on the warm machine after s42/device-call-next.sh): the hot
# loop under cmt bench copy with the built-in settings and three others, twice, with CMT_STATS; then
# cmt-lab-registered under hot in the same call. Files: call2/ (loop.txt, lab.txt, stats-*.json).
mkdir -p $OUT/h; cmake --build build-gpu > $OUT/h/build.txt 2>&1 || tail $OUT/h/build.txt; export CMT_CONFIGS_DIR=; for r in 1 2; do for v in base CMT_WAKE_AHEAD=0 CMT_THREADS=2 CMT_SPIN_US=0; do echo "== $v round $r"; env CMT_REGISTER=hot CMT_STATS=$OUT/h/stats-$v-$r.json $( [ $v = base ] || echo $v ) build-gpu/cmt bench copy --threads 1 --stream own --sizes 64K,256K --patterns h2d,d2h --seconds 0.2 --rounds 3 2>&1 | grep -E "x 1 threads|cmt/pinned|^  (cmt|pinned) "; done; done 2>&1 | tee $OUT/h/loop.txt; CMT_REGISTER=hot build-gpu/cmt run -- build-gpu/cmt-lab-registered --sizes 64K,256K --reps 3000 > $OUT/h/lab.txt 2>&1; tail -12 $OUT/h/lab.txt; cd $OUT && tar czf h.tgz h
