// Layer: core (src/layers.txt)
// Platforms: where a selection happens (vLLM's current_platform). Each platform owns its
// device description, its runtime facts and the question it answers (reference or
// runnable), and implements vLLM's get_attn_backend_cls for its device.
//
// Thread-safety: platforms are immutable after construction; selections may run
// concurrently on one platform.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnsel/export.hpp"
#include "attnsel/errors.hpp"
#include "attnsel/facts.hpp"
#include "attnsel/registry.hpp"
#include "attnsel/selector_config.hpp"

namespace attnsel {

/// reference: what vLLM would choose there (every backend assumed installed).
/// runnable: what this build can run (a backend without a kernel here is rejected).
enum class SelectionMode : std::uint8_t { reference, runnable };
ATTNSEL_API std::string_view mode_name(SelectionMode m);
ATTNSEL_API std::optional<SelectionMode> parse_mode(std::string_view s);

/// One backend considered by a selection.
struct ATTNSEL_API Candidate {
  std::string backend;               ///< enum member name
  int priority = 0;                  ///< index in the platform's list (0 = highest)
  bool valid = false;
  std::vector<std::string> reasons;  ///< why it was rejected (empty when valid)
};

/// A log record produced by a selection (also sent to spdlog).
struct ATTNSEL_API LogLine {
  enum class Level { debug, info, warning } level = Level::info;
  std::string text;
};

/// The outcome of one selection, with its explanation.
struct ATTNSEL_API Selection {
  std::shared_ptr<const AttentionBackend> backend_class;
  std::string backend;           ///< chosen enum member name
  std::string class_path;        ///< the returned path (vLLM's full_cls_name of the class)
  std::optional<int> priority;   ///< nullopt for an explicit or routed choice
  bool explicit_choice = false;
  std::vector<Candidate> candidates;
  std::vector<LogLine> logs;
  std::vector<std::string> warnings() const;
};

/// A failed selection: vLLM's error plus every candidate considered.
class ATTNSEL_API SelectionError : public Error {
 public:
  SelectionError(ErrorKind kind, const std::string& message, std::vector<Candidate> candidates)
      : Error(kind, message), candidates_(std::move(candidates)) {}
  const std::vector<Candidate>& candidates() const { return candidates_; }

 private:
  std::vector<Candidate> candidates_;
};

class ATTNSEL_API Platform {
 public:
  Platform(DeviceDescription device, RuntimeFacts facts, SelectionMode mode);
  virtual ~Platform() = default;

  PlatformKind kind() const { return env_.device.kind; }
  /// vLLM's device_name ("cuda", "rocm", "cpu", "xpu", or the custom platform's name).
  const std::string& device_name() const { return env_.device.device_name; }
  std::optional<DeviceCapability> get_device_capability() const { return env_.device.capability; }
  const RuntimeEnv& env() const { return env_; }
  SelectionMode mode() const { return mode_; }
  /// "cuda:9.0", "rocm:gfx942", "cpu", "xpu", "other:NAME".
  virtual std::string spec() const;
  /// A human description, e.g. "cuda:9.0 (NVIDIA H200, detected)".
  std::string describe() const;
  std::string host_detail;  ///< what host detection saw; empty for simulated platforms

  /// vLLM's get_attn_backend_cls: the explicit path validates one backend (no fallback);
  /// the automatic path walks the platform's priority list. Throws SelectionError.
  /// `run_cache_dtype` is CacheConfig.cache_dtype of the whole run (ROCm's TurboQuant
  /// boundary rule reads it).
  virtual Selection get_attn_backend_cls(const std::optional<BackendMember>& selected,
                                         const AttentionSelectorConfig& config,
                                         std::optional<int> num_heads,
                                         CacheDType run_cache_dtype = CacheDType::auto_) const = 0;

  /// The automatic priority list for a configuration (empty where the platform routes
  /// without a list).
  virtual std::vector<BackendMember> backend_priorities(const AttentionSelectorConfig& config,
                                                        std::optional<int> num_heads) const;

  /// vLLM's preferred block size policy hook (CPU: fixed default instead).
  virtual std::optional<int> default_block_size() const { return std::nullopt; }

  /// The same platform (device, mode, host detail) with other facts; see with_engine()
  /// (attnsel/engine_facts.hpp), which makes the platform an engine's settings leave.
  virtual std::shared_ptr<Platform> with_facts(RuntimeFacts facts) const = 0;

 /// A backend's class and its rejection reasons on this platform.
  struct Checked {
    std::shared_ptr<const AttentionBackend> cls;
    std::vector<std::string> reasons;
    bool unavailable = false;  ///< the class could not be loaded (ImportError or OSError)
  };
  /// Resolves a member's class and validates it: an ImportError or OSError (or, in runnable
  /// mode, a missing kernel) becomes the single reason "<type>: <message>"; in runnable mode
  /// the kernel's gaps are appended to the reasons.
  Checked check_backend(const BackendMember& member, const AttentionSelectorConfig& config) const;

 protected:
  /// vLLM's automatic path: validates every member in priority order into s.candidates,
  /// logs the debug line, throws "No valid attention backend found ..." when none is
  /// valid, else records the highest-priority valid one in `s`. `extra` may add reasons.
  using ExtraCheck = std::function<void(const BackendMember&, Checked&)>;
  void choose_by_priority(Selection& s, const std::vector<BackendMember>& priorities,
                          const AttentionSelectorConfig& config, const ExtraCheck& extra = {}) const;

  RuntimeEnv env_;
  SelectionMode mode_;

 private:
  class RecordCache;
  /// Each checked backend class's capability record on env_, made once (platforms/record_cache.hpp).
  std::shared_ptr<RecordCache> records_;
};

/// Parses "cuda:9.0", "rocm:gfx942", "xpu", "cpu", "other:NAME" (ValueError with the valid
/// forms). `facts` overrides are applied over the platform's defaults ("name=value").
ATTNSEL_API std::shared_ptr<Platform> make_platform(std::string_view spec, const std::vector<std::string>& fact_overrides = {},
                                                    std::optional<SelectionMode> mode = std::nullopt);
/// The host: CUDA through the driver library (dlopen) when a GPU is present, else the CPU.
/// Default mode: runnable.
ATTNSEL_API std::shared_ptr<Platform> detect_host_platform(const std::vector<std::string>& fact_overrides = {},
                                                           std::optional<SelectionMode> mode = std::nullopt);

}  // namespace attnsel
