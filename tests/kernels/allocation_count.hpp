// Counts the heap allocations (global operator new, every form) made while a callable runs,
// on any thread: execute() must make none. The counting operator new lives in
// step_plan_test.cpp (one definition per program).
#pragma once

#include <cstdint>
#include <functional>

namespace attnsel::kernel::testing {

/// Allocations through operator new (any thread) while `f` runs.
std::int64_t allocations_during(const std::function<void()>& f);

}  // namespace attnsel::kernel::testing
