// CPU_ATTN's SIMD kernels, compiled once per Highway target (run-time dispatch picks the
// best the machine runs: AVX-512, AVX2, or the portable EMU128 / SCALAR), and on AVX-512 once
// more with AVX-512-BF16 dot products, chosen at run time when the CPU has them.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention/cpu/attention_kernels.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "kernels/attention/cpu/work.hpp"
#include "kernels/fp8.hpp"
#include "kernels/half.hpp"

#if HWY_TARGET == HWY_AVX3
#include <immintrin.h>

HWY_PUSH_ATTRIBUTES(HWY_TARGET_STR ",avx512bf16")
namespace attnsel::kernel::cpu::HWY_NAMESPACE::bf16 {
#define ATTNSEL_BF16_VARIANT 1
#include "kernels/attention/cpu/attention_body-inl.h"
#undef ATTNSEL_BF16_VARIANT
}  // namespace attnsel::kernel::cpu::HWY_NAMESPACE::bf16
HWY_POP_ATTRIBUTES
#endif

HWY_BEFORE_NAMESPACE();
namespace attnsel::kernel::cpu::HWY_NAMESPACE {
#define ATTNSEL_BF16_VARIANT 0
#include "kernels/attention/cpu/attention_body-inl.h"
#undef ATTNSEL_BF16_VARIANT

void ProcessItem(const LayerCtx& c, const WorkItem& it, float* part, void* scratch) {
#if HWY_TARGET == HWY_AVX3
  // An fp8 cache is widened to bfloat16 in registers by byte-table lookups (AVX512-VBMI):
  // without VBMI its items take the fp32 path, which widens through half precision.
  static const bool has_vbmi = __builtin_cpu_supports("avx512vbmi");
  const bool fp8 = is_fp8(c.kv);
  if (c.bf16_dot && (!fp8 || has_vbmi)) return bf16::RunItemAnyKv(c, it, part, scratch);
#endif
  RunItemAnyKv(c, it, part, scratch);
}

const char* TargetName(bool bf16_dot) {
#if HWY_TARGET == HWY_AVX3
  if (bf16_dot) return "AVX3+BF16";
#endif
  (void)bf16_dot;
  return hwy::TargetName(HWY_TARGET);
}
}  // namespace attnsel::kernel::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnsel::kernel::cpu {

HWY_EXPORT(ProcessItem);
HWY_EXPORT(TargetName);

std::size_t scratch_bytes(int head_size) {
  const auto D = static_cast<std::size_t>(head_size);
  // Shared: s, p, pp (tile × rows), kf, vf (tile × D), a zero row; per KV head: qp, o
  // (rows × D) and m, l, alpha (rows). See CarveScratch.
  return 3 * kTileKeys * kMaxRows * 4 + 2 * kTileKeys * D * 4 + D * 4 +
         kMaxItemKvHeads * (2 * kMaxRows * D * 4 + 3 * kMaxRows * 4) + 64;
}

bool cpu_has_bf16_dot() {
#if defined(__x86_64__) || defined(__i386__)
  // The BF16 variant is compiled into the AVX3 target: both must be available.
  static const bool has = (hwy::SupportedTargets() & HWY_AVX3) != 0 && __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

void process_item(const LayerCtx& ctx, const WorkItem& item, float* partial_slot, void* scratch) {
  HWY_DYNAMIC_DISPATCH(ProcessItem)(ctx, item, partial_slot, scratch);
}

const char* kernel_target_name(const LayerCtx& ctx) { return HWY_DYNAMIC_DISPATCH(TargetName)(ctx.bf16_dot); }

}  // namespace attnsel::kernel::cpu
#endif
