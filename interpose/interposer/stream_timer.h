// Times copies on their streams, for register = auto (register_costs.h): a pair of timing events
// recorded on the copy's stream around it says how long the stream took from reaching the copy
// to its last DMA's end, which is what a copy costs a program whose next work waits on the
// stream. A call's own time says less: a cudaMemcpyAsync from pageable memory returns before its
// last DMA ends (bench/lab/NOTES.md 78). The time is read once the second event has completed,
// by a later call; nothing here ever waits for the GPU.
//
// A few timings at once (kSlots); a copy that finds none free, a stream being captured into a
// graph, or a driver that refuses an event, is simply not timed. Thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>

#include "cuda/driver_api.h"

namespace cmt {

class StreamTimer {
 public:
  static constexpr int kSlots = 16;

  explicit StreamTimer(const DriverApi& driver) : driver_(driver) {}
  // The process's is never destroyed (hooks may run at exit); a test's gives its events back.
  ~StreamTimer();
  StreamTimer(const StreamTimer&) = delete;
  StreamTimer& operator=(const StreamTimer&) = delete;

  // Before a copy is enqueued on `stream`, with the stream's context current: records the start.
  // Returns the timing's slot, or -1: not timed (then end() is not called).
  int begin(CUstream stream);
  // After the copy is enqueued: records the end. The timing then waits for collect().
  void end(int slot, CUstream stream, bool to_device, std::size_t bytes);
  // Each timing whose end has completed: done(to_device, bytes, ns). Returns at once if another
  // thread is collecting.
  void collect(const std::function<void(bool, std::size_t, std::uint64_t)>& done);
  // Whether a timing waits for collect() (one relaxed load).
  bool waiting() const { return waiting_.load(std::memory_order_relaxed) > 0; }

 private:
  enum class State { Free, Started, Ended };
  struct Slot {
    State state = State::Free;
    CUcontext ctx = nullptr;  // the events' context
    CUevent start = nullptr, end = nullptr;
    bool to_device = false;
    std::size_t bytes = 0;
  };
  // Gives `slot` a pair of timing events in `ctx` (kept for its next timing in the same one).
  bool events_for(Slot& slot, CUcontext ctx);
  void drop_events(Slot& slot);
  void free_slot(Slot& slot, bool keep_events);

  const DriverApi& driver_;
  std::mutex mu_;
  Slot slots_[kSlots];
  std::atomic<int> waiting_{0};
};

}  // namespace cmt
