#!/bin/sh
# The measurements a GPU machine owes the README, in stages that each fit one 10-minute device
# call on the 1-GPU H200 machine:
#   tests      the GPU tests (ctest) but the long suites (gpu_stress, gpu_hot_safety*), about 5 minutes
#   sweep      `cmt bench copy` 4 KiB..4 GiB with built-in defaults, plus the page-fault cases
#   small      the main table's sweep (`cmt bench copy`, 4 KiB..1 GiB, 10 reps, built-in defaults),
#              then 4 KiB..16 MiB with cmt's threads asleep (--gap-us 3000, 40 reps,
#              CMT_WAKE_AHEAD=0), then one
#              thread copying back to back, 64 KiB..16 MiB, async + synchronize and cudaMemcpy;
#              about 3 minutes
#   tunes      `cmt tune --search instant` twice and `--search full` once, each timed, profiles
#              into OUT/tune-*.toml; about 2 minutes
#   workloads  bench/workloads/run_all.py in two rounds, then DCP again with CMT_LANES=2
#   loaders    bench/workloads/loaders.py: a model's tensors copied by 1, 4, 8 Python threads and
#              from_pretrained, default / cmt / CMT_LANES=1, 3 rounds, one recorded round of each
#              cmt mode (OUT/rec), `cmt trace show` of the cmt traces and `cmt bench replay` of
#              them back to back; about 8 minutes
#   files      loaders.py --files-only: the checkpoint and staging loaders, default / cmt /
#              CMT_HOST_READS=all (reads into any memory) / CMT_HOST_COPY=all (and every large
#              memcpy), 2 rounds, recorded, shown and replayed
#              back to back; about 5 minutes
#   hot        hot buffers (issue 33): hotsafe, weights and offload below; about 9 minutes
#   hotsafe    gpu_structured_hot, the C safety suite 2 x 10000, the Python one 3 x 2000, CUDA's
#              pointer attributes of pageable, registered and pinned memory and of a buffer cmt
#              registered (cmt-lab-pointer-attrs); about 4 minutes
#   weights    the weight-set lab alone and under cmt hot; about 1 minute
#   offload    offloaded inference hot / pinned / staged in 2 rounds with one recorded hot run;
#              about 5 minutes
#   spin       offloaded inference hot / pinned / hot with CMT_SPIN_US=0 and 200, 2 rounds, and
#              the weight-set lab under cmt hot with the default spin and 0; about 6 minutes
#   hotround   issue 33's measurements (lab/NOTES.md 59): offloaded inference with hot, pinned and
#              default passes side by side in each of 3 processes (offload.py --same-process);
#              cmt-lab-registered at 16 bytes into a page; cmt-lab-register-wait; the C safety suite
#              10 x 10000, five processes at a time; about 4 minutes
#   dma        cmt-bench-dma (the lab's): the engine's DMA pattern without the engine, every
#              mode, then the staged pipeline with memcpy stores (lab/NOTES.md 15-24), 2 minutes
#   retune     `cmt tune --search full` into OUT/profile.toml, then that profile against the
#              shared one in configs/ and the built-in defaults (bench/compare.py), about 4 minutes
#   io         safetensors and DCP with and without cmt, 2 rounds, with cmt's own copy time
#              (cmt_copy_s), to see how much of their time the copies are, about 2 minutes
#   torch      the README's PyTorch table: .to('cuda') and .cpu() of 1 GiB with and without cmt,
#              built-in defaults, about 1 minute
#   hostleg    the host leg (bench/host_leg.py): memmove into a cudaHostAlloc buffer then H2D, the
#              64-byte memcpy hook's cost, a CPU-bound Python program; and safetensors' load with
#              and without cmt, 3 rounds; about 3 minutes
#   concurrent `cmt bench copy --threads N` (cmt-bench-concurrent): 8 threads x 256 MiB each way
#              and both, own streams; one H2D and one D2H thread x 1 GiB; 8 threads both ways on
#              the legacy stream; one thread x 16 MiB async + synchronize against cudaMemcpy;
#              about 3 minutes
#   gpus       the multi-GPU measurements (issue 15): `cmt bench p2p` (peer access, bandwidth and
#              latency matrices, then cudaMemcpyPeer through the host, CUDA against cmt, 256 KiB
#              to 1 GiB, with cmt's statistics), `cmt bench topo` (each GPU, each NUMA node's
#              GPUs, all; each way and both; 2 s windows) and the host's copy rate with up to 30
#              threads (cmt-bench-cpu), about 5 minutes on 2 GPUs
#   cores      every GPU at once with CMT_GPU_CORES=all against split, alternating processes, 2
#              rounds each (cmt bench topo on the set of all GPUs), about 2 minutes on 2 GPUs
#   stress     tests/gpu_stress.sh's 16-thread stress for $CMT_STRESS_SECONDS (default 600), in a
#              new session so it outlives the call: its log is OUT/stress.txt
#   versus     this build against another ($CMT_VERSUS_BUILD, e.g. the commit before a refactor),
#              built-in defaults, 256 KiB to 1 GiB, 3 rounds in alternating processes, about 3 minutes;
#              then the concurrent benchmark of both (bench/versus_concurrent.py: 8 x 256 MiB each
#              way and both, 1 + 1 x 1 GiB, 8 threads on the legacy stream, 1 x 16 MiB), 2 rounds
#              in alternating processes, about 5 minutes
#   hostcost   the 64-byte memcpy's cost and the CPU-bound Python program (bench/host_leg.py small
#              and python), with $CMT_VERSUS_BUILD's cmt run alternating where it is set, 3 minutes
# usage: bench/device_check.sh BUILD_DIR OUT_DIR STAGE...
set -u
build=$1
out=$2
shift 2
mkdir -p "$out"
here=$(dirname "$0")
for stage in "$@"; do
  started=$(date +%s)
  case $stage in
    tests)
      # The long suites (gpu_stress, gpu_hot_safety*: 3-10 minutes each) run in stages of their
      # own (stress, hotsafe); with them the rest ran past 300 s (session 24).
      timeout 420 ctest --test-dir "$build" -R "gpu_|GpuEngine|GpuTuner|getproc|taken_once|dlsym" \
        -E "gpu_stress|gpu_hot_safety" --output-on-failure > "$out/ctest.log" 2>&1
      grep -E "tests passed|\(Failed\)|Total Test time" "$out/ctest.log" ;;
    sweep)
      CMT_CONFIGS_DIR= timeout 240 "$build/cmt" bench copy --reps 5 --json "$out/sweep.json" \
        --csv "$out/sweep.csv" --plot "$out/sweep.svg" > "$out/sweep.txt" 2>&1
      tail -24 "$out/sweep.txt"
      CMT_CONFIGS_DIR= timeout 120 "$build/cmt" bench copy --sizes 64M,1G --reps 5 \
        --cases fresh,mmap --json "$out/page-fault-cases.json" > "$out/page-fault-cases.txt" 2>&1
      tail -6 "$out/page-fault-cases.txt" ;;
    small)
      CMT_CONFIGS_DIR= timeout 150 "$build/cmt" bench copy --reps 10 \
        --sizes 4K,16K,32K,64K,128K,256K,512K,1M,2M,4M,16M,64M,256M,1G --json "$out/sweep-warm.json" \
        --plot "$out/sweep-warm.svg" > "$out/sweep-warm.txt" 2>&1
      cat "$out/sweep-warm.txt"
      # Cold: the gaps are all alike, so cmt's threads would wake ahead of each copy otherwise.
      CMT_WAKE_AHEAD=0 CMT_CONFIGS_DIR= timeout 150 "$build/cmt" bench copy --reps 40 --gap-us 3000 \
        --sizes 4K,16K,64K,128K,256K,512K,1M,2M,4M,16M --json "$out/sweep-cold.json" \
        --plot "$out/sweep-cold.svg" > "$out/sweep-cold.txt" 2>&1
      cat "$out/sweep-cold.txt"
      for stream in own null; do
        CMT_CONFIGS_DIR= timeout 80 "$build/cmt" bench copy --threads 1 --stream $stream \
          --sizes 64K,256K,512K,1M,4M,16M --patterns h2d,d2h --seconds 0.2 --rounds 2 \
          --json "$out/loop-$stream.json" > "$out/loop-$stream.txt" 2>&1
        cat "$out/loop-$stream.txt"
      done ;;
    tunes)
      for search in instant instant full; do
        n=$search; [ -e "$out/tune-$n.toml" ] && n=$search-2
        start=$(date +%s.%N)
        CMT_CONFIGS_DIR= timeout 150 "$build/cmt" tune --search $search -o "$out/tune-$n.toml" \
          > "$out/tune-$n.txt" 2>&1
        awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "wall %.1f s\n", b - a }' >> "$out/tune-$n.txt"
        grep -E "search|threshold|confirm|wall" "$out/tune-$n.txt"
      done ;;
    workloads)
      timeout 450 python3 "$here/workloads/run_all.py" "$build/cmt" --rounds 2 \
        --json "$out/workloads.json" > "$out/workloads.txt" 2>&1
      tail -9 "$out/workloads.txt"
      CMT_LANES=2 timeout 100 python3 "$here/workloads/run_all.py" "$build/cmt" --rounds 1 \
        --only dcp_save > "$out/dcp-lanes2.txt" 2>&1
      tail -3 "$out/dcp-lanes2.txt" ;;
    loaders|files)
      if [ "$stage" = loaders ]; then
        set -- --rounds 3 --hf --mode lanes1:CMT_LANES=1
        traces="loaders-cmt hf-cmt"
      else  # four modes: two rounds fit the call
        set -- --rounds 2 --files-only --mode reads:CMT_HOST_READS=all --mode all:CMT_HOST_COPY=all
        traces="files-cmt"
      fi
      timeout 400 python3 "$here/workloads/loaders.py" "$build/cmt" "$@" \
        --record "$out/rec-$stage" --workdir "${TMPDIR:-/tmp}/cmt-loaders" \
        --json "$out/$stage.json" > "$out/$stage.txt" 2>&1
      tail -14 "$out/$stage.txt"
      for t in $traces; do
        "$build/cmt" trace show "$out/rec-$stage/$t.tsv" > "$out/rec-$stage/$t.show.txt" 2>&1
        timeout 100 "$build/cmt" bench replay "$out/rec-$stage/$t.tsv" --gap-scale 0 --rounds 3 \
          --json "$out/rec-$stage/replay-$t.json" > "$out/rec-$stage/replay-$t.txt" 2>&1
        cat "$out/rec-$stage/replay-$t.txt"
      done ;;
    hot)
      # Hot buffers (issue 33): the three stages below in turn.
      "$0" "$build" "$out" hotsafe weights offload ;;
    hotsafe)
      # Copies left to CUDA through cudart on registered buffers, the C safety suite (2D copies
      # among its steps), and CUDA's pointer attributes of a buffer cmt registered.
      timeout 120 ctest --test-dir "$build" -R "gpu_structured_hot" --output-on-failure \
        > "$out/hot-tests.log" 2>&1
      grep -E "tests passed|\(Failed\)|handed_back|without cmt" "$out/hot-tests.log"
      timeout 200 "$here/../tests/hot_safety.sh" "$build/cmt" "$build/tests/cmt_hot_safety_gpu" \
        10000 2 gpu > "$out/hot-safety.txt" 2>&1
      tail -6 "$out/hot-safety.txt"
      CMT_CONFIGS_DIR= timeout 150 "$here/../tests/hot_safety.sh" "$build/cmt" \
        "$here/../tests/hot_safety_torch.py" 2000 3 gpu > "$out/hot-safety-torch.txt" 2>&1
      grep -v "DeprecationWarning\|pid = os.fork" "$out/hot-safety-torch.txt" | tail -6
      CMT_REGISTER=hot CMT_STATS=$out/pointer-attrs.stats.json timeout 30 "$build/cmt" run -- \
        "$build/cmt-lab-pointer-attrs" > "$out/pointer-attrs.txt" 2>&1
      echo "cmt-lab-pointer-attrs exit $?" >> "$out/pointer-attrs.txt"
      cat "$out/pointer-attrs.txt"
      grep -o '"hot_buffers": {[^}]*}' "$out/pointer-attrs.stats.json" ;;
    weights)
      # The weight-set lab (a 1.1B Llama's weights as separate buffers, pass after pass) alone,
      # then its pinned and pageable modes under cmt hot.
      timeout 60 "$build/cmt-lab-weight-set" --passes 6 > "$out/weight-set.txt" 2>&1
      CMT_REGISTER=hot timeout 60 "$build/cmt" run -- "$build/cmt-lab-weight-set" --passes 6 \
        --modes pinned,pageable >> "$out/weight-set.txt" 2>&1
      cat "$out/weight-set.txt" ;;
    offload)
      # Offloaded inference hot / pinned / staged (2 rounds) and one recorded hot run.
      CMT_CONFIGS_DIR= CMT_STATS=$out/offload-%p.stats.json timeout 330 python3 \
        "$here/workloads/offload.py" "$build/cmt" --rounds 2 --passes 5 --modes hot,pinned,staged \
        --record "$out/rec-offload" --json "$out/offload.json" > "$out/offload.txt" 2>&1
      tail -8 "$out/offload.txt"
      "$build/cmt" trace show "$out/rec-offload/offload-hot.tsv" > "$out/rec-offload/show.txt" 2>&1 ;;
    spin)
      # Why hot offload loses to pinned (lab/NOTES.md 55): the copy threads' idle spin. Offloaded
      # inference hot / pinned / hot with CMT_SPIN_US=0 and 200, 2 rounds, each thread's CPU by
      # name; then the weight-set lab's pageable mode under cmt hot with the default spin and 0.
      CMT_CONFIGS_DIR= CMT_STATS=$out/spin-%p.stats.json timeout 330 python3 "$here/workloads/offload.py" \
        "$build/cmt" --rounds 2 --passes 5 --modes hot,pinned --mode hot-spin0:hot:CMT_SPIN_US=0 \
        --mode hot-spin200:hot:CMT_SPIN_US=200 --json "$out/offload-spin.json" > "$out/offload-spin.txt" 2>&1
      tail -8 "$out/offload-spin.txt"
      for spin in 1000 0; do
        CMT_REGISTER=hot CMT_SPIN_US=$spin CMT_STATS=$out/weight-set-spin$spin.stats.json timeout 60 \
          "$build/cmt" run -- "$build/cmt-lab-weight-set" --passes 6 --modes pinned,pageable \
          > "$out/weight-set-spin$spin.txt" 2>&1
        echo "CMT_SPIN_US=$spin"; tail -3 "$out/weight-set-spin$spin.txt"
        grep -o '"hot_buffers": {[^}]*}' "$out/weight-set-spin$spin.stats.json"
      done ;;
    hotround)
      CMT_CONFIGS_DIR= CMT_STATS=$out/hotround-%p.stats.json timeout 200 python3 \
        "$here/workloads/offload.py" "$build/cmt" --same-process --rounds 3 --passes 6 \
        --json "$out/offload-same.json" > "$out/offload-same.txt" 2>&1
      tail -7 "$out/offload-same.txt"
      CMT_REGISTER=hot timeout 60 "$build/cmt" run -- "$build/cmt-lab-registered" --reps 3000 \
        --offset 16 > "$out/registered-lab-offset16.txt" 2>&1
      cat "$out/registered-lab-offset16.txt"
      timeout 60 "$build/cmt-lab-register-wait" > "$out/register-wait.txt" 2>&1
      cat "$out/register-wait.txt"
      HOT_SAFETY_JOBS=5 timeout 300 "$here/../tests/hot_safety.sh" "$build/cmt" \
        "$build/tests/cmt_hot_safety_gpu" 10000 10 gpu > "$out/hot-safety.txt" 2>&1
      tail -7 "$out/hot-safety.txt" ;;
    dma)
      # The lab's yardsticks (bench/lab/NOTES.md 15-24): the DMA side alone, under CPU load, and
      # the bare staged pipeline with either store.
      timeout 150 "$build/cmt-bench-dma" --sizes 16M,64M,256M,1G --cpu-threads 9 \
        --json "$out/dma.json" > "$out/dma.txt" 2>&1
      cat "$out/dma.txt"
      timeout 100 "$build/cmt-bench-dma" --sizes 16M,64M,1G --cpu-threads 9 --reps 5 \
        --modes one,staged --staging memcpy --json "$out/dma-memcpy.json" > "$out/dma-memcpy.txt" 2>&1
      cat "$out/dma-memcpy.txt" ;;
    retune)
      CMT_CONFIGS_DIR= timeout 150 "$build/cmt" tune --search full -o "$out/profile.toml" \
        > "$out/tune.txt" 2>&1
      tail -12 "$out/tune.txt"
      timeout 150 python3 "$here/compare.py" "$build/cmt-bench-copy" --sizes 4M,16M,64M,256M,1G \
        --rounds 2 "retuned:CMT_PROFILE=$out/profile.toml" shared builtin:CMT_CONFIGS_DIR= \
        --json "$out/compare-retune.json" > "$out/compare-retune.txt" 2>&1
      cat "$out/compare-retune.txt" ;;
    io)
      timeout 200 python3 "$here/workloads/run_all.py" "$build/cmt" --rounds 2 \
        --only safetensors_load,dcp_save --json "$out/workloads-io.json" > "$out/workloads-io.txt" 2>&1
      tail -4 "$out/workloads-io.txt" ;;
    torch)
      CMT_CONFIGS_DIR= timeout 150 python3 "$here/../tests/gpu_framework_test.py" "$build/cmt" torch \
        --require-taken --json "$out/torch.json" > "$out/torch.txt" 2>&1
      tail -4 "$out/torch.txt" ;;
    hostleg)
      timeout 200 python3 "$here/host_leg.py" "$build/cmt" "$build/cmt-bench-host" --rounds 5 \
        --json "$out/host-leg.json" > "$out/host-leg.txt" 2>&1
      cat "$out/host-leg.txt"
      timeout 200 python3 "$here/workloads/run_all.py" "$build/cmt" --rounds 3 \
        --only safetensors_load --json "$out/safetensors.json" > "$out/safetensors.txt" 2>&1
      tail -4 "$out/safetensors.txt" ;;
    concurrent)
      c() {  # NAME, then cmt bench copy's arguments
        name=$1
        shift
        timeout 150 "$build/cmt" bench copy "$@" --json "$out/concurrent-$name.json" \
          --plot "$out/concurrent-$name.svg" > "$out/concurrent-$name.txt" 2>&1
        cat "$out/concurrent-$name.txt"
      }
      c 8x256M --threads 8 --sizes 256M --seconds 1.5 --rounds 3
      c 2x1G --threads 2 --sizes 1G --patterns both --seconds 2 --rounds 3
      c 8x256M-null --threads 8 --sizes 256M --patterns both --stream null --seconds 1.5 --rounds 3
      c 1x16M --threads 1 --sizes 16M --patterns h2d,d2h --seconds 1 --rounds 3
      c 1x16M-null --threads 1 --sizes 16M --patterns h2d,d2h --stream null --seconds 1 --rounds 3 ;;
    gpus)
      # p2p first (the peer path's first real test), with cmt's statistics: copies through the
      # host taken, and those with peer access enabled forwarded as peer_access.
      CMT_STATS="$out/p2p-stats.json" timeout 240 "$build/cmt" bench p2p --json "$out/p2p.json" \
        > "$out/p2p.txt" 2>&1
      echo "cmt bench p2p: exit $?" >> "$out/p2p.txt"
      cat "$out/p2p.txt"
      python3 -c "import json,sys; s=json.load(open(sys.argv[1])); \
print('p2p stats: taken gpu_to_gpu', s['taken']['gpu_to_gpu'], 'forwarded', \
{k: v for k, v in s['forwarded'].items() if v})" "$out/p2p-stats.json"
      timeout 300 "$build/cmt" bench topo --seconds 2 --json "$out/topo.json" --plot "$out/topo.svg" \
        > "$out/topo.txt" 2>&1
      cat "$out/topo.txt"
      # The host's own copy rate with many threads: what staging both GPUs at once needs.
      timeout 60 "$build/cmt-bench-cpu" --bytes 1G --threads 8,16,24,30 --reps 2 > "$out/cpu.txt" 2>&1
      cat "$out/cpu.txt" ;;
    cores)
      # Every GPU at once with gpu_cores all against split (each GPU's copy threads on all the
      # shared cores, or on a share of their own), alternating processes, 2 rounds, built-in
      # defaults otherwise: the shared profile's choice for a machine of several GPUs per node.
      n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); [ "$n" -ge 1 ] || n=1
      set=$(seq -s, 0 $((n - 1)))
      for round in 1 2; do
        for mode in all split; do
          CMT_GPU_CORES=$mode CMT_CONFIGS_DIR= timeout 120 "$build/cmt" bench topo --sets "$set" \
            --seconds 2 --rounds 1 --json "$out/cores-$mode-$round.json" > "$out/cores-$mode-$round.txt" 2>&1
        done
      done
      python3 - "$out"/cores-*.json <<'PY'
import json, os, sys
print("gpu_cores round pattern: cmt / pinned GB/s (cmt/pinned)")
for path in sorted(sys.argv[1:]):
    name = os.path.basename(path)[len("cores-"):-len(".json")]
    for r in json.load(open(path))["results"]:
        c, p = r["cmt"]["total_gbps"], r["pinned"]["total_gbps"]
        print(f"{name:8} {r['pattern']:5} {c:6.1f} / {p:6.1f} ({c / p:.3f})")
PY
      ;;
    stress)
      CMT_STATS="$out/stress-stats.json" setsid sh -c "'$build/cmt' run -- '$build/tests/cmt_gpu_stress' \
        stress ${CMT_STRESS_SECONDS:-600} 16 > '$out/stress.txt' 2>&1; echo exit \$? >> '$out/stress.txt'" \
        < /dev/null > /dev/null 2>&1 &
      echo "stress started for ${CMT_STRESS_SECONDS:-600} s: $out/stress.txt" ;;
    versus)
      [ -x "${CMT_VERSUS_BUILD:-}/cmt-bench-copy" ] ||
        { echo "device_check.sh: versus needs CMT_VERSUS_BUILD, a build dir with cmt-bench-copy" >&2; exit 2; }
      timeout 400 python3 "$here/compare.py" "$build/cmt-bench-copy" --sizes 256K,1M,4M,16M,64M,256M,1G \
        --reps 5 --rounds 3 --versus default "before@$CMT_VERSUS_BUILD/cmt-bench-copy:CMT_CONFIGS_DIR=" \
        after:CMT_CONFIGS_DIR= --json "$out/versus.json" > "$out/versus.txt" 2>&1
      cat "$out/versus.txt"
      timeout 420 python3 "$here/versus_concurrent.py" "$CMT_VERSUS_BUILD/cmt" "$build/cmt" --rounds 2 \
        --out "$out/vc" --json "$out/versus-concurrent.json" > "$out/versus-concurrent.txt" 2>&1
      cat "$out/versus-concurrent.txt" ;;
    hostcost)
      versus=""
      [ -x "${CMT_VERSUS_BUILD:-}/cmt" ] && versus="--versus $CMT_VERSUS_BUILD/cmt"
      timeout 300 python3 "$here/host_leg.py" "$build/cmt" "$build/cmt-bench-host" --parts small,python \
        --rounds 5 $versus --json "$out/host-cost.json" > "$out/host-cost.txt" 2>&1
      cat "$out/host-cost.txt" ;;
    *)
      echo "device_check.sh: unknown stage '$stage' (expected tests, sweep, small, tunes, workloads, loaders, files, hot, hotsafe, weights, offload, spin, hotround, dma, retune, io, torch, hostleg, hostcost, concurrent, gpus, cores, stress or versus)" >&2
      exit 2 ;;
  esac
  # What each stage costs, so the next plan of device calls fits their 10-minute limit.
  echo "device_check.sh: $stage took $(($(date +%s) - started)) s" | tee -a "$out/stages.txt"
done
