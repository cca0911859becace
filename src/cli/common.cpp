// SPDX-License-Identifier: Apache-2.0
#include "common.hpp"

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ipusim/plan/cache.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::cli {
namespace {
// The hidden option that collects arguments beyond a command's positional ones.
constexpr const char* kExtra = "unexpected-arguments";
}  // namespace

void add_common_options(po::options_description& desc, CommonOptions& common) {
  desc.add_options()("help,h", po::bool_switch(&common.help), "show this help and exit")(
      "log-level", po::value(&common.log_level)->default_value("warn")->value_name("LEVEL"),
      "stderr log level: trace, debug, info, warn, error or off");
}

void add_chip_options(po::options_description& desc, ChipOptions& chip) {
  desc.add_options()(
      "chip", po::value(&chip.chip_file)->default_value(default_chip_file())->value_name("FILE"),
      "chip config (configs/chips/*.yaml)")(
      "set", po::value(&chip.overrides)->composing()->value_name("KEY=VALUE"),
      "override a config key by its path, e.g. --set chip.clock=1.5GHz (repeatable)");
}

LoadedChip load_chip_options(const ChipOptions& chip) {
  return load_chip(chip.chip_file, chip.overrides);
}

po::variables_map parse(const std::string& command, int argc, char** argv,
                        const po::options_description& desc,
                        const po::positional_options_description* positional) {
  po::variables_map vm;
  try {
    // No option guessing: "--run" is not an abbreviation of "--run-reference" (an option a
    // command does not have is an error, never another one). Arguments beyond the command's
    // positional ones are collected and refused below, never dropped.
    po::options_description all;
    all.add(desc);
    std::vector<std::string> extra;
    all.add_options()(kExtra, po::value(&extra));
    // A command that takes any number of arguments (validate) keeps its own description.
    const bool unbounded =
        positional && positional->max_total_count() == std::numeric_limits<unsigned>::max();
    po::positional_options_description positions;
    if (unbounded) {
      positions = *positional;
    } else {
      for (unsigned i = 0; positional && i < positional->max_total_count(); ++i)
        positions.add(positional->name_for_position(i).c_str(), 1);
      positions.add(kExtra, -1);
    }
    auto parser =
        po::command_line_parser(argc, argv)
            .options(all)
            .style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing)
            .positional(positions);
    po::store(parser.run(), vm);
    po::notify(vm);
    if (!extra.empty())
      throw UsageError(fmt::format(
          "ipusim {}: unexpected argument '{}': {} (see 'ipusim {} --help')", command, extra[0],
          positional ? fmt::format("it takes at most {} argument(s) besides its options",
                                   positional->max_total_count())
                     : std::string("it takes no argument besides its options (a file is "
                                   "given with an option, such as --chip FILE)"),
          command));
  } catch (const po::error& e) {
    throw UsageError(
        fmt::format("ipusim {}: {} (see 'ipusim {} --help')", command, e.what(), command));
  }
  // An empty file name, directory or word is never meant ("--out $DIR" with DIR unset): it
  // would silently turn the option off (run --out "" wrote nothing) or name the current
  // directory.
  for (const auto& [name, value] : vm) {
    const auto* text = boost::any_cast<std::string>(&value.value());
    if (!value.defaulted() && text && text->empty()) {
      const bool is_positional = positional && positional->name_for_position(0) == name;
      throw UsageError(
          fmt::format("ipusim {}: {}: expected a value, found an empty one (see "
                      "'ipusim {} --help')",
                      command, is_positional ? "the " + name + " argument" : "--" + name, command));
    }
  }
  return vm;
}

void apply_log_level(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("ipusim");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%l] %v");
  const auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off")
    throw UsageError(fmt::format(
        "--log-level: expected trace, debug, info, warn, error or off, found \"{}\"", level));
  spdlog::set_level(lvl);
}

void add_plan_cache_option(po::options_description& desc, bool& no_plan_cache) {
  desc.add_options()(
      "no-plan-cache", po::bool_switch(&no_plan_cache),
      "search every conv and matmul plan instead of reading plans found before from the plan "
      "cache ($XDG_CACHE_HOME/ipusim/plans, else ~/.cache/ipusim/plans; results are identical; "
      "IPUSIM_PLAN_CACHE=off does the same)");
}

void apply_plan_cache(bool no_plan_cache) {
  if (no_plan_cache) ::setenv("IPUSIM_PLAN_CACHE", "off", 1);  // for child processes too
  if (plan::plan_cache_disabled_by_environment()) return plan::set_plan_store(nullptr);
  const auto folder = plan::default_plan_cache_folder();
  if (!folder) {
    spdlog::debug("plan cache: off (neither XDG_CACHE_HOME nor HOME is set)");
    return plan::set_plan_store(nullptr);
  }
  plan::set_plan_store(std::make_shared<plan::PlanStore>(*folder));
}

void print_help(const std::string& usage, const std::string& about,
                const po::options_description& desc) {
  std::cout << "Usage: " << usage << "\n\n" << about << "\n\n" << desc << "\n";
}

}  // namespace ipusim::cli
