// What the copy threads run for one copy, one unit at a time (engine/shared/worker_pool.h): stage a unit of
// the user's buffer into its piece's slot (H2D), drain a unit of a landed piece into the user's
// buffer (D2H), or fault one 2 MiB block of a fresh destination in. The thread that finishes a
// piece's last unit stamps the slot with the piece's ticket, which the issuer waits for.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/copy_types.h"
#include "engine/device/copy_plan.h"
#include "engine/device/copy_trace.h"
#include "engine/shared/fresh_pages.h"
#include "engine/shared/staging_ring.h"
#include "engine/shared/worker_pool.h"

namespace cmt {

class StageIn final : public UnitTask {  // H2D: user buffer -> slot
 public:
  StageIn(const char* src, const CopyLayout& l, StagingRing& ring, std::uint64_t base,
          CopyMethod method, CopyTrace& trace)
      : src_(src), layout_(l), ring_(ring), base_(base), method_(method), trace_(trace) {}
  void run_unit(std::size_t u) override;

 private:
  const char* src_;
  CopyLayout layout_;
  StagingRing& ring_;
  std::uint64_t base_;
  CopyMethod method_;
  CopyTrace& trace_;
};

class DrainOut final : public UnitTask {  // D2H: slot -> user buffer
 public:
  DrainOut(char* dst, const CopyLayout& l, StagingRing& ring, std::uint64_t base, CopyMethod method,
           CopyTrace& trace)
      : dst_(dst), layout_(l), ring_(ring), base_(base), method_(method), trace_(trace) {}
  void run_unit(std::size_t u) override;

 private:
  char* dst_;
  CopyLayout layout_;
  StagingRing& ring_;
  std::uint64_t base_;
  CopyMethod method_;
  CopyTrace& trace_;
};

}  // namespace cmt
