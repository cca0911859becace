// SPDX-License-Identifier: Apache-2.0
// ipusim check: the reference suite passes; one cycle more per sync fails exactly the cases
// with syncs, each by its number of syncs; the JUnit file is well-formed XML with one
// <testcase> per case; --update rewrites goldens and prints the diff; bad input is reported
// with file and line.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <vector>

#include "cli_harness.hpp"

namespace ipusim::testing {
namespace {

namespace fs = std::filesystem;

std::string suite_dir() { return source_dir() + "/tests/regression"; }
std::string suite() { return suite_dir() + "/suite.yaml"; }

// ---------------------------------------------------------------------------------------------
// A small XML well-formedness checker: one root element, properly nested and closed tags,
// quoted and unique attributes, only the predefined or numeric entities, no stray '<' or '&'.

struct XmlElement {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::vector<XmlElement> children;
  std::string text;
  std::vector<const XmlElement*> all(const std::string& tag) const {
    std::vector<const XmlElement*> out;
    for (const auto& c : children)
      if (c.name == tag) out.push_back(&c);
    return out;
  }
};

class XmlParser {
 public:
  explicit XmlParser(std::string s) : s_(std::move(s)) {}

  XmlElement document() {
    if (s_.starts_with("<?xml")) {
      const auto end = s_.find("?>");
      if (end == std::string::npos) fail("unterminated XML declaration");
      pos_ = end + 2;
    }
    skip_space();
    XmlElement root = element();
    skip_space();
    if (pos_ != s_.size()) fail("content after the root element");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("XML offset " + std::to_string(pos_) + ": " + what);
  }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  static bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
           c == ':';
  }
  std::string name() {
    const auto start = pos_;
    while (pos_ < s_.size() && name_char(s_[pos_])) ++pos_;
    if (pos_ == start) fail("expected a name");
    return s_.substr(start, pos_ - start);
  }
  // Decodes character data up to `stop`; rejects '<' and bad entities.
  std::string chars(char stop) {
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != stop) {
      const char c = s_[pos_];
      if (c == '<') fail("'<' in character data");
      if (c != '&') {
        out += c;
        ++pos_;
        continue;
      }
      const auto semi = s_.find(';', pos_);
      if (semi == std::string::npos) fail("unterminated entity");
      const std::string ent = s_.substr(pos_ + 1, semi - pos_ - 1);
      static const std::map<std::string, char> known{
          {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
      if (known.count(ent))
        out += known.at(ent);
      else if (std::regex_match(ent, std::regex("#[0-9]+|#x[0-9a-fA-F]+")))
        out += '?';
      else
        fail("unknown entity &" + ent + ";");
      pos_ = semi + 1;
    }
    return out;
  }
  XmlElement element() {
    if (s_.compare(pos_, 1, "<") != 0) fail("expected '<'");
    ++pos_;
    XmlElement e;
    e.name = name();
    while (true) {
      skip_space();
      if (pos_ >= s_.size()) fail("unterminated start tag");
      if (s_.compare(pos_, 2, "/>") == 0) {
        pos_ += 2;
        return e;
      }
      if (s_[pos_] == '>') {
        ++pos_;
        break;
      }
      const std::string attr = name();
      if (s_.compare(pos_, 2, "=\"") != 0) fail("expected =\"...\" after attribute " + attr);
      pos_ += 2;
      const std::string value = chars('"');
      if (pos_ >= s_.size()) fail("unterminated attribute value");
      ++pos_;
      if (!e.attrs.emplace(attr, value).second) fail("duplicate attribute " + attr);
    }
    while (true) {
      e.text += chars('<');
      if (pos_ >= s_.size()) fail("element <" + e.name + "> not closed");
      if (s_.compare(pos_, 2, "</") == 0) {
        pos_ += 2;
        const std::string closing = name();
        if (closing != e.name) fail("</" + closing + "> closes <" + e.name + ">");
        if (s_.compare(pos_, 1, ">") != 0) fail("expected '>'");
        ++pos_;
        return e;
      }
      e.children.push_back(element());
    }
  }
  std::string s_;
  std::size_t pos_ = 0;
};

XmlElement parse_xml(const std::string& text) { return XmlParser(text).document(); }

TEST(XmlChecker, RejectsMalformedXml) {
  EXPECT_NO_THROW(parse_xml("<?xml version=\"1.0\"?>\n<a x=\"1\"><b/>t &amp; u</a>\n"));
  for (const char* bad : {"<a><b></a></b>", "<a>", "<a x=1/>", "<a x=\"1\" x=\"2\"/>",
                          "<a>&nbsp;</a>", "<a>x < y</a>", "<a/><b/>", "<a>&amp</a>"})
    EXPECT_THROW(parse_xml(bad), std::runtime_error) << bad;
}

// ---------------------------------------------------------------------------------------------

// The suite's case names, in manifest order.
std::vector<std::string> case_names(const std::string& manifest, const std::string& filter = "") {
  const auto r = ipusim("check --suite " + manifest + " --list" + filter);
  EXPECT_EQ(r.status, 0) << r.err;
  std::vector<std::string> out;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) out.push_back(line.substr(0, line.find("  ")));
  return out;
}

// One row of the moved-fields table: case, field -> (old, new, delta, verdict).
struct Row {
  std::string old_value, new_value, delta, verdict;
};
std::map<std::pair<std::string, std::string>, Row> moved_rows(const std::string& out) {
  std::map<std::pair<std::string, std::string>, Row> rows;
  std::istringstream in(out);
  bool in_table = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "moved fields:" || line == "changed fields:") {
      in_table = true;
      std::getline(in, line);  // header
      continue;
    }
    if (!in_table) continue;
    if (!line.starts_with("  ")) break;
    std::istringstream cols(line);
    std::string name, field, pct;
    Row r;
    cols >> name >> field >> r.old_value >> r.new_value >> r.delta >> pct;
    std::getline(cols, r.verdict);
    r.verdict.erase(0, r.verdict.find_first_not_of(' '));
    rows[{name, field}] = r;
  }
  return rows;
}

std::string last_line(const std::string& text) {
  auto end = text.find_last_not_of('\n');
  auto start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1,
                     end - (start == std::string::npos ? 0 : start + 1) + 1);
}

// The golden value of `field` for `name` in the suite folder `dir`.
long golden_value(const std::string& dir, const std::string& name, const std::string& field) {
  const std::string text = read_all(dir + "/golden/" + name + ".yaml");
  const auto pos = text.find("\n  " + field + ": ");
  if (pos == std::string::npos) return -1;
  return std::stol(text.substr(pos + field.size() + 5));
}

TEST(Check, ReferenceSuitePassesAndWritesValidJunit) {
  TempDir tmp;
  const auto names = case_names(suite());
  ASSERT_GE(names.size(), 40u);
  const auto r = ipusim("check --suite " + suite() + " --jobs 2 --junit " + tmp.file("junit.xml"));
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_EQ(last_line(r.out), "check: " + std::to_string(names.size()) + " passed, 0 failed")
      << r.out;
  EXPECT_EQ(r.out.find("moved fields"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");

  const XmlElement root = parse_xml(read_all(tmp.file("junit.xml")));
  EXPECT_EQ(root.name, "testsuites");
  ASSERT_EQ(root.all("testsuite").size(), 1u);
  const XmlElement& ts = *root.all("testsuite")[0];
  EXPECT_EQ(ts.attrs.at("name"), "ipusim-reference");
  EXPECT_EQ(ts.attrs.at("tests"), std::to_string(names.size()));
  EXPECT_EQ(ts.attrs.at("failures"), "0");
  const auto cases = ts.all("testcase");
  ASSERT_EQ(cases.size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(cases[i]->attrs.at("name"), names[i]);
    EXPECT_TRUE(cases[i]->children.empty()) << names[i];
  }
}

TEST(Check, OneMoreSyncCycleFailsExactlyTheCasesWithSyncs) {
  TempDir tmp;
  const auto names = case_names(suite());
  const auto r = ipusim("check --suite " + suite() +
                        " --jobs 2 --set chip.sync.internal_latency=91cycles --junit " +
                        tmp.file("junit.xml"));
  EXPECT_EQ(r.status, 5) << r.out << r.err;
  const auto rows = moved_rows(r.out);

  // The expected move of each case, by hand: one cycle per internal sync.
  // - sync-loop of 1000 iterations: 1000 syncs; every exchange kernel and gather trace: one
  //   sync before its exchange; the host round trip: two; reduce and elementwise: none.
  // - matmul and conv: one sync per exchange, so one, plus one per stage of the partial-sum
  //   reduction when the planner splits the input channels (1 stage below a split of 16, 2
  //   from 16, 3 from 125); their goldens record which in phases.sync.count (and 90 x that).
  // - all-reduce over G IPUs: its reduce-scatter takes G - 1 ring steps, each ending with an
  //   on-chip reduction that pays one internal sync (src/topology/link_schedule.cpp); those
  //   cycles sit in phases.collective, not phases.sync. The all-gather half has no reduction.
  // - the compiled BERT-Large layer step, a 2-stage pipeline: as a full training step below
  //   (in its fill and flush cycles the other stage's syncs are on the critical path).
  // - external syncs and IPU-Link copies do not use the on-chip sync.
  // - a full training step (*/pod16-training-step) moves phases.sync by its sync count, and its
  //   collectives' reductions and (in a pipeline) its waits at external syncs for the other
  //   stages move too: checked below, apart from the others.
  std::map<std::string, long> expected;
  std::map<std::string, std::string> phase;
  std::set<std::string> full_steps;
  const std::regex allreduce(R"(allreduce/(\d+)ipus-.*)");
  for (const auto& n : names) {
    const long syncs = golden_value(suite_dir(), n, "phases.sync.count");
    ASSERT_GE(syncs, 0) << n;
    EXPECT_EQ(golden_value(suite_dir(), n, "phases.sync.cycles"), 90 * syncs) << n;
    if (n.ends_with("/pod16-training-step") || n == "bert-large/encoder-layer-step") {
      full_steps.insert(n);
      expected[n] = syncs;  // at least; the case fails
      phase[n] = "phases.sync.cycles";
      continue;
    }
    std::smatch m;
    if (std::regex_match(n, m, allreduce)) {
      EXPECT_EQ(syncs, 0) << n;
      expected[n] = std::stol(m[1]) - 1;
      phase[n] = "phases.collective.cycles";
      continue;
    }
    expected[n] = syncs;
    phase[n] = "phases.sync.cycles";
    if (n.starts_with("exchange/all-to-all") || n.starts_with("exchange/broadcast") ||
        n.starts_with("exchange/gather")) {
      EXPECT_EQ(syncs, 1) << n;
    } else if (n.starts_with("reduce/") || n.starts_with("elementwise/") ||
               n == "exchange/link-p2p-16MiB" || n == "sync/external-16ipus-100") {
      EXPECT_EQ(syncs, 0) << n;
    } else if (n == "matmul/fc-16x1024x1024-training") {
      // Its three passes and the update (docs/codelets.md lists its steps): 10 syncs.
      EXPECT_EQ(syncs, 10) << n;
    } else if (n.starts_with("matmul/") || n.starts_with("resnet50/")) {
      EXPECT_TRUE(syncs >= 1 && syncs <= 4) << n;
    }
  }
  EXPECT_EQ(expected.at("sync/loop-1000"), 1000);
  EXPECT_EQ(expected.at("host/roundtrip-1472t-4KiB"), 2);
  EXPECT_EQ(expected.at("allreduce/64ipus-4MiB"), 63);

  EXPECT_EQ(full_steps.size(), 3u);
  for (const auto& n : full_steps) {
    const long syncs = golden_value(suite_dir(), n, "phases.sync.count");
    ASSERT_EQ(rows.count({n, "phases.sync.cycles"}), 1u) << n << "\n" << r.out;
    EXPECT_EQ(rows.at({n, "phases.sync.cycles"}).delta, "+" + std::to_string(syncs)) << n;
    // The phases add up to the total: it moves by the sum of the phases' moves.
    long phases = 0;
    for (const auto& [key, row] : rows) {
      const auto& [name, field] = key;
      if (name != n) continue;
      if (field.starts_with("phases."))
        phases += std::stol(row.new_value) - std::stol(row.old_value);
      EXPECT_TRUE(field == "total.cycles" || field == "workload.throughput" ||
                  (field.starts_with("phases.") && field.ends_with(".cycles")) ||
                  std::regex_match(field, std::regex(R"(ipu\[\d+\]\.cycles)")))
          << n << " " << field << " moved\n"
          << r.out;
    }
    ASSERT_EQ(rows.count({n, "total.cycles"}), 1u) << n;
    EXPECT_EQ(std::stol(rows.at({n, "total.cycles"}).new_value) -
                  std::stol(rows.at({n, "total.cycles"}).old_value),
              phases)
        << n;
    // A step whose reported IPU never waits moves by at least its own syncs (its collectives'
    // reductions add more). In a pipeline the reported IPU's waits for the other stages absorb
    // part of its own syncs' cycles, so only a move remains certain.
    if (golden_value(suite_dir(), n, "phases.waiting.cycles") == 0)
      EXPECT_GE(phases, syncs) << n;
    else
      EXPECT_GT(phases, 0) << n;
  }

  std::size_t moved = 0;
  for (const auto& n : names) {
    if (full_steps.count(n)) {
      ++moved;
      continue;
    }
    if (expected[n] == 0) {
      EXPECT_EQ(rows.count({n, "total.cycles"}), 0u) << n;
      continue;
    }
    ++moved;
    for (const std::string& field : {std::string("total.cycles"), phase[n]}) {
      ASSERT_EQ(rows.count({n, field}), 1u) << n << " " << field << "\n" << r.out;
      const Row& row = rows.at({n, field});
      EXPECT_EQ(row.delta, "+" + std::to_string(expected[n])) << n << " " << field;
      EXPECT_EQ(std::stol(row.new_value) - std::stol(row.old_value), expected[n]) << n;
      EXPECT_EQ(row.verdict, "FAIL (exact)") << n;
    }
  }
  // Nothing else moves, except the end time of the slowest IPU of a multi-IPU run, which is
  // the total.
  const std::regex ipu_cycles(R"(ipu\[\d+\]\.cycles)");
  for (const auto& [key, row] : rows) {
    const auto& [n, field] = key;
    if (full_steps.count(n)) continue;
    EXPECT_TRUE(field == "total.cycles" || field == phase[n] || std::regex_match(field, ipu_cycles))
        << n << " " << field << " moved\n"
        << r.out;
    EXPECT_EQ(row.delta, "+" + std::to_string(expected[n])) << n << " " << field;
  }
  const auto& loop = rows.at({"sync/loop-1000", "total.cycles"});
  EXPECT_EQ(loop.old_value, "90000");
  EXPECT_EQ(loop.new_value, "91000");
  EXPECT_EQ(last_line(r.out), "check: " + std::to_string(names.size() - moved) + " passed, " +
                                  std::to_string(moved) + " failed");

  // JUnit: one <failure> inside each moved case, naming the field, old and new value.
  const XmlElement root = parse_xml(read_all(tmp.file("junit.xml")));
  const XmlElement& ts = *root.all("testsuite").at(0);
  EXPECT_EQ(ts.attrs.at("failures"), std::to_string(moved));
  for (const XmlElement* tc : ts.all("testcase")) {
    const std::string& n = tc->attrs.at("name");
    const auto failures = tc->all("failure");
    ASSERT_EQ(failures.size(), expected[n] ? 1u : 0u) << n;
    if (!expected[n]) continue;
    const std::string& msg = failures[0]->attrs.at("message");
    const long old_total = golden_value(suite_dir(), n, "total.cycles");
    const long total_move = full_steps.count(n)
                                ? std::stol(rows.at({n, "total.cycles"}).new_value) - old_total
                                : expected[n];
    EXPECT_NE(msg.find("total.cycles " + std::to_string(old_total) + " -> " +
                       std::to_string(old_total + total_move) + " (+" + std::to_string(total_move) +
                       ", "),
              std::string::npos)
        << msg;
    EXPECT_NE(failures[0]->text.find(phase[n] + ": old"), std::string::npos) << failures[0]->text;
  }
}

// Copies the suite (manifest, goldens, traces) into `dir`.
void copy_suite(const std::string& dir) { fs::copy(suite_dir(), dir, fs::copy_options::recursive); }

// Issue 27: a suite copied elsewhere failed with "/configs/systems/m2000.yaml: cannot open
// config file", a path and no word of where it came from. The compile case's run config names
// its system relative to itself (../../../configs/...), which the copy no longer has: the
// error names the suite's case, the run config and its key.
TEST(Check, ASuiteCopiedElsewhereNamesTheFileAndKeyOfAMissingConfig) {
  TempDir tmp;
  copy_suite(tmp.path());
  const auto r =
      ipusim("check --suite " + tmp.file("suite.yaml") + " --filter 'bert-large/encoder*'");
  EXPECT_EQ(r.status, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("error: " + tmp.file("suite.yaml") + ":"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(": case 'bert-large/encoder-layer-step': " +
                       tmp.file("workloads/bert-large-layer.yaml") +
                       ": run.system: expected a readable system config, found no file "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("(run.system is relative to the run config)"), std::string::npos);
}

TEST(Check, UpdatePrintsTheDiffAndTheNextCheckPasses) {
  TempDir tmp;
  copy_suite(tmp.path());
  const std::string m = tmp.file("suite.yaml");
  const std::string subset = " --filter 'exchange/*' --filter 'sync/*' --filter 'reduce/*'";
  const std::string set = " --set chip.sync.internal_latency=91cycles";
  const auto names = case_names(m, subset);
  ASSERT_EQ(names.size(), 11u);
  const std::string untouched = read_all(tmp.file("golden/matmul/square-512-half.yaml"));

  const auto up = ipusim("check --suite " + m + subset + set + " --update");
  EXPECT_EQ(up.status, 0) << up.out << up.err;
  const auto rows = moved_rows(up.out);
  EXPECT_EQ(rows.size(),
            2u * 7);  // 6 on-chip exchange cases + the sync loop; the rest have no on-chip sync
  EXPECT_EQ(rows.at({"sync/loop-1000", "total.cycles"}).old_value, "90000");
  EXPECT_EQ(rows.at({"sync/loop-1000", "total.cycles"}).new_value, "91000");
  EXPECT_EQ(rows.at({"sync/loop-1000", "total.cycles"}).delta, "+1000");
  EXPECT_EQ(rows.at({"sync/loop-1000", "total.cycles"}).verdict, "updated");
  EXPECT_EQ(rows.at({"exchange/gather-64t-4KiB", "total.cycles"}).delta, "+1");
  EXPECT_EQ(rows.count({"reduce/1M-by-8-half", "total.cycles"}), 0u);
  EXPECT_NE(up.out.find("update: wrote 7 golden file(s) in " + tmp.file("golden") +
                        " (7 changed, 0 new)"),
            std::string::npos)
      << up.out;
  EXPECT_EQ(last_line(up.out), "check: 11 passed, 0 failed");
  EXPECT_EQ(golden_value(tmp.path(), "sync/loop-1000", "total.cycles"), 91000);
  EXPECT_EQ(read_all(tmp.file("golden/matmul/square-512-half.yaml")), untouched);  // not selected

  // The same check now passes; the unchanged chip now fails the updated cases.
  const auto again = ipusim("check --suite " + m + subset + set);
  EXPECT_EQ(again.status, 0) << again.out;
  EXPECT_EQ(last_line(again.out), "check: 11 passed, 0 failed");
  const auto plain = ipusim("check --suite " + m + subset);
  EXPECT_EQ(plain.status, 5);
  EXPECT_EQ(last_line(plain.out), "check: 4 passed, 7 failed");
  EXPECT_EQ(moved_rows(plain.out).at({"sync/loop-1000", "total.cycles"}).delta, "-1000");

  // An update with nothing to change writes nothing.
  const auto noop = ipusim("check --suite " + m + subset + set + " --update");
  EXPECT_EQ(noop.status, 0);
  EXPECT_NE(noop.out.find("update: all 11 golden(s) already match"), std::string::npos) << noop.out;
}

TEST(Check, MissingGoldenFailsAndUpdateCreatesIt) {
  TempDir tmp;
  copy_suite(tmp.path());
  const std::string m = tmp.file("suite.yaml");
  fs::remove(tmp.file("golden/sync/loop-1000.yaml"));
  const auto r = ipusim("check --suite " + m + " --filter 'sync/*'");
  EXPECT_EQ(r.status, 5);
  EXPECT_NE(
      r.out.find("FAIL  sync/loop-1000: no golden file " + tmp.file("golden/sync/loop-1000.yaml") +
                 " (run 'ipusim check --update' to create it)"),
      std::string::npos)
      << r.out;
  const auto up = ipusim("check --suite " + m + " --filter 'sync/*' --update");
  EXPECT_EQ(up.status, 0) << up.out;
  EXPECT_NE(up.out.find("new   sync/loop-1000: " + tmp.file("golden/sync/loop-1000.yaml")),
            std::string::npos)
      << up.out;
  EXPECT_EQ(read_all(tmp.file("golden/sync/loop-1000.yaml")),
            read_all(suite_dir() + "/golden/sync/loop-1000.yaml"));
}

TEST(Check, ACaseThatCannotRunIsAnErrorAndUpdateWritesNothing) {
  TempDir tmp;
  const std::string m = tmp.file("m.yaml");
  std::ofstream(m) << "format: ipusim-suite/1\nname: broken\ndefaults:\n  fields: {total.cycles: "
                      "exact}\ncases:\n"
                      "  - name: ok\n    kernel: sync-loop\n    args: {iterations: 3}\n"
                      "  - name: typo\n    kernel: matmull\n    args: {m: 64, n: 64, k: 64}\n";
  const auto r = ipusim("check --suite " + m + " --update --junit " + tmp.file("j.xml"));
  EXPECT_EQ(r.status, 5);
  EXPECT_NE(r.err.find("check --update: wrote no goldens: 1 case(s) could not be run"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("ERROR typo: " + m + ":9: case 'typo': 'ipusim kernel matmull "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("exited with status 2: error: ipusim kernel: unknown kernel 'matmull' (did "
                       "you mean 'matmul'?)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(last_line(r.out), "check: 0 passed, 2 failed");
  EXPECT_FALSE(fs::exists(tmp.file("golden")));
  const XmlElement root = parse_xml(read_all(tmp.file("j.xml")));
  const auto cases = root.all("testsuite").at(0)->all("testcase");
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[1]->all("error").size(), 1u);
  EXPECT_NE(cases[1]->all("error")[0]->text.find("unknown kernel 'matmull'"), std::string::npos);
}

TEST(Check, BadInputIsReportedWithFileAndLine) {
  TempDir tmp;
  const std::string m = tmp.file("bad.yaml");
  std::ofstream(m)
      << "format: ipusim-suite/1\nname: bad\ndefaults:\n  fields: {total.cycles: exact}\ncases:\n"
         "  - name: a\n    kernel: sync-loop\n    args: {iterations: 3}\n    fields: "
         "{total.cycles: 1 cycle}\n";
  auto r = ipusim("check --suite " + m);
  EXPECT_EQ(r.status, 3);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "error: " + m +
                ":9:28: cases[0].fields.total.cycles: expected a tolerance: exact, a non-negative "
                "amount such as 100 or a percentage such as 0.5%, found \"1 cycle\"\n");

  std::ofstream(m)
      << "format: ipusim-suite/1\nname: bad\ndefaults:\n  fields: {total.cycles: exact}\ncases:\n"
         "  - name: a\n    kernel: sync-loop\n    set: [chip.sync.latency=1cycles]\n";
  r = ipusim("check --suite " + m);
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("error: " + m + ":6: case 'a': --set chip.sync.latency: unknown key"),
            std::string::npos)
      << r.err;

  r = ipusim("check --suite " + suite() + " --set chip.sync.internal_latenc=91cycles");
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("error: --set chip.sync.internal_latenc: unknown key (did you mean "
                       "chip.sync.internal_latency?)"),
            std::string::npos)
      << r.err;

  r = ipusim("check --suite " + tmp.file("nope.yaml"));
  EXPECT_EQ(r.status, 3);
  EXPECT_NE(r.err.find("nope.yaml: cannot open"), std::string::npos) << r.err;

  r = ipusim("check --suite " + suite() + " --filter 'nothing/*'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--filter nothing/* matches none of the"), std::string::npos) << r.err;

  r = ipusim("check");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err, "error: ipusim check: missing --suite MANIFEST (see 'ipusim check --help')\n");
}

}  // namespace
}  // namespace ipusim::testing
