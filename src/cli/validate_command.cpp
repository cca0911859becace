// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include <iostream>

#include "common.hpp"
#include "ipusim/cost/program_costs.hpp"
#include "ipusim/trace/trace_io.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::cli {
namespace {

bool is_config(const std::string& path) {
  return path.size() > 5 && (path.ends_with(".yaml") || path.ends_with(".yml"));
}

}  // namespace

int validate_command(int argc, char** argv) {
  CommonOptions common;
  ChipOptions chip_opts;
  std::vector<std::string> files;
  po::options_description desc("Options");
  add_common_options(desc, common);
  add_chip_options(desc, chip_opts);
  desc.add_options()("file", po::value(&files)->value_name("FILE"), "config or trace to check");
  po::positional_options_description pos;
  pos.add("file", -1);
  parse("validate", argc, argv, desc, &pos);
  if (common.help) {
    print_help("ipusim validate [options] FILE...",
               "Checks chip configs (*.yaml) and traces (*.trace, *.itb) without simulating:\n"
               "strict keys, units and ranges for configs; structure, tile indices and per-tile\n"
               "memory (against --chip) for traces. Prints one line per file; exits non-zero\n"
               "if any file is invalid.",
               desc);
    return 0;
  }
  apply_log_level(common.log_level);
  if (files.empty())
    throw UsageError("ipusim validate: no FILE given (see 'ipusim validate --help')");
  int failures = 0;
  std::optional<ChipSpec> chip;
  for (const auto& f : files) {
    try {
      if (is_config(f)) {
        const auto loaded = load_chip(f, chip_opts.overrides);
        std::cout << fmt::format("ok: {} (chip {}, {} tiles)\n", f, loaded.spec.name,
                                 loaded.spec.tiles);
        continue;
      }
      if (!chip) chip = load_chip_options(chip_opts).spec;
      const trace::Trace t = trace::read_file(f);  // checks the structure
      trace::check_tiles(t, chip->tiles, f);
      for (const auto& program : t.ipus)
        cost::check_memory(*chip, program, cost::memory_map(*chip, program));
      std::cout << fmt::format("ok: {} (trace {}, {} IPU program(s), fits {})\n", f, t.name,
                               t.ipus.size(), chip->name);
    } catch (const Error& e) {
      std::cerr << "error: " << e.what() << "\n";
      ++failures;
    }
  }
  return failures ? static_cast<int>(ExitCode::kBadInput) : 0;
}

}  // namespace ipusim::cli
