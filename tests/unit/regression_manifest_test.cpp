// SPDX-License-Identifier: Apache-2.0
// The regression suite manifest: strict parsing, file:line errors, tolerances and filters.
#include <gtest/gtest.h>

#include "ipusim/regression/manifest.hpp"
#include "ipusim/util/error.hpp"

namespace ipusim::regression {
namespace {

// Manifests parsed as if they lived in tests/regression/, so that trace paths resolve.
std::string manifest_path() { return std::string(IPUSIM_SOURCE_DIR) + "/tests/regression/m.yaml"; }

Manifest parse(const std::string& text) { return parse_manifest(text, manifest_path()); }

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const ConfigError& e) {
    std::string msg = e.what();
    const std::string prefix = manifest_path();
    if (msg.starts_with(prefix)) msg = "m.yaml" + msg.substr(prefix.size());
    return msg;
  }
  return "";
}

constexpr const char* kHead = R"(format: ipusim-suite/1
name: t
defaults:
  fields:
    total.cycles: exact
    phases.sync.cycles: 2
cases:
)";

TEST(RegressionManifest, ReadsKernelAndTraceCases) {
  const Manifest m = parse(std::string(kHead) + R"(  - name: mm/a
    kernel: matmul
    args: {m: 64, n: 32, k: 16, dtype: half, flag: }
    set: [chip.tiles=736]
    fields:
      phases.sync.cycles: 1%
      ipu[0].tiles.memory.max: 100
  - name: gather
    chip: bow
    trace: traces/gather-64t-4KiB.trace
)");
  EXPECT_EQ(m.name, "t");
  ASSERT_EQ(m.cases.size(), 2u);
  const Case& a = m.cases[0];
  EXPECT_EQ(a.line, 8);
  EXPECT_TRUE(a.is_kernel());
  EXPECT_EQ(
      a.definition(),
      "kernel matmul --m 64 --n 32 --k 16 --dtype half --flag; chip gc200; set chip.tiles=736");
  EXPECT_TRUE(a.chip_file.ends_with("/configs/chips/gc200.yaml"));
  ASSERT_EQ(a.fields.size(), 3u);
  EXPECT_EQ(a.fields[0].path, "total.cycles");
  EXPECT_EQ(a.fields[0].tolerance.kind, Tolerance::Kind::kExact);
  EXPECT_EQ(a.fields[1].tolerance.kind,
            Tolerance::Kind::kRelative);  // the case's own tolerance wins
  EXPECT_EQ(a.fields[2].path, "ipu[0].tiles.memory.max");
  EXPECT_EQ(a.fields[2].tolerance.kind, Tolerance::Kind::kAbsolute);
  const Case& g = m.cases[1];
  EXPECT_FALSE(g.is_kernel());
  EXPECT_EQ(g.definition(), "trace traces/gather-64t-4KiB.trace; chip bow");
  EXPECT_TRUE(g.trace_path.ends_with("tests/regression/traces/gather-64t-4KiB.trace"));
  EXPECT_EQ(g.fields[1].tolerance.kind, Tolerance::Kind::kAbsolute);
  EXPECT_TRUE(golden_path(m, g).ends_with("tests/regression/golden/gather.yaml"));
}

TEST(RegressionManifest, SystemCasesUseTheSystemsChipUnlessTheyNameOne) {
  const Manifest m = parse(std::string(kHead) + R"(  - name: ar
    system: pod16
    kernel: allreduce
    args: {bytes: 1024, group: 16}
  - name: ar-bow
    system: pod16
    chip: bow
    kernel: allreduce
    args: {bytes: 1024, group: 16}
)");
  ASSERT_EQ(m.cases.size(), 2u);
  EXPECT_TRUE(m.cases[0].is_system());
  EXPECT_TRUE(m.cases[0].system_file.ends_with("/configs/systems/pod16.yaml"));
  EXPECT_TRUE(m.cases[0].chip_file.ends_with("/configs/chips/gc200.yaml")) << m.cases[0].chip_file;
  EXPECT_EQ(m.cases[0].definition(), "kernel allreduce --bytes 1024 --group 16; system pod16");
  EXPECT_TRUE(m.cases[1].chip_file.ends_with("/configs/chips/bow.yaml"));
  EXPECT_EQ(m.cases[1].definition(),
            "kernel allreduce --bytes 1024 --group 16; system pod16; chip bow");
}

TEST(RegressionManifest, CompileCasesRunOnTheirRunConfigsSystem) {
  const Manifest m = parse(std::string(kHead) + R"(  - name: bert
    compile: workloads/bert-large-layer.yaml
  - name: bert-pod16
    compile: workloads/bert-large-layer.yaml
    system: pod16
    set: [run.micro_batch=2]
)");
  ASSERT_EQ(m.cases.size(), 2u);
  const Case& c = m.cases[0];
  EXPECT_TRUE(c.is_compile());
  EXPECT_TRUE(c.is_system());
  EXPECT_TRUE(c.compile_path.ends_with("tests/regression/workloads/bert-large-layer.yaml"));
  EXPECT_TRUE(c.system_file.ends_with("configs/systems/m2000.yaml")) << c.system_file;
  EXPECT_EQ(c.chip_file, "");
  EXPECT_EQ(c.definition(), "compile workloads/bert-large-layer.yaml");
  EXPECT_TRUE(m.cases[1].system_file.ends_with("/configs/systems/pod16.yaml"));
  EXPECT_EQ(m.cases[1].definition(),
            "compile workloads/bert-large-layer.yaml; system pod16; set run.micro_batch=2");
  EXPECT_TRUE(error_of(std::string(kHead) + "  - name: a\n    compile: bert-large-pod17\n")
                  .starts_with("m.yaml:9:14: compile: expected the name of a run config in "));
  EXPECT_EQ(error_of(std::string(kHead) +
                     "  - name: a\n    compile: bert-large-pod16\n    args: {m: 1}\n"),
            "m.yaml:8:5: case 'a': expected args only with kernel, found args without a kernel");
}

TEST(RegressionManifest, TheRealSuiteLoads) {
  const Manifest m = load_manifest(std::string(IPUSIM_SOURCE_DIR) + "/tests/regression/suite.yaml");
  EXPECT_EQ(m.name, "ipusim-reference");
  EXPECT_GE(m.cases.size(), 40u);
}

TEST(RegressionManifest, ErrorsNameTheLineWhatWasExpectedAndWhatWasFound) {
  const std::string h = kHead;
  EXPECT_EQ(error_of(h + "  - name: a\n    kernl: matmul\n"),
            "m.yaml:9:5: cases[0]: expected one of the keys name, description, kernel, args, "
            "trace, compile, chip, "
            "system, set, fields, found unknown key 'kernl' (did you mean 'kernel'?)");
  EXPECT_EQ(error_of(h + "  - name: a\n"),
            "m.yaml:8:5: case 'a': expected exactly one of kernel, trace or compile, found none");
  EXPECT_EQ(
      error_of(h + "  - name: a\n    kernel: matmul\n    trace: x.trace\n"),
      "m.yaml:8:5: case 'a': expected exactly one of kernel, trace or compile, found several");
  EXPECT_EQ(error_of(h + "  - name: a\n    kernel: matmul\n  - name: a\n    kernel: matmul\n"),
            "m.yaml:10:5: case 'a': expected a unique name, found a second case of that name");
  EXPECT_EQ(error_of(h + "  - name: ../a\n    kernel: matmul\n"),
            "m.yaml:8:11: cases[0].name: expected '/'-separated segments of letters, digits, '_', "
            "'.' and '-' "
            "(at most 200 characters), found \"../a\"");
  EXPECT_EQ(error_of(h + "  - name: a\n    kernel: matmul\n    fields: {total.cycles: 5 cycles}\n"),
            "m.yaml:10:28: cases[0].fields.total.cycles: expected a tolerance: exact, a "
            "non-negative amount such as "
            "100 or a percentage such as 0.5%, found \"5 cycles\"");
  EXPECT_EQ(
      error_of(h + "  - name: a\n    kernel: matmul\n    fields: {total..cycles: exact}\n"),
      "m.yaml:10:14: cases[0].fields: expected a stats.json field path such as total.cycles or "
      "ipu[0].tiles.memory.max, found 'total..cycles'");
  EXPECT_EQ(error_of(h + "  - name: a\n    kernel: matmul\n    args: {out: x.itb}\n"),
            "m.yaml:10:12: cases[0].args: expected a kernel option, found 'out' (check supplies "
            "--out and --format; "
            "use the case's chip: and set: keys)");
  EXPECT_EQ(error_of(h + "  - name: a\n    kernel: matmul\n    args: {m: [1, 2]}\n"),
            "m.yaml:10:15: cases[0].args.m: expected a value, found a list");
  EXPECT_EQ(
      error_of(h + "  - name: a\n    kernel: matmul\n    set: [chip.tiles]\n"),
      "m.yaml:10:10: set: expected KEY=VALUE such as chip.clock=1.85GHz, found \"chip.tiles\"");
  EXPECT_EQ(error_of(h + "  - name: a\n    trace: traces/nope.trace\n"),
            "m.yaml:9:12: case 'a': trace: expected a readable trace file, found no file " +
                std::string(IPUSIM_SOURCE_DIR) + "/tests/regression/traces/nope.trace");
  EXPECT_NE(error_of(h + "  - name: a\n    system: pod17\n    kernel: allreduce\n")
                .find("m.yaml:9:13: system: expected the name of a system config in "),
            std::string::npos);
  EXPECT_NE(error_of(h + "  - name: a\n    system: pod17\n    kernel: allreduce\n")
                .find("(did you mean 'pod16'?)"),
            std::string::npos);
  EXPECT_NE(error_of(h + "  - name: a\n    chip: gc201\n    kernel: matmul\n")
                .find("m.yaml:9:11: chip: expected the name of a chip config in "),
            std::string::npos);
  EXPECT_NE(error_of(h + "  - name: a\n    chip: gc201\n    kernel: matmul\n")
                .find("found \"gc201\" (did you mean 'gc200'?)"),
            std::string::npos);
  EXPECT_EQ(error_of("format: ipusim-suite/2\nname: t\ncases: []\n"),
            "m.yaml:1:9: format: expected ipusim-suite/1 (the only manifest version this build "
            "reads), found \"ipusim-suite/2\"");
  EXPECT_EQ(error_of(h + "  - kernel: matmul\n"),
            "m.yaml:8:5: cases[0]: expected a name, found none");
  EXPECT_EQ(error_of("format: ipusim-suite/1\nname: t\n"),
            "m.yaml: cases: missing required key (a list of cases)");
  EXPECT_EQ(error_of("name: t\ncases: []\n"),
            "m.yaml: format: missing required key (expected format: ipusim-suite/1)");
  EXPECT_EQ(error_of("format: ipusim-suite/1\ncases: {a: 1}\n"),
            "m.yaml:2:8: cases: expected a list of cases, found a map");
  EXPECT_EQ(error_of("format: ipusim-suite/1\ncases:\n  - name: a\n    kernel: matmul\n"),
            "m.yaml:3:5: case 'a': expected at least one compared field (defaults.fields or "
            "fields), found none");
  EXPECT_EQ(error_of("format: ipusim-suite/1\nformat: ipusim-suite/1\n"),
            "m.yaml:2:1: suite: duplicate key 'format'");
  EXPECT_EQ(error_of("format: [\n"), "m.yaml:2:1: invalid YAML: end of sequence flow not found");
}

TEST(RegressionManifest, Tolerances) {
  const JsonNumber golden = *JsonNumber::parse("1000");
  const JsonNumber up1 = *JsonNumber::parse("1001");
  const JsonNumber up6 = *JsonNumber::parse("1006");
  EXPECT_TRUE(Tolerance::parse("exact").allows(golden, golden));
  EXPECT_FALSE(Tolerance::parse("exact").allows(golden, up1));
  EXPECT_FALSE(Tolerance::parse("0").allows(golden, up1));
  EXPECT_EQ(Tolerance::parse("0%").kind, Tolerance::Kind::kExact);
  EXPECT_TRUE(Tolerance::parse("1").allows(golden, up1));
  EXPECT_FALSE(Tolerance::parse("5").allows(golden, up6));
  EXPECT_TRUE(Tolerance::parse("0.5%").allows(golden, *JsonNumber::parse("995")));
  EXPECT_FALSE(Tolerance::parse("0.5%").allows(golden, up6));
  EXPECT_TRUE(
      Tolerance::parse("0.5%").allows(*JsonNumber::parse("1000.0"), *JsonNumber::parse("1005.0")));
  for (const char* bad : {"-1", "1 %", "%", "abc", "nan", "inf", ".5", "1e999", "+2"})
    EXPECT_THROW(Tolerance::parse(bad), ParseError) << bad;
}

TEST(RegressionManifest, FiltersAreGlobs) {
  EXPECT_TRUE(matches_filter("matmul/square-512", {}));
  EXPECT_TRUE(matches_filter("matmul/square-512", {"matmul/*"}));
  EXPECT_TRUE(matches_filter("resnet50/conv1", {"matmul/*", "*conv*"}));
  EXPECT_FALSE(matches_filter("matmul/square-512", {"matmul"}));
  EXPECT_TRUE(matches_filter("a/b/c", {"a*c"}));
}

}  // namespace
}  // namespace ipusim::regression
