#!/bin/sh
# Session 34's second device call (issue 32): memcpy calls of 512 KiB up to host_copy_threshold
# into CUDA host memory, from pages not mapped in yet, now run on the copy threads (safetensors'
# load_file copies its 1 MiB tensors that way). This tree against b85ec00 (the commit before,
# .old-src/p, libraries only, as CMT_LIBRARY), both built here.
#  1. the host-leg and recorder tests on this machine; 2. loaders.py --files-only, default, cmt,
#  prev, rotating, with each process's statistics (unmapped_sources: the copies the new rule took);
#  3. one recorded load of the cmt mode, and cmt trace show of it.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
libs="libcmt.so libcmt-engine.so libcmt-host.so libcmt-host-avx2.so libcmt-release.so"
(cmake -S . -B build-gpu $cfg > $o/cmake.txt 2>&1 && cmake --build build-gpu > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src/p -B build-prev $cfg > $o/cmake-prev.txt 2>&1 && cmake --build build-prev --target $libs > $o/build-prev.txt 2>&1; echo $? > $o/build-prev.rc) &
wait
for b in build build-prev; do [ "$(cat $o/$b.rc)" = 0 ] || { tail -20 $o/$b.txt; pack; exit 1; }; done
echo "built in $(( $(date +%s) - start )) s"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 60 ctest --test-dir build-gpu -R "HostLeg|HostCopier|record_trace|host_copy$" > $o/ctest.txt 2>&1; echo "ctest rc $?"; tail -3 $o/ctest.txt
mkdir -p $o/stats
CMT_STATS=$o/stats/%p.json CMT_CONFIGS_DIR= PYTHONUNBUFFERED=1 timeout 420 python3 bench/workloads/loaders.py build-gpu/cmt \
  --rounds 4 --files-only --deadline 280 --workdir /tmp/cmt-loaders --mode prev:CMT_LIBRARY=$PWD/build-prev/libcmt.so \
  --record $o/rec --json $o/files.json > $o/files.txt 2>&1
echo "loaders rc $?"; grep -v "^child\|Writing" $o/files.txt | tail -14; pack
python3 - $o/stats <<'PY'
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    h = json.load(open(f)).get("host_copies", {})
    if h.get("armed"):
        print(f.split("/")[-1], "host calls", h["calls"], "unmapped_sources", h.get("unmapped_sources", "-"),
              "GB", round(h["bytes"] / 1e9, 2))
PY
for t in $o/rec/*.tsv; do build-gpu/cmt trace show $t > $t.show.txt 2>&1; done
head -40 $o/rec/files-cmt.tsv.show.txt 2>/dev/null
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
