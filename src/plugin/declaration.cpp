#include "plugin/declaration.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "attnsel/errors.hpp"

namespace attnsel::plugin {

namespace {

// Bounds on what a declaration may contain, so that a garbage count or an unterminated
// string is reported instead of read for gigabytes.
constexpr std::uint32_t kMaxListLength = 4096;
constexpr std::size_t kMaxStringLength = 4096;

class Reader {
 public:
  std::vector<std::string> problems;

  template <class... Args>
  void problem(fmt::format_string<Args...> f, Args&&... args) {
    problems.push_back(fmt::format(f, std::forward<Args>(args)...));
  }

  std::optional<std::string> string(const char* s, std::string_view field) {
    if (s == nullptr) {
      problem("{} is NULL", field);
      return std::nullopt;
    }
    const std::size_t n = strnlen(s, kMaxStringLength + 1);
    if (n > kMaxStringLength) {
      problem("{} is not NUL-terminated within {} bytes", field, kMaxStringLength);
      return std::nullopt;
    }
    return std::string(s, n);
  }

  // A (pointer, count) list: NULL with a non-zero count, or an absurd count, is a problem.
  template <class T>
  std::span<const T> list(const T* data, std::uint32_t count, std::string_view field) {
    if (count == 0) return {};
    if (data == nullptr) {
      problem("{} is NULL but num_{} is {}", field, field, count);
      return {};
    }
    if (count > kMaxListLength) {
      problem("num_{} is {}, more than the {} entries a list may hold", field, count, kMaxListLength);
      return {};
    }
    return {data, count};
  }
};

template <class T>
bool has_duplicates(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return std::adjacent_find(v.begin(), v.end()) != v.end();
}

std::vector<std::string> dtype_choices() {
  std::vector<std::string> out;
  for (DType d : {DType::float16, DType::bfloat16, DType::float32})
    out.push_back(fmt::format("{} ({})", static_cast<unsigned>(to_c_dtype(d)), dtype_name(d)));
  return out;
}

void read_names(Reader& r, const attnsel_backend& b, BackendDeclaration& d) {
  if (auto name = r.string(b.name, "name")) {
    if (!is_backend_identifier(*name))
      r.problem("name '{}' is not a backend name (use A-Z, 0-9 and _, not starting with a digit, e.g. MY_ATTN)",
                *name);
    d.name = *name;
  }
  for (const char* const& s : r.list(b.register_as, b.num_register_as, "register_as")) {
    auto member = r.string(s, "register_as entry");
    if (!member) continue;
    if (!is_backend_identifier(*member))
      r.problem("register_as entry '{}' is not a backend name (use A-Z, 0-9 and _, e.g. MY_ATTN)", *member);
    d.register_as.push_back(*member);
  }
  if (has_duplicates(d.register_as)) r.problem("register_as lists a name twice: {}", fmt::join(d.register_as, ", "));
}

void read_dtypes(Reader& r, const attnsel_backend& b, BackendDeclaration& d) {
  if (b.num_dtypes == 0)
    r.problem("dtypes is empty: a backend must support at least one of {}", fmt::join(dtype_choices(), ", "));
  for (attnsel_dtype c : r.list(b.dtypes, b.num_dtypes, "dtypes")) {
    if (auto t = from_c_dtype(c)) d.dtypes.push_back(*t);
    else r.problem("dtypes contains {}, which is not a dtype (valid: {})", c, fmt::join(dtype_choices(), ", "));
  }
  if (has_duplicates(d.dtypes)) r.problem("dtypes lists a dtype twice");

  if (b.num_kv_cache_dtypes == 0) {
    std::vector<std::string_view> names;
    for (CacheDType c : all_cache_dtypes()) names.push_back(cache_dtype_name(c));
    r.problem("kv_cache_dtypes is empty: a backend must support at least one of {}", fmt::join(names, ", "));
  }
  for (const char* const& s : r.list(b.kv_cache_dtypes, b.num_kv_cache_dtypes, "kv_cache_dtypes")) {
    auto name = r.string(s, "kv_cache_dtypes entry");
    if (!name) continue;
    try {
      d.kv_cache_dtypes.push_back(cache_dtype_from(*name, "kv_cache_dtypes entry"));
    } catch (const ValueError& e) {
      r.problem("{}", e.what());
    }
  }
  if (has_duplicates(d.kv_cache_dtypes)) r.problem("kv_cache_dtypes lists a cache dtype twice");
}

void read_sizes(Reader& r, const attnsel_backend& b, BackendDeclaration& d) {
  if (b.num_block_sizes == 0)
    r.problem("block_sizes is empty: declare at least one (a multiple-of-1 entry means any block size)");
  for (const attnsel_block_size& s : r.list(b.block_sizes, b.num_block_sizes, "block_sizes")) {
    if (s.value <= 0) {
      r.problem("block_sizes contains {}, but a block size must be positive", s.value);
      continue;
    }
    if (s.is_multiple_of > 1) r.problem("block_sizes entry {} has is_multiple_of = {} (must be 0 or 1)", s.value,
                                        static_cast<unsigned>(s.is_multiple_of));
    if (s.is_multiple_of != 0) d.block_sizes.emplace_back(MultipleOf{s.value});
    else d.block_sizes.emplace_back(s.value);
  }
  for (std::int32_t h : r.list(b.head_sizes, b.num_head_sizes, "head_sizes")) {
    if (h <= 0) r.problem("head_sizes contains {}, but a head size must be positive", h);
    else d.head_sizes.push_back(h);
  }
  if (has_duplicates(d.head_sizes)) r.problem("head_sizes lists a head size twice");

  std::vector<KVCacheLayout> layouts;
  const auto all = all_layouts();
  for (attnsel_kv_cache_layout l : r.list(b.kv_cache_layouts, b.num_kv_cache_layouts, "kv_cache_layouts")) {
    if (l < all.size()) layouts.push_back(all[l]);
    else r.problem("kv_cache_layouts contains {}, which is not a layout (valid: 0..{})", l, all.size() - 1);
  }
  if (has_duplicates(layouts)) r.problem("kv_cache_layouts lists a layout twice");
  if (!layouts.empty()) d.kv_cache_layouts = std::move(layouts);
}

void read_predicates(Reader& r, const attnsel_backend& b, BackendDeclaration& d) {
  constexpr std::uint32_t kAllAttnTypes = (1u << 4) - 1;
  if (b.attn_types == 0)
    r.problem("attn_types is empty: a backend must support at least one attention type (e.g. "
              "ATTNSEL_ATTN_TYPE_BIT(ATTNSEL_ATTN_TYPE_DECODER))");
  if ((b.attn_types & ~kAllAttnTypes) != 0) r.problem("attn_types has unknown bits 0x{:x}", b.attn_types & ~kAllAttnTypes);
  for (attnsel_attn_type t = 0; t < 4; ++t)
    if ((b.attn_types & ATTNSEL_ATTN_TYPE_BIT(t)) != 0) d.attn_types.push_back(*from_c_attn_type(t));

  if ((b.features & ~ATTNSEL_FEATURE_ALL_V1_0) != 0)
    r.problem("features has unknown bits 0x{:x} (a newer plugin ABI?)", b.features & ~ATTNSEL_FEATURE_ALL_V1_0);
  d.features = b.features;
  if (d.has(ATTNSEL_FEATURE_NON_CAUSAL_DCP) && !d.has(ATTNSEL_FEATURE_DCP))
    r.problem("features declares non-causal DCP without DCP");

  if (b.has_compute_capability_range > 1)
    r.problem("has_compute_capability_range is {} (must be 0 or 1)", static_cast<unsigned>(b.has_compute_capability_range));
  if (b.has_compute_capability_range != 0) {
    const DeviceCapability lo{b.min_compute_capability.major, b.min_compute_capability.minor};
    const DeviceCapability hi{b.max_compute_capability.major, b.max_compute_capability.minor};
    bool ok = true;
    for (const DeviceCapability& c : {lo, hi})
      if (c.major < 0 || c.minor < 0 || c.minor > 9) {
        r.problem("compute capability {}.{} is not a valid capability (major >= 0, minor 0..9)", c.major, c.minor);
        ok = false;
      }
    if (ok && hi < lo)
      r.problem("the compute capability range is empty: min {} is greater than max {}", lo.str(), hi.str());
    d.compute_capability_range = std::make_pair(lo, hi);
  }
}

void read_callbacks(Reader& r, const attnsel_backend& b, const AbiLayout& layout, BackendDeclaration& d) {
  d.user_data = b.user_data;
  d.check_combination = b.check_combination;
  d.score = b.score;
  d.kernel = b.kernel;
  if (b.kernel == nullptr) return;
  const attnsel_kernel_ops& k = *b.kernel;
  if (k.struct_size < layout.kernel_ops_size) {
    r.problem("its attnsel_kernel_ops struct is {} bytes, smaller than the {} bytes its ABI version requires",
              k.struct_size, layout.kernel_ops_size);
    return;
  }
  std::vector<std::string_view> missing;
  if (k.create == nullptr) missing.push_back("create");
  if (k.destroy == nullptr) missing.push_back("destroy");
  if (k.write_kv_cache == nullptr) missing.push_back("write_kv_cache");
  if (k.forward == nullptr) missing.push_back("forward");
  if (!missing.empty())
    r.problem("kernel entry points are incomplete: {} not set (set all four, or leave kernel NULL)",
              fmt::join(missing, ", "));
}

}  // namespace

bool is_backend_identifier(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; });
}

DeclarationRead read_backend_declaration(const attnsel_backend& backend, const AbiLayout& layout) {
  Reader r;
  DeclarationRead out;
  if (backend.struct_size < layout.backend_size) {
    r.problem("its attnsel_backend struct is {} bytes, smaller than the {} bytes its ABI version requires",
              backend.struct_size, layout.backend_size);
    out.problems = std::move(r.problems);
    return out;  // the other fields may lie outside the struct: read nothing more
  }
  BackendDeclaration& d = out.declaration;
  read_names(r, backend, d);
  read_dtypes(r, backend, d);
  read_sizes(r, backend, d);
  read_predicates(r, backend, d);
  read_callbacks(r, backend, layout, d);
  out.problems = std::move(r.problems);
  return out;
}

}  // namespace attnsel::plugin
