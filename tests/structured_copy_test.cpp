// The host bytes of the copies cmt leaves to CUDA (interposer/structured_copy.h): every byte the
// copy can touch inside the span, and no more than the bounds the header names.
#include <gtest/gtest.h>

#include <cstdint>

#include "interposer/structured_copy.h"

namespace cmt {
namespace {

std::uintptr_t lo_of(const HostSpan& s) { return reinterpret_cast<std::uintptr_t>(s.p); }

constexpr std::uintptr_t kHost = 0x7f0000000000;

TEST(StructuredCopy, A2DCopyFromHostSpansItsRowsFromItsOffset) {
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = reinterpret_cast<const void*>(kHost);
  c.srcXInBytes = 16;
  c.srcY = 2;
  c.srcPitch = 1000;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = 0x1000;
  c.WidthInBytes = 300;
  c.Height = 4;
  const HostSpans s = host_spans(c);
  EXPECT_EQ(lo_of(s.side[0]), kHost + 2 * 1000 + 16);
  EXPECT_EQ(s.side[0].bytes, 3u * 1000 + 300);  // the last row ends at its width
  EXPECT_EQ(s.side[1].bytes, 0u);               // device memory: nothing of the host's
}

TEST(StructuredCopy, AUnifiedSideCountsAsHostAndAnArraySideAsNone) {
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  c.dstDevice = kHost;
  c.dstPitch = 64;
  c.WidthInBytes = 64;
  c.Height = 10;
  const HostSpans s = host_spans(c);
  EXPECT_EQ(s.side[0].bytes, 0u);
  EXPECT_EQ(lo_of(s.side[1]), kHost);
  EXPECT_EQ(s.side[1].bytes, 640u);
}

TEST(StructuredCopy, APitchBelowTheWidthCountsRowsAtTheWidth) {
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = reinterpret_cast<const void*>(kHost);
  c.srcPitch = 0;  // invalid for CUDA with several rows, and still never a short span
  c.WidthInBytes = 100;
  c.Height = 3;
  EXPECT_EQ(host_spans(c).side[0].bytes, 300u);
}

TEST(StructuredCopy, A3DCopySpansItsSlicesAtTheSlicesHeight) {
  CUDA_MEMCPY3D c{};
  c.dstMemoryType = CU_MEMORYTYPE_HOST;
  c.dstHost = reinterpret_cast<void*>(kHost);
  c.dstXInBytes = 8;
  c.dstY = 1;
  c.dstZ = 2;
  c.dstPitch = 512;
  c.dstHeight = 20;  // rows a slice
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  c.WidthInBytes = 256;
  c.Height = 10;
  c.Depth = 3;
  const HostSpans s = host_spans(c);
  EXPECT_EQ(s.side[0].bytes, 0u);
  EXPECT_EQ(lo_of(s.side[1]), kHost + (2 * 20 + 1) * 512 + 8);
  EXPECT_EQ(s.side[1].bytes, (2u * 20 + 9) * 512 + 256);
}

TEST(StructuredCopy, A3DPeerCopyReadsTheSameFields) {
  CUDA_MEMCPY3D_PEER c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = reinterpret_cast<const void*>(kHost);
  c.srcPitch = 128;
  c.srcHeight = 0;  // allowed with one slice: the copy's height
  c.WidthInBytes = 128;
  c.Height = 4;
  c.Depth = 1;
  EXPECT_EQ(host_spans(c).side[0].bytes, 512u);
}

TEST(StructuredCopy, ACopyOfNothingHasNoSpan) {
  CUDA_MEMCPY3D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = reinterpret_cast<const void*>(kHost);
  c.WidthInBytes = 64;
  c.Height = 4;
  c.Depth = 0;
  EXPECT_EQ(host_spans(c).side[0].bytes, 0u);
}

TEST(StructuredCopy, ASpanPastTheEndOfTheAddressSpaceEndsThere) {
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = reinterpret_cast<const void*>(kHost);
  c.srcPitch = SIZE_MAX / 2;
  c.WidthInBytes = 1;
  c.Height = 5;  // rows that overflow the size
  const HostSpan s = host_spans(c).side[0];
  EXPECT_EQ(lo_of(s), kHost);
  EXPECT_EQ(s.bytes, UINTPTR_MAX - kHost);
}

TEST(StructuredCopy, ABatchOperationCountsBytesBetweenPointersAndSixteenBesideAnArray) {
  CUDA_MEMCPY3D_BATCH_OP op{};
  op.src.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  op.src.op.ptr.ptr = kHost;
  op.src.op.ptr.rowLength = 100;  // elements
  op.src.op.ptr.layerHeight = 0;  // the extent's height
  op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  op.dst.op.ptr.ptr = 0x1000;
  op.extent = CUextent3D{50, 3, 2};
  HostSpans s = host_spans(op);
  EXPECT_EQ(lo_of(s.side[0]), kHost);
  EXPECT_EQ(s.side[0].bytes, (1u * 3 + 2) * 100 + 50);  // pointer to pointer: elements are bytes
  op.dst.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
  s = host_spans(op);
  EXPECT_EQ(s.side[0].bytes, ((1u * 3 + 2) * 100 + 50) * 16);
  EXPECT_EQ(s.side[1].bytes, 0u);
}

}  // namespace
}  // namespace cmt
