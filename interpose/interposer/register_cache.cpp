#include "interposer/register_cache.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/log.h"

namespace cmt {

struct RegisterCache::Entry {
  std::uintptr_t page_lo = 0, page_hi = 0;  // the registered pages
  std::uintptr_t copy_lo = 0, copy_hi = 0;  // the copied range that registered them
  std::uint64_t last = 0;                   // tick of the last copy from it
  bool ready = false;    // registered (not while cuMemHostRegister runs)
  bool dropped = false;  // released while being registered: the registering thread drops it
  CUcontext context = nullptr;  // current when it was registered: current again to unregister it
  std::atomic<int> users{0};
  std::size_t bytes() const { return page_hi - page_lo; }
};

namespace {

// Set while this thread works inside the cache (its lock held, or a driver call it makes): a
// release reported then is the cache's own or the driver's memory, never a registered range.
thread_local bool t_in_cache = false;

// The first of `entries` (by first page) whose pages end after `from`: the one before the first
// that starts after it, if its pages reach that far (pages never overlap: only that one can).
template <typename Entries>
auto first_reaching(Entries& entries, std::uintptr_t from) -> decltype(entries.begin()) {
  auto it = entries.upper_bound(from);
  if (it != entries.begin() && std::prev(it)->second->page_hi > from) --it;
  return it;
}

class InCache {
 public:
  InCache() : was_(t_in_cache) { t_in_cache = true; }
  ~InCache() { t_in_cache = was_; }

 private:
  bool was_;
};

bool overlap(std::uintptr_t a_lo, std::uintptr_t a_hi, std::uintptr_t b_lo, std::uintptr_t b_hi) {
  return a_lo < b_hi && b_lo < a_hi;
}

std::uintptr_t page_size() {
  static const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  return page;
}

std::uintptr_t round_up_to_page(std::uintptr_t a) {
  const std::uintptr_t p = page_size();
  return a > UINTPTR_MAX - (p - 1) ? UINTPTR_MAX / p * p : (a + p - 1) / p * p;
}

// Whether make_room may evict `e` for a range last copied before tick `since`: registered, no
// copy using it, and not copied since.
bool evictable(const RegisterCache::Entry& e, std::uint64_t since) {
  return e.ready && e.users.load(std::memory_order_acquire) == 0 && e.last < since;
}

// A chunk's release drops the registrations of ranges copied inside it (drop's `hits`).
auto copied_inside(std::uintptr_t lo, std::uintptr_t hi) {
  return [lo, hi](std::uintptr_t copy_lo, std::uintptr_t copy_hi, std::uintptr_t, std::uintptr_t) {
    return overlap(copy_lo, copy_hi, lo, hi);
  };
}

}  // namespace

RegisterCache::Use& RegisterCache::Use::operator=(Use&& other) noexcept {
  if (this != &other) {
    if (entry_) entry_->users.fetch_sub(1, std::memory_order_release);
    entry_ = other.entry_;
    other.entry_ = nullptr;
  }
  return *this;
}

std::pair<std::uintptr_t, std::uintptr_t> RegisterCache::Use::pages() const {
  return entry_ ? std::make_pair(entry_->page_lo, entry_->page_hi)
                : std::pair<std::uintptr_t, std::uintptr_t>{0, 0};
}

RegisterCache::Use::~Use() {
  if (entry_) entry_->users.fetch_sub(1, std::memory_order_release);
}

RegisterCache::RegisterCache(const DriverApi& driver, RegisterSettings settings,
                             Trackable trackable, Watch watch)
    : driver_(driver), settings_(settings), trackable_(std::move(trackable)),
      watch_(std::move(watch)) {}

RegisterCache::~RegisterCache() {
  later_.reset();  // the frees taken over made first: their tasks use the table
  InCache inside;
  std::vector<std::unique_ptr<Entry>> gone;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& [first, e] : entries_)
      if (e->ready) gone.push_back(std::move(e));
    entries_.clear();
    for (auto& e : evicting_) gone.push_back(std::move(e));  // none once later_'s tasks ran
    evicting_.clear();
    if (watch_) watch_(0, 0, settings_.from);
  }
  if (!forked_child_) unregister(gone);
}

void RegisterCache::add_entry(std::unique_ptr<Entry> e) {
  reach_ = std::max({reach_, e->page_lo - std::min(e->page_lo, e->copy_lo),
                     std::max(e->page_hi, e->copy_hi) - e->page_hi});
  const std::uintptr_t first = e->page_lo;
  entries_.emplace(first, std::move(e));
}

RegisterCache::Entry* RegisterCache::covering(std::uintptr_t lo, std::uintptr_t hi) const {
  const std::uintptr_t end = window_end(lo + 1);
  for (auto it = first_reaching(entries_, window_start(lo)); it != entries_.end() && it->first < end;
       ++it) {
    const Entry& e = *it->second;
    if (e.ready && e.copy_lo <= lo && hi <= e.copy_hi) return it->second.get();
  }
  return nullptr;
}

bool RegisterCache::touches(const void* p, std::size_t bytes) const {
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t hi = bytes > UINTPTR_MAX - lo ? UINTPTR_MAX : lo + bytes;
  if (!overlap(lo, hi, entries_lo_.load(std::memory_order_acquire),
               entries_hi_.load(std::memory_order_acquire)))
    return false;
  InCache inside;
  std::lock_guard<std::mutex> lk(mu_);
  return overlaps_entry(lo, hi) || overlaps_retiring(lo, hi);
}

bool RegisterCache::covers(const void* p, std::size_t bytes) const {
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  InCache inside;
  std::lock_guard<std::mutex> lk(mu_);
  return covering(lo, lo + bytes) != nullptr;
}

RegisterCache::Candidate* RegisterCache::find_candidate(std::uintptr_t lo, std::uintptr_t hi) {
  const auto it = candidate_index_.find({lo, hi});
  return it == candidate_index_.end() ? nullptr : &candidates_[it->second];
}

void RegisterCache::clear_candidate(Candidate& c) {
  if (c.lo == c.hi) return;
  const int slot = static_cast<int>(&c - candidates_.data());
  candidate_index_.erase({c.lo, c.hi});
  candidates_by_lo_.erase({c.lo, slot});
  if (candidates_by_lo_.empty()) longest_candidate_ = 0;
  unlink(c);
  free_slots_.push_back(slot);
  c = Candidate{};
}

void RegisterCache::unlink(Candidate& c) {
  (c.older >= 0 ? candidates_[c.older].newer : oldest_) = c.newer;
  (c.newer >= 0 ? candidates_[c.newer].older : newest_) = c.older;
  c.older = c.newer = -1;
}

void RegisterCache::link_newest(Candidate& c) {
  const int slot = static_cast<int>(&c - candidates_.data());
  c.older = newest_;
  c.newer = -1;
  (newest_ >= 0 ? candidates_[newest_].newer : oldest_) = slot;
  newest_ = slot;
}

// The range's candidate; a new one takes a free slot, else that of the least recently copied one
// not being registered.
RegisterCache::Candidate& RegisterCache::candidate_for(std::uintptr_t lo, std::uintptr_t hi) {
  if (Candidate* c = find_candidate(lo, hi)) return *c;
  if (candidate_index_.empty() && free_slots_.empty())
    for (int i = kCandidates - 1; i >= 0; --i) free_slots_.push_back(i);
  Candidate* slot = nullptr;
  if (!free_slots_.empty()) {
    slot = &candidates_[free_slots_.back()];
    free_slots_.pop_back();
  } else {
    for (int i = oldest_; i >= 0 && !slot; i = candidates_[i].newer)
      if (!candidates_[i].registering) slot = &candidates_[i];
    if (!slot) slot = &candidates_[oldest_];  // all being registered: the oldest's is dropped
    candidate_index_.erase({slot->lo, slot->hi});
    candidates_by_lo_.erase({slot->lo, static_cast<int>(slot - candidates_.data())});
    unlink(*slot);
  }
  *slot = Candidate{lo, hi, 0, false, false, next_id_++};
  link_newest(*slot);
  candidate_index_[{lo, hi}] = static_cast<int>(slot - candidates_.data());
  candidates_by_lo_.insert({lo, static_cast<int>(slot - candidates_.data())});
  longest_candidate_ = std::max(longest_candidate_, hi - lo);
  if (lo < watch_lo_ || hi > watch_hi_ || watch_lo_ == watch_hi_) update_watch();  // only widens
  return *slot;
}

RegisterCache::Use RegisterCache::offer(const void* p, std::size_t bytes, bool* registered_now) {
  if (registered_now) *registered_now = false;
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  if (bytes == 0 || bytes > UINTPTR_MAX - lo) return {};
  const std::uintptr_t hi = lo + bytes;
  InCache inside;
  std::unique_lock<std::mutex> lock(mu_);
  if (forked_child_) return {};
  ++tick_;
  if (Entry* e = covering(lo, hi)) {
    e->last = tick_;
    e->users.fetch_add(1, std::memory_order_acquire);
    ++counts_.hits;
    return Use(e);
  }
  if (bytes < settings_.from) return {};
  Candidate& c = candidate_for(lo, hi);
  copied(c);
  if (!due_to_register(c, c.copies + 1, bytes)) {
    if (!c.refused && !c.registering && c.copies + 1 < settings_.after) ++c.copies;
    return {};
  }
  ++c.copies;
  return register_range(lo, hi, c, lock, registered_now);
}

RegisterCache::Use RegisterCache::find(const void* p, std::size_t bytes) {
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  if (bytes == 0 || bytes > UINTPTR_MAX - lo) return {};
  InCache inside;
  std::lock_guard<std::mutex> lk(mu_);
  Entry* e = forked_child_ ? nullptr : covering(lo, lo + bytes);
  if (!e) return {};
  e->last = ++tick_;
  e->users.fetch_add(1, std::memory_order_acquire);
  ++counts_.hits;
  return Use(e);
}

bool RegisterCache::due(const void* p, std::size_t bytes) {
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  if (bytes == 0 || bytes > UINTPTR_MAX - lo) return false;
  const std::uintptr_t hi = lo + bytes;
  InCache inside;
  std::lock_guard<std::mutex> lk(mu_);
  if (forked_child_) return false;
  if (covering(lo, hi)) return true;
  if (bytes < settings_.from) return false;
  const auto it = candidate_index_.find({lo, hi});
  if (it == candidate_index_.end()) return settings_.after <= 1 && !settings_.paid;
  const Candidate& c = candidates_[it->second];
  return due_to_register(c, c.copies + 1, bytes);
}

void RegisterCache::count(const void* p, std::size_t bytes) {
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  if (bytes < settings_.from || bytes > UINTPTR_MAX - lo) return;
  InCache inside;
  std::lock_guard<std::mutex> lk(mu_);
  if (forked_child_) return;
  ++tick_;
  Candidate& c = candidate_for(lo, lo + bytes);
  copied(c);
  if (!c.refused && !c.registering && c.copies + 1 < settings_.after) ++c.copies;
}

void RegisterCache::add_loss(const void* p, std::size_t bytes, double ns) {
  if (!settings_.paid || !(ns > 0)) return;
  const auto lo = reinterpret_cast<std::uintptr_t>(p);
  if (bytes > UINTPTR_MAX - lo) return;
  InCache inside;
  std::lock_guard<std::mutex> lk(mu_);
  if (Candidate* c = find_candidate(lo, lo + bytes)) c->lost_ns += ns;
}

// With the lock held on entry and on return; released around the driver calls and the look at
// the memory's kind.
RegisterCache::Use RegisterCache::register_range(std::uintptr_t lo, std::uintptr_t hi,
                                                 Candidate& candidate,
                                                 std::unique_lock<std::mutex>& lock,
                                                 bool* registered_now) {
  candidate.registering = true;
  const std::uint64_t id = candidate.id;
  auto refuse = [&](bool for_good) {
    if (candidate.id == id) {
      candidate.registering = false;
      candidate.refused = for_good;
    }
    ++counts_.refusals;
    return Use();
  };
  // Room first, before any look at the memory: a range kept out is staged this time and offered
  // again at its next copy (the registrations it would evict may have aged by then).
  const std::size_t rough = round_up_to_page(hi) - lo / page_size() * page_size();
  if (rough <= settings_.max_bytes && !room_for(rough, candidate.prev)) {
    candidate.registering = false;
    ++counts_.kept_out;
    return {};
  }
  lock.unlock();
  const TrackableRange pages = trackable_(reinterpret_cast<const void*>(lo), hi - lo);
  lock.lock();
  if (!pages.ok || candidate.id != id) {
    CMT_LOG(debug, "hot buffer [{:#x}, +{}) not registered: {}", lo, hi - lo,
            pages.ok ? "released meanwhile" : pages.why);
    return refuse(true);
  }
  std::uintptr_t page_lo = pages.lo, page_hi = pages.hi;
  // Pages still being taken back (evicted, or released by another thread): not yet; CUDA would
  // find them registered.
  if (overlaps_retiring(page_lo, page_hi)) return refuse(false);
  // A page a registration already holds (a neighbour's: CUDA registers a page once) stays out:
  // the range's own whole pages are registered, and a copy's bytes on the shared pages go
  // through pinned scratch (hot_copy.h).
  if (overlaps_entry(page_lo, page_hi)) {
    if (!inside_pages(lo, hi, &page_lo, &page_hi) || overlaps_entry(page_lo, page_hi))
      return refuse(true);
  }
  const std::size_t bytes = page_hi - page_lo;
  std::vector<std::unique_ptr<Entry>> evicted;
  if (bytes > settings_.max_bytes) return refuse(true);
  if (!make_room(bytes, candidate.prev, &evicted)) {
    // Nothing was evicted (make_room checks first); unregister kept so that nothing evicted is
    // ever left registered (it was, before that check, when copies held the last victims).
    lock.unlock();
    unregister(evicted);
    lock.lock();
    if (candidate.id == id) candidate.registering = false;
    ++counts_.kept_out;
    return {};
  }
  // Pending: watched (and seen by overlap checks) before the pages are registered.
  auto owned = std::make_unique<Entry>();
  Entry* e = owned.get();
  e->page_lo = page_lo;
  e->page_hi = page_hi;
  e->copy_lo = lo;
  e->copy_hi = hi;
  add_entry(std::move(owned));
  registered_bytes_ += bytes;
  update_watch();
  lock.unlock();
  unregister_evicted(evicted);
  const auto asked = std::chrono::steady_clock::now();
  CUresult r = register_pages(e, lo, hi);
  if (r == CUDA_SUCCESS)
    costs_.registered(
        bytes, static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::steady_clock::now() - asked)
                                              .count()));
  lock.lock();
  const bool dropped = e->dropped;
  if (r != CUDA_SUCCESS || dropped) {
    std::vector<std::unique_ptr<Entry>> gone;
    const auto it = entries_.find(e->page_lo);
    if (it != entries_.end() && it->second.get() == e) {
      if (r == CUDA_SUCCESS) retire(*e);  // registered, then released meanwhile
      gone.push_back(std::move(it->second));
      entries_.erase(it);
    }
    registered_bytes_ -= e->bytes();
    update_watch();
    if (r != CUDA_SUCCESS) {
      ++counts_.failures;
      CMT_LOG(debug, "hot buffer [{:#x}, +{}) not registered: {}", lo, hi - lo,
              cuda_error_text(driver_, r));
      return refuse(true);
    }
    if (candidate.id == id) candidate.registering = false;
    lock.unlock();
    unregister(gone);  // a release came while registering: never used
    lock.lock();
    return {};
  }
  CMT_LOG(debug, "hot buffer [{:#x}, +{}) registered", lo, hi - lo);
  e->ready = true;
  e->last = tick_;
  e->users.fetch_add(1, std::memory_order_acquire);
  ++counts_.registrations;
  ++counts_.hits;
  if (candidate.id == id) clear_candidate(candidate);  // the registration stands for it now
  update_watch();
  if (registered_now) *registered_now = true;
  return Use(e);
}

bool RegisterCache::overlaps_entry(std::uintptr_t lo, std::uintptr_t hi) const {
  // The last entry starting below `hi` is the only one that can: the pages of those before it
  // end where its begin, or earlier.
  auto it = entries_.lower_bound(hi);
  return it != entries_.begin() && std::prev(it)->second->page_hi > lo;
}

bool RegisterCache::inside_pages(std::uintptr_t lo, std::uintptr_t hi, std::uintptr_t* page_lo,
                                 std::uintptr_t* page_hi) {
  const std::uintptr_t page = page_size();
  *page_lo = (lo + page - 1) / page * page;
  *page_hi = hi / page * page;
  return *page_hi > *page_lo;
}

// Without the lock (a driver call). A page of the range that someone else registered (the
// program, on a page it shares with the range) makes CUDA refuse: the range's own whole pages are
// registered instead, and `e` shrunk to them under the lock.
CUresult RegisterCache::register_pages(Entry* e, std::uintptr_t lo, std::uintptr_t hi) {
  RelaxedCaptureMode relaxed(driver_);
  if (driver_.ctx_get_current(&e->context) != CUDA_SUCCESS) e->context = nullptr;
  std::uintptr_t page_lo = e->page_lo, page_hi = e->page_hi;
  CUresult r = driver_.mem_host_register(reinterpret_cast<void*>(page_lo), page_hi - page_lo,
                                         CU_MEMHOSTREGISTER_PORTABLE);
  if (r != CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED || !inside_pages(lo, hi, &page_lo, &page_hi) ||
      (page_lo == e->page_lo && page_hi == e->page_hi))
    return r;
  r = driver_.mem_host_register(reinterpret_cast<void*>(page_lo), page_hi - page_lo,
                                CU_MEMHOSTREGISTER_PORTABLE);
  if (r == CUDA_SUCCESS) {
    std::lock_guard<std::mutex> lk(mu_);
    registered_bytes_ -= e->bytes() - (page_hi - page_lo);
    auto node = entries_.extract(e->page_lo);  // filed under its first page: moved with it
    e->page_lo = page_lo;
    e->page_hi = page_hi;
    if (!node.empty()) add_entry(std::move(node.mapped()));
  }
  return r;
}

bool RegisterCache::room_for(std::size_t bytes, std::uint64_t since) const {
  if (registered_bytes_ + bytes <= settings_.max_bytes) return true;
  std::size_t freeable = 0;  // the cap full: a walk of the entries, only then
  for (const auto& [first, e] : entries_)
    if (evictable(*e, since)) freeable += e->bytes();
  return registered_bytes_ + bytes <= settings_.max_bytes + freeable;
}

bool RegisterCache::make_room(std::size_t bytes, std::uint64_t since,
                              std::vector<std::unique_ptr<Entry>>* evicted) {
  // Nothing is evicted unless enough can be: registrations in use (or being made), and those
  // copied since the newcomer's previous copy, stay.
  if (!room_for(bytes, since)) return false;
  while (registered_bytes_ + bytes > settings_.max_bytes) {
    auto victim = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (evictable(*it->second, since) &&
          (victim == entries_.end() || it->second->last < victim->second->last))
        victim = it;
    if (victim == entries_.end()) return false;
    registered_bytes_ -= victim->second->bytes();
    ++counts_.evictions;
    retire(*victim->second);
    evicted->push_back(std::move(victim->second));
    entries_.erase(victim);
  }
  return true;
}

// Evicted entries taken back on later_'s thread: each task takes whatever waits in evicting_
// when it runs (a release may have taken some back itself meanwhile).
struct RegisterCache::EvictTask final : LaterFrees::Task {
  explicit EvictTask(RegisterCache* c) : cache(c) {}
  RegisterCache* cache;
  void run() noexcept override {
    InCache inside;  // the driver's own frees while it unregisters are not reports
    std::vector<std::unique_ptr<Entry>> gone;
    {
      std::lock_guard<std::mutex> lk(cache->mu_);
      gone.swap(cache->evicting_);
    }
    cache->unregister(gone);
  }
};

void RegisterCache::unregister_evicted(std::vector<std::unique_ptr<Entry>>& evicted) {
  if (evicted.empty()) return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (later_ && free_now_ && !forked_child_) {
      bool room = true;
      try {
        evicting_.reserve(evicting_.size() + evicted.size());  // the moves below cannot throw
      } catch (...) {
        room = false;
      }
      // Posted with mu_ held (the thread takes mu_ only outside LaterFrees' lock), so the task
      // cannot run before the entries are in evicting_.
      std::unique_ptr<LaterFrees::Task> task(room ? new (std::nothrow) EvictTask(this) : nullptr);
      if (task && later_->post(task)) {
        for (auto& e : evicted) evicting_.push_back(std::move(e));
        evicted.clear();
        return;
      }
    }
  }
  unregister(evicted);  // no thread (or no memory for it): now, as before
}

bool RegisterCache::overlaps_retiring(std::uintptr_t lo, std::uintptr_t hi) const {
  for (const auto& [page_lo, page_hi] : retiring_)
    if (overlap(page_lo, page_hi, lo, hi)) return true;
  return false;
}

template <typename Hits>
void RegisterCache::drop(std::uintptr_t lo, std::uintptr_t hi, Hits hits, std::uint64_t* counter,
                         Pages wait) {
  if (t_in_cache) return;
  InCache inside;
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<Entry>> gone;
  {
    std::lock_guard<std::mutex> lk(mu_);
    collect(lo, hi, hits, counter, gone);
  }
  finish(wait, gone, started);
}

RegisterCache::Pages RegisterCache::chunk_pages(std::uintptr_t lo, std::uintptr_t hi) {
  Pages pages;
  if (!inside_pages(lo, hi, &pages.first, &pages.second)) pages = {0, 0};
  return pages;
}

template <typename Hits>
void RegisterCache::collect(std::uintptr_t lo, std::uintptr_t hi, Hits hits, std::uint64_t* counter,
                            std::vector<std::unique_ptr<Entry>>& gone) {
  bool changed = false;
  // A candidate being registered right now loses its slot: its registering thread, finding
  // the slot's id changed, drops what it registered. Only candidates starting within the
  // longest one's length below `lo` can reach it.
  const std::uintptr_t from = lo > longest_candidate_ ? lo - longest_candidate_ : 0;
  for (auto it = candidates_by_lo_.lower_bound({from, -1});
       it != candidates_by_lo_.end() && it->first < hi;) {
    Candidate& c = candidates_[it->second];
    ++it;  // clear_candidate erases c's own place in the set
    if (overlap(c.lo, c.hi, lo, hi)) {
      clear_candidate(c);
      changed = true;
    }
  }
  // Only the entries whose pages or copied range can reach [lo, hi).
  const std::uintptr_t end = window_end(hi);
  for (auto it = first_reaching(entries_, window_start(lo));
       it != entries_.end() && it->first < end;) {
    Entry& e = *it->second;
    if (!hits(e.copy_lo, e.copy_hi, e.page_lo, e.page_hi)) {
      ++it;
    } else if (!e.ready) {
      e.dropped = true;  // its registering thread drops it
      ++it;
    } else {
      CMT_LOG(debug, "hot buffer [{:#x}, +{}) unregistered: [{:#x}, +{}) {}", e.copy_lo,
              e.copy_hi - e.copy_lo, lo, hi - lo,
              counter == &counts_.handed_back ? "is handed back to CUDA" : "is released");
      registered_bytes_ -= e.bytes();
      ++*counter;
      retire(e);
      gone.push_back(std::move(it->second));
      it = entries_.erase(it);
      changed = true;
    }
  }
  // Evicted ones still registered (already retired and counted): taken back by this release, so
  // that it returns only once they are.
  for (auto it = evicting_.begin(); it != evicting_.end();) {
    Entry& e = **it;
    if (hits(e.copy_lo, e.copy_hi, e.page_lo, e.page_hi)) {
      gone.push_back(std::move(*it));
      it = evicting_.erase(it);
    } else {
      ++it;
    }
  }
  if (changed) update_watch();
}

bool RegisterCache::finish(Pages wait, std::vector<std::unique_ptr<Entry>>& gone,
                           std::chrono::steady_clock::time_point started) {
  const bool all = unregister(gone);
  wait_until_unregistered(wait.first, wait.second);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - started).count();
  std::lock_guard<std::mutex> lk(mu_);
  ++counts_.reports;
  counts_.report_ns += static_cast<std::uint64_t>(ns);
  return all;
}

// A free chunk_freed took over: its registrations back from the driver, then the chunk freed.
struct RegisterCache::FreeTask final : LaterFrees::Task {
  RegisterCache* cache = nullptr;
  void* chunk = nullptr;
  Pages wait;  // the chunk's own pages (chunk_pages)
  std::chrono::steady_clock::time_point started;
  std::vector<std::unique_ptr<Entry>> gone;
  void run() noexcept override {
    InCache inside;  // the driver's own frees while it unregisters are not reports
    // A registration the driver would not take back may outlive the chunk's pages: the chunk is
    // kept (leaked), so that nothing new is ever mapped where the driver still holds old pages.
    if (cache->finish(wait, gone, started)) {
      cache->free_now_(chunk);
    } else {
      CMT_WARN_ONCE("a hot buffer could not be unregistered; its memory is kept, not freed");
    }
  }
};

void RegisterCache::free_later(void (*free_now)(void*), bool close_at_exit) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!later_) later_ = std::make_unique<LaterFrees>(close_at_exit);
  free_now_ = free_now;
}

bool RegisterCache::frees_later(std::uintptr_t lo, std::uintptr_t hi) const {
  if (t_in_cache || hi <= lo) return false;
  InCache inside;
  std::lock_guard<std::mutex> lk(mu_);
  if (!free_now_ || forked_child_) return false;
  const auto hits = copied_inside(lo, hi);
  const std::uintptr_t end = window_end(hi);
  for (auto it = first_reaching(entries_, window_start(lo)); it != entries_.end() && it->first < end;
       ++it) {
    const Entry& e = *it->second;
    if (e.ready && hits(e.copy_lo, e.copy_hi, e.page_lo, e.page_hi)) return true;
  }
  for (const auto& e : evicting_)
    if (hits(e->copy_lo, e->copy_hi, e->page_lo, e->page_hi)) return true;
  return overlaps_retiring(lo, hi);  // being taken back: chunk_freed queues the free behind it
}

std::size_t RegisterCache::frees_pending() {
  return later_ ? later_->pending() : 0;
}

bool RegisterCache::chunk_freed(void* chunk, std::uintptr_t lo, std::uintptr_t hi) {
  if (t_in_cache) return false;  // the cache's own work: as drop, no report
  if (!free_now_) {
    chunk_released(lo, hi);
    return false;
  }
  InCache inside;
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<Entry>> gone;
  bool being_taken_back = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (forked_child_) return false;  // nothing registered: the parent's were forgotten
    collect(lo, hi, copied_inside(lo, hi), &counts_.invalidations, gone);
    // An eviction already being taken back on later_'s thread: the free is queued behind it
    // there, rather than waiting for it here.
    being_taken_back = gone.empty() && overlaps_retiring(lo, hi);
  }
  if (!gone.empty() || being_taken_back) {
    std::unique_ptr<FreeTask> task(new (std::nothrow) FreeTask);
    if (task) {
      task->cache = this;
      task->chunk = chunk;
      task->wait = chunk_pages(lo, hi);
      task->started = started;
      task->gone.swap(gone);
      std::unique_ptr<LaterFrees::Task> posted(task.release());
      if (later_->post(posted)) {
        std::lock_guard<std::mutex> lk(mu_);
        ++counts_.freed_later;
        return true;
      }
      gone.swap(static_cast<FreeTask&>(*posted).gone);  // not taken: finished here
    }
  }
  finish(chunk_pages(lo, hi), gone, started);
  return false;
}

void RegisterCache::pages_released(std::uintptr_t lo, std::uintptr_t hi) {
  drop(lo, hi, [&](std::uintptr_t copy_lo, std::uintptr_t copy_hi, std::uintptr_t page_lo,
           std::uintptr_t page_hi) {
    return overlap(page_lo, page_hi, lo, hi) || overlap(copy_lo, copy_hi, lo, hi);
  }, &counts_.invalidations, {lo, hi});
}

void RegisterCache::chunk_released(std::uintptr_t lo, std::uintptr_t hi) {
  drop(lo, hi, copied_inside(lo, hi), &counts_.invalidations, chunk_pages(lo, hi));
}

void RegisterCache::hand_back(std::uintptr_t lo, std::uintptr_t hi) {
  if (hi <= lo || !touches(reinterpret_cast<const void*>(lo), hi - lo)) return;
  drop(lo, hi, [&](std::uintptr_t, std::uintptr_t, std::uintptr_t page_lo,
                   std::uintptr_t page_hi) { return overlap(page_lo, page_hi, lo, hi); },
       &counts_.handed_back, {lo, hi});
}

void RegisterCache::all_released() {
  drop(0, UINTPTR_MAX,
       [](std::uintptr_t, std::uintptr_t, std::uintptr_t, std::uintptr_t) { return true; },
       &counts_.invalidations, {0, UINTPTR_MAX});
}

std::size_t RegisterCache::forget_context(CUcontext ctx, bool alive) {
  std::vector<Pages> ranges;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (auto& [first, e] : entries_)
      if (e->context == ctx) {
        if (!alive) e->context = nullptr;
        ranges.emplace_back(e->page_lo, e->page_hi);
      }
  }
  for (const auto& [lo, hi] : ranges)
    drop(lo, hi,
         [lo = lo, hi = hi](std::uintptr_t, std::uintptr_t, std::uintptr_t page_lo,
                            std::uintptr_t page_hi) { return page_lo == lo && page_hi == hi; },
         &counts_.invalidations, {lo, hi});
  return ranges.size();
}

bool RegisterCache::unregister(std::vector<std::unique_ptr<Entry>>& gone) {
  bool all = true;
  for (auto& e : gone) {
    // A copy still using it finishes first (a program that frees a buffer while another thread
    // copies from it has a bug of its own; cmt's DMA must still not fault).
    while (e->users.load(std::memory_order_acquire) > 0) std::this_thread::yield();
    {
      // The context it was registered in (a thread of cmt's has none current; the program's
      // may have another), and the caller's put back after.
      RelaxedCaptureMode relaxed(driver_);
      ScopedContext in(driver_, e->context);
      const CUresult r = driver_.mem_host_unregister(reinterpret_cast<void*>(e->page_lo));
      if (r != CUDA_SUCCESS) {
        all = false;
        CMT_LOG(debug, "hot buffer [{:#x}, {:#x}): unregistering failed (CUDA error {})",
                e->page_lo, e->page_hi, static_cast<int>(r));
      }
    }
    std::lock_guard<std::mutex> lk(mu_);
    const auto it = std::find(retiring_.begin(), retiring_.end(),
                              std::make_pair(e->page_lo, e->page_hi));
    if (it != retiring_.end()) {
      retiring_.erase(it);
      update_watch();
    }
  }
  gone.clear();
  return all;
}

void RegisterCache::retire(const Entry& e) {
  retiring_.emplace_back(e.page_lo, e.page_hi);
}

void RegisterCache::wait_until_unregistered(std::uintptr_t lo, std::uintptr_t hi) {
  if (hi <= lo) return;
  const auto deadline = std::chrono::steady_clock::now() + settings_.release_wait;
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      bool busy = overlaps_retiring(lo, hi);
      for (auto it = first_reaching(entries_, lo); it != entries_.end() && it->first < hi; ++it)
        busy |= !it->second->ready && it->second->dropped;  // pages overlapping [lo, hi)
      if (!busy) return;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      // CUDA may now meet a page of cmt's still registered there: worth a warning.
      CMT_WARN_ONCE("a release or a copy left to CUDA went on before a hot buffer's pages were "
                    "unregistered (the driver took more than {} ms)",
                    settings_.release_wait.count());
      CMT_LOG(debug, "a release of [{:#x}, {:#x}) went on before cmt's registration there was "
              "taken back (after {} ms)", lo, hi, settings_.release_wait.count());
      return;
    }
    std::this_thread::yield();
  }
}

void RegisterCache::update_watch() {
  // The candidates' span from the ordered set: from the first start to the last start plus the
  // longest length (a bound: the watch may be wider than the candidates, never narrower).
  std::uintptr_t lo = UINTPTR_MAX, hi = 0;
  if (!candidates_by_lo_.empty()) {
    lo = candidates_by_lo_.begin()->first;
    const std::uintptr_t last = candidates_by_lo_.rbegin()->first;
    hi = longest_candidate_ > UINTPTR_MAX - last ? UINTPTR_MAX : last + longest_candidate_;
  }
  std::uintptr_t entries_lo = UINTPTR_MAX, entries_hi = 0;
  if (!entries_.empty()) {  // in order, their pages apart: the first's start, the last's end
    entries_lo = entries_.begin()->second->page_lo;
    entries_hi = entries_.rbegin()->second->page_hi;
  } else {
    reach_ = 0;
  }
  for (const auto& [page_lo, page_hi] : retiring_) {  // still registered: touches() sees them
    entries_lo = std::min(entries_lo, page_lo);
    entries_hi = std::max(entries_hi, page_hi);
  }
  entries_lo_.store(entries_hi > entries_lo ? entries_lo : 0, std::memory_order_release);
  entries_hi_.store(entries_hi > entries_lo ? entries_hi : 0, std::memory_order_release);
  lo = std::min(lo, entries_lo);
  hi = std::max(hi, entries_hi);
  if (hi <= lo) lo = hi = 0;
  watch_lo_ = lo;
  watch_hi_ = hi;
  if (watch_) watch_(lo, hi, settings_.from);
}

void RegisterCache::forget_in_child() {
  InCache inside;  // the lock is held (fork_lock), and the frees below are the cache's own
  forked_child_ = true;
  if (later_) later_->forget_in_child();  // its thread and its queue were the parent's
  if (watch_) watch_(0, 0, settings_.from);
  for (auto& [first, e] : entries_) e.release();  // leaked: the parent's, no driver to unregister
  entries_.clear();
  for (auto& e : evicting_) e.release();
  evicting_.clear();
  reach_ = 0;
  for (Candidate& c : candidates_) c = Candidate{};
  candidate_index_.clear();
  candidates_by_lo_.clear();
  longest_candidate_ = 0;
  oldest_ = newest_ = -1;
  retiring_.clear();  // the parent's own to take back
  free_slots_.clear();
  registered_bytes_ = 0;
  counts_ = RegisterCounts{};  // the child's statistics count what it does itself
}

RegisterCounts RegisterCache::counts() const {
  InCache inside;
  std::lock_guard<std::mutex> lk(mu_);
  RegisterCounts out = counts_;
  out.registered_bytes = registered_bytes_;
  return out;
}

}  // namespace cmt
