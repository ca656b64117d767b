// Work the registration cache hands off the program's thread: a free() of a chunk that holds
// registrations must first take them back from the driver, and cuMemHostUnregister waits for
// every kernel queued on the GPU (bench/lab/NOTES.md 59), so the free is finished here, on a
// thread of cmt's, in the order the frees came, and the program's free returns at once.
//
// The thread starts at the first task. At the process's exit the tasks still queued run before
// the exit goes on (the driver is still there then); in a forked child nothing is taken (the
// thread was the parent's, and its lock may have been held at the fork). Never throws.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace cmt {

class LaterFrees {
 public:
  struct Task {
    virtual ~Task() = default;
    virtual void run() noexcept = 0;
  };

  // close_at_exit: the process's exit closes this one (close()), from a handler registered when
  // its thread starts, so after the CUDA runtime's own, and run before it. One such at a time.
  explicit LaterFrees(bool close_at_exit = false) : close_at_exit_(close_at_exit) {}
  LaterFrees(const LaterFrees&) = delete;
  LaterFrees& operator=(const LaterFrees&) = delete;
  ~LaterFrees();  // runs what is queued (tests; the product's is never destroyed)

  // Takes `task` (true: it will run on the thread, and `task` is emptied) or leaves it to the
  // caller to run now (false: in a forked child, at exit, or no thread could start).
  bool post(std::unique_ptr<Task>& task) noexcept;
  // Returns once every task posted has run, and takes none from then on (the exit's handler).
  void close() noexcept;
  // In a forked child: takes nothing from now on, touching no lock.
  void forget_in_child() noexcept { in_child_.store(true, std::memory_order_release); }
  // Tasks waiting or running now.
  std::size_t pending() noexcept;

 private:
  bool start() noexcept;  // with mu_ held
  void thread_main() noexcept;

  const bool close_at_exit_;
  std::atomic<bool> in_child_{false};
  std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<std::unique_ptr<Task>> tasks_;
  bool running_ = false;  // a task is being run
  bool started_ = false, closed_ = false, stop_ = false;
  std::unique_ptr<std::thread> thread_;
};

}  // namespace cmt
