// Internal: OpenMP's dynamic team sizing, on for the kernel's regions (and the ceiling probes
// paired with them) only.
#pragma once

#include <omp.h>

#include <cstdlib>

namespace attnsel::kernel::cpu {

/// Turns on OpenMP's dynamic adjustment (libgomp sizes a team by the load average) while it
/// lives: on an oversubscribed machine a full team's spin-waiting workers steal the cores
/// from the thread that has the work (50× slowdowns were measured); on an idle machine
/// nothing changes. The caller's setting is restored; an explicit OMP_DYNAMIC in the
/// environment is the user's choice and is left alone. Not thread-safe (OpenMP's setting is
/// per thread): use it on the thread that opens the parallel regions.
class DynamicTeams {
 public:
  DynamicTeams() : previous_(omp_get_dynamic()) {
    if (std::getenv("OMP_DYNAMIC") == nullptr) omp_set_dynamic(1);
  }
  ~DynamicTeams() { omp_set_dynamic(previous_); }
  DynamicTeams(const DynamicTeams&) = delete;
  DynamicTeams& operator=(const DynamicTeams&) = delete;

 private:
  int previous_;
};

}  // namespace attnsel::kernel::cpu
