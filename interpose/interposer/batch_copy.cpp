#include "interposer/batch_copy.h"

namespace cmt {

bool batch_is_well_formed(const BatchCall& b) {
  if (b.count == 0 || !b.dsts || !b.srcs || !b.sizes || !b.attrs || !b.attrs_idxs) return false;
  if (b.num_attrs == 0 || b.num_attrs > b.count || b.attrs_idxs[0] != 0) return false;
  for (std::size_t k = 0; k < b.num_attrs; ++k) {
    if (k > 0 && b.attrs_idxs[k] <= b.attrs_idxs[k - 1]) return false;
    if (b.attrs_idxs[k] >= b.count) return false;
    const CUmemcpySrcAccessOrder order = b.attrs[k].srcAccessOrder;
    if (order != CU_MEMCPY_SRC_ACCESS_ORDER_STREAM &&
        order != CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL &&
        order != CU_MEMCPY_SRC_ACCESS_ORDER_ANY)
      return false;
  }
  if (b.stream == CU_STREAM_LEGACY || (!b.stream && !b.null_is_per_thread)) return false;
  return true;
}

CUstream batch_stream(const BatchCall& b) {
  return b.stream ? b.stream : CU_STREAM_PER_THREAD;
}

void BatchRest::reserve(std::size_t count) {
  dsts.reserve(count);
  srcs.reserve(count);
  sizes.reserve(count);
  attrs.reserve(count);
  attrs_idxs.reserve(count);
  index.reserve(count);
}

BatchCall BatchRest::as_call(const BatchCall& batch) {
  return BatchCall{dsts.data(),  srcs.data(),  sizes.data(),
                   count(),      attrs.data(), attrs_idxs.data(),
                   attrs.size(), batch.stream, batch.null_is_per_thread};
}

void BatchRest::add(const BatchCall& b, std::size_t i, std::size_t done, std::size_t attr_entry) {
  // A new attribute entry where this copy's differs from the previous rest copy's: the rest's
  // indices rise from 0 as CUDA requires, and never outnumber its copies.
  // (The previous rest copy is under this copy's entry if that entry starts at or before it.)
  const bool same_entry = !index.empty() && b.attrs_idxs[attr_entry] <= index.back();
  if (!same_entry) {
    attrs.push_back(b.attrs[attr_entry]);
    attrs_idxs.push_back(sizes.size());
  }
  dsts.push_back(b.dsts[i] + done);
  srcs.push_back(b.srcs[i] + done);
  sizes.push_back(b.sizes[i] - done);
  index.push_back(i);
}

}  // namespace cmt
