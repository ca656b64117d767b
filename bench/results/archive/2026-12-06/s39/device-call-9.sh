#!/bin/sh
# Session 39, call 9 (run as this one command line; carry [".deps"]): the Python safety suite as
# ctest runs it (2000 operations x 3 seeds), after tests/hot_safety.sh says rather than requires
# small copies beside registrations for the Python suite, and hot_safety_torch.py reports wrong
# bytes seen before a break. Output: 0 wrong bytes in 4582 copies (390 registrations, 2318 copies
# from them, 299 dropped on release, 111 freed later); the self-registering control exit 1 with
# 382,997,544 wrong bytes in 230 copies; "hot_safety: all passed", rc 0.
b=build-gpu; cmake -S . -B $b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INCLUDE_PATH=$PWD/.deps/include > /dev/null 2>&1 && cmake --build $b --target cmt_cli cmt cmt_host cmt_host_avx2 cmt_release > /dev/null 2>&1 && timeout 150 tests/hot_safety.sh $b/cmt tests/hot_safety_torch.py 2000 3 gpu; echo "rc $?"
