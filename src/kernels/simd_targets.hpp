// The Highway targets the CPU kernels are compiled for; a kernel's translation unit includes
// this before hwy/foreach_target.h. SSSE3 adds compile time and nothing over SSE4 on any
// x86-64 that runs these kernels.
#pragma once

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS HWY_SSSE3
#endif
