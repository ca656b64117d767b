// A copy offered to cmt with the calling thread's signals put aside (common/caller_hold.h), as the
// host leg's hooks put theirs: no handler the program installed runs on the caller and leaves by
// siglongjmp while cmt's copy threads still write its buffer (where cmt's signal chain is in
// front: interposer/signal_chain.h). They run as the hook returns (hook_hold.h), where no frame
// of cmt's holds anything. Only around the offer: CUDA's own call, which gets what cmt left,
// meets signals as it would without cmt.
#pragma once

#include <cstddef>

#include "common/caller_hold.h"
#include "hooks/hook_hold.h"
#include "interposer/signal_chain.h"

namespace cmt {

// `offer()` (returning the bytes cmt handled) with signals put aside, into the hook's hold
// (hook_hold.h), which sends them again as the hook returns. Outside a hook (a test calling a
// handler), into a hold of its own, released at its end; not noexcept then.
template <typename Offer>
std::size_t held_offer(Offer&& offer) {
  CallerHold own;
  CallerHold* hold = HookHold::current();
  if (!hold) {
    own.hold();
    hold = &own;
  }
  CallerHold* const outer = begin_deferring(hold);
  const std::size_t done = offer();
  end_deferring(outer);
  own.release();  // nothing if the hook's hold was used
  return done;
}

}  // namespace cmt
