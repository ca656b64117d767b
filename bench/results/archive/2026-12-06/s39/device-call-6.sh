#!/bin/sh
# Session 39, call 6: gpu_hot_safety_torch failed in call 5. Is it the sync hooks? The suite with
# this tree, and with the same tree less the hooks' change (s39-hooks.patch reversed), and the
# self-registering control run's own error.
start=$(date +%s)
o=$OUT/r; mkdir -p $o
pack() { (cd $OUT && tar czf r.tgz r); }
b=build-gpu
cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > $o/cmake.txt 2>&1 &&
  cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release > $o/build.txt 2>&1 || { tail -20 $o/build.txt; pack; exit 1; }
rm -rf /tmp/before && mkdir /tmp/before && cp -r . /tmp/before/ 2>/dev/null; rm -rf /tmp/before/$b
(cd /tmp/before && patch -R -p1 < s39-hooks.patch > $o/patch.txt 2>&1 && \
  cmake -S . -B bb -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > /dev/null 2>&1 && \
  cmake --build bb --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release > $o/build-before.txt 2>&1) || echo "before: build failed"
echo "built at $(( $(date +%s) - start )) s"
timeout 100 python3 tests/hot_safety_torch.py 300 1 --self-register > $o/self.txt 2>&1; echo "self-register rc $?"; tail -5 $o/self.txt
for v in now before now before; do
  [ $(( $(date +%s) - start )) -gt 420 ] && break
  c=$b/cmt; [ $v = before ] && c=/tmp/before/bb/cmt
  timeout 120 tests/hot_safety.sh $c tests/hot_safety_torch.py 1000 2 gpu > $o/safety-$v.txt 2>&1
  echo "$v rc $?"; grep -E "^registrations|FAIL|wrong" $o/safety-$v.txt | head -5
  cat $o/safety-$v.txt >> $o/safety-$v-all.txt
  pack
done
echo "done at $(( $(date +%s) - start )) s"; date -u
pack
