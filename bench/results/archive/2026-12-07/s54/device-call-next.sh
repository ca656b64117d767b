#!/bin/sh
# Ready for a later session, not run in 54 (two starts refused after the H100 went idle; carry
# [".deps", ".old-src"], .old-src/h holding fbbb314): the file loaders' rows at this tree against
# fbbb314's library, alternating, to show that the host leg's page question (now an fstat and a
# pread, 2.83 us against 1.56 on the development VM; lab/NOTES.md 102) costs its rows nothing.
# T: seconds the loaders may take (default 330).
start=$(date +%s); o=$OUT/r; mkdir -p $o
cfg="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include"
libs="libcmt.so libcmt-engine.so libcmt-host.so libcmt-host-avx2.so libcmt-release.so"
(cmake -S . -B build-gpu $cfg > $o/cmake.txt 2>&1 && cmake --build build-gpu --target $libs cmt_cli > $o/build.txt 2>&1; echo $? > $o/build.rc) &
(cmake -S .old-src/h -B build-head $cfg > $o/cmake-head.txt 2>&1 && cmake --build build-head --target $libs > $o/build-head.txt 2>&1; echo $? > $o/build-head.rc) &
wait
echo "built at $(( $(date +%s) - start )) s: $(cat $o/build.rc) $(cat $o/build-head.rc)"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
export CMT_CONFIGS_DIR=
left=$(( ${T:-330} - $(date +%s) + start ))
timeout $left python3 bench/workloads/loaders.py build-gpu/cmt --rounds 4 --files-only \
  --deadline $(( left - 20 )) --mode head:CMT_LIBRARY=$PWD/build-head/libcmt.so \
  --workdir /tmp/cmt-loaders --json $o/loaders.json > $o/loaders.txt 2>&1
echo "loaders rc $?"; cut -c1-220 $o/loaders.txt | tail -16
(cd $OUT && tar czf r.tgz r)
