#include "interposer/later_frees.h"

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>

#include "common/log.h"
#include "common/thread_context.h"

namespace cmt {
namespace {

// The instance the exit closes (close_at_exit), and the handler that does it.
std::atomic<LaterFrees*> g_closed_at_exit{nullptr};

void close_at_exit() noexcept {
  if (LaterFrees* later = g_closed_at_exit.load(std::memory_order_acquire)) later->close();
}

// How long close() waits for the tasks queued (each waits for the GPU's queued work): a bound
// against a driver that never returns, not a delay.
constexpr std::chrono::seconds kCloseWait{30};

}  // namespace

LaterFrees::~LaterFrees() {
  close();
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_ && thread_->joinable()) thread_->join();
  LaterFrees* self = this;
  g_closed_at_exit.compare_exchange_strong(self, nullptr);
}

bool LaterFrees::start() noexcept {
  if (started_) return thread_ != nullptr;
  started_ = true;
  // The thread blocks every signal: the program's handlers run on the program's threads.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  try {
    thread_ = std::make_unique<std::thread>([this] { thread_main(); });
  } catch (...) {
    thread_.reset();
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (!thread_) {
    CMT_WARN_ONCE(
        "cmt's release thread could not start: frees of registered buffers wait for "
        "the GPU");
    return false;
  }
  if (close_at_exit_) {
    LaterFrees* none = nullptr;
    if (g_closed_at_exit.compare_exchange_strong(none, this)) std::atexit(close_at_exit);
  }
  return true;
}

bool LaterFrees::post(std::unique_ptr<Task>& task) noexcept {
  if (!task || in_child_.load(std::memory_order_acquire)) return false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (closed_ || !start()) return false;
    try {
      tasks_.push_back(std::move(task));
    } catch (...) {
      return false;  // task untouched: push_back moves only once it has room
    }
  }
  wake_.notify_one();
  return true;
}

void LaterFrees::close() noexcept {
  if (in_child_.load(std::memory_order_acquire)) return;
  std::unique_lock<std::mutex> lk(mu_);
  closed_ = true;
  if (!idle_.wait_for(lk, kCloseWait, [this] { return tasks_.empty() && !running_; }))
    CMT_LOG(warn, "{} frees of registered buffers still waited for the driver at exit",
            tasks_.size() + (running_ ? 1 : 0));
}

std::size_t LaterFrees::pending() noexcept {
  std::lock_guard<std::mutex> lk(mu_);
  return tasks_.size() + (running_ ? 1 : 0);
}

void LaterFrees::thread_main() noexcept {
  pthread_setname_np(pthread_self(), "cmt-release");  // what top -H and debuggers show
  t_thread.inside_cmt = true;                         // its own memcpy calls are libc's
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    wake_.wait(lk, [this] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stop_
    std::unique_ptr<Task> task = std::move(tasks_.front());
    tasks_.pop_front();
    running_ = true;
    lk.unlock();
    task->run();
    task.reset();
    lk.lock();
    running_ = false;
    if (tasks_.empty()) idle_.notify_all();
  }
}

}  // namespace cmt
