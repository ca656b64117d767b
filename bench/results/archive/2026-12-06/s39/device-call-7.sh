#!/bin/sh
# Session 39, call 7 (run as this one command line): the self-registering control of the Python
# safety suite after tests/hot_safety_torch.py reports wrong bytes seen before a run breaks.
# Output: rc 1; "ops 272 copies 219 wrong_bytes 352669416 (then the run broke)"; 113 copies with
# wrong bytes; torch 2.11.0+cu130.
timeout 120 python3 tests/hot_safety_torch.py 300 1 --self-register > /tmp/self.txt 2>&1; echo "rc $?"; grep -v "^wrong bytes" /tmp/self.txt | tail -4; grep -c "^wrong bytes" /tmp/self.txt; python3 -c "import torch; print(torch.__version__)"
