// Selection speed: a cached get_attn_backend call (target <= 50 ns), an uncached full
// selection on cuda:9.0 (target <= 20 us), and `attnsel select` as a whole process
// (target <= 20 ms). Each is reported next to a ceiling measured in the same run: the
// reader lock + hash lookup a cached call cannot avoid, and spawning /bin/true.
#include <benchmark/benchmark.h>
#include <spawn.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "attnsel/platform.hpp"
#include "attnsel/selector.hpp"

extern char** environ;

namespace {

using namespace attnsel;

LayerRequest dense_layer() {
  LayerRequest layer;
  layer.head_size = 128;
  layer.dtype = DType::bfloat16;
  return layer;
}

void BM_CachedGetAttnBackend(benchmark::State& state) {
  Selector selector(make_platform("cuda:9.0"));
  const EngineConfig engine;
  const LayerRequest layer = dense_layer();
  try {
    benchmark::DoNotOptimize(selector.get_attn_backend(engine, layer));  // fills the cache
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(selector.get_attn_backend(engine, layer));
}
BENCHMARK(BM_CachedGetAttnBackend);

// Ceiling for the cached call: a reader lock and a hash-map hit on the same key type.
void BM_CeilingSharedLockedLookup(benchmark::State& state) {
  std::shared_mutex mu;
  std::unordered_map<std::size_t, int> map{{AttentionSelectorConfig{}.hash(), 1}};
  AttentionSelectorConfig config;
  config.head_size = 128;
  map.emplace(config.hash(), 2);
  for (auto _ : state) {
    std::shared_lock lock(mu);
    benchmark::DoNotOptimize(map.find(config.hash()));
  }
}
BENCHMARK(BM_CeilingSharedLockedLookup);

void BM_UncachedSelectionCuda90(benchmark::State& state) {
  Selector selector(make_platform("cuda:9.0"));
  const EngineConfig engine;
  const LayerRequest layer = dense_layer();
  try {
    benchmark::DoNotOptimize(selector.get_attn_backend(engine, layer));
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  for (auto _ : state) {
    selector.clear();
    benchmark::DoNotOptimize(selector.get_attn_backend(engine, layer));
  }
}
BENCHMARK(BM_UncachedSelectionCuda90)->Unit(benchmark::kMicrosecond);

void BM_UncachedMlaSelectionCuda100(benchmark::State& state) {
  Selector selector(make_platform("cuda:10.0"));
  const EngineConfig engine;
  LayerRequest layer = dense_layer();
  layer.head_size = 576;
  layer.use_mla = true;
  try {
    benchmark::DoNotOptimize(selector.get_attn_backend(engine, layer));
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return;
  }
  for (auto _ : state) {
    selector.clear();
    benchmark::DoNotOptimize(selector.get_attn_backend(engine, layer));
  }
}
BENCHMARK(BM_UncachedMlaSelectionCuda100)->Unit(benchmark::kMicrosecond);

// Runs `argv` with stdout and stderr sent to /dev/null and waits; returns the exit status.
int spawn_and_wait(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::vector<std::string> copy = args;
  for (std::string& s : copy) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The binary under test: $ATTNSEL_CLI when set (a copied or installed build), else the one
// built next to this benchmark.
std::string attnsel_binary() {
  if (const char* env = std::getenv("ATTNSEL_CLI"); env != nullptr && *env != '\0') return env;
#ifdef ATTNSEL_CLI_PATH
  return ATTNSEL_CLI_PATH;
#else
  return {};
#endif
}

void BM_SelectProcess(benchmark::State& state) {
  const std::string binary = attnsel_binary();
  if (binary.empty()) {
    state.SkipWithError("the attnsel command is not built");
    return;
  }
  const std::vector<std::string> args{binary, "select", "--platform", "cuda:9.0", "--head-size", "128"};
  if (const int rc = spawn_and_wait(args); rc != 0) {
    state.SkipWithError(("attnsel select exited " + std::to_string(rc)).c_str());
    return;
  }
  for (auto _ : state) benchmark::DoNotOptimize(spawn_and_wait(args));
}
BENCHMARK(BM_SelectProcess)->Unit(benchmark::kMillisecond)->UseRealTime();

// Ceiling for the process: starting and reaping the smallest program there is.
void BM_CeilingSpawnTrue(benchmark::State& state) {
  const std::vector<std::string> args{"/bin/true"};
  for (auto _ : state) benchmark::DoNotOptimize(spawn_and_wait(args));
}
BENCHMARK(BM_CeilingSpawnTrue)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
