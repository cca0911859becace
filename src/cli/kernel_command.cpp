// SPDX-License-Identifier: Apache-2.0
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <iostream>

#include "common.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/kernels/catalogue.hpp"
#include "ipusim/kernels/kernels.hpp"
#include "ipusim/trace/trace_io.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"
#include "ipusim/util/strings.hpp"

namespace ipusim::cli {
namespace {

const std::vector<std::string> kKernels(kernels::kKernelNames.begin(), kernels::kKernelNames.end());
// reduce --layout values, in the order of trace::ReduceLayout.
constexpr std::array<std::string_view, 3> kReduceLayouts{"partial-sums", "strided", "continuous"};

trace::DType parse_dtype(const std::string& s) {
  auto d = trace::dtype_by_name(s);
  if (!d || (*d != trace::DType::kHalf && *d != trace::DType::kFloat))
    throw UsageError(fmt::format("--dtype: expected half or float, found \"{}\"", s));
  return *d;
}

trace::Op parse_op(const std::string& s) {
  auto op = trace::op_by_name(s);
  if (!op) {
    std::vector<std::string> names(trace::kOpNames.begin(), trace::kOpNames.end());
    throw UsageError(fmt::format("--op: unknown operator \"{}\"{}", s, did_you_mean(s, names)));
  }
  return *op;
}

// --pass: forward (the reference kernel) or training (compiler::compile_layer).
compiler::LayerPass parse_pass(const std::string& s) {
  if (s == "forward") return compiler::LayerPass::kForward;
  if (s == "training") return compiler::LayerPass::kTraining;
  throw UsageError(fmt::format("--pass: expected forward or training, found \"{}\"", s));
}

trace::DType parse_partials(const std::string& s) {
  if (s == "half") return trace::DType::kHalf;
  if (s == "float") return trace::DType::kFloat;
  throw UsageError(fmt::format("--partials: expected half or float, found \"{}\"", s));
}

double parse_available_memory(double p) {
  if (!std::isfinite(p) || p <= 0 || p > 1)
    throw UsageError(fmt::format(
        "--available-memory: expected a proportion of tile memory in (0, 1], found {}", p));
  return p;
}

// Sizes and counts: at most 2^40, the trace format's limit (trace::kMaxCount), so that
// nothing the kernels compute from them starts near 2^64.
po::typed_value<std::uint64_t>* size_value() {
  return unsigned_value<std::uint64_t>(nullptr, static_cast<std::uint64_t>(trace::kMaxCount));
}

template <class T>
T need(const po::variables_map& vm, const std::string& name, const std::string& kernel) {
  if (!vm.count(name))
    throw UsageError(
        fmt::format("ipusim kernel {}: missing --{} (see 'ipusim kernel --help')", kernel, name));
  return vm[name].as<T>();
}

}  // namespace

int kernel_command(int argc, char** argv) {
  CommonOptions common;
  ChipOptions chip_opts;
  std::string name, out, format_name, dtype = "half", op = "relu", pass = "forward",
                                      partials = "half";
  po::options_description desc("Options");
  add_common_options(desc, common);
  bool no_plan_cache = false;
  add_plan_cache_option(desc, no_plan_cache);
  add_chip_options(desc, chip_opts);
  desc.add_options()("out,o", po::value(&out)->value_name("FILE"),
                     "trace file to write (.trace text, .itb binary)")(
      "format", po::value(&format_name)->value_name("text|binary"),
      "force the output format instead of choosing it from the file name")(
      "dtype", po::value(&dtype)->default_value("half"), "element type: half or float")(
      "pass", po::value(&pass)->default_value("forward")->value_name("forward|training"),
      "matmul, conv2d: forward = the layer's forward conv (the reference kernel); training = "
      "forward, data gradient, weight gradient and an SGD weight update of the layer, lowered "
      "as 'ipusim compile' lowers a layer")(
      "partials", po::value(&partials)->default_value("half")->value_name("half|float"),
      "matmul, conv2d: AMP partials (accumulation) type for half inputs: half = FP16.16 (16 "
      "AMP engines on GC200), float = FP16.32 (8 engines); --dtype float always uses float")(
      "conv-unit-load-bits", po::value<std::string>()->default_value("64")->value_name("64|128"),
      "matmul, conv2d: bits per supervisor load of weights into the AMP engines: 64 is "
      "Poplar's default (8 B/cycle), 128 loads at the chip's full rate")(
      "fully-connected-pass", po::value<std::string>()->default_value("yes")->value_name("yes|no"),
      "matmul with --pass training: yes plans its forward pass with its data and weight "
      "gradients, jointly where poplin's estimates make that cheaper (poplin's "
      "fullyConnectedPass, as run.fully_connected_pass); no plans each pass on its own")(
      "available-memory", po::value<double>()->value_name("P"),
      "matmul, conv2d: available-memory proportion in (0, 1]: each conv is planned within "
      "P x tile memory bytes per tile for its temporaries (default 0.6 with --pass training; "
      "without it --pass forward plans within all tile memory less stack and code)")(
      "m", size_value(), "matmul: rows of A and C")(
      "n", size_value(), "matmul: columns of B and C; elementwise: elements")(
      "k", size_value(), "matmul: columns of A, rows of B")(
      "groups", size_value()->default_value(1),
      "matmul: independent matmuls G of a batched [G][M][K] x [G][K][N] (conv groups)")(
      "batch", size_value()->default_value(1), "conv2d: images (N)")(
      "channels", size_value(), "conv2d: input channels (C)")("height", size_value(),
                                                              "conv2d: input height (H)")(
      "width", size_value(), "conv2d: input width (W)")("filters", size_value(),
                                                        "conv2d: output channels (K)")(
      "kernel", size_value()->default_value(1), "conv2d: square kernel size")(
      "stride", size_value()->default_value(1), "conv2d: stride")(
      "outputs", size_value(), "reduce: output elements")("inputs", size_value(),
                                                          "reduce: partials per output")(
      "layout", po::value<std::string>()->default_value("partial-sums"),
      "reduce: how the partials lie: partial-sums (a conv's, poplin's ReduceAdd), strided "
      "(an output's partials a row apart, popops STRIDED_REDUCE) or continuous (contiguous, "
      "popops ALL_REGIONS_CONTINUOUS); one output is popops' scalar reduction in any case")(
      "op", po::value(&op)->default_value("relu"), "elementwise: operator (relu, exp, add, ...)")(
      "bytes", size_value(), "exchange: bytes per transfer")(
      "tiles", unsigned_value<std::uint32_t>(), "exchange: tiles taking part (default: all)")(
      "src", unsigned_value<std::uint32_t>()->default_value(0), "exchange-broadcast: source tile")(
      "iterations", size_value(), "sync-loop, sync: number of syncs")(
      "src-ipu", unsigned_value<std::uint32_t>(nullptr, trace::kMaxIpus - 1)->default_value(0),
      "link-p2p: sending IPU")(
      "dst-ipu", unsigned_value<std::uint32_t>(nullptr, trace::kMaxIpus - 1)->default_value(1),
      "link-p2p: receiving IPU")("group", unsigned_value<std::uint32_t>(nullptr, trace::kMaxIpus),
                                 "allreduce, collective, sync: IPUs taking part")(
      "method", po::value<std::string>()->default_value("auto"),
      "allreduce, collective: auto, ring, bidirectional_ring, quad_ring or broadcast_reduce")(
      "collective", po::value<std::string>()->default_value("all_reduce"),
      "collective: all_reduce, reduce_scatter, all_gather or broadcast")(
      "name", po::value(&name)->value_name("KERNEL"), "kernel to write");
  po::positional_options_description pos;
  pos.add("name", 1);
  const auto vm = parse("kernel", argc, argv, desc, &pos);
  if (common.help) {
    print_help("ipusim kernel KERNEL [options] --out FILE",
               "Writes a reference kernel as a program trace, mapped over the tiles of the\n"
               "chip given by --chip/--set (docs/kernels.md describes each mapping).\n"
               "Kernels: matmul (--m --n --k [--groups]), conv2d (--batch --channels --height\n"
               "--width --filters --kernel --stride), reduce (--outputs --inputs), elementwise\n"
               "(--op --n), exchange-all-to-all (--bytes [--tiles]), exchange-broadcast\n"
               "(--bytes [--tiles --src]), sync-loop (--iterations).\n"
               "System kernels (run them with --system): link-p2p (--bytes --src-ipu\n"
               "--dst-ipu), allreduce (--bytes --group [--method]), collective (--collective\n"
               "--bytes --group [--method]), sync (--group [--iterations]).\n"
               "--dtype half|float applies to all. matmul and conv2d also take --pass\n"
               "forward|training, --partials half|float and --available-memory P.",
               desc);
    return 0;
  }
  apply_log_level(common.log_level);
  apply_plan_cache(no_plan_cache);
  if (name.empty()) throw UsageError("ipusim kernel: missing KERNEL (see 'ipusim kernel --help')");
  if (out.empty()) throw UsageError("ipusim kernel: missing --out FILE");
  if (std::find(kKernels.begin(), kKernels.end(), name) == kKernels.end())
    throw UsageError(
        fmt::format("ipusim kernel: unknown kernel '{}'{}", name, did_you_mean(name, kKernels)));

  const ChipSpec chip = load_chip_options(chip_opts).spec;
  const trace::DType dt = parse_dtype(dtype);
  const compiler::LayerPass layer_pass = parse_pass(pass);
  const trace::DType partials_dt = parse_partials(partials);
  const bool available = vm.count("available-memory") > 0;
  // Poplar's default proportion (poplar-compiler.md §1.5) when --available-memory is not given.
  const double proportion =
      available ? parse_available_memory(vm["available-memory"].as<double>()) : 0.6;
  const bool planned_kernel = name == "matmul" || name == "conv2d";
  if (!planned_kernel && (!vm["pass"].defaulted() || !vm["partials"].defaulted() || available ||
                          !vm["conv-unit-load-bits"].defaulted()))
    throw UsageError(
        fmt::format("ipusim kernel {}: --pass, --partials, --conv-unit-load-bits and "
                    "--available-memory apply to matmul and conv2d only",
                    name));
  const std::string fc_text = vm["fully-connected-pass"].as<std::string>();
  if (!vm["fully-connected-pass"].defaulted() &&
      (name != "matmul" || layer_pass != compiler::LayerPass::kTraining))
    throw UsageError(fmt::format(
        "ipusim kernel {}: --fully-connected-pass applies to matmul with --pass training only",
        name));
  if (fc_text != "yes" && fc_text != "no")
    throw UsageError(
        fmt::format("ipusim kernel {}: --fully-connected-pass: expected yes or no, found \"{}\"",
                    name, fc_text));
  const std::string load_text = vm["conv-unit-load-bits"].as<std::string>();
  if (load_text != "64" && load_text != "128")
    throw UsageError(
        fmt::format("ipusim kernel {}: --conv-unit-load-bits: expected 64 or 128, found \"{}\"",
                    name, load_text));
  const std::uint32_t load_bits = load_text == "64" ? 64 : 128;
  // matmul and conv2d: the reference kernel (forward) or the layer's training program.
  auto planned = [&](const plan::ConvArgs& a) {
    if (layer_pass == compiler::LayerPass::kTraining)
      return compiler::compile_layer(chip, a, layer_pass, proportion, fc_text == "yes");
    if (!available) return kernels::conv2d(chip, a);
    return kernels::conv2d(
        chip, a,
        static_cast<std::uint64_t>(proportion * static_cast<double>(chip.tile_memory.count)));
  };
  const std::uint32_t tiles = vm.count("tiles") ? vm["tiles"].as<std::uint32_t>() : chip.tiles;
  trace::Trace t;
  using U = std::uint64_t;
  if (name == "matmul") {
    const U groups = vm["groups"].as<U>();
    if (groups < 1) throw UsageError("ipusim kernel matmul: --groups must be at least 1");
    plan::ConvArgs a;
    a.height = need<U>(vm, "m", name);
    a.out_chans = need<U>(vm, "n", name);
    a.in_chans = need<U>(vm, "k", name);
    a.dtype = dt;
    a.groups = groups;
    a.matmul = true;
    a.partials = partials_dt;
    a.coeff_load_bits = load_bits;
    t = planned(a);
  } else if (name == "conv2d") {
    plan::ConvArgs a;
    a.batch = vm["batch"].as<U>();
    a.in_chans = need<U>(vm, "channels", name);
    a.height = need<U>(vm, "height", name);
    a.width = need<U>(vm, "width", name);
    a.out_chans = need<U>(vm, "filters", name);
    a.kernel = vm["kernel"].as<U>();
    a.stride = vm["stride"].as<U>();
    a.dtype = dt;
    a.partials = partials_dt;
    a.coeff_load_bits = load_bits;
    t = planned(a);
  } else if (name == "reduce") {
    const std::string layout = vm["layout"].as<std::string>();
    const auto found = std::find(kReduceLayouts.begin(), kReduceLayouts.end(), layout);
    if (found == kReduceLayouts.end())
      throw UsageError("--layout: expected partial-sums, strided or continuous, found '" + layout +
                       "'");
    t = kernels::reduce(chip, need<U>(vm, "outputs", name), need<U>(vm, "inputs", name), dt,
                        static_cast<trace::ReduceLayout>(found - kReduceLayouts.begin()));
  } else if (name == "elementwise") {
    t = kernels::elementwise(chip, parse_op(op), need<U>(vm, "n", name), dt);
  } else if (name == "exchange-all-to-all") {
    t = kernels::exchange_all_to_all(chip, need<U>(vm, "bytes", name), tiles);
  } else if (name == "exchange-broadcast") {
    t = kernels::exchange_broadcast(chip, need<U>(vm, "bytes", name), tiles,
                                    vm["src"].as<std::uint32_t>());
  } else if (name == "sync-loop") {
    t = kernels::sync_loop(chip, need<U>(vm, "iterations", name));
  } else if (name == "link-p2p") {
    t = kernels::link_p2p(chip, need<U>(vm, "bytes", name), vm["src-ipu"].as<std::uint32_t>(),
                          vm["dst-ipu"].as<std::uint32_t>());
  } else if (name == "sync") {
    t = kernels::external_sync(chip, need<std::uint32_t>(vm, "group", name),
                               vm.count("iterations") ? vm["iterations"].as<U>() : 1);
  } else {
    auto pick = [&](const std::string& value, const auto& names, const char* option) {
      std::vector<std::string> list(names.begin(), names.end());
      auto it = std::find(list.begin(), list.end(), value);
      if (it == list.end())
        throw UsageError(
            fmt::format("--{}: unknown value \"{}\"{}", option, value, did_you_mean(value, list)));
      return static_cast<std::size_t>(it - list.begin());
    };
    const auto collective =
        name == "allreduce"
            ? trace::CollectiveOp::kAllReduce
            : static_cast<trace::CollectiveOp>(pick(vm["collective"].as<std::string>(),
                                                    trace::kCollectiveOpNames, "collective"));
    const auto method = static_cast<trace::CollectiveMethod>(
        pick(vm["method"].as<std::string>(), trace::kCollectiveMethodNames, "method"));
    t = kernels::collective(chip, collective, need<U>(vm, "bytes", name),
                            need<std::uint32_t>(vm, "group", name), method, dt);
  }
  // The chip it was mapped for, so that a run on another chip warns (compiler::target_mismatches).
  for (auto& entry : compiler::chip_target_meta(chip)) t.meta.push_back(std::move(entry));
  trace::check_structure(t, out);
  trace::Format format = trace::format_for_path(out);
  if (format_name == "text")
    format = trace::Format::kText;
  else if (format_name == "binary")
    format = trace::Format::kBinary;
  else if (!format_name.empty())
    throw UsageError(fmt::format("--format: expected text or binary, found \"{}\"", format_name));
  create_parent_directories(out);  // a missing folder is made, as run --out makes its own
  trace::write_file(t, out, format, trace::Checked::kYes);  // checked above
  std::cout << fmt::format("wrote {} ({}, {} IPU program(s) x {} replica(s))\n", out, t.name,
                           t.ipus.size(), t.replicas);
  return 0;
}

}  // namespace ipusim::cli
