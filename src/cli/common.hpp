// SPDX-License-Identifier: Apache-2.0
// Shared pieces of the ipusim subcommands.
#pragma once

#include <boost/program_options.hpp>
#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ipusim/config/chip.hpp"

namespace ipusim::cli {

namespace po = boost::program_options;

// The value semantic of every unsigned option (po::value<unsigned> would accept "-1" and wrap
// it to 2^64-1, since it parses with lexical_cast). Accepts only decimal digits, at most `max`;
// anything else ("-1", "+3", "1e3", a value beyond `max`) is a usage error naming the option:
// "--m: expected a whole number 0 to 1099511627776, found "-1"". Use unsigned_value() for every
// option of an unsigned type (tests/integration/reliability_test.cpp, Round2.NegativeOptions).
template <class T>
class UnsignedValue : public po::typed_value<T> {
  static_assert(std::is_unsigned_v<T>);

 public:
  UnsignedValue(T* store, T max) : po::typed_value<T>(store), max_(max) {}
  void xparse(boost::any& value, const std::vector<std::string>& tokens) const override {
    po::validators::check_first_occurrence(value);
    const std::string& s = po::validators::get_single_string(tokens);
    T parsed{};
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), parsed);
    const bool digits_only = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
    if (!digits_only || ec != std::errc() || end != s.data() + s.size() || parsed > max_) {
      po::error_with_option_name e(
          "%canonical_option%: expected a whole number 0 to " + std::to_string(max_) +
          (s.starts_with('-') ? " (not negative)" : "") + ", found \"%value%\"");
      e.set_substitute("value", s);
      throw e;
    }
    value = boost::any(parsed);
  }

 private:
  T max_;
};
template <class T>
po::typed_value<T>* unsigned_value(T* store = nullptr, T max = std::numeric_limits<T>::max()) {
  return new UnsignedValue<T>(store, max);
}

// Options every subcommand understands: --help, --log-level.
struct CommonOptions {
  bool help = false;
  std::string log_level = "warn";
};
void add_common_options(po::options_description& desc, CommonOptions& common);

// --chip FILE and --set KEY=VALUE (repeatable).
struct ChipOptions {
  std::string chip_file;
  std::vector<std::string> overrides;
};
void add_chip_options(po::options_description& desc, ChipOptions& chip);
LoadedChip load_chip_options(const ChipOptions& chip);

// Parses argv (after the subcommand name). Throws UsageError with the subcommand's name on
// unknown options or bad values.
po::variables_map parse(const std::string& command, int argc, char** argv,
                        const po::options_description& desc,
                        const po::positional_options_description* positional = nullptr);

void apply_log_level(const std::string& level);

// --no-plan-cache, for every command that compiles (itself or in child processes).
void add_plan_cache_option(po::options_description& desc, bool& no_plan_cache);
// Sets the process's plan store (plan/cache.hpp): the user's cache folder unless
// `no_plan_cache` or IPUSIM_PLAN_CACHE=off; off also for the child processes this one starts
// (a sweep's points, a check's runs), which inherit IPUSIM_PLAN_CACHE=off. Call after
// apply_log_level.
void apply_plan_cache(bool no_plan_cache);

// Prints "Usage: ...", the description and the options.
void print_help(const std::string& usage, const std::string& about,
                const po::options_description& desc);

int run_command(int argc, char** argv);
int compile_command(int argc, char** argv);
int kernel_command(int argc, char** argv);
int validate_command(int argc, char** argv);
int import_command(int argc, char** argv);
int info_command(int argc, char** argv);
int check_command(int argc, char** argv);
int sweep_command(int argc, char** argv);
int report_command(int argc, char** argv);
int compare_command(int argc, char** argv);

}  // namespace ipusim::cli
