// Times copies on their streams: a pair of timing events recorded on the copy's stream around it
// says how long the stream took from reaching the copy to its last DMA's end, which is what a copy
// costs a program whose next work waits on the stream. A call's own time says less: a
// cudaMemcpyAsync from pageable memory returns before its last DMA ends (bench/lab/NOTES.md 78).
// The time is read once the second event has completed, by a later call; nothing here ever waits
// for the GPU.
//
// Two users: register = auto weighs copies by their stream time (register_costs.h), and the
// recorder (recorder.h) writes each copy's stream time into the trace. The recorder's timer also
// keeps, per stream, the end of the copy timed on it last, so that a timing says how long the
// stream was busy with other work (the program's kernels) or idle between that copy's end and
// this one's start: what `cmt bench replay` makes the GPU do between copies.
//
// A fixed number of timings at once; a copy that finds no slot free, a stream being captured into
// a graph, or a driver that refuses an event, is simply not timed. Thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "cuda/driver_api.h"

namespace cmt {

class StreamTimer {
 public:
  static constexpr int kSlots = 16;
  // Streams whose last timed copy a timer with gaps keeps (the least recently timed out first).
  static constexpr int kStreams = 32;

  // `slots` timings at once; with `gaps`, each timing also says its stream's time since the end
  // of the copy timed on it before.
  explicit StreamTimer(const DriverApi& driver, int slots = kSlots, bool gaps = false);
  // The process's timers are never destroyed (hooks may run at exit); a test's gives its events
  // back.
  ~StreamTimer();
  StreamTimer(const StreamTimer&) = delete;
  StreamTimer& operator=(const StreamTimer&) = delete;

  // Before a copy is enqueued on `stream`, with the stream's context current: records the start.
  // Returns the timing's slot, or -1: not timed (then end() is not called).
  int begin(CUstream stream);
  // After the copy is enqueued: records the end. `tag` is the caller's name for the copy, handed
  // back by collect(). The timing then waits for collect().
  void end(int slot, CUstream stream, std::uint64_t tag);

  struct Timing {
    std::uint64_t tag = 0;
    std::uint64_t ns = 0;      // the stream from reaching the copy to its end
    std::int64_t gap_ns = -1;  // from the end of the copy timed before on its stream (-1: none)
  };
  // Each timing whose end has completed, to `done`. Returns at once if another thread is
  // collecting.
  void collect(const std::function<void(const Timing&)>& done);
  // `ctx` ends: the timing events made in it are dropped, destroyed in it where it is `alive`
  // (before the driver destroys it), else forgotten untouched (their handles may name new
  // objects by now). A timing under way in it is not timed; a slot gets new events at its next.
  void forget_context(CUcontext ctx, bool alive);
  // Whether a timing waits for collect() (one relaxed load).
  bool waiting() const { return waiting_.load(std::memory_order_relaxed) > 0; }

 private:
  enum class State { Free, Started, Ended, Done };
  // A stream as the timer tells streams apart: the per-thread default stream is each thread's own.
  struct StreamKey {
    CUcontext ctx = nullptr;
    CUstream stream = nullptr;
    std::uintptr_t thread = 0;
    bool operator==(const StreamKey& o) const {
      return ctx == o.ctx && stream == o.stream && thread == o.thread;
    }
  };
  struct Slot {
    State state = State::Free;
    CUcontext ctx = nullptr;  // the events' context
    CUevent start = nullptr, end = nullptr;
    StreamKey key;
    std::uint64_t tag = 0;
    int before = -1;      // the slot of the copy timed before on its stream (gaps), or -1
    int after = 0;        // timings begun after this one on its stream that read its end
    bool last = false;    // its end is its stream's last (streams_)
    bool broken = false;  // its events failed: not used again
  };
  struct LastOnStream {
    StreamKey key;
    int slot = -1;
    std::uint64_t used = 0;  // when it was last timed, in timings begun
  };
  // Gives `slot` a pair of timing events in `ctx` (kept for its next timing in the same one).
  bool events_for(Slot& slot, CUcontext ctx);
  void drop_events(Slot& slot);
  // The slot whose end precedes a timing on `key`, or -1; and its new last timing.
  int last_on(const StreamKey& key);
  void set_last(const StreamKey& key, int slot);
  // Lets a slot go once its own timing is read and no later timing needs its end.
  void release_if_unused(int slot);
  void unlink_before(Slot& slot);

  const DriverApi& driver_;
  const bool gaps_;
  std::mutex mu_;
  std::vector<Slot> slots_;
  std::vector<LastOnStream> streams_;
  std::uint64_t begun_ = 0;
  std::atomic<int> waiting_{0};
};

}  // namespace cmt
