// The CPU copy kernels every copier's threads run: between the user's buffer and a staging slot,
// or between two host buffers. Streaming (non-temporal) stores write the destination without
// pulling it into the cache first, which is what makes device-to-host copies into large buffers
// fast; plain memcpy is used everywhere else.
#pragma once

#include <cstddef>

namespace cmt {

void copy_memcpy(void* dst, const void* src, std::size_t bytes);
// Like memcpy; bytes reach memory with non-temporal stores where alignment allows. Ends with a
// store fence, so the data is visible to any thread that synchronizes with the caller afterwards.
void copy_streaming(void* dst, const void* src, std::size_t bytes);

}  // namespace cmt
