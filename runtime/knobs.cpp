// knobs.cpp: the knob registry, parsing of typed values and the runtime's own knobs.
#include "knobs.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>

#include "log.hpp"

namespace quorum {

namespace {
std::mutex &registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, KnobBase *> &registry() {
  static std::map<std::string, KnobBase *> r;
  return r;
}
}  // namespace

const char *knob_source_name(KnobSource s) {
  switch (s) {
    case KnobSource::Default:
      return "default";
    case KnobSource::Environment:
      return "environment";
    case KnobSource::Override:
      return "override";
  }
  return "?";
}

KnobBase::KnobBase(const char *name, const char *type, std::string default_text, const char *help,
                   std::vector<std::string> choices)
    : name_(name),
      type_(type),
      default_text_(std::move(default_text)),
      help_(help),
      choices_(std::move(choices)) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[name_] = this;
}

void KnobBase::ensure_loaded() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (loaded_) return;
  loaded_ = true;
  error_.clear();
  reset_to_default();
  source_ = KnobSource::Default;
  std::string text;
  KnobSource src;
  if (override_) {
    text = *override_;
    src = KnobSource::Override;
  } else if (const char *env = std::getenv(name_); env != nullptr) {
    text = env;
    src = KnobSource::Environment;
  } else {
    return;
  }
  std::string why;
  if (!choices_.empty() && std::find(choices_.begin(), choices_.end(), text) == choices_.end()) {
    why = "expected one of";
    for (const auto &c : choices_) why += " " + c;
  } else if (parse(text, &why)) {
    source_ = src;
    return;
  }
  reset_to_default();
  error_ = fmt::format("{}='{}' is not valid ({}); using the default '{}'", name_, text, why,
                       default_text_);
}

std::string KnobBase::value_text() {
  ensure_loaded();
  std::lock_guard<std::mutex> lock(mutex_);
  return format();
}

KnobSource KnobBase::source() {
  ensure_loaded();
  std::lock_guard<std::mutex> lock(mutex_);
  return source_;
}

std::string KnobBase::error() {
  ensure_loaded();
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

namespace {
std::atomic<uint64_t> g_knob_generation{1};
}  // namespace

uint64_t knob_generation() {
  return g_knob_generation.load(std::memory_order_acquire);
}

void KnobBase::set_override(std::optional<std::string> text) {
  std::lock_guard<std::mutex> lock(mutex_);
  override_ = std::move(text);
  loaded_ = false;
  g_knob_generation.fetch_add(1, std::memory_order_acq_rel);
}

void KnobBase::reload() {
  std::lock_guard<std::mutex> lock(mutex_);
  loaded_ = false;
  g_knob_generation.fetch_add(1, std::memory_order_acq_rel);
}

namespace {
std::string default_text_of(bool v) {
  return v ? "1" : "0";
}
std::string default_text_of(int64_t v) {
  return std::to_string(v);
}
std::string default_text_of(double v) {
  return fmt::format("{}", v);
}
std::string default_text_of(const std::string &v) {
  return v;
}
const char *type_name_of(bool) {
  return "bool";
}
const char *type_name_of(int64_t) {
  return "int";
}
const char *type_name_of(double) {
  return "float";
}
const char *type_name_of(const std::string &) {
  return "string";
}
}  // namespace

namespace {
bool parse_value(const std::string &t, bool *out, std::string *why) {
  if (t == "1" || t == "y" || t == "yes" || t == "on" || t == "true") {
    *out = true;
    return true;
  }
  if (t == "0" || t == "n" || t == "no" || t == "off" || t == "false") {
    *out = false;
    return true;
  }
  *why = "expected 0/1, yes/no, on/off or true/false";
  return false;
}

// An integer (decimal, 0x hex or 0 octal), optionally followed by one of the
// binary units k, m, g (any case, x 1024, 1024^2, 1024^3), as UCX's memory
// units: QUORUM_SHM_MAX_BYTES=64M.
bool parse_value(const std::string &t, int64_t *out, std::string *why) {
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(t.c_str(), &end, 0);
  int shift = 0;
  if (!t.empty() && errno == 0 && end != nullptr && end != t.c_str() && end[0] != '\0' &&
      end[1] == '\0') {
    const char unit = static_cast<char>(std::tolower(static_cast<unsigned char>(end[0])));
    shift = unit == 'k' ? 10 : unit == 'm' ? 20 : unit == 'g' ? 30 : -1;
    if (shift > 0) ++end;
  }
  if (t.empty() || errno != 0 || end == nullptr || *end != '\0') {
    *why = "expected an integer, optionally with a unit k, m or g (x1024)";
    return false;
  }
  const long long limit = std::numeric_limits<long long>::max() >> shift;
  if (v > limit || v < -limit) {
    *why = "out of range";
    return false;
  }
  *out = v * (1LL << shift);
  return true;
}

bool parse_value(const std::string &t, double *out, std::string *why) {
  errno = 0;
  char *end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (t.empty() || errno != 0 || end == nullptr || *end != '\0') {
    *why = "expected a number";
    return false;
  }
  *out = v;
  return true;
}

bool parse_value(const std::string &t, std::string *out, std::string *) {
  *out = t;
  return true;
}

// Durations (knobs named *_MS or *_US) take a plain number: a unit k/m/g is
// a size's (QUORUM_TIMEOUT_MS=9000g is a typo, not 9000 GiB of milliseconds),
// and a value past about 31 years would overflow the clock into a deadline
// already past. Other knobs have no bound here.
bool check_range(const char *name, const std::string &text, int64_t v, std::string *why) {
  const std::string n = name;
  const bool ms = n.size() > 3 && n.compare(n.size() - 3, 3, "_MS") == 0;
  const bool us = n.size() > 3 && n.compare(n.size() - 3, 3, "_US") == 0;
  if (!ms && !us) return true;
  const char last = text.empty() ? '0' : text.back();
  if (!std::isdigit(static_cast<unsigned char>(last))) {
    *why = fmt::format("a duration in {} takes no unit", ms ? "milliseconds" : "microseconds");
    return false;
  }
  const int64_t max = ms ? int64_t{1000000000000} : int64_t{1000000000000000};
  if (v > max) {
    *why = fmt::format("at most {} (about 31 years)", max);
    return false;
  }
  return true;
}
template <typename T>
bool check_range(const char *, const std::string &, const T &, std::string *) {
  return true;
}

}  // namespace

template <typename T>
Knob<T>::Knob(const char *name, T default_value, const char *help, std::vector<std::string> choices)
    : KnobBase(name, type_name_of(default_value), default_text_of(default_value), help,
               std::move(choices)),
      default_(default_value),
      value_(default_value) {}

template <typename T>
bool Knob<T>::parse(const std::string &text, std::string *why) {
  T parsed = value_;
  if (!parse_value(text, &parsed, why) || !check_range(name(), text, parsed, why)) return false;
  value_ = parsed;
  return true;
}

template <typename T>
std::string Knob<T>::format() const {
  return default_text_of(value_);
}

template class Knob<bool>;
template class Knob<int64_t>;
template class Knob<double>;
template class Knob<std::string>;

std::vector<KnobBase *> all_knobs() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<KnobBase *> out;
  for (auto &[name, k] : registry()) out.push_back(k);
  return out;
}

KnobBase *find_knob(const std::string &name) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : it->second;
}

namespace {
// QUORUM_* variables read without a knob: the launcher's (quorum-run sets
// them, the bootstrap reads them), the logger's, and knobs of parts that may
// not be linked into this program (the CUDA backend), and the scripts'.
// QUORUM_TEST_* belong to the test programs.
constexpr const char *kOtherVariables[] = {
    "QUORUM_RANK", "QUORUM_SIZE", "QUORUM_LOCAL_RANK", "QUORUM_LOCAL_SIZE", "QUORUM_STORE",
    "QUORUM_TOKEN", "QUORUM_LOG_LEVEL", "QUORUM_LOG_SUBSYS", "QUORUM_BOOTSTRAP", "QUORUM_TRANSPORT",
    "QUORUM_FASHION_MNIST_DIR", "QUORUM_CUDA_WORKSPACE_MB", "QUORUM_CUDA_ON_ERROR",
    "QUORUM_UCX_DEAD_PEER_CHILD",
    // the build and test scripts' own
    "QUORUM_BUILD_JOBS", "QUORUM_BUILD_TARGETS", "QUORUM_CONFIGURE_ONLY", "QUORUM_WITH_TORCH",
    "QUORUM_FUZZ_CXX", "QUORUM_FUZZ_TARGETS", "QUORUM_BUILD_DIR", "QUORUM_CLUSTER_PREFIX",
    "QUORUM_CLUSTER_NET", "QUORUM_RDZV_TOKEN"};

// Levenshtein distance over the first 64 characters of each name (longer
// names are no misspelling of a knob).
size_t edit_distance(const std::string &a_text, const std::string &b_text) {
  constexpr size_t kMax = 64;
  const size_t na = std::min(a_text.size(), kMax), nb = std::min(b_text.size(), kMax);
  size_t row[kMax + 1];
  for (size_t j = 0; j <= nb; ++j) row[j] = j;
  for (size_t i = 1; i <= na; ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= nb; ++j) {
      const size_t up = row[j];
      size_t best = diagonal + (a_text[i - 1] == b_text[j - 1] ? 0 : 1);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diagonal = up;
    }
  }
  return row[nb];
}

bool is_known_variable(const std::string &name) {
  if (name.rfind("QUORUM_TEST_", 0) == 0 || find_knob(name) != nullptr) return true;
  for (const char *other : kOtherVariables) {
    if (name == other) return true;
  }
  return false;
}
}  // namespace

std::vector<std::string> unknown_quorum_variables(char *const *environment) {
  std::vector<std::string> unknown;
  for (char *const *e = environment; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("QUORUM_", 0) != 0) continue;
    const std::string name = entry.substr(0, entry.find('='));
    if (!is_known_variable(name)) unknown.push_back(name);
  }
  return unknown;
}

std::string closest_known_variable(const std::string &name) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  auto consider = [&](const std::string &candidate) {
    // The distance is at least the difference in length: skip what cannot win.
    const size_t gap = name.size() > candidate.size() ? name.size() - candidate.size()
                                                      : candidate.size() - name.size();
    if (gap >= best_distance) return;
    const size_t d = edit_distance(name, candidate);
    if (d < best_distance) best = candidate, best_distance = d;
  };
  for (KnobBase *k : all_knobs()) consider(k->name());
  for (const char *other : kOtherVariables) consider(other);
  return best;
}

void warn_unknown_quorum_variables() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const std::string &name : unknown_quorum_variables(environ)) {
      QLOG_WARN("config",
                "{} is not a quorum setting and is ignored; did you mean {}? "
                "(quorum-info lists them all)",
                name, closest_known_variable(name));
    }
  });
}

Status validate_knobs() {
  warn_unknown_quorum_variables();
  for (KnobBase *k : all_knobs()) {
    std::string e = k->error();
    if (!e.empty()) return fail(QUORUM_ERR_INVALID_ARG, "config", "{}", e);
  }
  return kOk;
}

void reload_knobs() {
  for (KnobBase *k : all_knobs()) k->reload();
}

Knob<int64_t> knob_timeout_ms("QUORUM_TIMEOUT_MS", 60000,
                              "Timeout in milliseconds of every blocking call (collectives, "
                              "bootstrap, waits); 0 or less waits forever");
Knob<std::string> knob_progress_thread(
    "QUORUM_PROGRESS_THREAD", "auto",
    "Progress thread per communicator, sleeping on transport events: auto (started by the "
    "first non-blocking or partial collective), on, or off (progress only inside the "
    "caller's own calls; partial collectives then join rounds only inside post/wait)",
    {"auto", "on", "off"});

}  // namespace quorum
