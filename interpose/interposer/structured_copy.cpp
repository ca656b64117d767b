#include "interposer/structured_copy.h"

#include <algorithm>
#include <cstdint>

namespace cmt {
namespace {

// a * b + c, or SIZE_MAX where that overflows: a span that long reaches the end of the address
// space, which is what a bound may do.
std::size_t mul_add(std::size_t a, std::size_t b, std::size_t c) {
  std::size_t product = 0, sum = 0;
  if (__builtin_mul_overflow(a, b, &product) || __builtin_add_overflow(product, c, &sum))
    return SIZE_MAX;
  return sum;
}

// `offset` bytes past `base`, then `bytes` long, cut at the end of the address space.
HostSpan span_at(std::uintptr_t base, std::size_t offset, std::size_t bytes) {
  std::uintptr_t lo = 0;
  if (__builtin_add_overflow(base, offset, &lo)) return {};
  return {reinterpret_cast<const void*>(lo), std::min<std::size_t>(bytes, UINTPTR_MAX - lo)};
}

// The host address of a side, if it may be a host one.
bool host_base(CUmemorytype type, const void* host, CUdeviceptr device, std::uintptr_t* base) {
  if (type == CU_MEMORYTYPE_HOST) *base = reinterpret_cast<std::uintptr_t>(host);
  else if (type == CU_MEMORYTYPE_UNIFIED) *base = static_cast<std::uintptr_t>(device);
  else return false;
  return *base != 0;
}

// Rows of `width` bytes `pitch` apart, `height` rows a slice, `depth` slices `slice_rows` rows
// apart, starting at (x, y, z).
HostSpan box_span(std::uintptr_t base, std::size_t x, std::size_t y, std::size_t z,
                  std::size_t pitch, std::size_t slice_rows, std::size_t width,
                  std::size_t height, std::size_t depth) {
  if (width == 0 || height == 0 || depth == 0) return {};
  pitch = std::max(pitch, width);
  slice_rows = std::max(slice_rows, height);
  const std::size_t first_row = mul_add(z, slice_rows, y);
  const std::size_t offset = mul_add(first_row, pitch, x);
  const std::size_t last_row = mul_add(depth - 1, slice_rows, height - 1);
  const std::size_t bytes = mul_add(last_row, pitch, width);
  if (offset == SIZE_MAX || bytes == SIZE_MAX) return span_at(base, 0, SIZE_MAX);
  return span_at(base, offset, bytes);
}

template <typename Copy3D>
HostSpans spans_3d(const Copy3D& c) {
  HostSpans out;
  std::uintptr_t base = 0;
  if (host_base(c.srcMemoryType, c.srcHost, c.srcDevice, &base))
    out.side[0] = box_span(base, c.srcXInBytes, c.srcY, c.srcZ, c.srcPitch, c.srcHeight,
                           c.WidthInBytes, c.Height, c.Depth);
  if (host_base(c.dstMemoryType, c.dstHost, c.dstDevice, &base))
    out.side[1] = box_span(base, c.dstXInBytes, c.dstY, c.dstZ, c.dstPitch, c.dstHeight,
                           c.WidthInBytes, c.Height, c.Depth);
  return out;
}

// A pointer operand of a 3D batch: rows of rowLength elements (0: the extent's width), slices of
// layerHeight rows (0: the extent's height).
HostSpan operand_span(const CUmemcpy3DOperand& operand, const CUextent3D& extent,
                      std::size_t element) {
  if (operand.type != CU_MEMCPY_OPERAND_TYPE_POINTER) return {};
  const auto base = static_cast<std::uintptr_t>(operand.op.ptr.ptr);
  if (base == 0) return {};
  const std::size_t width = mul_add(extent.width, element, 0);
  const std::size_t pitch = mul_add(operand.op.ptr.rowLength, element, 0);
  return box_span(base, 0, 0, 0, pitch, operand.op.ptr.layerHeight, width, extent.height,
                  extent.depth);
}

}  // namespace

HostSpans host_spans(const CUDA_MEMCPY2D& c) {
  HostSpans out;
  std::uintptr_t base = 0;
  if (host_base(c.srcMemoryType, c.srcHost, c.srcDevice, &base))
    out.side[0] = box_span(base, c.srcXInBytes, c.srcY, 0, c.srcPitch, 0, c.WidthInBytes,
                           c.Height, 1);
  if (host_base(c.dstMemoryType, c.dstHost, c.dstDevice, &base))
    out.side[1] = box_span(base, c.dstXInBytes, c.dstY, 0, c.dstPitch, 0, c.WidthInBytes,
                           c.Height, 1);
  return out;
}

HostSpans host_spans(const CUDA_MEMCPY3D& c) { return spans_3d(c); }
HostSpans host_spans(const CUDA_MEMCPY3D_PEER& c) { return spans_3d(c); }

HostSpans host_spans(const CUDA_MEMCPY3D_BATCH_OP& op) {
  // Between two pointers the extent is in bytes; beside an array, in its elements.
  const bool both_pointers = op.src.type == CU_MEMCPY_OPERAND_TYPE_POINTER &&
                             op.dst.type == CU_MEMCPY_OPERAND_TYPE_POINTER;
  const std::size_t element = both_pointers ? 1 : 16;
  HostSpans out;
  out.side[0] = operand_span(op.src, op.extent, element);
  out.side[1] = operand_span(op.dst, op.extent, element);
  return out;
}

}  // namespace cmt
