#!/usr/bin/env python3
"""Where the time of transformers' from_pretrained goes (issue 32, lab/NOTES.md 46): a process's
first and second call, each under cProfile, the functions with the most cumulative time printed.
usage: hf_profile.py MODEL_DIR [TOP]   (MODEL_DIR as bench/workloads/loaders.py --hf makes it)"""
import cProfile
import io
import pstats
import sys
import time

import torch
import transformers


def main():
    model_dir, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25
    torch.zeros(1, device="cuda")
    for call in ("first", "second"):
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        model = transformers.AutoModelForCausalLM.from_pretrained(
            model_dir, device_map="cuda", dtype=torch.bfloat16)
        torch.cuda.synchronize()
        prof.disable()
        print(f"== {call} call: {time.perf_counter() - t0:.3f} s")
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(top)
        print(text.getvalue())
        del model
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
