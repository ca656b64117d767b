#!/bin/sh
# Ran on ca17ec6 plus the 2 MiB ring (committed after) and ring-small-pages-lab.patch (not committed).
# Session 42, call 1. Carry [".deps"]. (1) the whole build and the GPU tests (session 41's engine
# change, each lane keeping what its build took, had not run on a GPU); (2) s41/device-call-next.sh:
# the engine's own account of a first H2D and D2H copy from Python (cmt run -v's "lane ready"
# lines), and cmt-lab-ring-build (memset against MADV_POPULATE_WRITE, cuMemHostRegister against
# cuMemHostAlloc, at the rings' sizes), now with a huge-page ring (mmap 2 MiB aligned +
# MADV_HUGEPAGE), which the engine's ring now is unless CMT_LAB_RING_SMALL_PAGES is set.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $o/gpu.txt
echo "built at $(( $(date +%s) - start )) s"
timeout 240 ctest --test-dir $b -R "^gpu_" --output-on-failure > $o/gpu-tests.txt 2>&1
echo "gpu tests rc $? at $(( $(date +%s) - start )) s"; grep -E "tests passed|Failed|\*\*\*|Skipped|Not Run" $o/gpu-tests.txt | head -20
pack
cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag | tee $o/thp.txt
cat > $o/first.py <<'PY'
import sys, time, torch
torch.zeros(1, device='cuda'); x = torch.randint(0, 255, (125 << 20,), dtype=torch.uint8)
t = time.perf_counter(); y = x.cuda(); torch.cuda.synchronize(); a = time.perf_counter() - t
t = time.perf_counter(); z = y.cpu(); b = time.perf_counter() - t
t = time.perf_counter(); y2 = x.cuda(); torch.cuda.synchronize(); c = time.perf_counter() - t
print('%s: first h2d %.1f ms, first d2h %.1f ms, second h2d %.1f ms, equal %s' % (sys.argv[1], a * 1e3, b * 1e3, c * 1e3, torch.equal(x, z) and torch.equal(y2.cpu(), x)))
PY
for i in 1 2 3 4; do
  CMT_CONFIGS_DIR= $b/cmt run -v -- python3 $o/first.py huge > $o/first-huge-$i.txt 2>&1
  CMT_CONFIGS_DIR= CMT_LAB_RING_SMALL_PAGES=1 $b/cmt run -v -- python3 $o/first.py small > $o/first-small-$i.txt 2>&1
  python3 $o/first.py default > $o/first-default-$i.txt 2>&1
  grep -h "first h2d" $o/first-*-$i.txt; grep -ho "built in.*" $o/first-huge-$i.txt $o/first-small-$i.txt
done
timeout 120 $b/cmt-lab-ring-build --sizes 24M,48M --reps 5 | tee $o/ring-build.txt
echo "done at $(( $(date +%s) - start )) s"; date -u; pack
