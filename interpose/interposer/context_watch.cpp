#include "interposer/context_watch.h"

namespace cmt {

ContextWatch::Slot* ContextWatch::find(CUcontext ctx) {
  for (Slot& s : slots_)
    if (s.handle.load(std::memory_order_relaxed) == ctx) return &s;
  return nullptr;
}

ContextWatch::Verdict ContextWatch::check(CUcontext ctx, std::uint64_t id) {
  // Without the lock: ids are never reused, so a slot showing this handle with this id was
  // written for this very context, whatever else happened to the slot in between.
  for (Slot& s : slots_)
    if (s.handle.load(std::memory_order_acquire) == ctx &&
        s.id.load(std::memory_order_acquire) == id)
      return Verdict::Known;
  std::lock_guard<std::mutex> lk(mu_);
  if (Slot* s = find(ctx)) {
    const std::uint64_t known = s->id.load(std::memory_order_relaxed);
    if (known == kEnding) return Verdict::Unsure;
    if (known == id) return Verdict::Known;
    s->id.store(kEnding, std::memory_order_release);
    return Verdict::Ended;
  }
  Slot* free = find(nullptr);
  if (!free) return Verdict::Unwatched;
  free->id.store(id, std::memory_order_relaxed);
  free->handle.store(ctx, std::memory_order_release);
  return Verdict::Known;
}

void ContextWatch::settle(CUcontext ctx, std::uint64_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  if (Slot* s = find(ctx)) s->id.store(id, std::memory_order_release);
}

void ContextWatch::forget(CUcontext ctx) {
  if (!ctx) return;
  std::lock_guard<std::mutex> lk(mu_);
  if (Slot* s = find(ctx)) {
    s->handle.store(nullptr, std::memory_order_release);
    s->id.store(0, std::memory_order_release);
  }
}

}  // namespace cmt
