// SPDX-License-Identifier: Apache-2.0
// ipusim import: an ONNX model as the model file it is read as (docs/onnx.md).
#include <fmt/format.h>

#include <iostream>

#include "common.hpp"
#include "ipusim/compiler/compiler.hpp"
#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"

namespace ipusim::cli {

int import_command(int argc, char** argv) {
  CommonOptions common;
  std::string input, out;
  po::options_description desc("Options");
  add_common_options(desc, common);
  desc.add_options()("out,o", po::value(&out)->value_name("FILE"),
                     "write the model file here (default: standard output)")(
      "model", po::value(&input)->value_name("MODEL.onnx"), "the ONNX model to import");
  po::positional_options_description pos;
  pos.add("model", 1);
  parse("import", argc, argv, desc, &pos);
  if (common.help) {
    print_help(
        "ipusim import [options] MODEL.onnx [--out MODEL.yaml]",
        "Writes the model file (models/*.yaml format) that an ONNX model is read as: a CNN's\n"
        "layers one per node (layout-only nodes such as Flatten, Reshape and Dropout folded\n"
        "away; a loss added after the class scores), a transformer as its sizes (layers,\n"
        "hidden, heads, FFN, vocabulary or patches, norm placement, masks, head). 'ipusim run\n"
        "--model MODEL.onnx' compiles the same model without this step. An op or pattern\n"
        "ipusim does not model is an error naming the node (exit status 3). Weights are read\n"
        "for their shapes only: a model saved with external data imports without its data\n"
        "file. See docs/onnx.md for what is recognised.",
        desc);
    return 0;
  }
  apply_log_level(common.log_level);
  if (input.empty())
    throw UsageError("ipusim import: no MODEL.onnx given (see 'ipusim import --help')");
  if (!compiler::is_onnx_file(input))
    throw UsageError(fmt::format("ipusim import: {}: expected an ONNX model (*.onnx)", input));
  check_output_is_not_an_input(out, "--out", {{"the input model", input}});
  const std::string yaml = compiler::import_onnx(input);
  // The result is read back as a model file before it is written: what import writes, run
  // --model reads.
  const compiler::ModelDef model = compiler::load_model(input);
  if (out.empty()) {
    std::cout << yaml;
  } else {
    create_parent_directories(out);
    write_file_atomically(out, [&](std::ostream& os) { os << yaml; });
    std::cerr << fmt::format("ipusim import: {} -> {} ({} model {}, {} parameters)\n", input, out,
                             compiler::family_name(model.family), model.name,
                             compiler::parameter_count(model));
  }
  return 0;
}

}  // namespace ipusim::cli
