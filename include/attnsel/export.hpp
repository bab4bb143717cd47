// Layer: core (src/layers.txt)
// ATTNSEL_API marks the public API. The shared library is built with
// -fvisibility=hidden -fvisibility-inlines-hidden, so a class or function of
// include/attnsel/ that is not marked is not exported from libattnsel.so.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define ATTNSEL_API __attribute__((visibility("default")))
#else
#define ATTNSEL_API
#endif
