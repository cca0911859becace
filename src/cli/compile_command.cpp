// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <iostream>

#include "common.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/plan/cache.hpp"
#include "ipusim/trace/trace_io.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/progress.hpp"
#include "ipusim/util/strings.hpp"

namespace ipusim::cli {

int compile_command(int argc, char** argv) {
  CommonOptions common;
  std::string model_file, run_file, system_file, chip_file, out;
  std::vector<std::string> overrides;
  bool quiet = false;
  po::options_description desc("Options");
  add_common_options(desc, common);
  bool no_plan_cache = false;
  add_plan_cache_option(desc, no_plan_cache);
  desc.add_options()("run", po::value(&run_file)->value_name("FILE"),
                     "run config (configs/runs/*.yaml): replicas, micro-batch, gradient "
                     "accumulation, placement, recomputation, optimiser, ...")(
      "model", po::value(&model_file)->value_name("FILE"),
      "model (models/*.yaml); default: the run's")(
      "system", po::value(&system_file)->value_name("FILE"),
      "system (configs/systems/*.yaml); default: the run's")(
      "chip", po::value(&chip_file)->value_name("FILE"), "replace the system's chip")(
      "set", po::value(&overrides)->composing()->value_name("KEY=VALUE"),
      "override a chip.*, machine.*, fabric.*, system.* or run.* key, e.g. --set chip.tiles=736 "
      "or --set run.gradient_accumulation=4 (repeatable)")(
      "out,o", po::value(&out)->value_name("TRACE"), "trace to write (.itb binary, .trace text)")(
      "quiet,q", po::bool_switch(&quiet),
      "no progress line (shown on stderr only when it is a terminal)");
  parse("compile", argc, argv, desc);
  if (common.help) {
    print_help(
        "ipusim compile --run FILE [--model FILE] [--system FILE] [--set KEY=VALUE]... --out TRACE",
        "Lowers one step of a model (CNN or transformer) onto a system: a training step\n"
        "(forward, backward with recomputation, weight update) or, with run.mode\n"
        "inference, a forward pass. Every conv and matmul is planned for the chip given\n"
        "(tile partition, AMP vertices, exchanges, reductions, within the run's\n"
        "available-memory proportion), elementwise and normalisation layers are mapped\n"
        "over the tiles, memory is accounted per tile, a transformer is pipelined over\n"
        "the IPUs of a replica, and replicas reduce their gradients. A model that does not fit\n"
        "fails with an out-of-memory error naming the tile and its largest tensors.\n"
        "Run the result with: ipusim run --system FILE TRACE (docs/workloads.md), or\n"
        "compile and run in one process, without a trace file: ipusim run --run FILE.",
        desc);
    return 0;
  }
  apply_log_level(common.log_level);
  apply_plan_cache(no_plan_cache);
  if (run_file.empty())
    throw UsageError("ipusim compile: missing --run FILE (see 'ipusim compile --help')");
  if (out.empty()) throw UsageError("ipusim compile: missing --out TRACE");
  check_output_is_not_an_input(out, "--out",
                               {{"the run config", run_file},
                                {"the model", model_file},
                                {"the system config", system_file},
                                {"the chip config", chip_file}});
  const auto start = std::chrono::steady_clock::now();
  // Overrides go to the file they belong to.
  std::vector<std::string> run_overrides, system_overrides;
  for (const auto& o : overrides)
    (o.starts_with("run.") ? run_overrides : system_overrides).push_back(o);
  Progress progress("ipusim compile", "stages", !quiet);
  progress.stage("loading configs", 0, 3);
  const compiler::LoadedRun run = compiler::load_run(run_file, run_overrides);
  const compiler::ModelDef model =
      compiler::load_model(model_file.empty() ? run.run.model_file : model_file);
  if (!model_file.empty())
    if (auto m = compiler::input_mismatch(run.run, model, run_overrides))
      std::cerr << fmt::format("ipusim compile: warning: {}: {}\n", printable(run_file),
                               printable(*m));
  const LoadedSystem system =
      load_system(system_file.empty() ? run.run.system_file : system_file, system_overrides,
                  chip_file.empty() ? std::nullopt : std::optional(chip_file));
  for (const auto& w : system.warnings)
    std::cerr << fmt::format("ipusim compile: warning: {}\n", printable(w));
  progress.stage(fmt::format("lowering {}", model.name), 1, 3);
  const trace::Trace trace = compiler::compile(model, run.run, system.spec);
  plan::log_plan_store_use();
  progress.stage("writing " + out, 2, 3);
  // compile() checked the structure of its result; the writer need not check it again.
  create_parent_directories(out);
  trace::write_file(trace, out, trace::format_for_path(out), trace::Checked::kYes);
  progress.finish();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::size_t compute_sets = 0, exchanges = 0;
  for (const auto& p : trace.ipus) {
    compute_sets += p.compute_sets.size();
    exchanges += p.exchanges.size();
  }
  std::cout << fmt::format(
      "compiled {} ({}) for {}: {} replica(s) x {} IPU(s), {} compute sets, {} exchanges -> {} "
      "({:.1f} s)\n",
      model.name, run.run.name, system.spec.name, trace.replicas, trace.ipus.size(), compute_sets,
      exchanges, out, seconds);
  return 0;
}

}  // namespace ipusim::cli
