#!/bin/sh
# For the next session (NOT RUN in session 41: its device time was spent). Carry [".deps"].
# NOTES 86: a lane's first copy waited 12-17 ms (H2D) and 25-36 ms (D2H) for the lane's build.
# (1) The build's parts as the engine now logs them (cmt run -v's "lane ready ... built in"), for
#     a first H2D and a first D2H copy of 125 MiB from Python; (2) cmt-lab-ring-build: memset
#     against MADV_POPULATE_WRITE, cuMemHostRegister against cuMemHostAlloc, at the rings' sizes.
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release cmt-lab-ring-build > $o/build.txt 2>&1 ||
  { tail -20 $o/build.txt; pack; exit 1; }
for i in 1 2 3; do
  CMT_CONFIGS_DIR= $b/cmt run -v -- python3 -c "
import time, torch
torch.zeros(1, device='cuda'); x = torch.randint(0, 255, (125 << 20,), dtype=torch.uint8)
t = time.perf_counter(); y = x.cuda(); torch.cuda.synchronize(); a = time.perf_counter() - t
t = time.perf_counter(); z = y.cpu(); b = time.perf_counter() - t
t = time.perf_counter(); y2 = x.cuda(); torch.cuda.synchronize(); c = time.perf_counter() - t
print('first h2d %.1f ms, first d2h %.1f ms, second h2d %.1f ms, equal %s' % (a * 1e3, b * 1e3, c * 1e3, torch.equal(x, z)))
" > $o/first-copy-$i.txt 2>&1
  grep -h "lane ready\|first h2d" $o/first-copy-$i.txt
done
$b/cmt-lab-ring-build --sizes 24M,48M --reps 5 | tee $o/ring-build.txt
date -u; pack
