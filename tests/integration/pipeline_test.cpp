// SPDX-License-Identifier: Apache-2.0
// The summary's pipeline lines and stats.json's "pipeline" (report/pipeline.hpp) on the
// shipped pipelined runs: PopART's schedule, fed with the simulated stages' work per
// micro-batch, accounts for the waiting the engine simulated in the pipeline, IPU by IPU (ViT
// and GPT-2 within 0.05%).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "cli_harness.hpp"
#include "ipusim/util/json_reader.hpp"

namespace ipusim::testing {
namespace {

class PipelineRun : public ::testing::TestWithParam<const char*> {};

TEST_P(PipelineRun, TheScheduleAccountsForTheWaitingInThePipeline) {
  TempDir dir;
  const std::string args = GetParam();
  const auto r = ipusim("run " + args + " --out " + dir.file("out"));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("  pipeline      "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("in the pipeline (by these stage times: fill and drain "), std::string::npos)
      << r.out;
  const JsonValue stats = parse_json(read_all(dir.file("out/stats.json")), "stats.json");
  const JsonValue* waiting = json_find(stats, "pipeline.waiting");
  ASSERT_NE(waiting, nullptr);
  ASSERT_FALSE(waiting->items.empty());
  // Within 2% of the step: the stage times are averages over the micro-batches, and a host
  // input prefetch stalls an IPU more in the short fill cycles than in the steady ones (BERT's
  // IPU 0: 1.2% of its step).
  const double step = json_field(stats, "total.cycles")->number.d;
  for (const JsonValue& w : waiting->items) {
    const double simulated = json_field(w, "in_pipeline")->number.d;
    const double schedule =
        json_field(w, "fill_and_drain")->number.d + json_field(w, "unequal_stages")->number.d;
    EXPECT_GT(simulated, 0);
    EXPECT_NEAR(schedule, simulated, 0.02 * step)
        << args << ", ipu " << json_field(w, "ipu")->number.d;
  }
}

TEST(PipelineRun, TheReportShowsEachStageAndEachIpusWaiting) {
  TempDir dir;
  const auto r = ipusim("run -q --run " + source_dir() +
                        "/configs/runs/gpt2-small-pod16.yaml --out " + dir.file("out"));
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(ipusim("report " + dir.file("out")).status, 0);
  const std::string html = read_all(dir.file("out/report.html"));
  EXPECT_NE(html.find("<h2 id=\"pipeline\">Pipeline stages</h2>"), std::string::npos);
  EXPECT_NE(html.find("2048 micro-batches in 2056 pipeline cycles"), std::string::npos);
  // Five stages (the tied head's back on IPU 0), four IPUs.
  const auto stages = html.find("<table id=\"pipeline-stages\">");
  const auto waiting = html.find("<table id=\"pipeline-waiting\">");
  ASSERT_NE(stages, std::string::npos);
  ASSERT_NE(waiting, std::string::npos);
  const auto rows = [&](std::size_t from, std::size_t to) {
    std::size_t n = 0;
    for (auto at = html.find("<tr><td>", from); at < to; at = html.find("<tr><td>", at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(rows(stages, waiting), 5u);
  EXPECT_EQ(rows(waiting, html.find("</table>", waiting)), 4u);
  EXPECT_NE(html.find("stage 4 (IPU 0)"), std::string::npos);
}

// A balanced pipeline written by hand as PopART schedules it (the compiler's pipeline_loops):
// 2 stages of equal work (stage 0: forward F, backward 2F; stage 1, the loss: forward F,
// backward 2F in one cycle), 4 micro-batches, 6 cycles, each ending at the stages' copy. Its
// IPUs wait only in the fill and drain: IPU 0 in cycle 1 (for stage 1's forward and backward)
// and cycle 4, IPU 1 in cycles 0 and 5; in the steady cycles 2 and 3 neither waits. (No
// internal syncs: the two IPUs' loops place them differently around the copies, which would
// give the two stages different sync cycles.)
constexpr const char* kBalancedPipeline = R"(ipusim-trace 3
name balanced_pipeline
meta pipeline.micro_batches 4
meta pipeline.stage_ipus 0:1
global_exchange copies
  copy src=0 dst=1 bytes=4096
  copy src=1 dst=0 bytes=4096
end
ipu 0
computeset f layer=s0 pass=forward op=matmul
  vertex tiles=0..15 copy bytes=24000
end
computeset b layer=s0 pass=data_gradient op=matmul
  vertex tiles=0..15 copy bytes=48000
end
program
  repeat 2
    compute f
    global_exchange copies
  end
  repeat 2
    compute f
    compute b
    global_exchange copies
  end
  repeat 2
    compute b
    global_exchange copies
  end
end
ipu 1
computeset f layer=s1 pass=forward op=matmul
  vertex tiles=0..15 copy bytes=24000
end
computeset b layer=s1 pass=data_gradient op=matmul
  vertex tiles=0..15 copy bytes=48000
end
program
  repeat 1
    global_exchange copies
  end
  repeat 4
    compute f
    compute b
    global_exchange copies
  end
  repeat 1
    global_exchange copies
  end
end
)";

TEST(PipelineRun, ABalancedPipelineWaitsOnlyInItsFillAndDrain) {
  TempDir dir;
  const std::string trace = dir.file("balanced.trace");
  std::ofstream(trace) << kBalancedPipeline;
  const auto r = ipusim("run --system " + source_dir() +
                        "/configs/systems/pod16.yaml --set chip.tiles=16 --out " + dir.file("out") +
                        " " + trace);
  ASSERT_EQ(r.status, 0) << r.err;
  const JsonValue stats = parse_json(read_all(dir.file("out/stats.json")), "stats.json");
  const JsonValue* stages = json_find(stats, "pipeline.stages");
  ASSERT_NE(stages, nullptr) << r.out;
  ASSERT_EQ(stages->items.size(), 2u);
  const double f = json_field(stages->items[0], "forward")->number.d;
  const double b = json_field(stages->items[0], "backward")->number.d;
  EXPECT_GT(f, 0);
  EXPECT_GT(b, f);
  EXPECT_EQ(json_field(stages->items[1], "forward")->number.d, f);
  EXPECT_EQ(json_field(stages->items[1], "backward")->number.d, b);
  const JsonValue* waiting = json_find(stats, "pipeline.waiting");
  ASSERT_NE(waiting, nullptr);
  ASSERT_EQ(waiting->items.size(), 2u);
  for (const JsonValue& w : waiting->items) {
    // Each IPU waits one forward and one backward in the fill and drain, and nothing else:
    // no unequal stages, and the simulated waiting is all in the pipeline and all of it.
    EXPECT_EQ(json_field(w, "unequal_stages")->number.d, 0);
    EXPECT_EQ(json_field(w, "fill_and_drain")->number.d, f + b);
    EXPECT_EQ(json_field(w, "in_pipeline")->number.d, f + b);
    EXPECT_EQ(json_field(w, "simulated")->number.d, f + b);
  }
  EXPECT_NE(r.out.find("unequal stages 0"), std::string::npos) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Shipped, PipelineRun,
    ::testing::Values(
        "--run " IPUSIM_SOURCE_DIR
        "/configs/runs/vit-b16-finetune-pytorch-pod16.yaml --system " IPUSIM_SOURCE_DIR
        "/configs/systems/bow-pod16.yaml",
        "--run " IPUSIM_SOURCE_DIR "/configs/runs/gpt2-small-pod16.yaml",
        "--run " IPUSIM_SOURCE_DIR "/configs/runs/bert-large-pod16.yaml"));

}  // namespace
}  // namespace ipusim::testing
