// The absorbed MLA decode on the H200 benchmark shapes: time per step, TB/s and TFLOP/s
// counted as FlashMLA's benchmark counts them, with CUDA events (median, L2 flushed before
// every run), each shape checked against a double-precision latent reference on sampled
// rows, next to the read bandwidth measured in the same run. Writes one JSON document
// (--json) that scripts/mla_anchors.py joins with FlashMLA and vLLM's Triton decode on the
// same shapes.
//
//   attnsel_mla_cuda_bench [--json FILE] [--reps N] [--only REGEX]
//
// Counting (FlashMLA's tests/test_flash_mla_dense_decoding.py):
//   FLOPs = 2 · N · s_q · Σ L_i · (576 + 512)
//   bytes = Σ L_i · 576 · 2 + b · s_q · N · 576 · 2 + b · s_q · N · 512 · 2
// The time is the whole step: the decode kernel and the combine (the plan, made once, is not).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "attnsel/errors.hpp"
#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/mla/cuda/decode_cuda.hpp"

namespace ak = attnsel::kernel;
namespace cu = attnsel::kernel::cuda;
namespace mla = attnsel::kernel::cuda::mla;

namespace {

struct Shape {
  std::string name;
  int batch = 1, seq_len = 0, heads = 16, query_len = 1, block_size = 64;
};

double bf16_to_double(std::uint16_t b) {
  const std::uint32_t u = std::uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct Result {
  Shape shape;
  double seconds = 0, tbs = 0, tflops = 0, max_err = 0;
  std::string plan;
};

Result run_shape(const Shape& s, int reps, cu::DeviceBuffer& flush) {
  const int nb_per = (s.seq_len + s.block_size - 1) / s.block_size;
  const int num_blocks = s.batch * nb_per + 1;
  const std::int64_t tokens = std::int64_t(s.batch) * s.query_len;
  std::vector<std::int32_t> qsl(s.batch + 1), lens(s.batch, s.seq_len), table(std::size_t(s.batch) * nb_per);
  for (int i = 0; i <= s.batch; ++i) qsl[i] = i * s.query_len;
  std::vector<std::int32_t> perm(num_blocks - 1);
  std::iota(perm.begin(), perm.end(), 1);
  std::mt19937 rng(17);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::copy(perm.begin(), perm.end(), table.begin());

  cu::DeviceTensor cache =
      cu::device_like(ak::TensorView::contiguous(nullptr, ak::ScalarType::bf16, {num_blocks, s.block_size, 576}));
  cu::DeviceTensor q = cu::device_like(ak::TensorView::contiguous(nullptr, ak::ScalarType::bf16, {tokens, s.heads, 576}));
  cu::DeviceTensor o = cu::device_like(ak::TensorView::contiguous(nullptr, ak::ScalarType::bf16, {tokens, s.heads, 512}));
  cu::fill_uniform(cache, 11, 1.0f);
  cu::fill_uniform(q, 12, 1.0f);
  const float scale = 0.1352337789f;

  mla::DecodeBatch b{.query_start_loc = qsl, .seq_lens = lens, .block_table = table, .max_blocks_per_seq = nb_per};
  mla::DecodeOptions opt{.num_heads = s.heads, .dtype = ak::ScalarType::bf16, .max_query_len = s.query_len};
  auto plan = mla::plan_decode(b, cache.view, opt, {});
  mla::run_decode(*plan, q.view, cache.view, o.view, scale, 1.0f, {});
  cu::synchronize("MLA decode warm-up");
  std::vector<float> times;
  cu::EventTimer timer;
  for (int r = 0; r < reps; ++r) {
    cu::flush_l2(flush);
    timer.start();
    mla::run_decode(*plan, q.view, cache.view, o.view, scale, 1.0f, {});
    times.push_back(timer.stop());
  }
  std::sort(times.begin(), times.end());
  Result res;
  res.shape = s;
  res.seconds = times[times.size() / 2] * 1e-3;
  res.plan = plan->describe();
  const double sum_l = double(s.batch) * s.seq_len;
  const double flops = 2.0 * s.heads * s.query_len * sum_l * (576 + 512);
  const double bytes = sum_l * 576 * 2 + double(s.batch) * s.query_len * s.heads * (576 + 512) * 2;
  res.tbs = bytes / res.seconds * 1e-12;
  res.tflops = flops / res.seconds * 1e-12;

  // Sampled rows against a double latent reference (every key visible to the last token).
  std::vector<std::uint16_t> hq(std::size_t(tokens) * s.heads * 576), ho(std::size_t(tokens) * s.heads * 512);
  q.buffer.download(hq.data(), hq.size() * 2);
  o.buffer.download(ho.data(), ho.size() * 2);
  std::vector<std::uint16_t> row(576);
  for (int sample = 0; sample < 4; ++sample) {
    const int req = (sample * 37) % s.batch, head = (sample * 13) % s.heads, j = s.query_len - 1;
    const std::int64_t tok = std::int64_t(req) * s.query_len + j;
    const std::uint16_t* qr = hq.data() + (tok * s.heads + head) * 576;
    std::vector<double> sc(s.seq_len), acc(512, 0.0);
    double mx = -INFINITY;
    std::vector<std::vector<std::uint16_t>> keys(s.seq_len, std::vector<std::uint16_t>(576));
    for (int k = 0; k < s.seq_len; ++k) {
      const int page = table[std::size_t(req) * nb_per + k / s.block_size];
      cache.buffer.download(keys[k].data(), 576 * 2, (std::size_t(page) * s.block_size + k % s.block_size) * 576 * 2);
      double d = 0;
      for (int c = 0; c < 576; ++c) d += bf16_to_double(qr[c]) * bf16_to_double(keys[k][c]);
      sc[k] = d * scale;
      mx = std::max(mx, sc[k]);
    }
    double sum = 0;
    for (int k = 0; k < s.seq_len; ++k) {
      const double w = std::exp(sc[k] - mx);
      sum += w;
      for (int c = 0; c < 512; ++c) acc[c] += w * bf16_to_double(keys[k][c]);
    }
    for (int c = 0; c < 512; ++c)
      res.max_err = std::max(res.max_err, std::abs(acc[c] / sum - bf16_to_double(ho[(tok * s.heads + head) * 512 + c])));
  }
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json_path, only;
  int reps = 30;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else {
      std::fprintf(stderr, "usage: attnsel_mla_cuda_bench [--json FILE] [--reps N] [--only REGEX]\n");
      return 2;
    }
  }
  try {
    if (cu::device_count() == 0) throw attnsel::NotImplementedError(cu::cuda_kernels_unavailable_reason());
    const std::vector<Shape> shapes = {
        {"decode 128x4096 h16 sq1", 128, 4096, 16, 1},   {"decode 128x4096 h12 sq1", 128, 4096, 12, 1},
        {"decode 128x4096 h128 sq1", 128, 4096, 128, 1}, {"decode 128x4096 h96 sq1", 128, 4096, 96, 1},
        {"decode 128x4096 h128 sq2", 128, 4096, 128, 2}, {"decode 1x32768 h128 sq1", 1, 32768, 128, 1},
        {"decode 128x4096 h16 sq1 blk16", 128, 4096, 16, 1, 16},
    };
    cu::DeviceBuffer flush(std::size_t(256) << 20);
    cu::DeviceBuffer probe(std::size_t(2) << 30);
    probe.fill_bytes(1);
    const double read_gbs = cu::measure_read_bandwidth(probe, 20);
    std::printf("read bandwidth (same run): %.2f TB/s\n", read_gbs * 1e-3);
    std::printf("FLOPs = 2*N*s_q*sum(L)*(576+512); bytes = sum(L)*576*2 + b*s_q*N*(576+512)*2; time = decode + "
                "combine (FlashMLA's counting)\n");
    nlohmann::json out = nlohmann::json::array();
    for (const Shape& s : shapes) {
      if (!only.empty() && !std::regex_search(s.name, std::regex(only))) continue;
      const Result r = run_shape(s, reps, flush);
      std::printf("%-30s %9.1f us %6.2f TB/s %7.1f TFLOP/s  max|err| %.2e  (%s)\n", s.name.c_str(), r.seconds * 1e6,
                  r.tbs, r.tflops, r.max_err, r.plan.c_str());
      out.push_back({{"name", s.name},
                     {"batch", s.batch},
                     {"seq_len", s.seq_len},
                     {"heads", s.heads},
                     {"query_len", s.query_len},
                     {"block_size", s.block_size},
                     {"seconds", r.seconds},
                     {"tb_per_s", r.tbs},
                     {"tflop_per_s", r.tflops},
                     {"max_abs_err", r.max_err},
                     {"plan", r.plan}});
    }
    if (!json_path.empty()) {
      std::ofstream f(json_path);
      f << nlohmann::json{{"read_gb_per_s", read_gbs}, {"results", out}}.dump(2) << "\n";
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attnsel_mla_cuda_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
