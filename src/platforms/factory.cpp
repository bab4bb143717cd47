// make_platform (simulated platforms from a spec string) and detect_host_platform.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <algorithm>

#include "attnsel/platform.hpp"
#include "platforms/host_detect.hpp"
#include "platforms/platforms.hpp"

namespace attnsel {

namespace {
constexpr std::string_view kValidForms =
    "cuda:MAJOR.MINOR (e.g. cuda:9.0), rocm:gfxNNN (e.g. rocm:gfx942), xpu, cpu, other:NAME";

[[noreturn]] void bad_spec(std::string_view spec, std::string_view why) {
  throw ValueError(fmt::format("Invalid platform '{}': {}. Valid forms: {}", spec, why, kValidForms));
}

// gfx942/gfx950 are CDNA3/CDNA4, gfx90a CDNA2, gfx908 CDNA1; others (RDNA) have none.
int cdna_version(std::string_view arch) {
  if (arch == "gfx950") return 4;
  if (arch.starts_with("gfx94")) return 3;
  if (arch == "gfx90a") return 2;
  if (arch == "gfx908") return 1;
  return 0;
}

// vLLM derives a capability from the GCN arch: gfx9XY → (9, X), gfx1100 → (11, 0).
// A hex minor digit (gfx90a) reads as 0.
DeviceCapability capability_from_gfx(std::string_view spec, std::string_view arch) {
  auto is_hex = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f'); };
  const std::string_view digits = arch.starts_with("gfx") ? arch.substr(3) : std::string_view{};
  const bool well_formed = (digits.size() == 3 || digits.size() == 4) &&
                           std::all_of(digits.begin(), digits.end() - 2,
                                       [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) &&
                           is_hex(digits[digits.size() - 2]) && is_hex(digits.back());
  if (!well_formed) bad_spec(spec, "expected a gfx architecture such as gfx942");
  // A simulated device must be one that exists: vLLM reads the arch from the hardware.
  constexpr std::string_view kKnownArchs[] = {"gfx906", "gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950",
                                              "gfx1030", "gfx1100", "gfx1101", "gfx1102", "gfx1150", "gfx1151",
                                              "gfx1200", "gfx1201"};
  if (std::find(std::begin(kKnownArchs), std::end(kKnownArchs), arch) == std::end(kKnownArchs))
    bad_spec(spec, fmt::format("unknown ROCm architecture {}; known: {}", arch, fmt::join(kKnownArchs, ", ")));
  int major = 0;
  std::from_chars(digits.data(), digits.data() + digits.size() - 2, major);
  const char minor_digit = digits[digits.size() - 2];
  const int minor = std::isdigit(static_cast<unsigned char>(minor_digit)) ? minor_digit - '0' : 0;
  return {major, minor};
}

bool is_platform_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

RuntimeFacts facts_for(const DeviceDescription& device, const std::vector<std::string>& overrides) {
  RuntimeFacts facts(device);
  for (const std::string& o : overrides) {
    const auto eq = o.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ValueError(fmt::format("Invalid fact '{}': expected NAME=VALUE (see `attnsel select --list-facts`)", o));
    facts.set(o.substr(0, eq), std::string_view(o).substr(eq + 1));
  }
  return facts;
}

std::shared_ptr<Platform> build(DeviceDescription device, const std::vector<std::string>& overrides,
                                SelectionMode mode, RuntimeFacts* base = nullptr) {
  RuntimeFacts facts = facts_for(device, overrides);
  if (base != nullptr)
    for (const auto& [name, value] : base->values())
      if (base->is_overridden(name) && !facts.is_overridden(name)) facts.set(name, value);
  switch (device.kind) {
    case PlatformKind::cuda: return std::make_shared<platforms::CudaPlatform>(device, std::move(facts), mode);
    case PlatformKind::rocm: return std::make_shared<platforms::RocmPlatform>(device, std::move(facts), mode);
    case PlatformKind::cpu: return std::make_shared<platforms::CpuPlatform>(device, std::move(facts), mode);
    case PlatformKind::xpu: return std::make_shared<platforms::XpuPlatform>(device, std::move(facts), mode);
    case PlatformKind::other: return std::make_shared<platforms::OtherPlatform>(device, std::move(facts), mode);
  }
  throw ValueError("unknown platform kind");
}
}  // namespace

std::shared_ptr<Platform> make_platform(std::string_view spec, const std::vector<std::string>& fact_overrides,
                                        std::optional<SelectionMode> mode) {
  const std::string lower = to_lower(spec);
  DeviceDescription d;
  if (lower.starts_with("cuda:")) {
    const std::string_view v = std::string_view(lower).substr(5);
    const auto dot = v.find('.');
    if (dot == std::string_view::npos) bad_spec(spec, "expected MAJOR.MINOR after 'cuda:'");
    // Digits only: from_chars alone would read "-0" as 0 and "09" as 9.
    const std::string_view major_text = v.substr(0, dot), minor_text = v.substr(dot + 1);
    auto digits = [](std::string_view t, std::size_t max_length) {
      return !t.empty() && t.size() <= max_length && (t.size() == 1 || t.front() != '0') &&
             std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (!digits(major_text, 2) || !digits(minor_text, 1) || major_text == "0")
      bad_spec(spec, "expected a compute capability MAJOR.MINOR with MAJOR from 1 to 99 and MINOR from 0 to 9, "
                     "written in digits (e.g. 9.0)");
    int major = 0, minor = 0;
    std::from_chars(major_text.data(), major_text.data() + major_text.size(), major);
    std::from_chars(minor_text.data(), minor_text.data() + minor_text.size(), minor);
    d = {PlatformKind::cuda, DeviceCapability{major, minor}, "cuda", "", 0};
  } else if (lower.starts_with("rocm:")) {
    const std::string arch = lower.substr(5);
    d = {PlatformKind::rocm, capability_from_gfx(spec, arch), "rocm", arch, cdna_version(arch)};
  } else if (lower == "xpu") {
    d = {PlatformKind::xpu, std::nullopt, "xpu", "", 0};
  } else if (lower == "cpu") {
    d = {PlatformKind::cpu, std::nullopt, "cpu", "", 0};
  } else if (lower.starts_with("other:") && lower.size() > 6) {
    const std::string name(spec.substr(6));
    if (!is_platform_name(name)) bad_spec(spec, "the name may hold letters, digits, '_', '.' and '-'");
    d = {PlatformKind::other, std::nullopt, name, "", 0};
  } else {
    bad_spec(spec, "unknown platform");
  }
  return build(d, fact_overrides, mode.value_or(SelectionMode::reference));
}

std::shared_ptr<Platform> detect_host_platform(const std::vector<std::string>& fact_overrides,
                                               std::optional<SelectionMode> mode) {
  const SelectionMode m = mode.value_or(SelectionMode::runnable);
  if (auto gpu = platforms::detect_cuda_device()) {
    DeviceDescription d{PlatformKind::cuda, gpu->capability, "cuda", "", 0};
    auto p = build(d, fact_overrides, m);
    p->host_detail = fmt::format("{}, detected through the CUDA driver", gpu->name);
    return p;
  }
  const platforms::CpuFeatures cpu = platforms::detect_cpu_features();
  DeviceDescription d{PlatformKind::cpu, std::nullopt, "cpu", "", 0};
  RuntimeFacts detected(d);
  if (find_fact("cpu.amx") != nullptr) detected.set("cpu.amx", FactValue{cpu.amx_tile && cpu.amx_bf16});
  auto p = build(d, fact_overrides, m, &detected);
  p->host_detail = fmt::format("host CPU: {}", cpu.describe());
  return p;
}

}  // namespace attnsel
