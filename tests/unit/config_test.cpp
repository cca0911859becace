// SPDX-License-Identifier: Apache-2.0
#include "ipusim/config/config.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "ipusim/compiler/compiler.hpp"
#include "ipusim/config/chip.hpp"
#include "ipusim/config/field.hpp"
#include "ipusim/config/system.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim {
namespace {

std::string chip_path(const std::string& name) {
  return std::string(IPUSIM_SOURCE_DIR) + "/configs/chips/" + name + ".yaml";
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Loads the GC200 config text with one line replaced (by exact match) and returns the error.
std::string error_with_edit(const std::string& from, const std::string& to) {
  std::string text = read(chip_path("gc200"));
  const auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  text.replace(pos, from.size(), to);
  try {
    config::Document doc = config::parse_document(text, "edited.yaml");
    config::resolve(doc, chip_schema());
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

// A schema row bound to a member: its kind follows from the member's type, a count's range
// must fit the member, and assign_fields sets exactly the bound members.
TEST(ConfigField, KindFollowsTheMemberAndAssignSetsIt) {
  struct Spec {
    Bytes size;
    std::uint32_t n = 0;
    double share = 0;
    std::string label;
  };
  using config::field;
  const std::vector<config::Field<Spec>> fields = {
      field<Spec>("s.size", 0, 1e6, "size", "-", [](Spec& s) { return &s.size; }),
      field<Spec>("s.n", 1, 10, "count", "-", [](Spec& s) { return &s.n; }),
      field<Spec>("s.share", 0, 1, "ratio", "-", [](Spec& s) { return &s.share; }),
      field<Spec>("s.label", 0, 0, "text", "-", [](Spec& s) { return &s.label; }),
      config::unbound<Spec>({"s.other", config::ValueKind::kInclude, 0, 0, "include", "-"}),
  };
  EXPECT_EQ(fields[0].decl.kind, config::ValueKind::kBytes);
  EXPECT_EQ(fields[1].decl.kind, config::ValueKind::kCount);
  EXPECT_EQ(fields[2].decl.kind, config::ValueKind::kRatio);
  EXPECT_EQ(fields[3].decl.kind, config::ValueKind::kString);
  EXPECT_FALSE(fields[4].assign);
  // A count whose range does not fit its member is refused when the row is made.
  EXPECT_THROW(field<Spec>("s.n", 1, 1e10, "count", "-", [](Spec& s) { return &s.n; }),
               std::logic_error);

  const config::Schema schema("s", config::decls_of(fields));
  const config::Document doc = config::parse_document(
      "s:\n  size: 2KiB\n  n: 7\n  share: 0.25\n  label: abc\n  other: x.yaml\n", "s.yaml");
  Spec spec;
  config::assign_fields(fields, config::resolve(doc, schema), spec);
  EXPECT_EQ(spec.size.count, 2048u);
  EXPECT_EQ(spec.n, 7u);
  EXPECT_DOUBLE_EQ(spec.share, 0.25);
  EXPECT_EQ(spec.label, "abc");
}

TEST(ConfigChip, Gc200MatchesTheHardwareReference) {
  const ChipSpec c = load_chip(chip_path("gc200")).spec;
  EXPECT_EQ(c.name, "GC200");
  EXPECT_EQ(c.tiles, 1472u);
  EXPECT_EQ(c.tile_memory.count, 638976u);
  EXPECT_DOUBLE_EQ(c.clock.hz, 1.325e9);
  EXPECT_EQ(c.worker_contexts, 6u);
  EXPECT_EQ(c.amp.half_half.engines, 16u);
  EXPECT_DOUBLE_EQ(c.exchange.bytes_per_cycle.value, 4.0);
  EXPECT_EQ(c.sync.internal_latency.count, 90u);
  // §1: 64 MAC/cycle/tile x 2 x 1472 x 1.325 GHz = 249.66 TFLOP/s ("250 TFLOPS").
  EXPECT_NEAR(c.peak_flops(true, false), 64.0 * 2 * 1472 * 1.325e9, 1.0);
  // §1: FP32 62.5 TFLOPS = 16 MAC/cycle/tile.
  EXPECT_NEAR(c.peak_flops(false, true) / 1e12, 62.4, 0.1);
  // §5: all-to-all exchange cannot beat 4 B x 1472 x 1.325 GHz = 7.8 TB/s.
  EXPECT_NEAR(c.exchange_bandwidth() / 1e12, 7.80, 0.01);
}

TEST(ConfigChip, Gc2AndBowLoad) {
  const ChipSpec mk1 = load_chip(chip_path("gc2")).spec;
  EXPECT_EQ(mk1.tiles, 1216u);
  EXPECT_EQ(mk1.tile_memory.count, 256u * 1024);
  EXPECT_DOUBLE_EQ(mk1.clock.hz, 1.6e9);
  // §1 Mk1: FP32 31.1 TFLOPS, mixed 124.5 TFLOPS.
  EXPECT_NEAR(mk1.peak_flops(false, true) / 1e12, 31.1, 0.1);
  EXPECT_NEAR(mk1.peak_flops(true, true) / 1e12, 124.5, 0.1);
  const ChipSpec bow = load_chip(chip_path("bow")).spec;
  EXPECT_DOUBLE_EQ(bow.clock.hz, 1.85e9);
  EXPECT_EQ(bow.tiles, 1472u);
}

TEST(ConfigChip, OverrideByPath) {
  const ChipSpec c =
      load_chip(chip_path("gc200"), {"chip.clock=1.5GHz", "chip.sync.internal_latency=91cycles"})
          .spec;
  EXPECT_DOUBLE_EQ(c.clock.hz, 1.5e9);
  EXPECT_EQ(c.sync.internal_latency.count, 91u);
}

TEST(ConfigChip, OverrideOfUnknownKeySuggests) {
  try {
    load_chip(chip_path("gc200"), {"chip.clok=1.5GHz"});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "--set chip.clok: unknown key (did you mean chip.clock?)");
  }
  try {
    load_chip(chip_path("gc200"), {"chip.internal_latency=91cycles"});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean chip.sync.internal_latency?"),
              std::string::npos);
  }
  EXPECT_THROW(load_chip(chip_path("gc200"), {"chip.clock"}), ConfigError);
}

TEST(ConfigChip, OverrideWithBadValueNamesTheKey) {
  try {
    load_chip(chip_path("gc200"), {"chip.clock=fast"});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "--set: chip.clock: expected a frequency such as \"1.325GHz\", found \"fast\"");
  }
}

TEST(ConfigChip, UnknownKeyInFileNamesLineAndSuggests) {
  const std::string e = error_with_edit("  tiles: 1472", "  tilez: 1472");
  EXPECT_NE(e.find("edited.yaml:9:3: chip.tilez: unknown key (did you mean chip.tiles?)"),
            std::string::npos)
      << e;
}

TEST(ConfigChip, BadUnitNamesLineAndExpectedForm) {
  const std::string e = error_with_edit("tile_memory: 624KiB", "tile_memory: 624Kb");
  EXPECT_NE(e.find("edited.yaml:10:16: chip.tile_memory: expected a size such as \"624KiB\", "
                   "found \"624Kb\""),
            std::string::npos)
      << e;
}

TEST(ConfigChip, NegativeSizeRejected) {
  const std::string e = error_with_edit("tile_memory: 624KiB", "tile_memory: -624KiB");
  EXPECT_NE(e.find("chip.tile_memory: expected a size such as \"624KiB\" (not negative), found "
                   "\"-624KiB\""),
            std::string::npos)
      << e;
}

TEST(ConfigChip, OutOfRangeRejected) {
  const std::string e = error_with_edit("tiles: 1472", "tiles: 0");
  EXPECT_NE(e.find("chip.tiles: expected 1 to 65536, found \"0\""), std::string::npos) << e;
}

TEST(ConfigChip, MissingKeyRejected) {
  const std::string e = error_with_edit("  tiles: 1472", "");
  EXPECT_NE(e.find("edited.yaml: chip.tiles: missing required key"), std::string::npos) << e;
}

TEST(ConfigChip, YamlSyntaxErrorHasLine) {
  try {
    config::parse_document("chip:\n  clock: [1.3GHz\n", "bad.yaml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.yaml:3:1: invalid YAML"), std::string::npos)
        << e.what();
  }
}

TEST(ConfigChip, ResolvedYamlReloadsToTheSameSpec) {
  const LoadedChip a = load_chip(chip_path("gc200"), {"chip.clock=1.5GHz"});
  config::Document doc = config::parse_document(a.resolved.to_yaml(), "resolved.yaml");
  const config::Resolved again = config::resolve(doc, chip_schema());
  EXPECT_EQ(again.to_yaml(), a.resolved.to_yaml());
  EXPECT_DOUBLE_EQ(chip_from(again).clock.hz, 1.5e9);
}

TEST(ConfigChip, EveryConfigValueCarriesASourceComment) {
  // Each scalar line under chip: names its reference row in a comment.
  for (const char* name : {"gc200", "gc2", "bow"}) {
    std::istringstream in(read(chip_path(name)));
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#' || line.ends_with(":")) continue;
      EXPECT_NE(line.find('#'), std::string::npos) << name << ": " << line;
    }
  }
}

TEST(ConfigChip, ReferenceDocMatchesTheSchema) {
  const std::string doc = read(std::string(IPUSIM_SOURCE_DIR) + "/docs/config-reference.md");
  EXPECT_NE(doc.find(config::reference_markdown(system_schema())), std::string::npos)
      << "docs/config-reference.md is stale: regenerate the table with "
         "'ipusim info --config-reference'";
}

// Issue 31, item 4: the run keys have a generated reference, kept in step with the schema.
TEST(ConfigRun, ReferenceDocMatchesTheSchema) {
  const std::string doc = read(std::string(IPUSIM_SOURCE_DIR) + "/docs/run-reference.md");
  EXPECT_NE(doc.find(config::reference_markdown(compiler::run_schema())), std::string::npos)
      << "docs/run-reference.md is stale: regenerate the table with "
         "'ipusim info --run-reference'";
}

TEST(ConfigOverride, OneCheckOfTheKeyValueForm) {
  const auto o = config::parse_override("chip.clock=1.5GHz");
  ASSERT_TRUE(o);
  EXPECT_EQ(o->key, "chip.clock");
  EXPECT_EQ(o->value, "1.5GHz");
  EXPECT_EQ(config::parse_override("run.name=a=b")->value, "a=b");  // split at the first '='
  EXPECT_EQ(config::parse_override("chip.name=")->value, "");
  EXPECT_FALSE(config::parse_override("chip.tiles"));
  EXPECT_FALSE(config::parse_override("=736"));
  EXPECT_FALSE(config::parse_override(""));
  // Spaces around key and value are dropped (issue 27: "chip.clock = 1.5GHz" was an unknown
  // key "chip.clock " whose suggestion was chip.clock); spaces inside the value are kept.
  const auto spaced = config::parse_override(" chip.clock = 1.5GHz ");
  ASSERT_TRUE(spaced);
  EXPECT_EQ(spaced->key, "chip.clock");
  EXPECT_EQ(spaced->value, "1.5GHz");
  EXPECT_EQ(config::parse_override("run.name = a b")->value, "a b");
  EXPECT_FALSE(config::parse_override(" = 736"));
  EXPECT_EQ(config::override_form_error("chip.tiles"),
            "expected KEY=VALUE such as chip.clock=1.85GHz, found \"chip.tiles\"");
}

}  // namespace
}  // namespace ipusim
