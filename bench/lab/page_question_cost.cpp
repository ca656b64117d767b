// cmt-lab-page-question (lab, CPU only): what one page question costs (interposer/page_map.h,
// asked by the host leg once per copy into pinned memory from 4 MiB up, and by the recorder per
// recorded call), now that the descriptor is checked before each read (common/kept_file.h:
// an fstat, then the pread), against the read through a descriptor kept blindly, as before
// session 54. Alternating rounds in one process; median and range. NOTES.md 102.
//
// usage: cmt-lab-page-question [--questions 100000] [--rounds 9]
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "bench_cli.h"
#include "interposer/page_map.h"

namespace {

int g_blind_fd = -1;

// The question as it was: one pread of the entry through a descriptor opened once.
bool blind_question(const void* p) {
  std::uint64_t entry = 0;
  const off_t at = static_cast<off_t>(reinterpret_cast<std::uintptr_t>(p) / 4096 * 8);
  return pread(g_blind_fd, &entry, sizeof entry, at) == sizeof entry;
}

template <typename Ask>
double ns_per_question(int questions, Ask&& ask) {
  static int page = 1;
  long known = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < questions; ++i) known += ask(&page);
  const auto t1 = std::chrono::steady_clock::now();
  return known == questions ? std::chrono::duration<double, std::nano>(t1 - t0).count() / questions
                            : -1;
}

void say(const char* what, std::vector<double> ns) {
  std::sort(ns.begin(), ns.end());
  std::printf("%-34s median %6.0f ns, range %.0f-%.0f\n", what, ns[ns.size() / 2], ns.front(),
              ns.back());
}

}  // namespace

int main(int argc, char** argv) {
  int questions = 100000, rounds = 9;
  CLI::App app{"cmt-lab-page-question: a page question, checked against blind"};
  app.add_option("--questions", questions, "questions per round")->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "alternating rounds")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  g_blind_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (g_blind_fd < 0) {
    std::fprintf(stderr, "cmt-lab-page-question: cannot open /proc/self/pagemap\n");
    return 1;
  }
  std::vector<double> checked, blind;
  for (int r = 0; r < rounds; ++r) {
    checked.push_back(
        ns_per_question(questions, [](const void* p) { return cmt::page_entry(p).known; }));
    blind.push_back(ns_per_question(questions, blind_question));
  }
  std::printf("%d rounds of %d questions, alternating\n", rounds, questions);
  say("checked descriptor (page_entry)", checked);
  say("descriptor kept blindly (before)", blind);
  return 0;
}
