// The hot buffers' registration cache (interposer/register_cache.h) and their copies
// (interposer/hot_copy.h) against the fake driver, and
// the rules of which memory it may register (interposer/trackable_memory.h) on this process's own
// glibc memory.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "fake_driver.h"
#include "interposer/classify.h"
#include "interposer/hot_copy.h"
#include "interposer/register_cache.h"
#include "interposer/trackable_memory.h"

namespace cmt {
namespace {

constexpr std::size_t kPage = 4096;

// A cache whose memory is always trackable (its pages: the range rounded out), and the span it
// asks the release hooks to watch.
struct Harness {
  fake::FakeDriver driver;
  std::uintptr_t watch_lo = 0, watch_hi = 0;
  bool trackable = true;
  std::function<void()> while_checking;  // runs inside the kind check, lock released
  RegisterCache cache;

  explicit Harness(RegisterSettings s = {})
      : cache(driver.api(), s,
              [this](const void* p, std::size_t bytes) {
                if (while_checking) while_checking();
                TrackableRange r;
                const auto lo = reinterpret_cast<std::uintptr_t>(p);
                r.ok = trackable;
                r.lo = lo / kPage * kPage;
                r.hi = (lo + bytes + kPage - 1) / kPage * kPage;
                return r;
              },
              [this](std::uintptr_t lo, std::uintptr_t hi, std::size_t) {
                watch_lo = lo;
                watch_hi = hi;
              }) {}
  std::size_t registered() {
    std::lock_guard<std::mutex> lk(driver.mu);
    return driver.host_ranges.size();
  }
};

const void* at(std::uintptr_t a) { return reinterpret_cast<const void*>(a); }

TEST(RegisterCache, RegistersAtTheAfterthCopyAndServesTheRangeFromThen) {
  Harness h;  // after = 2, from = 64 KiB
  const std::uintptr_t base = 0x10000000 + 100;
  EXPECT_FALSE(h.cache.offer(at(base), 1 << 20));
  EXPECT_EQ(h.registered(), 0u);
  bool now = false;
  EXPECT_TRUE(h.cache.offer(at(base), 1 << 20, &now));
  EXPECT_TRUE(now);
  EXPECT_EQ(h.registered(), 1u);
  EXPECT_TRUE(h.cache.offer(at(base), 1 << 20, &now));
  EXPECT_FALSE(now);
  // A part of the range, at any size, is served by the registration; what leaves it is not.
  EXPECT_TRUE(h.cache.offer(at(base + 4096), 100));
  EXPECT_TRUE(h.cache.covers(at(base + 10), 1000));
  EXPECT_FALSE(h.cache.covers(at(base - 1), 1000));
  EXPECT_TRUE(h.cache.touches(at(base - 50), 10));  // the registered page, before the range
  EXPECT_FALSE(h.cache.touches(at(base + (2 << 20)), 10));
  const RegisterCounts c = h.cache.counts();
  EXPECT_EQ(c.registrations, 1u);
  EXPECT_EQ(c.hits, 3u);
  EXPECT_EQ(c.registered_bytes, (1u << 20) + kPage);
  EXPECT_LE(h.watch_lo, base);
  EXPECT_GE(h.watch_hi, base + (1 << 20));
}

TEST(RegisterCache, SmallCopiesNeverRegister) {
  Harness h;
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(h.cache.offer(at(0x20000000), 32 << 10));
  EXPECT_EQ(h.registered(), 0u);
}

// A call left to CUDA on some of a registration's pages (a 2D copy, the program's own register)
// drops it, counted apart from releases; a registration it does not touch stays.
TEST(RegisterCache, HandingPagesBackToCudaDropsOnlyTheRegistrationsOnThem) {
  Harness h;
  const std::uintptr_t a = 0x30000000, b = 0x40000000;
  for (int i = 0; i < 2; ++i) {
    h.cache.offer(at(a), 256 << 10);
    h.cache.offer(at(b), 256 << 10);
  }
  ASSERT_EQ(h.registered(), 2u);
  h.cache.hand_back(a + (256 << 10), a + (512 << 10));  // past a's pages: nothing there
  h.cache.hand_back(a - kPage, a);
  EXPECT_EQ(h.registered(), 2u);
  h.cache.hand_back(a + 100, a + 101);
  EXPECT_EQ(h.registered(), 1u);
  EXPECT_FALSE(h.cache.touches(at(a), 256 << 10));
  EXPECT_TRUE(h.cache.covers(at(b), 256 << 10));
  EXPECT_EQ(h.cache.counts().handed_back, 1u);
  EXPECT_EQ(h.cache.counts().invalidations, 0u);
}

// A context that ends takes the registrations made in it with it: they are dropped, unregistered
// in it while it lives, else with no context current (its handle may name a new one by now); the
// registrations of another context stay.
TEST(RegisterCache, AContextThatEndsTakesItsRegistrationsAlong) {
  Harness h;
  h.driver.devices = 2;
  const std::uintptr_t a = 0x30000000, b = 0x40000000, c = 0x50000000;
  const DriverApi& d = h.driver.api();
  auto register_in = [&](int device, std::uintptr_t p) {
    ASSERT_EQ(d.ctx_set_current(fake::fake_context(device)), CUDA_SUCCESS);
    for (int i = 0; i < 2; ++i) h.cache.offer(at(p), 256 << 10);
  };
  register_in(0, a);
  register_in(1, b);
  register_in(0, c);
  ASSERT_EQ(h.registered(), 3u);
  EXPECT_EQ(h.cache.forget_context(fake::fake_context(0), true), 2u);
  EXPECT_EQ(h.registered(), 1u);
  EXPECT_EQ(h.driver.last_unregister_context, fake::fake_context(0));
  EXPECT_FALSE(h.cache.touches(at(a), 256 << 10));
  EXPECT_TRUE(h.cache.covers(at(b), 256 << 10));
  EXPECT_EQ(h.cache.forget_context(fake::fake_context(1), false), 1u);
  EXPECT_EQ(h.registered(), 0u);
  // Unregistered with no context made current (the fake's null stands for device 0's), never
  // the ended one's handle.
  EXPECT_NE(h.driver.last_unregister_context, fake::fake_context(1));
  EXPECT_EQ(h.cache.counts().invalidations, 3u);
  EXPECT_EQ(h.cache.forget_context(fake::fake_context(1), false), 0u);
}

// A release found through the candidates' order: one deep inside a long candidate, which starts
// far below it (with shorter candidates in between), drops it; one just past its end does not.
TEST(RegisterCache, AReleaseDeepInsideALongCandidateDropsIt) {
  Harness h;
  const std::uintptr_t a = 0x30000000;
  h.cache.offer(at(a), 64 << 20);  // a candidate of 64 MiB
  for (int i = 1; i <= 8; ++i) h.cache.offer(at(a + (std::uintptr_t(i) << 20)), 64 << 10);
  h.cache.chunk_released(a + (64 << 20), a + (65 << 20));  // just past it: kept
  EXPECT_TRUE(h.cache.offer(at(a), 64 << 20));             // its second copy registers it
  h.cache.all_released();
  h.cache.offer(at(a), 64 << 20);
  h.cache.chunk_released(a + (60 << 20), a + (60 << 20) + 4096);
  EXPECT_FALSE(h.cache.offer(at(a), 64 << 20));  // dropped: this is its first copy again
  EXPECT_TRUE(h.cache.offer(at(a), 64 << 20));
}

TEST(RegisterCache, AReleasedChunkDropsItsRegistrationsAndCandidates) {
  Harness h;
  const std::uintptr_t a = 0x30000000, b = 0x40000000;
  h.cache.offer(at(a), 256 << 10);
  h.cache.offer(at(a), 256 << 10);
  h.cache.offer(at(b), 256 << 10);  // a candidate
  ASSERT_EQ(h.registered(), 1u);
  h.cache.chunk_released(a + (300 << 10), a + (400 << 10));  // past the copied range: kept
  EXPECT_EQ(h.registered(), 1u);
  h.cache.chunk_released(a + 100, a + 200);
  EXPECT_EQ(h.registered(), 0u);
  EXPECT_FALSE(h.cache.covers(at(a), 256 << 10));
  EXPECT_EQ(h.cache.counts().invalidations, 1u);
  // The candidate at b, released, starts again from its first copy.
  h.cache.chunk_released(b, b + 10);
  EXPECT_FALSE(h.cache.offer(at(b), 256 << 10));
  EXPECT_TRUE(h.cache.offer(at(b), 256 << 10));
  h.cache.all_released();
  EXPECT_EQ(h.registered(), 0u);
  EXPECT_EQ(h.watch_hi, h.watch_lo);  // nothing left to watch
}

// free_later's function in the test below: which chunk it freed, and whether the driver still
// held a registration inside it then.
std::atomic<std::uintptr_t> g_freed{0};
std::atomic<bool> g_registered_when_freed{false};
constexpr std::size_t kFreedSize = 256 << 10;
void note_free(void* chunk) {
  const auto lo = reinterpret_cast<std::uintptr_t>(chunk);
  g_registered_when_freed.store(fake::registered_overlap(lo, lo + kFreedSize));
  g_freed.store(lo);
}

// A free() of a chunk holding a registration returns at once, though unregistering takes long
// (in CUDA it waits for every kernel queued on the GPU): the registration leaves the table then,
// and a thread of the cache's takes it back from the driver and only then frees the chunk. A
// chunk holding none, and every chunk before free_later, is the caller's to free at once.
TEST(RegisterCache, AFreeOfAChunkHoldingARegistrationIsFinishedLater) {
  auto owned = std::make_unique<Harness>();
  Harness& h = *owned;
  const std::uintptr_t a = 0x30000000, b = 0x40000000, c = 0x50000000;
  h.cache.offer(at(a), kFreedSize);
  h.cache.offer(at(a), kFreedSize);
  ASSERT_EQ(h.registered(), 1u);
  EXPECT_FALSE(h.cache.frees_later(a, a + kFreedSize)) << "no free_later yet";
  EXPECT_FALSE(h.cache.chunk_freed(reinterpret_cast<void*>(a), a, a + kFreedSize))
      << "no free_later yet: the caller frees";
  EXPECT_EQ(h.registered(), 0u);
  h.cache.free_later(note_free, false);
  g_freed.store(0);
  h.driver.unregister_wait_ms.store(300);
  // Registered in a context of GPU 1's: the cache's thread, which has none current, must make it
  // current to unregister them.
  h.driver.devices = 2;
  ASSERT_EQ(h.driver.api().ctx_set_current(fake::fake_context(1)), CUDA_SUCCESS);
  for (std::uintptr_t x : {b, c}) {
    h.cache.offer(at(x), kFreedSize);
    h.cache.offer(at(x), kFreedSize);
  }
  ASSERT_EQ(h.driver.api().ctx_set_current(fake::fake_context(0)), CUDA_SUCCESS);
  ASSERT_EQ(h.registered(), 2u);
  // What a realloc asks first (release_abi.h, chunk_registered): the chunk's free would be taken
  // over; not for a chunk beside it, nor one whose range is only a candidate.
  EXPECT_TRUE(h.cache.frees_later(b, b + kFreedSize));
  EXPECT_FALSE(h.cache.frees_later(b + kFreedSize, b + 2 * kFreedSize));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(h.cache.chunk_freed(reinterpret_cast<void*>(b), b, b + kFreedSize));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(150))
      << "the free waited for the driver";
  EXPECT_FALSE(h.cache.covers(at(b), kFreedSize));
  // Off the table, but still being taken back: a free there would be queued behind it.
  EXPECT_TRUE(h.cache.frees_later(b, b + kFreedSize));
  EXPECT_EQ(g_freed.load(), 0u) << "freed before its registration was back";
  EXPECT_EQ(h.cache.frees_pending(), 1u);
  // A release of those pages meanwhile (the program unmapping what it freed) waits until the
  // registration is back, as every release does.
  h.cache.pages_released(b, b + kFreedSize);
  EXPECT_FALSE(fake::registered_overlap(b, b + kFreedSize));
  for (int i = 0; i < 500 && h.cache.frees_pending(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(h.cache.frees_pending(), 0u);
  EXPECT_EQ(g_freed.load(), b);
  EXPECT_FALSE(g_registered_when_freed.load());
  EXPECT_EQ(h.registered(), 1u);  // c's
  EXPECT_EQ(h.cache.counts().freed_later, 1u);
  {
    std::lock_guard<std::mutex> lk(h.driver.mu);
    EXPECT_EQ(h.driver.last_unregister_context, fake::fake_context(1));
  }
  // A chunk that holds no registration: the caller's, at once.
  h.cache.offer(at(0x60000000), kFreedSize);  // a candidate only
  EXPECT_FALSE(h.cache.frees_later(0x60000000, 0x60000000 + kFreedSize));
  EXPECT_FALSE(h.cache.chunk_freed(reinterpret_cast<void*>(0x60000000), 0x60000000,
                                   0x60000000 + kFreedSize));
  // Destroying the cache (as a process's exit closes the product's) makes the frees still
  // queued first.
  g_freed.store(0);
  EXPECT_TRUE(h.cache.chunk_freed(reinterpret_cast<void*>(c), c, c + kFreedSize));
  owned.reset();
  EXPECT_EQ(g_freed.load(), c);
  EXPECT_FALSE(g_registered_when_freed.load());
}

// Two neighbouring chunks freed one after the other, the second's registration holding the page
// they share: the first's free, finished on the cache's thread, waits only for its own pages,
// not for the neighbour's registration, which the task queued behind it takes back (it waited
// for it until release_wait ran out, and a copy left to CUDA meanwhile met registered pages: the
// GPU safety suite's seed 6, bench/lab/NOTES.md 67). Neither chunk is freed with a registration
// still on its own pages.
std::atomic<int> g_neighbour_frees{0};
std::atomic<bool> g_neighbour_registered_when_freed{false};
constexpr std::uintptr_t kFirst = 0x70000010, kFirstEnd = 0x70020000 + 1000;  // user bytes
constexpr std::uintptr_t kSecond = kFirstEnd + 16, kSecondEnd = kSecond + (200 << 10);
void note_neighbour_free(void* chunk) {
  const auto lo = reinterpret_cast<std::uintptr_t>(chunk);
  const auto pages = RegisterCache::chunk_pages(lo, lo == kFirst ? kFirstEnd : kSecondEnd);
  if (fake::registered_overlap(pages.first, pages.second))
    g_neighbour_registered_when_freed.store(true);
  g_neighbour_frees.fetch_add(1);
}

TEST(RegisterCache, AFreeFinishedLaterDoesNotWaitForANeighboursRegistrationQueuedBehindIt) {
  g_neighbour_frees.store(0);  // counted afresh when the test runs again in one process
  g_neighbour_registered_when_freed.store(false);
  RegisterSettings s;
  s.release_wait = std::chrono::milliseconds(3000);
  Harness h(s);
  h.cache.free_later(note_neighbour_free, false);
  // The second first: its registration takes the page the two share.
  for (int i = 0; i < 2; ++i) h.cache.offer(at(kSecond), kSecondEnd - kSecond);
  for (int i = 0; i < 2; ++i) h.cache.offer(at(kFirst), kFirstEnd - kFirst);
  ASSERT_EQ(h.registered(), 2u);
  ASSERT_TRUE(fake::registered_overlap(0x70020000, 0x70020001));
  h.driver.unregister_wait_ms.store(100);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(h.cache.chunk_freed(reinterpret_cast<void*>(kFirst), kFirst, kFirstEnd));
  ASSERT_TRUE(h.cache.chunk_freed(reinterpret_cast<void*>(kSecond), kSecond, kSecondEnd));
  for (int i = 0; i < 600 && h.cache.frees_pending(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(g_neighbour_frees.load(), 2);
  EXPECT_LT(took, std::chrono::milliseconds(1500))
      << "the first free waited for the registration queued behind it";
  EXPECT_FALSE(g_neighbour_registered_when_freed.load());
  EXPECT_EQ(h.registered(), 0u);
}

// LaterFrees runs what it takes in order, on its own thread; close() returns once all of it has
// run and takes nothing after; in a forked child it takes nothing.
TEST(LaterFrees, RunsTasksInOrderAndClosesOnceTheyHaveRun) {
  struct Note final : LaterFrees::Task {
    std::vector<int>* out;
    int n;
    std::thread::id* where;
    Note(std::vector<int>* o, int i, std::thread::id* w) : out(o), n(i), where(w) {}
    void run() noexcept override {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      out->push_back(n);
      *where = std::this_thread::get_id();
    }
  };
  std::vector<int> ran;
  std::thread::id where;
  LaterFrees later;
  for (int i = 0; i < 5; ++i) {
    std::unique_ptr<LaterFrees::Task> t = std::make_unique<Note>(&ran, i, &where);
    ASSERT_TRUE(later.post(t));
    EXPECT_FALSE(t) << "a task taken is the thread's";
  }
  later.close();
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_NE(where, std::this_thread::get_id());
  EXPECT_EQ(later.pending(), 0u);
  std::unique_ptr<LaterFrees::Task> t = std::make_unique<Note>(&ran, 9, &where);
  EXPECT_FALSE(later.post(t)) << "closed";
  EXPECT_TRUE(t) << "a task not taken stays the caller's";
  LaterFrees child;
  child.forget_in_child();
  EXPECT_FALSE(child.post(t));
}

TEST(RegisterCache, ReleasedPagesDropEveryRegistrationOnThem) {
  Harness h;
  const std::uintptr_t a = 0x50000000 + 64;
  h.cache.offer(at(a), 128 << 10);
  h.cache.offer(at(a), 128 << 10);
  ASSERT_EQ(h.registered(), 1u);
  // The registered page before the copied range counts for munmap and its kind.
  h.cache.pages_released(a - 64, a - 32);
  EXPECT_EQ(h.registered(), 0u);
}

// With every candidate slot taken, a new range takes the least recently copied one's: a range
// copied again keeps its count, the oldest starts over.
TEST(RegisterCache, ANewCandidateTakesTheLeastRecentlyCopiedSlot) {
  RegisterSettings s;
  s.after = 3;
  Harness h(s);
  const std::uintptr_t base = 0x300000000000;
  auto range = [&](int i) { return at(base + (std::uintptr_t(i) << 20)); };
  for (int i = 0; i < 4096; ++i) h.cache.offer(range(i), 64 << 10);  // the table full
  h.cache.offer(range(0), 64 << 10);                                  // range 0 copied again
  h.cache.offer(range(5000), 64 << 10);  // new: takes range 1's slot, the least recent
  EXPECT_TRUE(h.cache.offer(range(0), 64 << 10));  // its third copy: registered
  EXPECT_FALSE(h.cache.offer(range(1), 64 << 10));  // counted from the start again
  EXPECT_FALSE(h.cache.offer(range(1), 64 << 10));
  EXPECT_TRUE(h.cache.offer(range(1), 64 << 10));
}

TEST(RegisterCache, TheLeastRecentlyCopiedGoesToMakeRoomButNotOneInUse) {
  RegisterSettings s;
  s.max_bytes = 3 * ((256 << 10) + kPage);
  Harness h(s);
  const std::uintptr_t base = 0x60000000;
  auto hot = [&](int i) {
    h.cache.offer(at(base + i * (1 << 20)), 256 << 10);
    return h.cache.offer(at(base + i * (1 << 20)), 256 << 10);
  };
  RegisterCache::Use held = hot(0);  // in use: never evicted
  hot(1);
  hot(2);
  EXPECT_EQ(h.registered(), 3u);
  hot(3);  // evicts 1, the least recently copied one not in use
  EXPECT_EQ(h.registered(), 3u);
  EXPECT_TRUE(h.cache.covers(at(base), 256 << 10));
  EXPECT_FALSE(h.cache.covers(at(base + (1 << 20)), 256 << 10));
  EXPECT_EQ(h.cache.counts().evictions, 1u);
}

// More bytes copied in turn than the bound holds (a model's weights offloaded, pass after pass):
// evicting the least recently copied would drop, before its next copy, each registration about
// to be copied again, so that every copy paid a registration and an unregistration. The ones
// registered first stay; the rest stay staged ("kept out"), and no copy evicts.
TEST(RegisterCache, ASetLargerThanTheBoundKeepsItsRegistrationsAndStagesTheRest) {
  RegisterSettings s;
  s.max_bytes = 3 * (256 << 10);
  Harness h(s);
  const std::uintptr_t base = 0x60000000;
  auto range = [&](int i) { return at(base + i * (1 << 20)); };
  int hits_last_round = 0;
  for (int round = 0; round < 6; ++round) {
    hits_last_round = 0;
    for (int i = 0; i < 5; ++i) hits_last_round += h.cache.offer(range(i), 256 << 10) ? 1 : 0;
  }
  EXPECT_EQ(h.registered(), 3u);
  EXPECT_EQ(hits_last_round, 3);
  const RegisterCounts c = h.cache.counts();
  EXPECT_EQ(c.evictions, 0u);
  EXPECT_EQ(c.registrations, 3u);
  EXPECT_EQ(c.kept_out, 2u * 5u);  // ranges 3 and 4, from their second copy on
  EXPECT_EQ(c.refusals, 0u);
}

// A program that moves on to new buffers has its old ones evicted for them: those were last
// copied before the newcomers' previous copies.
TEST(RegisterCache, BuffersNoLongerCopiedMakeRoomForNewOnes) {
  RegisterSettings s;
  s.max_bytes = 3 * (256 << 10);
  Harness h(s);
  const std::uintptr_t old_set = 0x60000000, new_set = 0x70000000;
  for (int round = 0; round < 3; ++round)
    for (int i = 0; i < 3; ++i) h.cache.offer(at(old_set + i * (1 << 20)), 256 << 10);
  ASSERT_EQ(h.cache.counts().registrations, 3u);
  for (int round = 0; round < 3; ++round)
    for (int i = 0; i < 3; ++i) h.cache.offer(at(new_set + i * (1 << 20)), 256 << 10);
  EXPECT_EQ(h.registered(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(h.cache.covers(at(new_set + i * (1 << 20)), 256 << 10));
    EXPECT_FALSE(h.cache.covers(at(old_set + i * (1 << 20)), 256 << 10));
  }
  EXPECT_EQ(h.cache.counts().evictions, 3u);
  EXPECT_EQ(h.cache.counts().kept_out, 0u);
}

// An eviction happens inside the program's copy, and cuMemHostUnregister waits for every kernel
// queued on the GPU: with the cache's thread there (free_later), the evicted registration is
// taken back there, and the copy that evicted it returns at once. Until then its pages stay out
// of new registrations, a release of them takes it back itself before returning, and a free of
// its chunk is taken over as for a registration in the table.
TEST(RegisterCache, AnEvictionIsTakenBackOnTheCachesThreadNotInTheCopy) {
  RegisterSettings s;
  s.max_bytes = kFreedSize;
  auto owned = std::make_unique<Harness>(s);
  Harness& h = *owned;
  h.cache.free_later(note_free, false);
  g_freed.store(0);
  const std::uintptr_t a = 0x30000000, b = 0x40000000, c = 0x50000000;
  h.cache.offer(at(a), kFreedSize);
  ASSERT_TRUE(h.cache.offer(at(a), kFreedSize));
  h.driver.unregister_wait_ms.store(300);
  h.cache.offer(at(b), kFreedSize);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(h.cache.offer(at(b), kFreedSize));  // evicts a
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(150))
      << "the copy waited for the eviction's unregistering";
  EXPECT_EQ(h.cache.counts().evictions, 1u);
  EXPECT_FALSE(h.cache.covers(at(a), kFreedSize));
  EXPECT_TRUE(fake::registered_overlap(a, a + kFreedSize)) << "taken back already";
  // Copied again meanwhile: due, but its pages are still registered: staged, not refused.
  h.cache.offer(at(a), kFreedSize);
  EXPECT_FALSE(h.cache.offer(at(a), kFreedSize));
  EXPECT_EQ(h.cache.counts().registrations, 2u);
  for (int i = 0; i < 200 && fake::registered_overlap(a, a + kFreedSize); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE(fake::registered_overlap(a, a + kFreedSize));
  EXPECT_TRUE(h.cache.offer(at(a), kFreedSize)) << "refused for good while it was taken back";
  // b evicted for a: a release of b's pages while the eviction waits returns once it is back.
  h.cache.pages_released(b, b + 4096);
  EXPECT_FALSE(fake::registered_overlap(b, b + kFreedSize));
  // c evicts a; a's chunk freed while its eviction waits: taken over, freed once a is back.
  h.cache.offer(at(c), kFreedSize);
  ASSERT_TRUE(h.cache.offer(at(c), kFreedSize));
  EXPECT_TRUE(h.cache.frees_later(a, a + kFreedSize));
  t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(h.cache.chunk_freed(reinterpret_cast<void*>(a), a, a + kFreedSize));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(150));
  for (int i = 0; i < 200 && h.cache.frees_pending(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(g_freed.load(), a);
  EXPECT_FALSE(g_registered_when_freed.load());
  EXPECT_EQ(h.registered(), 1u);  // c's
}

TEST(RegisterCache, BuffersCopiedInTurnAreRegisteredOnTheirSecondRound) {
  Harness h;  // as a model's 200 weights, each copied once per forward pass
  const std::uintptr_t base = 0xB0000000;
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < 300; ++i) h.cache.offer(at(base + i * (1 << 20)), 256 << 10);
  EXPECT_EQ(h.registered(), 300u);
  EXPECT_EQ(h.cache.counts().registrations, 300u);
}

// register = auto's rule (register_costs.h): a range is registered once the time its copies lost
// against copies from a registration reaches what registering it is expected to cost; a range
// whose copies lose nothing stays staged however often it is copied; a released range starts
// over; and each registration and copy from one teaches the estimates.
TEST(RegisterCache, UnderAutoARangeIsRegisteredOnceItsCopiesLostWhatRegisteringCosts) {
  RegisterSettings s;
  s.paid = true;
  Harness h(s);
  const std::size_t mib = 1 << 20;
  const double cost = h.cache.costs().register_ns(mib);  // the prior: 0.2 ms
  const double fast = h.cache.costs().hot_copy_ns(mib);  // ~29 us at 50 GB/s
  ASSERT_NEAR(cost, 200e3, 1e3);
  ASSERT_NEAR(fast, 8e3 + mib / RegisterCosts::kHotBytesPerNs, 1e3);
  // The interposer's order for a copy not due: count it, make it, then tell its time.
  auto staged_copy = [&](std::uintptr_t p, std::uint64_t call_ns) {
    if (h.cache.due(at(p), mib)) return true;
    h.cache.count(at(p), mib);
    h.cache.add_loss(at(p), mib, h.cache.costs().lost_ns(mib, call_ns));
    return false;
  };
  const std::uintptr_t a = 0x50000000, b = 0x60000000;
  // Each copy of a takes 51 us more than one from a registration: due at its fifth.
  int copies = 0;
  while (!staged_copy(a, static_cast<std::uint64_t>(fast + 51000)) && copies < 100) ++copies;
  EXPECT_EQ(copies, 4);
  bool now = false;
  EXPECT_TRUE(h.cache.offer(at(a), mib, &now));
  EXPECT_TRUE(now);
  // b's copies take what copies from a registration take: never due.
  for (int i = 0; i < 200; ++i) EXPECT_FALSE(staged_copy(b, static_cast<std::uint64_t>(fast)));
  EXPECT_EQ(h.registered(), 1u);
  // Released, a range starts over: its earlier losses were another buffer's.
  h.cache.chunk_released(b, b + 10);
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(staged_copy(b, 100000)) << i;
  h.cache.chunk_released(b, b + 10);
  EXPECT_FALSE(staged_copy(b, 100000));
  // The fake's registration took microseconds, not the prior's 0.2 ms: the estimate moved down.
  EXPECT_LT(h.cache.costs().register_ns(mib), cost);
  // A copy of a buffer that no copy of it has lost anything against is never due under auto
  // (under hot with after = 1 a first copy is).
  EXPECT_FALSE(h.cache.due(at(0x70000000), mib));
}

TEST(RegisterCosts, PriorsUntilMeasuredThenWhatWasMeasured) {
  RegisterCosts c;
  const std::size_t mib = 1 << 20;
  EXPECT_DOUBLE_EQ(c.register_ns(0), RegisterCosts::kRegisterFixedNs);
  EXPECT_NEAR(c.register_ns(64 * mib), 150e3 + 64 * 50e3, 1);
  EXPECT_DOUBLE_EQ(c.hot_copy_ns(0), RegisterCosts::kHotLatencyNs);
  EXPECT_EQ(c.lost_ns(mib, 10000), 0.0);  // faster than the estimate: nothing lost
  EXPECT_NEAR(c.lost_ns(mib, 100000), 100000 - c.hot_copy_ns(mib), 1);
  // A copy that also waited 50 ms for a kernel counts as four copies from a registration at most.
  EXPECT_NEAR(c.lost_ns(mib, 50000000), 4 * c.hot_copy_ns(mib), 1);
  // A link at 50 GB/s and a 6 us latency, measured on large and small copies.
  for (int i = 0; i < 40; ++i) {
    c.hot_copied(64 * mib, static_cast<std::uint64_t>(6e3 + 64 * mib / 50.0));
    c.hot_copied(64 << 10, static_cast<std::uint64_t>(6e3 + (64 << 10) / 50.0));
  }
  EXPECT_NEAR(c.hot_copy_ns(16 * mib), 6e3 + 16 * mib / 50.0, 0.05 * (16 * mib / 50.0));
  EXPECT_NEAR(c.hot_copy_ns(64 << 10), 6e3 + (64 << 10) / 50.0, 500);
  // Registrations taking three times the prior's.
  for (int i = 0; i < 40; ++i)
    c.registered(8 * mib, static_cast<std::uint64_t>(3 * (150e3 + 8 * 50e3)));
  EXPECT_NEAR(c.register_ns(8 * mib), 3 * (150e3 + 8 * 50e3), 0.02 * 3 * (150e3 + 8 * 50e3));
  // One outlier moves it a quarter of the way, not all of it.
  c.registered(8 * mib, static_cast<std::uint64_t>(100 * (150e3 + 8 * 50e3)));
  EXPECT_LT(c.register_ns(8 * mib), 30 * (150e3 + 8 * 50e3));
}

// Copies not made from a registration are weighed by what copies of their size and direction
// took on their streams: each size's first few are timed, then one in kTimeEvery; until one is
// timed nothing is expected (the interposer then uses the call's time).
TEST(RegisterCosts, CopiesNotFromARegistrationAreWeighedByTheTimedOnesOfTheirSize) {
  RegisterCosts c;
  const std::size_t mib = 1 << 20;
  EXPECT_LT(c.expected_loss_ns(true, mib), 0);
  int timed = 0;
  for (unsigned i = 0; i < RegisterCosts::kFirstTimed + 10 * RegisterCosts::kTimeEvery; ++i)
    timed += c.time_this(true, mib + i);  // all in 1 MiB's size class
  EXPECT_EQ(timed, static_cast<int>(RegisterCosts::kFirstTimed) + 10);
  EXPECT_TRUE(c.time_this(false, mib));     // the other direction counts on its own
  EXPECT_TRUE(c.time_this(true, 4 * mib));  // and so does another size
  // 1 MiB copies to the device taking 100 us on their streams (about 10 GB/s): each loses what
  // they take beyond a copy from a registration.
  for (int i = 0; i < 3; ++i) c.staged_timed(true, mib, 100000);
  EXPECT_EQ(c.timed_copies(), 3u);
  EXPECT_NEAR(c.expected_loss_ns(true, mib), 100000 - c.hot_copy_ns(mib), 10);
  // A copy of 1.5 MiB, in the same class, at the same rate.
  EXPECT_NEAR(c.expected_loss_ns(true, 3 * mib / 2), 150000 - c.hot_copy_ns(3 * mib / 2), 10);
  // Nothing timed from the device, nor at 64 KiB.
  EXPECT_LT(c.expected_loss_ns(false, mib), 0);
  EXPECT_LT(c.expected_loss_ns(true, 64 << 10), 0);
  // Copies as fast as from a registration lose nothing; a stalled one at most kMostLossTimes.
  for (int i = 0; i < 40; ++i) c.staged_timed(false, mib, 1000);
  EXPECT_EQ(c.expected_loss_ns(false, mib), 0.0);
  c.staged_timed(true, 16 * mib, 1000000000);
  EXPECT_NEAR(c.expected_loss_ns(true, 16 * mib), 4 * c.hot_copy_ns(16 * mib), 10);
}

TEST(RegisterCache, MemoryItCannotFollowIsRefusedOnce) {
  Harness h;
  h.trackable = false;
  for (int i = 0; i < 6; ++i) EXPECT_FALSE(h.cache.offer(at(0x70000000), 1 << 20));
  EXPECT_EQ(h.registered(), 0u);
  EXPECT_EQ(h.cache.counts().refusals, 1u);  // asked once: the candidate is marked
}

TEST(RegisterCache, ARangeSharingAPageWithARegistrationRegistersItsOwnWholePages) {
  Harness h;
  const std::uintptr_t a = 0x80000000 + 100;  // ends inside a page
  h.cache.offer(at(a), 100 << 10);
  h.cache.offer(at(a), 100 << 10);
  const std::uintptr_t b = a + (100 << 10) + 16;  // starts in the registration's last page
  h.cache.offer(at(b), 100 << 10);
  RegisterCache::Use use = h.cache.offer(at(b), 100 << 10);
  ASSERT_TRUE(use);
  EXPECT_EQ(h.registered(), 2u);
  const auto [lo, hi] = use.pages();
  EXPECT_EQ(lo, (b + kPage - 1) / kPage * kPage);  // the shared page left out
  EXPECT_EQ(hi, (b + (100 << 10)) / kPage * kPage);
  EXPECT_TRUE(h.cache.find(at(b), 100 << 10));  // the whole range is served
  // No whole page of its own: nothing to register.
  const std::uintptr_t c = b + (100 << 10) + 16;
  h.cache.offer(at(c), 100);
  EXPECT_FALSE(h.cache.offer(at(c), 100));
}

// A weight whose first page holds the end of a registered neighbour (tensors one after another
// in the heap): CUDA calls its start registered, but it is the program's pageable memory, so the
// hot path takes it and registers it too. Copies that only classified it as pinned dropped the
// neighbour's registration, and the next copy of the neighbour dropped its: half of an offloaded
// model's weights went hot in turn.
TEST(RegisterCache, ARangeStartingOnANeighboursRegisteredPageIsPageableToTheHotPath) {
  Harness h;
  std::vector<char> heap(1 << 20);
  const auto a = reinterpret_cast<std::uintptr_t>(heap.data()) / kPage * kPage + kPage + 100;
  h.cache.offer(at(a), 100 << 10);
  ASSERT_TRUE(h.cache.offer(at(a), 100 << 10));
  const std::uintptr_t b = a + (100 << 10) + 16;  // starts on a's last registered page
  const CUdeviceptr dev = h.driver.alloc_device(100 << 10);
  auto* d = reinterpret_cast<void*>(dev);
  auto* host = reinterpret_cast<void*>(b);
  EXPECT_EQ(classify_copy(h.driver.api(), d, host, 100 << 10, kHostToDevice, CU_STREAM_LEGACY,
                          {1, 1})
                .reason,
            ForwardReason::PinnedOrManaged);  // CUDA's view
  const CopyDecision hot = classify_copy(h.driver.api(), d, host, 100 << 10, kHostToDevice,
                                         CU_STREAM_LEGACY, {1, 1}, &h.cache);
  ASSERT_TRUE(hot.taken());
  EXPECT_EQ(hot.request.host, host);
}

TEST(RegisterCache, APageTheProgramRegisteredIsLeftOut) {
  Harness h;
  const std::uintptr_t a = 0x88000000 + 100;
  // The program's own registration of the next buffer, which starts in a's last page.
  ASSERT_EQ(h.driver.api().mem_host_register(reinterpret_cast<void*>(a + (80 << 10) + 16), 4096,
                                             0),
            CUDA_SUCCESS);
  h.cache.offer(at(a), 80 << 10);
  RegisterCache::Use use = h.cache.offer(at(a), 80 << 10);
  ASSERT_TRUE(use);
  EXPECT_EQ(use.pages().first, (a + kPage - 1) / kPage * kPage);
  EXPECT_EQ(use.pages().second, (a + (80 << 10)) / kPage * kPage);
  EXPECT_EQ(h.cache.counts().failures, 0u);
}

TEST(RegisterCache, AReleaseFromAnotherThreadWhileRegisteringWins) {
  Harness h;
  const std::uintptr_t a = 0x90000000;
  h.while_checking = [&] {
    std::thread([&] { h.cache.chunk_released(a, a + 10); }).join();
  };
  h.cache.offer(at(a), 1 << 20);
  EXPECT_FALSE(h.cache.offer(at(a), 1 << 20));
  EXPECT_EQ(h.registered(), 0u);
}

// Threads sharing one cache, each copying, releasing and handing back ranges of its own slots
// at random: a registration a copy holds stays registered with the driver until the copy lets
// go, and once a release or hand-back returns no registration is left on its pages (which only
// the releasing thread's own copies could have made), also where another thread was still
// taking it back (one thread drops everything now and then, and evictions are another's work).
// Before the releases waited for those, each run left 5-28 behind.
TEST(RegisterCache, ThreadsCopyingReleasingAndHandingBackAtOnceKeepTheRules) {
  RegisterSettings settings;
  settings.max_bytes = 2u << 20;  // room for two or three: registering evicts others
  settings.release_wait = std::chrono::milliseconds(50);  // a registration left: a failure, soon
  Harness h(settings);
  constexpr int kThreads = 8, kSlots = 8, kOps = 3000;
  const std::uintptr_t base = 0x200000000000;
  auto registered_over = [&](std::uintptr_t lo, std::uintptr_t hi) {
    std::lock_guard<std::mutex> lk(h.driver.mu);
    for (const auto& [at_, size] : h.driver.host_ranges)
      if (at_ < hi && lo < at_ + size) return true;
    return false;
  };
  auto pages_registered = [&](std::pair<std::uintptr_t, std::uintptr_t> pages) {
    std::lock_guard<std::mutex> lk(h.driver.mu);
    const auto it = h.driver.host_ranges.find(pages.first);
    return it != h.driver.host_ranges.end() && pages.first + it->second >= pages.second;
  };
  // What broke: a held registration not registered, or one left after a chunk release, a page
  // release or a hand-back returned.
  std::atomic<int> held_gone{0}, left[3] = {};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      for (int i = 0; i < kOps; ++i) {
        // A slot is 1 MiB of its own; its ranges (copied again and again) start at its first
        // page or a little past the second's start, and are 64 or 900 KiB long.
        const std::uintptr_t slot = base + (std::uintptr_t(t * kSlots + rng() % kSlots) << 20);
        const std::uintptr_t lo = slot + (rng() % 2) * (kPage + 100);
        const std::size_t bytes = static_cast<std::size_t>(rng() % 2 ? 64 : 900) << 10;
        const unsigned op = rng() % 100;
        if (op < 80) {
          RegisterCache::Use use = rng() % 4 ? h.cache.offer(at(lo), bytes)
                                             : h.cache.find(at(lo), bytes);
          if (use && !pages_registered(use.pages())) ++held_gone;
          if (rng() % 8 == 0) std::this_thread::yield();  // held while others drop and register
          if (use && !pages_registered(use.pages())) ++held_gone;
        } else if (op < 90) {
          h.cache.chunk_released(slot, slot + (1 << 20));
          if (registered_over(slot, slot + (1 << 20))) ++left[0];
        } else if (op < 95) {
          const std::uintptr_t page = slot + (rng() % 256) * kPage;
          h.cache.pages_released(page, page + kPage);
          if (registered_over(page, page + kPage)) ++left[1];
        } else if (op < 99) {
          h.cache.hand_back(lo, lo + bytes);
          if (registered_over(lo, lo + bytes)) ++left[2];
        } else if (t == 0) {
          h.cache.all_released();
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(held_gone.load(), 0);
  EXPECT_EQ(left[0].load(), 0) << "registrations left after a chunk release";
  EXPECT_EQ(left[1].load(), 0) << "registrations left after a page release";
  EXPECT_EQ(left[2].load(), 0) << "registrations left after a hand-back";
  const RegisterCounts c = h.cache.counts();
  EXPECT_GT(c.registrations, 100u);
  EXPECT_GT(c.hits, c.registrations);
  EXPECT_GT(c.invalidations + c.handed_back, 100u);
  EXPECT_GT(c.evictions, 0u);
  h.cache.all_released();
  EXPECT_EQ(h.registered(), 0u);
}

// Hundreds of registrations side by side, each sharing its end pages with its neighbours (so each
// registers only its own whole pages and its copied range reaches past them): what the cache
// says of any range matches the ranges it registered and the pages the driver holds, and a
// release drops exactly the registration it hits (the cache finds entries by address, not by
// walking them all).
TEST(RegisterCache, ManyNeighboursAreFoundAndDroppedOneByOne) {
  Harness h;
  constexpr int kRanges = 300;
  constexpr std::size_t kSize = (300u << 10) + 100;  // ends mid-page: neighbours share a page
  const std::uintptr_t base = 0x40000000 + 1000;
  auto lo_of = [&](int i) { return base + static_cast<std::uintptr_t>(i) * kSize; };
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < kRanges; ++i) h.cache.offer(at(lo_of(i)), kSize);
  ASSERT_EQ(h.cache.counts().registrations, static_cast<unsigned>(kRanges));
  std::vector<bool> live(kRanges, true);
  std::mt19937_64 rng(7);
  auto check = [&](int queries) {
    std::vector<std::pair<std::uintptr_t, std::size_t>> pages;
    {
      std::lock_guard<std::mutex> lk(h.driver.mu);
      pages.assign(h.driver.host_ranges.begin(), h.driver.host_ranges.end());
    }
    for (int q = 0; q < queries; ++q) {
      const std::uintptr_t lo = lo_of(0) - kPage + rng() % (kRanges * kSize + 2 * kPage);
      const std::size_t bytes = 1 + rng() % (rng() % 2 ? 64 : 2 * kSize);
      bool covered = false, touched = false;
      for (int i = 0; i < kRanges; ++i)
        covered |= live[i] && lo_of(i) <= lo && lo + bytes <= lo_of(i) + kSize;
      for (const auto& [p, n] : pages) touched |= p < lo + bytes && lo < p + n;
      ASSERT_EQ(h.cache.covers(at(lo), bytes), covered) << lo << " +" << bytes;
      ASSERT_EQ(h.cache.touches(at(lo), bytes), touched) << lo << " +" << bytes;
    }
  };
  check(20000);
  for (int k = 0; k < kRanges / 2; ++k) {
    const int i = static_cast<int>(rng() % kRanges);
    const std::uint64_t before = h.cache.counts().invalidations;
    h.cache.chunk_released(lo_of(i), lo_of(i) + kSize);
    EXPECT_EQ(h.cache.counts().invalidations, before + (live[i] ? 1u : 0u));
    live[i] = false;
    if (k % 30 == 0) check(2000);
  }
  check(20000);
  EXPECT_EQ(h.registered(), static_cast<std::size_t>(std::count(live.begin(), live.end(), true)));
}

TEST(RegisterCache, AFailedRegistrationIsNotRetried) {
  Harness h;
  h.driver.faults.host_register = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(h.cache.offer(at(0xA0000000), 1 << 20));
  EXPECT_EQ(h.cache.counts().failures, 1u);
  EXPECT_EQ(h.registered(), 0u);
}

// copy_registered (hot_copy.h): the bytes outside the registered pages go through pinned
// scratch, every byte lands, both ways, at every split of the copy around those pages.
// A host range [lo, hi) and the device's first bytes.
struct HostRange {
  std::uintptr_t lo, hi;
};

// Each range copied to the device and back from it by `copy` (a CopyRequest: its CUresult), with
// every byte compared; `base` names a case in a failure's message.
template <typename Copy>
void expect_copies_right(CUdeviceptr device, std::uintptr_t base,
                         const std::vector<HostRange>& cases, Copy copy) {
  auto* dev = reinterpret_cast<unsigned char*>(device);
  int round = 0;
  for (const HostRange& c : cases)
    for (Direction d : {Direction::HostToDevice, Direction::DeviceToHost}) {
      ++round;
      const std::size_t n = c.hi - c.lo;
      auto* h = reinterpret_cast<unsigned char*>(c.lo);
      CopyRequest r;
      r.direction = d;
      r.host = h;
      r.device = device;
      r.bytes = n;
      r.stream = CU_STREAM_LEGACY;
      for (std::size_t i = 0; i < n; ++i) {
        (d == Direction::HostToDevice ? h : dev)[i] = static_cast<unsigned char>(i * 13 + round);
        (d == Direction::HostToDevice ? dev : h)[i] = 0;
      }
      ASSERT_EQ(copy(r), CUDA_SUCCESS) << "case " << (c.lo - base);
      const unsigned char* got = d == Direction::HostToDevice ? dev : h;
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(got[i], static_cast<unsigned char>(i * 13 + round))
            << "byte " << i << " of " << n << " at case " << (c.lo - base);
    }
}

TEST(HotCopy, BytesOnPagesLeftOutOfTheRegistrationMoveThroughScratch) {
  fake::FakeDriver driver;
  PinnedScratch scratch(driver.api(), 2 * kPage, 4);
  std::vector<unsigned char> host(8 * kPage);
  const auto base = (reinterpret_cast<std::uintptr_t>(host.data()) + kPage - 1) / kPage * kPage;
  const std::uintptr_t page_lo = base + kPage, page_hi = base + 4 * kPage;  // the registered pages
  ASSERT_EQ(driver.api().mem_host_register(reinterpret_cast<void*>(page_lo), page_hi - page_lo, 0),
            CUDA_SUCCESS);
  expect_copies_right(driver.alloc_device(8 * kPage), base,
                      {{base + 100, base + 5 * kPage - 7},  // both ends outside
                       {page_lo, page_hi},                   // all on registered pages
                       {base + 3000, page_lo + 10},          // mostly before
                       {base + 10, base + 900},              // all before
                       {page_hi - 5, page_hi + 4000},        // mostly after
                       {page_hi + 1, page_hi + 2}},          // all after
                      [&](const CopyRequest& r) {
                        return copy_registered(driver.api(), r, page_lo, page_hi, scratch);
                      });
  // Never a DMA from or to pages outside the registration (CUDA would take it as pageable).
  EXPECT_EQ(driver.unpinned_async.load(), 0);
}

TEST(HotCopy, ASmallCopyBesideARegistrationMovesWholeThroughScratch) {
  fake::FakeDriver driver;
  PinnedScratch scratch(driver.api(), 5 * kPage - 100, 2);  // slots of five pages
  ASSERT_EQ(scratch.slot_bytes(), 5 * kPage);
  std::vector<unsigned char> host(12 * kPage);
  const auto base = (reinterpret_cast<std::uintptr_t>(host.data()) + kPage - 1) / kPage * kPage;
  const std::uintptr_t page_lo = base + kPage, page_hi = base + 3 * kPage;  // a neighbour's pages
  ASSERT_EQ(driver.api().mem_host_register(reinterpret_cast<void*>(page_lo), page_hi - page_lo, 0),
            CUDA_SUCCESS);
  const CUdeviceptr device = driver.alloc_device(12 * kPage);
  auto beside = [&](const CopyRequest& r) {
    return copy_beside_registered(driver.api(), r, scratch);
  };
  expect_copies_right(
      device, base,
      {{page_hi - 100, page_hi + 3000},                             // its last page and the next
       {page_lo - 4000, page_lo + 16},                              // the page before and its first
       {page_hi - 1, page_hi},                                      // one byte
       {page_hi - 2000, page_hi - 2000 + scratch.slot_bytes()}},  // a whole slot
      beside);
  // Every DMA from or to pinned scratch: none meets the neighbour's page or a pageable one.
  EXPECT_EQ(driver.unpinned_async.load(), 0);
  // One byte more than a slot is not made at all.
  CopyRequest big;
  big.direction = Direction::HostToDevice;
  big.host = reinterpret_cast<void*>(base);
  big.device = device;
  big.bytes = scratch.slot_bytes() + 1;
  big.stream = CU_STREAM_LEGACY;
  EXPECT_EQ(beside(big), CUDA_ERROR_INVALID_VALUE);
}

// Whether this process's malloc is glibc's (not a sanitizer's, whose memory has no glibc chunks).
bool glibc_malloc() {
  void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
  const bool same = libc && dlsym(RTLD_DEFAULT, "malloc") == dlsym(libc, "malloc");
  if (libc) dlclose(libc);
  return same;
}

TEST(TrackableMemory, GlibcMemoryIsTrackedAndOtherMemoryIsNot) {
  if (!glibc_malloc()) GTEST_SKIP() << "malloc is not glibc's here (a sanitizer's)";
  // A chunk above glibc's largest mmap threshold (32 MiB) is always mmap'd.
  void* big = std::malloc(64 << 20);
  ASSERT_NE(big, nullptr);
  EXPECT_TRUE(inside_mmapped_chunk(big, 64 << 20));
  EXPECT_TRUE(inside_mmapped_chunk(static_cast<char*>(big) + 5 * kPage + 3, 1 << 20));
  EXPECT_FALSE(inside_mmapped_chunk(big, (64 << 20) + kPage));  // runs past the chunk
  TrackableRange r = trackable_range(big, 64 << 20, true);
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.lo % kPage, 0u);
  EXPECT_GE(r.hi, reinterpret_cast<std::uintptr_t>(big) + (64 << 20));
  EXPECT_FALSE(trackable_range(big, 64 << 20, false).ok);  // another malloc below the hooks
  std::free(big);
  void* aligned = nullptr;
  ASSERT_EQ(posix_memalign(&aligned, 64, 48 << 20), 0);
  EXPECT_TRUE(inside_mmapped_chunk(aligned, 48 << 20));
  std::free(aligned);
  // The main heap: a small chunk of this (main) thread's arena.
  void* small = std::malloc(100 << 10);
  const HeapSpan heap = main_heap_span();
  ASSERT_LT(heap.lo, heap.hi);
  if (reinterpret_cast<std::uintptr_t>(small) >= heap.lo) {
    EXPECT_TRUE(trackable_range(small, 100 << 10, true).ok);
  }
  std::free(small);
  // A thread's chunk, in another arena's heap.
  void* in_arena = nullptr;
  std::thread([&] { in_arena = std::malloc(100 << 10); }).join();
  ASSERT_TRUE(reinterpret_cast<std::uintptr_t>(in_arena) < heap.lo ||
              reinterpret_cast<std::uintptr_t>(in_arena) >= heap.hi);  // not the main heap
  {
    EXPECT_TRUE(inside_arena_heap(in_arena, 100 << 10));
    EXPECT_TRUE(trackable_range(in_arena, 100 << 10, true).ok);
  }
  std::free(in_arena);
  // An anonymous mapping the program made, a file mapping and the stack: not glibc's.
  void* anon = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(anon, MAP_FAILED);
  EXPECT_FALSE(trackable_range(anon, 1 << 20, true).ok);
  munmap(anon, 1 << 20);
  const int fd = open("/proc/self/exe", O_RDONLY);
  void* file = mmap(nullptr, kPage, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  ASSERT_NE(file, MAP_FAILED);
  EXPECT_FALSE(trackable_range(file, kPage, true).ok);
  munmap(file, kPage);
  char stack[256 << 10];
  stack[0] = 1;
  EXPECT_FALSE(trackable_range(stack, sizeof stack, true).ok);
  // An unmapped range is refused without a fault.
  EXPECT_FALSE(inside_mmapped_chunk(reinterpret_cast<void*>(0x1000), 1 << 20));
}

}  // namespace
}  // namespace cmt
