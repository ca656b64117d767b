#!/bin/sh
# Session 42, call 3 (run as one command line on call 2's warm machine; carry [".deps"]): the file
# loaders with the huge-page ring, then with CMT_LAB_RING_SMALL_PAGES=1 (ring-small-pages-lab.patch:
# the ring as it was, 4 KiB pages), one after the other, 2 rounds each. (loaders.py then ignored the unknown --only, which it now refuses:
# every files scenario ran.)
o=$OUT/r; mkdir -p $o; b=build-gpu; cmake --build $b > /dev/null 2>&1; for ring in huge small; do if [ $ring = small ]; then export CMT_LAB_RING_SMALL_PAGES=1; fi; CMT_CONFIGS_DIR= timeout 200 python3 bench/workloads/loaders.py $b/cmt --rounds 2 --files --only torch-load-cuda,torch-load-mmap,safe-open,load-file --workdir /tmp/cmt-loaders --json $o/files-$ring.json > $o/files-$ring.txt 2>&1; echo "$ring rc $?"; grep -v "^child" $o/files-$ring.txt | tail -8; done; (cd $OUT && tar czf r.tgz r)
