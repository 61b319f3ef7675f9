// knobs.hpp: every tunable is declared once (name, type, default, help) and read
// from a QUORUM_* environment variable; quorum-info lists them all with their
// current value and where the value came from.
//
// Declare in a .cpp:   Knob<int64_t> knob_timeout_ms("QUORUM_TIMEOUT_MS", 60000, "help");
// and in a header:     extern Knob<int64_t> knob_timeout_ms;
// Values are parsed on first use; a malformed value is reported by
// validate_knobs() (called by init) and the default is used meanwhile.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "status.hpp"

namespace quorum {

enum class KnobSource { Default, Environment, Override };

// Bumped whenever a knob's value may change (override set or cleared,
// reload): hot paths cache knob values and re-read them when it moves.
uint64_t knob_generation();
const char *knob_source_name(KnobSource s);

class KnobBase {
 public:
  KnobBase(const char *name, const char *type, std::string default_text, const char *help,
           std::vector<std::string> choices = {});
  virtual ~KnobBase() = default;
  KnobBase(const KnobBase &) = delete;
  KnobBase &operator=(const KnobBase &) = delete;

  const char *name() const { return name_; }
  const char *type() const { return type_; }
  const std::string &default_text() const { return default_text_; }
  const char *help() const { return help_; }
  const std::vector<std::string> &choices() const { return choices_; }

  // Current value as text, and where it came from.
  std::string value_text();
  KnobSource source();
  // Error text if the environment value does not parse ("" when fine).
  std::string error();

  // Overrides the value in-process (tests, tools); empty optional clears it.
  void set_override(std::optional<std::string> text);
  // Forget the cached value so the next read looks at the environment again.
  void reload();

 protected:
  // Parses text into the typed value; returns false with a reason on error.
  virtual bool parse(const std::string &text, std::string *why) = 0;
  virtual void reset_to_default() = 0;
  virtual std::string format() const = 0;
  void ensure_loaded();
  std::mutex mutex_;

 private:
  const char *name_;
  const char *type_;
  std::string default_text_;
  const char *help_;
  std::vector<std::string> choices_;
  bool loaded_ = false;
  KnobSource source_ = KnobSource::Default;
  std::string error_;
  std::optional<std::string> override_;
};

template <typename T>
class Knob : public KnobBase {
 public:
  Knob(const char *name, T default_value, const char *help, std::vector<std::string> choices = {});
  T get() {
    ensure_loaded();
    std::lock_guard<std::mutex> lock(mutex_);
    return value_;
  }

 protected:
  bool parse(const std::string &text, std::string *why) override;
  void reset_to_default() override { value_ = default_; }
  std::string format() const override;

 private:
  T default_;
  T value_;
};

extern template class Knob<bool>;
extern template class Knob<int64_t>;
extern template class Knob<double>;
extern template class Knob<std::string>;

// All knobs, sorted by name.
std::vector<KnobBase *> all_knobs();
KnobBase *find_knob(const std::string &name);
// Checks every knob's environment value; QUORUM_ERR_INVALID_ARG naming the
// first bad one. Also warns about misspelled QUORUM_* variables (once).
Status validate_knobs();
void reload_knobs();
// The QUORUM_* names in `environment` that are neither a knob nor a variable
// quorum reads otherwise (the launcher's, the logger's): misspellings.
std::vector<std::string> unknown_quorum_variables(char *const *environment);
// The known name nearest to `name` (edit distance), for "did you mean".
std::string closest_known_variable(const std::string &name);
// Warns once per process about each unknown QUORUM_* variable of the
// environment, naming the closest known one. validate_knobs() calls it.
void warn_unknown_quorum_variables();

// Knobs of the runtime layer.
extern Knob<int64_t> knob_timeout_ms;
extern Knob<std::string> knob_progress_thread;

}  // namespace quorum
