// FLASH_ATTN's CUDA kernels on the standard GPU shapes: prefill TFLOP/s and paged-decode TB/s,
// timed with CUDA events (median, L2 flushed before every run), each shape checked against
// the reference on sampled query tokens, next to the read bandwidth measured in the same run.
// Writes one JSON document (--json) that scripts/bench_torch_sdpa.py joins with PyTorch's
// FlashAttention-2 and cuDNN timings on the same shapes.
//
//   attnsel_cuda_bench [--json FILE] [--quick] [--reps N] [--only REGEX]
//
// --only REGEX runs the shapes whose name it matches (e.g. 'd128 (full|causal) blk16$').
// A prefill on an fp8 cache up to head size 128 also runs with f16 products
// (ATTNSEL_CUDA_FP8_PREFILL=f16), labelled "f16" beside the default.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "attnsel/errors.hpp"
#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/attention/cuda/flash_attn_cuda.hpp"
#include "kernels/attention/reference.hpp"

namespace ak = attnsel::kernel;
namespace cu = attnsel::kernel::cuda;

namespace {

struct Shape {
  std::string name;
  std::string kind;  // "prefill" or "decode"
  int batch = 1, seq_len = 0, query_len = 0;
  int heads = 32, kv_heads = 8, head_size = 128;
  int block_size = 16;
  bool hnd = false;  // cache layout [block][head][token][dim] instead of [block][token][head][dim]
  bool causal = true;
  ak::ScalarType dtype = ak::ScalarType::bf16;
  bool kv_fp8 = false;  // e4m3 cache (k_scale 0.25, v_scale 0.5) instead of dtype
  // Each sequence's pages adjacent and in order (the block table counts up): the cache read
  // as one run per sequence, as contiguous attention reads it, where the others scatter it.
  bool contiguous_pages = false;
};

/// A paged batch built directly on the device: random keys/values/queries, shuffled pages
/// (unless Shape::contiguous_pages).
struct DeviceBatch {
  cu::DeviceTensor q, o, k, v;
  std::vector<std::int32_t> qsl, seq_lens, block_table;
  int max_blocks = 0;
  ak::AttentionMetadata md() const {
    ak::AttentionMetadata m;
    m.num_seqs = static_cast<int>(seq_lens.size());
    m.num_actual_tokens = qsl.back();
    m.query_start_loc = qsl;
    m.seq_lens = seq_lens;
    m.block_table = block_table;
    m.max_blocks_per_seq = max_blocks;
    m.max_query_len = 0;
    for (std::size_t i = 0; i + 1 < qsl.size(); ++i) m.max_query_len = std::max(m.max_query_len, qsl[i + 1] - qsl[i]);
    m.max_seq_len = *std::max_element(seq_lens.begin(), seq_lens.end());
    return m;
  }
};

DeviceBatch make_batch(const Shape& s, std::uint64_t seed) {
  DeviceBatch b;
  const int blocks_per_seq = (s.seq_len + s.block_size - 1) / s.block_size;
  const int num_blocks = blocks_per_seq * s.batch + 7;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937_64 rng(seed);
  if (!s.contiguous_pages) std::shuffle(ids.begin(), ids.end(), rng);
  b.max_blocks = blocks_per_seq;
  b.qsl.push_back(0);
  std::size_t next = 0;
  for (int i = 0; i < s.batch; ++i) {
    b.qsl.push_back(b.qsl.back() + s.query_len);
    b.seq_lens.push_back(s.seq_len);
    for (int j = 0; j < blocks_per_seq; ++j) b.block_table.push_back(ids[next++]);
  }
  const int tokens = b.qsl.back();
  std::vector<std::int64_t> qshape = {tokens, s.heads, s.head_size};
  std::vector<std::int64_t> qstride = {std::int64_t(s.heads) * s.head_size, s.head_size, 1};
  std::vector<std::int64_t> cshape = {num_blocks, s.block_size, s.kv_heads, s.head_size};
  std::vector<std::int64_t> cstride = {std::int64_t(s.block_size) * s.kv_heads * s.head_size,
                                       std::int64_t(s.kv_heads) * s.head_size, s.head_size, 1};
  if (s.hnd) cstride = {std::int64_t(s.block_size) * s.kv_heads * s.head_size, s.head_size,
                        std::int64_t(s.block_size) * s.head_size, 1};
  b.q = cu::device_like(ak::TensorView::strided(nullptr, s.dtype, qshape, qstride));
  b.o = cu::device_like(ak::TensorView::strided(nullptr, s.dtype, qshape, qstride));
  const ak::ScalarType cache_dtype = s.kv_fp8 ? ak::ScalarType::fp8_e4m3 : s.dtype;
  b.k = cu::device_like(ak::TensorView::strided(nullptr, cache_dtype, cshape, cstride));
  b.v = cu::device_like(ak::TensorView::strided(nullptr, cache_dtype, cshape, cstride));
  cu::fill_uniform(b.q, seed * 4 + 1, 2.0f);
  if (s.kv_fp8) {
    // Random e4m3 codes of magnitude 2^-6 .. 3.75 (exponent fields 1..9), either sign.
    std::vector<std::uint8_t> bytes(cu::span_bytes(b.k.view));
    for (cu::DeviceTensor* t : {&b.k, &b.v}) {
      for (auto& x : bytes) {
        const std::uint64_t r = rng();
        x = static_cast<std::uint8_t>((r & 0x80) | ((1 + (r >> 8) % 9) << 3) | ((r >> 16) & 7));
      }
      t->buffer.upload(bytes.data(), bytes.size());
    }
  } else {
    cu::fill_uniform(b.k, seed * 4 + 2, 1.0f);
    cu::fill_uniform(b.v, seed * 4 + 3, 1.0f);
  }
  return b;
}

ak::LayerParams layer(const Shape& s) {
  ak::LayerParams p;
  p.num_heads = s.heads;
  p.num_kv_heads = s.kv_heads;
  p.head_size = s.head_size;
  p.scale = 1.0f / std::sqrt(static_cast<float>(s.head_size));
  p.causal = s.causal;
  if (s.kv_fp8) {
    p.kv_cache_dtype = attnsel::CacheDType::fp8_e4m3;
    p.k_scale = 0.25f;
    p.v_scale = 0.5f;
  }
  return p;
}

double flops(const Shape& s) {
  double keys = 0.0;
  for (int i = 0; i < s.query_len; ++i)
    keys += s.causal ? double(s.seq_len - s.query_len + i + 1) : double(s.seq_len);
  return 4.0 * keys * s.head_size * s.heads * s.batch;
}
double kv_bytes(const Shape& s) {
  const double elem = s.kv_fp8 ? 1.0 : double(ak::element_size(s.dtype));
  return 2.0 * s.batch * double(s.seq_len) * s.kv_heads * s.head_size * elem;
}

/// Relative L2 error of sampled tokens against the reference (downloads the batch).
double check_sample(const Shape& s, const DeviceBatch& b, const ak::LayerParams& lp) {
  auto host = [](const cu::DeviceTensor& t, std::vector<std::uint8_t>& buf) {
    buf.resize(cu::span_bytes(t.view));
    ak::TensorView h = t.view;
    h.data = buf.data();
    h.device = ak::DeviceKind::cpu;
    cu::copy_to_host(t, h);
    return h;
  };
  std::vector<std::uint8_t> qb, ob, kb, vb;
  const ak::TensorView q = host(b.q, qb), o = host(b.o, ob), k = host(b.k, kb), v = host(b.v, vb);
  const int tokens = b.qsl.back();
  std::vector<std::int32_t> sample = {0, tokens - 1, tokens / 2, std::min(tokens - 1, tokens / 3 + 1)};
  std::sort(sample.begin(), sample.end());
  sample.erase(std::unique(sample.begin(), sample.end()), sample.end());
  const ak::AttentionMetadata md = b.md();
  const std::vector<double> ref = ak::reference::attend(lp, q, {k, v}, md, sample);
  double e2 = 0.0, r2 = 0.0;
  const std::size_t per = std::size_t(s.heads) * s.head_size;
  for (std::size_t i = 0; i < sample.size(); ++i)
    for (std::size_t j = 0; j < per; ++j) {
      const double got = ak::reference::load(o.data, o.dtype, std::int64_t(sample[i]) * std::int64_t(per) + std::int64_t(j));
      const double want = ref[i * per + j];
      if (!std::isfinite(got)) return INFINITY;
      e2 += (got - want) * (got - want);
      r2 += want * want;
    }
  return std::sqrt(e2 / std::max(r2, 1e-30));
}

struct Timing {
  double median_ms = 0.0, min_ms = 0.0;
};

Timing time_plan(const std::function<void()>& execute, cu::DeviceBuffer& flush, int reps) {
  cu::EventTimer timer;
  std::vector<double> ms;
  for (int r = 0; r < reps + 3; ++r) {
    cu::flush_l2(flush);
    timer.start();
    execute();
    const double t = timer.stop();
    if (r >= 3) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front()};
}

std::vector<Shape> shapes(bool quick) {
  std::vector<Shape> v;
  auto prefill = [&](int batch, int seq, int heads, int d, bool causal, int block = 16, bool fp8 = false) {
    Shape s;
    s.kind = "prefill";
    s.batch = batch;
    s.seq_len = seq;
    s.query_len = seq;
    s.heads = heads;
    s.kv_heads = heads;
    s.head_size = d;
    s.causal = causal;
    s.block_size = block;
    s.kv_fp8 = fp8;
    s.name = fmt::format("prefill b{} s{} h{} d{} {} blk{}{}", batch, seq, heads, d, causal ? "causal" : "full", block,
                         fp8 ? " fp8" : "");
    v.push_back(s);
  };
  auto decode = [&](int batch, int ctx, bool hnd = false, bool fp8 = false, bool contiguous = false, int d = 128) {
    Shape s;
    s.kind = "decode";
    s.batch = batch;
    s.seq_len = ctx;
    s.query_len = 1;
    s.heads = 32;
    s.kv_heads = 8;
    s.head_size = d;
    s.hnd = hnd;
    s.kv_fp8 = fp8;
    s.contiguous_pages = contiguous;
    s.name = fmt::format("decode b{} ctx{} gqa32/8 d{} blk16{}{}{}", batch, ctx, d, hnd ? " HND" : "",
                         fp8 ? " fp8" : "", contiguous ? " contiguous" : "");
    v.push_back(s);
  };
  decode(64, 4096);
  decode(1, 32768);
  decode(64, 4096, true);
  // The small decode batches engines spend most steps on: launch latency, the split count,
  // the merge and the ramp of the CTAs weigh most there.
  decode(1, 8192);
  decode(4, 4096);
  decode(16, 2048);
  if (!quick) {
    decode(32, 16384);
    // The same cache read in order: what the pages' scatter costs against contiguous K and V.
    decode(64, 4096, false, false, true);
    decode(1, 32768, false, false, true);
  }
  decode(64, 4096, false, true);  // e4m3 cache: half the bytes
  decode(1, 32768, false, true);
  if (!quick) {
    // Decode around its head pads (64 columns of a 16-bit cache, 128 of an fp8 one): sizes
    // between them compute zero-filled padding columns.
    for (int d : {64, 80, 96, 160, 224, 256}) decode(64, 4096, false, false, false, d);
    for (int d : {64, 96, 160, 192}) decode(64, 4096, false, true, false, d);
  }
  prefill(2, 16384, 16, 128, false);
  prefill(2, 16384, 16, 128, true);
  prefill(2, 16384, 16, 128, true, 16, true);
  if (!quick) {
    prefill(2, 16384, 16, 256, false);
    prefill(2, 16384, 16, 256, true);
    prefill(2, 16384, 16, 96, false);
    prefill(2, 16384, 16, 64, false);
    prefill(4, 4096, 16, 128, true);
    prefill(2, 16384, 16, 128, false, 128);
    prefill(2, 16384, 16, 128, false, 16, true);
    prefill(2, 16384, 16, 64, false, 16, true);
    prefill(2, 16384, 16, 256, true, 16, true);  // f16 products, widened in place
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path;
  std::optional<std::regex> only;
  bool quick = false;
  int reps = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (a == "--quick") quick = true;
    else if (a == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
    else if (a == "--only" && i + 1 < argc) {
      try {
        only.emplace(argv[++i]);
      } catch (const std::regex_error& e) {
        std::fprintf(stderr, "attnsel_cuda_bench: --only takes a regular expression; '%s': %s\n", argv[i], e.what());
        return 2;
      }
    }
    else {
      std::fprintf(stderr, "usage: attnsel_cuda_bench [--json FILE] [--quick] [--reps N] [--only REGEX]\n");
      return 2;
    }
  }
  if (const std::string why = cu::cuda_kernels_unavailable_reason(); !why.empty()) {
    std::fprintf(stderr, "attnsel_cuda_bench: %s\n", why.c_str());
    return 1;
  }
  try {
    const cu::DeviceInfo dev = cu::device_info(0);
    cu::DeviceBuffer flush(std::max<std::size_t>(4 * dev.l2_bytes, 256u << 20));
    cu::DeviceBuffer probe(std::size_t(2) << 30);
    probe.fill_bytes(1);
    const double read_gbs = cu::measure_read_bandwidth(probe, 20);
    probe = cu::DeviceBuffer();
    fmt::print("device: {} (sm_{}{}, {} SMs, L2 {} MB); read bandwidth {:.0f} GB/s\n", dev.name, dev.major, dev.minor,
               dev.multiprocessors, dev.l2_bytes >> 20, read_gbs);
    nlohmann::json out;
    out["device"] = dev.name;
    out["read_gbs"] = read_gbs;
    out["results"] = nlohmann::json::array();
    fmt::print("{:<44} {:>10} {:>9} {:>9} {:>9}  {}\n", "shape", "ms", "TFLOP/s", "TB/s", "rel err", "plan");
    std::uint64_t seed = 1;
    for (const Shape& s : shapes(quick)) {
      if (only && !std::regex_search(s.name, *only)) continue;
      DeviceBatch b = make_batch(s, seed++);
      const ak::LayerParams lp = layer(s);
      std::vector<std::pair<std::string, cu::CudaTuning>> variants = {{"default", {}}};
      if (s.kind == "prefill" && s.kv_fp8 && s.head_size <= 128) {  // the tuning option: f16 products
        cu::CudaTuning t;
        t.fp8_prefill = cu::Fp8PrefillProducts::f16;
        variants.push_back({"f16", t});
      }
      for (const auto& [label, tuning] : variants) {
        cu::FlashAttnCuda impl(lp, tuning);
        const attnsel::kernel::KVCacheView dev_cache{b.k.view, b.v.view};
        const auto plan = impl.plan(b.md(), dev_cache, b.q.view.dtype, attnsel::kernel::Stream{});
        auto execute = [&] { impl.execute(*plan, b.q.view, dev_cache, b.o.view, attnsel::kernel::Stream{}); };
        b.o.buffer.fill_bytes(0xFF);
        execute();
        cu::synchronize(s.name);
        const double err = check_sample(s, b, lp);
        const Timing t = time_plan(execute, flush, s.kind == "decode" ? reps * 3 : reps);
        const double tflops = flops(s) / (t.median_ms * 1e-3) / 1e12;
        const double tbs = kv_bytes(s) / (t.median_ms * 1e-3) / 1e12;
        const std::string plan_text = cu::FlashAttnCuda::summary(*plan).describe();
        fmt::print("{:<44} {:>10.4f} {:>9.1f} {:>9.3f} {:>9.2e}  [{}] {}\n", s.name, t.median_ms, tflops, tbs, err,
                   label, plan_text);
        std::fflush(stdout);
        out["results"].push_back({{"name", s.name}, {"kind", s.kind}, {"variant", label}, {"batch", s.batch},
                                  {"seq_len", s.seq_len}, {"query_len", s.query_len}, {"heads", s.heads},
                                  {"kv_heads", s.kv_heads}, {"head_size", s.head_size}, {"causal", s.causal},
                                  {"block_size", s.block_size}, {"kv_fp8", s.kv_fp8},
                                  {"ms", t.median_ms}, {"min_ms", t.min_ms},
                                  {"tflops", tflops}, {"tbs", tbs}, {"flops", flops(s)}, {"bytes", kv_bytes(s)},
                                  {"rel_err", err}, {"plan", plan_text}});
      }
      // Written after every shape: a run cut short keeps what it measured.
      if (!json_path.empty()) std::ofstream(json_path) << out.dump(2) << "\n";
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attnsel_cuda_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
