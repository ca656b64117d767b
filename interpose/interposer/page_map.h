// This process's page table, read one entry at a time through /proc/self/pagemap: whether a page
// is mapped in the process now (touching it will not fault) and whether it is a file's. The
// recorder samples the kind of each copy's host memory with it; the host leg asks it whether a
// copy's source is still to be faulted in (interposer/host_leg.h). A question is an fstat, which
// makes sure the descriptor is still cmt's (common/kept_file.h), and a pread; it takes no lock and
// never allocates, so it may be asked inside malloc and in signal handlers.
#pragma once

namespace cmt {

struct PageEntry {
  bool known = false;    // the entry could be read (no /proc, or no descriptor left: not known)
  bool present = false;  // mapped in this process now
  bool file = false;     // a file's page, or shared memory
};

// The entry of the page that holds `p`.
PageEntry page_entry(const void* p) noexcept;

// In a forked child: the descriptor the parent opened answers for the parent's pages, so it is
// closed and the child opens its own at its first question.
void page_map_forget_in_child() noexcept;

}  // namespace cmt
