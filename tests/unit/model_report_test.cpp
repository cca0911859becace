// SPDX-License-Identifier: Apache-2.0
// The model's parameters and FLOPs in stats.json and the summary (report::stats_json,
// summary_text), from the compiler's trace meta: the arithmetic worked by hand.
#include <gtest/gtest.h>

#include <string>

#include "ipusim/report/report.hpp"
#include "ipusim/util/json_reader.hpp"
#include "test_chips.hpp"

namespace ipusim::report {
namespace {

TEST(ModelReport, ParametersAndModelFlopsAreReportedPerStepPerSampleAndAgainstPeak) {
  const ChipSpec chip = testing::gc200_by_hand();
  RunStats stats;
  stats.ipus.resize(1);
  stats.cycles = 2;
  stats.seconds = 2.0;  // a 2 s step
  RunInfo info;
  // 4 samples per step on 2 IPUs; 600 FLOP forward and 1,200 backward per step.
  info.meta = {{"model", "m"},
               {"mode", "training"},
               {"samples_per_step", "4"},
               {"sample_unit", "images"},
               {"model.parameters", "25557032"},
               {"model.flops.forward", "600"},
               {"model.flops.backward", "1200"},
               {"model.ipus", "2"}};
  const JsonValue s = parse_json(stats_json(chip, stats, info), "stats.json");
  auto value = [&](const std::string& path) { return json_field(s, path)->number.d; };
  EXPECT_EQ(value("workload.parameters.value"), 25557032.0);
  EXPECT_EQ(value("workload.model_flops.total.value"), 1800.0);
  EXPECT_EQ(value("workload.model_flops.per_sample.value"), 450.0);  // 1,800 / 4
  EXPECT_EQ(value("workload.model_flops.rate.value"), 900.0);        // 1,800 / 2 s
  // 900 FLOP/s against two IPUs' FP16.16 peak
  EXPECT_DOUBLE_EQ(value("workload.model_flops.utilisation.value"),
                   900.0 / (2 * chip.peak_flops(true, false)));
  const std::string text = summary_text(chip, stats, info);
  EXPECT_NE(text.find("  model         25.56 M parameters; 450.00 FLOP per image (forward "
                      "150.00 FLOP + backward 300.00 FLOP, from its graph); 900.00 FLOP/s over "
                      "2 IPUs = "),
            std::string::npos)
      << text;
  // A trace without the model's meta (hand-written, or compiled before) reports none of it.
  info.meta.resize(4);
  EXPECT_EQ(
      json_find(parse_json(stats_json(chip, stats, info), "stats.json"), "workload.parameters"),
      nullptr);
  EXPECT_EQ(summary_text(chip, stats, info).find("  model "), std::string::npos);
}

}  // namespace
}  // namespace ipusim::report
