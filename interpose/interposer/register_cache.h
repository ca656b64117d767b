// Hot buffers (register = hot): a pageable host range that the program copies again and again is
// registered with CUDA once (cuMemHostRegister) and from then on copied by the DMA engine straight
// from the program's pages, at pinned speed at every size, with no staging and no copy threads.
//
// A range becomes a candidate at its first copy of at least `from` bytes and is registered at its
// `after`-th, if its memory is of a kind whose every release cmt sees (trackable_memory.h). A page
// it shares with a registration already there (cmt's or the program's: CUDA registers a page once)
// stays out, and its bytes on that page are copied through pinned scratch (hot_copy.h).
//
// Registered bytes are bounded. To make room, the least recently copied registrations not in use
// are evicted, but only those not copied since the newcomer's previous copy: a program that copies
// more bytes in turn than the bound holds (a model's weights offloaded, pass after pass) would
// otherwise evict, before its next copy, every registration it is about to copy again, and pay a
// registration and an unregistration for every copy, slower than staging. So a set larger than
// the bound keeps the registrations it has and stages the rest (`kept_out`), while a program that
// moves on to new buffers still has its old ones evicted. Evicted registrations are taken back
// from the driver on the cache's thread (later_frees.h) once there is one: cuMemHostUnregister
// waits for every kernel queued on the GPU, and an eviction happens inside the program's copy.
//
// A registration pins the pages its range had when it was made; after the program gives those
// pages back and maps new ones at the same address, a copy would silently read the old ones. So
// libcmt-release.so's hooks report every release before it happens (common/release_abi.h), and
// the cache drops each registration on those pages, and each candidate there, first. A chunk's
// release drops the registrations of copied ranges inside it; an explicit page release (munmap,
// madvise...) those whose registered pages it touches.
//
// Thread-safe. Driver calls (register, unregister) are made outside the lock, so a thread inside
// the driver that frees memory cannot deadlock against one registering; a release reported from
// inside the cache's own work on the same thread (the driver freeing its own memory) is ignored.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cuda/driver_api.h"
#include "interposer/later_frees.h"
#include "interposer/register_costs.h"
#include "interposer/trackable_memory.h"

namespace cmt {

struct RegisterSettings {
  unsigned after = 2;  // the copy of a range that registers it, at the earliest
  // register = auto: also not before the time its copies lost against copies from a registration
  // reaches what registering it is expected to cost (register_costs.h, lost()).
  bool paid = false;
  std::size_t from = 64u << 10;   // smaller copies are never candidates
  std::size_t max_bytes = 1ull << 34;  // registered bytes at most
  // How long a release waits for registrations on its pages to be taken back before it gives
  // up (wait_until_unregistered): a bound against a driver that never returns, not a delay. Long,
  // because giving up lets CUDA meet pages still registered, and a registration may wait its turn
  // on the cache's thread behind others, the first of which waits for the GPU's queued work.
  std::chrono::milliseconds release_wait{10000};
};

struct RegisterCounts {
  std::uint64_t hits = 0;           // copies made from a registration
  std::uint64_t registrations = 0;  // ranges registered
  std::uint64_t invalidations = 0;  // registrations dropped because their pages were released
  std::uint64_t evictions = 0;      // registrations dropped to make room
  std::uint64_t kept_out = 0;       // due copies left staged: room only by evicting newer ones
  std::uint64_t handed_back = 0;    // dropped so that CUDA sees pageable memory (hand_back)
  std::uint64_t freed_later = 0;    // frees of registered chunks taken over (chunk_freed)
  std::uint64_t reports = 0;        // releases and hand-backs looked at (inside the watched span)
  std::uint64_t report_ns = 0;      // their time in the cache, waits included
  std::uint64_t refusals = 0;       // candidates that could not be registered (kind, overlap, size)
  std::uint64_t failures = 0;       // cuMemHostRegister calls that failed
  std::uint64_t registered_bytes = 0;  // now
};

class RegisterCache {
 public:
  // Which pages of [p, p + bytes) to register, if any (trackable_range in the product).
  using Trackable = std::function<TrackableRange(const void* p, std::size_t bytes)>;
  // Tells the release hooks which addresses to report (ReleaseLibrary::watch in the product).
  using Watch = std::function<void(std::uintptr_t lo, std::uintptr_t hi, std::size_t smallest)>;

  RegisterCache(const DriverApi& driver, RegisterSettings settings, Trackable trackable,
                Watch watch);
  ~RegisterCache();  // unregisters everything (tests; the product's cache is never destroyed)
  RegisterCache(const RegisterCache&) = delete;
  RegisterCache& operator=(const RegisterCache&) = delete;

  struct Entry;
  // A registration held for one copy: it is not unregistered while held. Empty: none.
  class Use {
   public:
    Use() = default;
    explicit Use(Entry* entry) : entry_(entry) {}
    Use(Use&& other) noexcept : entry_(other.entry_) { other.entry_ = nullptr; }
    Use& operator=(Use&& other) noexcept;
    ~Use();
    explicit operator bool() const { return entry_ != nullptr; }
    // The registered pages [first, second): all of the copied range's pages, or only its whole
    // ones where a neighbour's registration holds a page at an end.
    std::pair<std::uintptr_t, std::uintptr_t> pages() const;

   private:
    Entry* entry_ = nullptr;
  };

  // A copy of [p, p + bytes) (the host side of a pageable copy, or of one cmt registered): the
  // registration covering it, at any size; else, for a copy of at least `from` bytes, one made
  // now if this is the range's `after`-th copy (`*registered_now` then says so); else empty.
  // Needs the copy's context current.
  Use offer(const void* p, std::size_t bytes, bool* registered_now = nullptr);
  // The registration covering [p, p + bytes), at any size; empty if none (offer without the
  // counting).
  Use find(const void* p, std::size_t bytes);
  // Whether the next offer of [p, p + bytes) would find or make a registration: covered, or a
  // candidate due (its `after`-th copy). The interposer classifies a copy only then.
  bool due(const void* p, std::size_t bytes);
  // Counts a copy of [p, p + bytes) that is not due, as offer would, without registering.
  void count(const void* p, std::size_t bytes);
  // A copy of [p, p + bytes) that was counted and not made from a registration lost `ns` against
  // a copy from one (costs()): with `paid`, it counts towards registering the range.
  void add_loss(const void* p, std::size_t bytes, double ns);
  // A copy of `bytes` from a registration took `ns` (what the next losses are measured against).
  void hot_copied(std::size_t bytes, std::uint64_t ns) { costs_.hot_copied(bytes, ns); }
  const RegisterCosts& costs() const { return costs_; }
  RegisterCosts& costs() { return costs_; }
  bool paid() const { return settings_.paid; }
  // Whether a registration of cmt's covers [p, p + bytes) (classify asks: CUDA calls it pinned).
  bool covers(const void* p, std::size_t bytes) const;
  // Whether [p, p + bytes) touches a page cmt registered: a copy CUDA would take as from pinned
  // memory, with no wait. One compare when it does not.
  bool touches(const void* p, std::size_t bytes) const;

  using Pages = std::pair<std::uintptr_t, std::uintptr_t>;  // [first, second)
  // The pages a chunk's free or reallocation may give back, for which it waits: those wholly
  // inside its bytes [lo, hi) (none for a chunk inside one page). A page it shares with a
  // neighbour also holds the neighbour's bytes, and glibc gives back no page holding bytes of a
  // chunk in use; a registration there is the neighbour's, and may be taken back on later_'s
  // thread by a task queued behind this very free, which waiting for it would hold up until
  // release_wait ran out (the GPU safety suite's seed 6, bench/lab/NOTES.md 67).
  static Pages chunk_pages(std::uintptr_t lo, std::uintptr_t hi);

  // The release hooks' reports (common/release_abi.h).
  void pages_released(std::uintptr_t lo, std::uintptr_t hi);
  void chunk_released(std::uintptr_t lo, std::uintptr_t hi);
  void all_released();
  // `ctx` ends (a context-end hook): the registrations made in it are dropped, unregistered in
  // it where it is `alive` (before the driver destroys it), else with no context made current
  // (its handle may name a new context by now), the driver having taken them with it. Returns
  // how many.
  std::size_t forget_context(CUcontext ctx, bool alive);
  // A free() of the glibc chunk `chunk`, whose user bytes lie in [lo, hi), about to be made. As
  // chunk_released, except where registrations of ranges copied inside it must be taken back:
  // then they leave the table now and the free is taken over (true), finished by a thread of the
  // cache's (later_frees.h) that unregisters them and then frees the chunk with free_later's
  // function, so the program's free does not wait for the GPU (cuMemHostUnregister waits for
  // every kernel queued there, lab/NOTES.md 59). The chunk is no longer the program's, and glibc
  // cannot hand its bytes to anyone before that free, so no copy can meet its registrations
  // meanwhile. False: the caller frees the chunk now; nothing of cmt's is registered inside it.
  bool chunk_freed(void* chunk, std::uintptr_t lo, std::uintptr_t hi);
  // Whether chunk_freed of this chunk would take the free over now: free_later set, and a
  // registration of a range copied inside [lo, hi) there. (A realloc of such a chunk is then
  // made as malloc, copy and free, the free taken over.)
  bool frees_later(std::uintptr_t lo, std::uintptr_t hi) const;
  // How chunk_freed's thread frees a chunk (glibc's own free); until set, chunk_freed takes no
  // free over. close_at_exit: the process's exit waits for the frees taken over (the product's).
  void free_later(void (*free_now)(void*), bool close_at_exit);
  // Frees taken over and not yet made.
  std::size_t frees_pending();
  // A call cmt leaves to CUDA (a copy it does not make, the program's own registration) is about
  // to use [lo, hi): each registration on those pages is dropped first, so that CUDA finds the
  // memory as it would without cmt. One compare when none is there.
  void hand_back(std::uintptr_t lo, std::uintptr_t hi);

  // In a forked child: forgets everything without a driver call (the child cannot use CUDA) and
  // takes nothing from then on.
  void forget_in_child();
  // fork(): held across it by the parent, so the child never copies a half-changed table.
  std::mutex& fork_lock() { return mu_; }

  RegisterCounts counts() const;

 private:
  struct Candidate {
    std::uintptr_t lo = 0, hi = 0;  // the copied range; lo == hi: a free slot
    unsigned copies = 0;
    bool refused = false, registering = false;
    std::uint64_t id = 0;  // changes when the slot is reused or dropped
    int older = -1, newer = -1;  // neighbours in the order of their last copies (slots)
    // Ticks of its last copy and of the one before (the last, at the first): a registration
    // copied since `prev` is reused sooner than this range and is not evicted for it.
    std::uint64_t last = 0, prev = 0;
    double lost_ns = 0;  // with `paid`: what its copies lost against copies from a registration
  };
  // Whether candidate `c`, of `bytes`, is to be registered at its `copies`-th copy: not refused
  // or being registered, its `after`-th copy or later, and with `paid` its losses as large as
  // registering `bytes` is expected to cost.
  bool due_to_register(const Candidate& c, unsigned copies, std::size_t bytes) const {
    return !c.refused && !c.registering && copies >= settings_.after &&
           (!settings_.paid || c.lost_ns >= costs_.register_ns(bytes));
  }
  // Ranges followed at once: enough for a model's weights copied layer by layer, each of which
  // comes round again only after all the others (a 1.1B Llama has about 200).
  static constexpr int kCandidates = 4096;
  struct RangeHash {
    std::size_t operator()(const std::pair<std::uintptr_t, std::uintptr_t>& r) const {
      return std::hash<std::uintptr_t>()(r.first * 31 + r.second);
    }
  };

  Entry* covering(std::uintptr_t lo, std::uintptr_t hi) const;
  using Entries = std::map<std::uintptr_t, std::unique_ptr<Entry>>;
  // The entries whose pages or copied range may reach [lo, hi): from the first whose pages
  // reach window_start(lo) on, while their first page is below window_end(hi). With mu_ held.
  std::uintptr_t window_start(std::uintptr_t lo) const { return lo > reach_ ? lo - reach_ : 0; }
  std::uintptr_t window_end(std::uintptr_t hi) const {
    return hi > UINTPTR_MAX - reach_ ? UINTPTR_MAX : hi + reach_;
  }
  void add_entry(std::unique_ptr<Entry> e);  // with mu_ held
  Candidate& candidate_for(std::uintptr_t lo, std::uintptr_t hi);
  Candidate* find_candidate(std::uintptr_t lo, std::uintptr_t hi);
  void clear_candidate(Candidate& c);  // its slot free again
  // The candidates in the order of their last copies, so that a new one takes the least
  // recently copied slot at once (it walked all 4096 before).
  void unlink(Candidate& c);
  void link_newest(Candidate& c);
  void touch(Candidate& c) { unlink(c), link_newest(c); }
  // A copy of c now: the newest in the order, and its ticks move on.
  void copied(Candidate& c) {
    touch(c);
    c.prev = c.last ? c.last : tick_;
    c.last = tick_;
  }
  Use register_range(std::uintptr_t lo, std::uintptr_t hi, Candidate& candidate,
                     std::unique_lock<std::mutex>& lock, bool* registered_now);
  // Whether `bytes` more fit, evicting only registrations not in use and last copied before
  // tick `since` (with mu_ held); make_room then evicts them, least recently copied first.
  bool room_for(std::size_t bytes, std::uint64_t since) const;
  bool make_room(std::size_t bytes, std::uint64_t since,
                 std::vector<std::unique_ptr<Entry>>* evicted);
  // Takes the evicted entries back from the driver: on later_'s thread where there is one (they
  // wait in evicting_, where a release of their pages finds them and takes them back itself),
  // else now. Without mu_.
  void unregister_evicted(std::vector<std::unique_ptr<Entry>>& evicted);
  struct EvictTask;  // unregister_evicted's work for later_'s thread
  bool overlaps_retiring(std::uintptr_t lo, std::uintptr_t hi) const;  // with mu_ held
  bool overlaps_entry(std::uintptr_t lo, std::uintptr_t hi) const;  // with mu_ held
  // The whole pages inside [lo, hi); false if there are none.
  static bool inside_pages(std::uintptr_t lo, std::uintptr_t hi, std::uintptr_t* page_lo,
                           std::uintptr_t* page_hi);
  CUresult register_pages(Entry* e, std::uintptr_t lo, std::uintptr_t hi);
  // Drops the candidates overlapping [lo, hi) and the entries matching `hits`, then unregisters
  // the dropped entries outside the lock once no copy holds them.
  // ... and then waits until no registration on `wait`'s pages is with the driver any more.
  template <typename Hits>
  void drop(std::uintptr_t lo, std::uintptr_t hi, Hits hits, std::uint64_t* counter, Pages wait);
  // drop's two halves: the table's part, with mu_ held (the dropped entries into `gone`, each
  // retired), and the driver's, without it (unregister, wait_until_unregistered, the count).
  template <typename Hits>
  void collect(std::uintptr_t lo, std::uintptr_t hi, Hits hits, std::uint64_t* counter,
               std::vector<std::unique_ptr<Entry>>& gone);
  bool finish(Pages wait, std::vector<std::unique_ptr<Entry>>& gone,
              std::chrono::steady_clock::time_point started);  // unregister's answer
  struct FreeTask;  // chunk_freed's work for later_'s thread
  // Takes the entries in `gone` (each retired) back from the driver, once no copy holds them,
  // each in the context it was registered in; false if the driver refused one.
  bool unregister(std::vector<std::unique_ptr<Entry>>& gone);
  // An entry off the table that is still registered with the driver: its pages stay in
  // retiring_ (and touch()) until unregister has taken them back. With mu_ held.
  void retire(const Entry& e);
  // Returns once no registration of cmt's on [lo, hi) is with the driver any more: none being
  // taken back (by this thread or another) and none being made (another thread's, which finds
  // it dropped and takes it back). A release must not return before: the program may map new
  // pages there next, and CUDA would copy from the old ones. Gives up after release_wait
  // (warned once).
  void wait_until_unregistered(std::uintptr_t lo, std::uintptr_t hi);
  void update_watch();  // with mu_ held

  // The registered pages' span, for touches() without the lock.
  std::atomic<std::uintptr_t> entries_lo_{0}, entries_hi_{0};
  const DriverApi& driver_;
  const RegisterSettings settings_;
  Trackable trackable_;
  Watch watch_;
  mutable std::mutex mu_;
  // The registrations by their first page. Their pages never overlap (CUDA registers a page once,
  // and register_range keeps a neighbour's pages out), so a lookup looks at the few entries
  // whose reach (below) can touch the address, not at all of them (a hot copy's lookups with
  // 4096 registered walked them all: 3.8 us, NOTES.md 56).
  std::map<std::uintptr_t, std::unique_ptr<Entry>> entries_;
  // How far any entry's copied range reaches past its pages, either side (a range that shares
  // an end page with a neighbour registers only its own whole pages): the window a lookup of an
  // address widens by. Grows only; back to 0 when the table is empty.
  std::uintptr_t reach_ = 0;
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> retiring_;  // pages being unregistered
  // Evicted, still registered, waiting for later_'s thread (their pages are in retiring_).
  std::vector<std::unique_ptr<Entry>> evicting_;
  std::vector<Candidate> candidates_ = std::vector<Candidate>(kCandidates);
  std::unordered_map<std::pair<std::uintptr_t, std::uintptr_t>, int, RangeHash> candidate_index_;
  std::vector<int> free_slots_;
  // The candidates by where they start, and the longest one's length since the table was last
  // empty: a release finds those it overlaps without walking every slot (a free of a large chunk
  // in the watched span walked all 4096 before: 7.5 us).
  std::set<std::pair<std::uintptr_t, int>> candidates_by_lo_;
  std::size_t longest_candidate_ = 0;
  int oldest_ = -1, newest_ = -1;  // the ends of the candidates' order (slots; -1: none)
  std::uintptr_t watch_lo_ = 0, watch_hi_ = 0;  // the span last given to watch_
  std::uint64_t tick_ = 0, next_id_ = 1;
  std::size_t registered_bytes_ = 0;
  bool forked_child_ = false;
  RegisterCounts counts_;
  RegisterCosts costs_;
  void (*free_now_)(void*) = nullptr;  // free_later's; chunk_freed takes nothing over until set
  std::unique_ptr<LaterFrees> later_;  // made by free_later; closed first at destruction
};

}  // namespace cmt
