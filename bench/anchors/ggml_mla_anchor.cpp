// The anchor for CPU_MLA's decode: llama.cpp's ggml CPU flash attention on the shapes of
// BM_MlaDecodeLatent8x8192 — b requests of L cached latents, s_q = 1, N query heads, one KV
// head, keys the 576-entry latents and values a view of their first 512 entries (as
// llama.cpp runs DeepSeek's MLA), an f16 cache, f32 queries, no mask (every key visible).
// Each request is one slice of the fourth dimension (llama.cpp's per-sequence streams).
// Built against a ggml build by scripts/ggml-anchor; not part of attnsel's build.
//
// Usage: ggml_mla_anchor [--heads N]... [--batch b] [--seq L] [--reps r] [--threads t]
// Prints one line per head count: the median milliseconds per call and GFLOP/s, counted as
// attnsel's benchmark counts them (2 · N · b · L · (576 + 512)).
#include <ggml-cpu.h>
#include <ggml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kLatent = 576;  // kv_lora_rank + qk_rope_head_dim
constexpr int kValue = 512;   // kv_lora_rank

struct Options {
  std::vector<int> heads;
  int batch = 8, seq = 8192, reps = 7, threads = 0;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::atoi(argv[++i]);
    };
    if (a == "--heads") o.heads.push_back(value());
    else if (a == "--batch") o.batch = value();
    else if (a == "--seq") o.seq = value();
    else if (a == "--reps") o.reps = value();
    else if (a == "--threads") o.threads = value();
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      std::exit(2);
    }
  }
  if (o.heads.empty()) o.heads = {16, 128};
  if (o.threads <= 0) o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return o;
}

// One decode step's attention at `heads` query heads: median seconds per call.
double time_decode(const Options& o, int heads) {
  const std::size_t cache_bytes = static_cast<std::size_t>(o.batch) * o.seq * kLatent * sizeof(ggml_fp16_t);
  const std::size_t q_bytes = static_cast<std::size_t>(o.batch) * heads * kLatent * sizeof(float);
  const std::size_t out_bytes = static_cast<std::size_t>(o.batch) * heads * kValue * sizeof(float);
  ggml_init_params params = {};
  params.mem_size = cache_bytes + q_bytes + out_bytes + (std::size_t{64} << 20);  // tensors, graph, work buffer
  params.mem_buffer = nullptr;
  params.no_alloc = false;
  ggml_context* ctx = ggml_init(params);

  // k: [576, L, 1 KV head, b]; v: its first 512 entries of every row (a view, same strides).
  ggml_tensor* k = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, kLatent, o.seq, 1, o.batch);
  ggml_tensor* v = ggml_view_4d(ctx, k, kValue, o.seq, 1, o.batch, k->nb[1], k->nb[2], k->nb[3], 0);
  ggml_tensor* q = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, kLatent, 1, heads, o.batch);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-0.2f, 0.2f);
  auto* kd = static_cast<ggml_fp16_t*>(k->data);
  for (std::size_t i = 0; i < static_cast<std::size_t>(ggml_nelements(k)); ++i) kd[i] = ggml_fp32_to_fp16(u(rng));
  auto* qd = static_cast<float*>(q->data);
  for (std::size_t i = 0; i < static_cast<std::size_t>(ggml_nelements(q)); ++i) qd[i] = 10.0f * u(rng);

  const float scale = 0.1352337789f;  // DeepSeek-V3's softmax scale
  ggml_tensor* out = ggml_flash_attn_ext(ctx, q, k, v, nullptr, scale, 0.0f, 0.0f);
  ggml_flash_attn_ext_set_prec(out, GGML_PREC_F32);
  ggml_cgraph* graph = ggml_new_graph(ctx);
  ggml_build_forward_expand(graph, out);

  ggml_graph_compute_with_ctx(ctx, graph, o.threads);  // warm-up
  std::vector<double> seconds;
  for (int r = 0; r < o.reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    ggml_graph_compute_with_ctx(ctx, graph, o.threads);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const auto* od = static_cast<const float*>(out->data);
  bool finite = true;
  for (std::size_t i = 0; i < static_cast<std::size_t>(ggml_nelements(out)); ++i)
    finite = finite && std::isfinite(od[i]);
  ggml_free(ctx);
  if (!finite) {
    std::fprintf(stderr, "ggml's output has non-finite values\n");
    std::exit(1);
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  ggml_cpu_init();
  for (int heads : o.heads) {
    const double s = time_decode(o, heads);
    const double flops = 2.0 * heads * o.batch * static_cast<double>(o.seq) * (kLatent + kValue);
    std::printf("ggml heads=%d batch=%d seq=%d threads=%d median_ms=%.3f GFLOP/s=%.1f\n", heads, o.batch, o.seq,
                o.threads, s * 1e3, flops / s / 1e9);
    std::fflush(stdout);
  }
  return 0;
}
