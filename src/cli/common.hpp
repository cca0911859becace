// SPDX-License-Identifier: Apache-2.0
// Shared pieces of the ipusim subcommands.
#pragma once

#include <boost/program_options.hpp>

#include <string>
#include <vector>

#include "ipusim/config/chip.hpp"

namespace ipusim::cli {

namespace po = boost::program_options;

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

// Prints "Usage: ...", the description and the options.
void print_help(const std::string& usage, const std::string& about,
                const po::options_description& desc);

int run_command(int argc, char** argv);
int compile_command(int argc, char** argv);
int kernel_command(int argc, char** argv);
int validate_command(int argc, char** argv);
int info_command(int argc, char** argv);
int check_command(int argc, char** argv);
int sweep_command(int argc, char** argv);
int report_command(int argc, char** argv);
int compare_command(int argc, char** argv);

}  // namespace ipusim::cli
