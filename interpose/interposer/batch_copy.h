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
  // Adds copy `index` from `done` bytes on, under `attr` (attribute entry `attr_entry`).
  void add(const BatchCall& batch, std::size_t index, std::size_t done, std::size_t attr_entry);
};

// Offers each copy of a well-formed batch in order: `offer(dst, src, bytes,
// source_in_stream_order)` returns how many leading bytes cmt handled. Fills `rest` (reserved for
// the batch) with what CUDA must still copy.
template <typename Offer>
void offer_batch(const BatchCall& batch, BatchRest* rest, Offer&& offer) {
  std::size_t entry = 0;  // the attribute entry of copy i
  for (std::size_t i = 0; i < batch.count; ++i) {
    while (entry + 1 < batch.num_attrs && batch.attrs_idxs[entry + 1] <= i) ++entry;
    const bool in_stream_order =
        batch.attrs[entry].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    const std::size_t done = offer(batch.dsts[i], batch.srcs[i], batch.sizes[i], in_stream_order);
    if (done > 0) rest->untouched = false;
    if (done < batch.sizes[i] || batch.sizes[i] == 0) rest->add(batch, i, done, entry);
  }
}

}  // namespace cmt
