// SPDX-License-Identifier: Apache-2.0
// Golden files, field comparison, the moved-fields table and JUnit XML.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "ipusim/regression/compare.hpp"
#include "ipusim/regression/golden.hpp"
#include "ipusim/regression/junit.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::regression {
namespace {

JsonNumber num(const char* s) { return *JsonNumber::parse(s); }

Case sample_case() {
  Case c;
  c.name = "sync/loop";
  c.kernel = "sync-loop";
  c.args = {{"iterations", "1000"}};
  c.chip = "gc200";
  c.fields = {Field{"total.cycles", Tolerance{}}, Field{"phases.sync.count", Tolerance{}},
              Field{"ipu[0].tiles.memory.max", Tolerance::parse("1%")}};
  return c;
}

Golden sample_golden() {
  return Golden{"sync/loop",
                "kernel sync-loop --iterations 1000; chip gc200",
                {{"total.cycles", num("90000")},
                 {"phases.sync.count", num("1000")},
                 {"ipu[0].tiles.memory.max", num("3072.0")}}};
}

TEST(RegressionGolden, TextIsStableAndRoundTrips) {
  const Golden g = sample_golden();
  const std::string text = golden_text(g);
  EXPECT_EQ(text,
            "# Golden result of regression case sync/loop.\n"
            "# Written by 'ipusim check --update' (docs/regression.md); review changes like code.\n"
            "format: ipusim-golden/1\n"
            "case: \"sync/loop\"\n"
            "definition: \"kernel sync-loop --iterations 1000; chip gc200\"\n"
            "fields:\n"
            "  total.cycles: 90000\n"
            "  phases.sync.count: 1000\n"
            "  ipu[0].tiles.memory.max: 3072.0\n");
  const Golden back = parse_golden(text, "g.yaml");
  EXPECT_EQ(back.case_name, g.case_name);
  EXPECT_EQ(back.definition, g.definition);
  ASSERT_EQ(back.fields.size(), 3u);
  EXPECT_EQ(back.fields[2].first, "ipu[0].tiles.memory.max");
  EXPECT_EQ(back.fields[2].second.text, "3072.0");
  EXPECT_EQ(golden_text(back), text);
  Golden odd = g;
  odd.definition = "trace \"a\\b\".trace\t\x01";
  EXPECT_EQ(parse_golden(golden_text(odd), "g.yaml").definition, odd.definition);
}

TEST(RegressionGolden, MalformedGoldensNameTheLine) {
  auto error_of = [](const std::string& text) {
    try {
      parse_golden(text, "g.yaml");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error_of("format: ipusim-golden/1\ncase: a\nfields:\n  total.cycles: lots\n"),
            "g.yaml:4:17: fields.total.cycles: expected a number, found \"lots\"");
  // A quoted "3\0 5" is not the number 3 (found by fuzz_golden: the writer wrote the NUL raw).
  EXPECT_EQ(error_of("format: ipusim-golden/1\ncase: a\nfields:\n  total.cycles: \"3\\0 5\"\n"),
            "g.yaml:4:17: fields.total.cycles: expected a number, found \"3\\0 5\"");
  EXPECT_EQ(error_of("format: ipusim-golden/1\ncase: a\nfield: {}\n"),
            "g.yaml:3:1: expected one of the keys format, case, definition, fields, found 'field'");
  EXPECT_EQ(error_of("format: ipusim-golden/1\ncase: a\n"),
            "g.yaml: expected the keys format, case and fields, found fields missing");
  EXPECT_EQ(error_of("format: ipusim-golden/2\n"),
            "g.yaml:1:9: format: expected ipusim-golden/1, found \"ipusim-golden/2\"");
}

TEST(RegressionGolden, GoldensAreReadCappedAndOnlyFromFiles) {
  // Issue 30, defect 8: a golden symlinked to /dev/zero was read to 2.1 GB before failing, and
  // a 42 MB golden took 12 s and 1.9 GB before the node-count refusal. Goldens are read by the
  // one input reader: at most 16 MiB, regular files and FIFOs only.
  const auto dir =
      std::filesystem::temp_directory_path() / ("ipusim-golden-cap-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string link = (dir / "zero.yaml").string(), big = (dir / "big.yaml").string();
  std::filesystem::create_symlink("/dev/zero", link);
  std::ofstream(big) << "case: x\n";
  std::filesystem::resize_file(big, 42u << 20);  // sparse
  const auto message = [](const std::string& path) {
    try {
      (void)regression::read_golden(path);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(link), link +
                               ": cannot read a golden: it is a character device (expected a "
                               "regular file or a FIFO)");
  EXPECT_EQ(message(big),
            big + ": expected a golden of at most 16777216 bytes, found a larger one");
  std::filesystem::remove_all(dir);
}

TEST(RegressionCompare, ExactFieldsFailAndTolerancesHold) {
  const Case c = sample_case();
  const Golden g = sample_golden();
  // Unchanged.
  CaseOutcome same = compare_case(c, g, g.fields, "g.yaml");
  EXPECT_EQ(same.status, CaseOutcome::Status::kPassed);
  EXPECT_TRUE(same.changes.empty());
  // One sync cycle more per iteration; memory within its 1%.
  std::vector<std::pair<std::string, JsonNumber>> now = {
      {"total.cycles", num("91000")},
      {"phases.sync.count", num("1000")},
      {"ipu[0].tiles.memory.max", num("3100.0")}};
  const CaseOutcome o = compare_case(c, g, now, "g.yaml");
  EXPECT_EQ(o.status, CaseOutcome::Status::kFailed);
  ASSERT_EQ(o.changes.size(), 2u);
  EXPECT_FALSE(o.changes[0].within_tolerance);
  EXPECT_TRUE(o.changes[1].within_tolerance);
  EXPECT_EQ(failure_message(o), "total.cycles 90000 -> 91000 (+1000, +1.11%; exact)");
  EXPECT_EQ(
      moved_table({o}, false),
      "  case       field                       old     new  delta  delta%  verdict\n"
      "  sync/loop  total.cycles              90000   91000  +1000  +1.11%  FAIL (exact)\n"
      "  sync/loop  ipu[0].tiles.memory.max  3072.0  3100.0    +28  +0.91%  ok (within 1%)\n");
  EXPECT_NE(moved_table({o}, true).find("+1000  +1.11%  updated"), std::string::npos);
  // Only within tolerance: passes, still listed.
  now[0].second = num("90000");
  const CaseOutcome ok = compare_case(c, g, now, "g.yaml");
  EXPECT_EQ(ok.status, CaseOutcome::Status::kPassed);
  EXPECT_EQ(ok.changes.size(), 1u);
  // A move in the other direction fails too: goldens record the current timing.
  now[0].second = num("89999");
  EXPECT_EQ(compare_case(c, g, now, "g.yaml").status, CaseOutcome::Status::kFailed);
}

TEST(RegressionCompare, MissingGoldenChangedDefinitionAndMissingField) {
  const Case c = sample_case();
  const CaseOutcome none =
      compare_case(c, std::nullopt, sample_golden().fields, "golden/sync/loop.yaml");
  EXPECT_EQ(none.status, CaseOutcome::Status::kFailed);
  EXPECT_TRUE(none.new_golden);
  EXPECT_EQ(failure_message(none),
            "no golden file golden/sync/loop.yaml (run 'ipusim check --update' to create it)");
  Golden g = sample_golden();
  g.definition = "kernel sync-loop --iterations 999; chip gc200";
  g.fields.pop_back();
  const CaseOutcome o = compare_case(c, g, sample_golden().fields, "g.yaml");
  EXPECT_EQ(o.status, CaseOutcome::Status::kFailed);
  ASSERT_EQ(o.problems.size(), 2u);
  EXPECT_EQ(o.problems[0],
            "the case changed since its golden was written: golden 'kernel sync-loop --iterations "
            "999; chip gc200', manifest 'kernel sync-loop --iterations 1000; chip gc200'");
  EXPECT_EQ(o.problems[1], "golden has no field ipu[0].tiles.memory.max (new value 3072.0)");
}

TEST(RegressionCompare, DeltaAndPercentText) {
  EXPECT_EQ(delta_text(num("100"), num("90")), "-10");
  EXPECT_EQ(percent_text(num("100"), num("90")), "-10.00%");
  EXPECT_EQ(percent_text(num("0"), num("5")), "n/a");
  EXPECT_EQ(percent_text(num("500000"), num("500001")), "+0.0002%");
  EXPECT_EQ(delta_text(num("0.5"), num("0.75")), "+0.25");
}

TEST(RegressionJunit, EscapesAndStructure) {
  EXPECT_EQ(xml_escape("a<b>&\"c\"'\x01\n"), "a&lt;b&gt;&amp;&quot;c&quot;&apos;\n");
  const Case c = sample_case();
  const Golden g = sample_golden();
  std::vector<std::pair<std::string, JsonNumber>> now = g.fields;
  now[0].second = num("91000");
  CaseOutcome failed = compare_case(c, g, now, "g.yaml");
  failed.seconds = 0.5;
  CaseOutcome passed = compare_case(c, g, g.fields, "g.yaml");
  passed.name = "a<b";
  CaseOutcome error;
  error.name = "broken";
  error.status = CaseOutcome::Status::kError;
  error.error = "m.yaml:3: case 'broken': 'ipusim kernel x' exited with status 2";
  error.output = "error: bad & worse\n";
  const std::string xml = junit_xml("suite", {failed, passed, error}, 1.25);
  EXPECT_EQ(
      xml,
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<testsuites name=\"ipusim check\" tests=\"3\" failures=\"1\" errors=\"1\" time=\"1.250\">\n"
      "  <testsuite name=\"suite\" tests=\"3\" failures=\"1\" errors=\"1\" skipped=\"0\" "
      "time=\"1.250\">\n"
      "    <testcase name=\"sync/loop\" classname=\"suite\" time=\"0.500\">\n"
      "      <failure type=\"regression\" message=\"total.cycles 90000 -&gt; 91000 (+1000, +1.11%; "
      "exact)\">"
      "total.cycles: old 90000 new 91000 delta +1000 (+1.11%)\n</failure>\n"
      "    </testcase>\n"
      "    <testcase name=\"a&lt;b\" classname=\"suite\" time=\"0.000\"/>\n"
      "    <testcase name=\"broken\" classname=\"suite\" time=\"0.000\">\n"
      "      <error type=\"error\" message=\"m.yaml:3: case &apos;broken&apos;: &apos;ipusim "
      "kernel x&apos; exited "
      "with status 2\">error: bad &amp; worse\n</error>\n"
      "    </testcase>\n"
      "  </testsuite>\n"
      "</testsuites>\n");
}

}  // namespace
}  // namespace ipusim::regression
