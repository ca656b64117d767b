// Batches of copies (cuMemcpyBatchAsync and cudaMemcpyBatchAsync, CUDA 12.8 on: libcudf, KV-cache
// offloaders, kvikio and NCCL copy this way). CUDA stages a batch's pageable copies as slowly as
// single ones, so each copy of a batch is offered to cmt like an asynchronous copy on the batch's
// stream, and whatever cmt did not handle goes to CUDA as one smaller batch with its attributes.
//
// Why that keeps the batch's contract: CUDA runs a batch after the work queued before it on the
// stream and before the work queued after it, and its copies in no particular order (a batch
// whose copies depend on each other is undefined). cmt's copies are ordered on the same stream,
// and the rest of the batch is enqueued after them; the whole stays between the same neighbours.
// A copy whose source is read "in stream order" waits for the stream before cmt reads it, as
// cudaMemcpy does; one read "during the call" or "any time" needs no wait, and cmt has read its
// source before the call returns either way.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace cmt {

// The arguments of one batch call, as the program passed them (the CUDA 13 form; CUDA 12.8's
// failIdx is the hook's business).
struct BatchCall {
  CUdeviceptr* dsts = nullptr;
  CUdeviceptr* srcs = nullptr;
  std::size_t* sizes = nullptr;
  std::size_t count = 0;
  CUmemcpyAttributes* attrs = nullptr;
  std::size_t* attrs_idxs = nullptr;
  std::size_t num_attrs = 0;
  CUstream stream = nullptr;        // the program's; the entry point decides what NULL means
  bool null_is_per_thread = false;  // _ptsz: NULL is the calling thread's default stream
};

// Whether cmt may look into the batch: its arrays present, its attributes as CUDA requires (the
// first index 0, rising, under count; a valid source order each) and a stream other than the
// legacy one, which the batch API refuses. Anything else goes to CUDA untouched, for its error.
bool batch_is_well_formed(const BatchCall& batch);

// The stream the batch runs on, explicit: NULL becomes CU_STREAM_PER_THREAD (_ptsz entries).
CUstream batch_stream(const BatchCall& batch);

// What is left of a batch for CUDA: the copies cmt handled none or part of (the remainder), with
// the attributes they had, and the index each had in the program's batch.
struct BatchRest {
  std::vector<CUdeviceptr> dsts, srcs;
  std::vector<std::size_t> sizes;
  std::vector<CUmemcpyAttributes> attrs;
  std::vector<std::size_t> attrs_idxs;
  std::vector<std::size_t> index;  // rest copy i is the program's copy index[i]
  bool untouched = true;           // cmt handled no byte: forward the program's own arrays

  std::size_t count() const { return sizes.size(); }
  // Room for a whole batch, claimed before any copy is offered, so that nothing can fail to
  // allocate once cmt has made a copy. Throws std::bad_alloc.
  void reserve(std::size_t count);
  // The rest as a batch of its own, on `batch`'s stream (valid while this rest lives).
  BatchCall as_call(const BatchCall& batch);
  // Adds copy `index` from `done` bytes on, under `attr` (attribute entry `attr_entry`).
  void add(const BatchCall& batch, std::size_t index, std::size_t done, std::size_t attr_entry);
};

// Splits a well-formed batch into runs and hands each, in order, to `take(dst, src, bytes,
// source_in_stream_order)`, which returns how many leading bytes cmt took. Copies that each
// continue the one before on both sides (one buffer cut into parts) make one run, read in stream
// order if any of them is: a batch's copies have no order among them, so one pipeline may carry
// them all instead of one each. If cmt declines such a run whole, its copies are handed over one
// by one (the run may cross two allocations). Fills `rest` (reserved for the batch) with what
// CUDA must still copy.
template <typename Take>
void split_batch(const BatchCall& batch, BatchRest* rest, Take&& take) {
  // The attribute entry of copy i: the last one starting at or before it.
  auto entry_of = [&](std::size_t i) {
    return static_cast<std::size_t>(
        std::upper_bound(batch.attrs_idxs, batch.attrs_idxs + batch.num_attrs, i) -
        batch.attrs_idxs - 1);
  };
  auto in_stream_order = [&](std::size_t i) {
    return batch.attrs[entry_of(i)].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  };
  // Hands CUDA what cmt's `done` leading bytes of the run [first, end) left of each copy.
  auto leave_rest = [&](std::size_t first, std::size_t end, std::size_t done) {
    for (std::size_t k = first; k < end; ++k) {
      const std::size_t covered = done < batch.sizes[k] ? done : batch.sizes[k];
      done -= covered;
      if (covered < batch.sizes[k] || batch.sizes[k] == 0)
        rest->add(batch, k, covered, entry_of(k));
    }
  };
  for (std::size_t i = 0; i < batch.count;) {
    std::size_t end = i + 1, bytes = batch.sizes[i];
    bool ordered = in_stream_order(i);
    while (end < batch.count && batch.sizes[end - 1] != 0 && batch.sizes[end] != 0 &&
           batch.dsts[end] == batch.dsts[end - 1] + batch.sizes[end - 1] &&
           batch.srcs[end] == batch.srcs[end - 1] + batch.sizes[end - 1] &&
           bytes + batch.sizes[end] > bytes) {
      bytes += batch.sizes[end];
      ordered = ordered || in_stream_order(end);
      ++end;
    }
    std::size_t done = take(batch.dsts[i], batch.srcs[i], bytes, ordered);
    if (done == 0 && end - i > 1) {
      for (std::size_t k = i; k < end; ++k) {
        const std::size_t one =
            take(batch.dsts[k], batch.srcs[k], batch.sizes[k], in_stream_order(k));
        if (one > 0) rest->untouched = false;
        leave_rest(k, k + 1, one);
      }
    } else {
      if (done > 0) rest->untouched = false;
      leave_rest(i, end, done);
    }
    i = end;
  }
}

}  // namespace cmt
