// SPDX-License-Identifier: Apache-2.0
// flatten_stats: the field paths 'ipusim compare' matches two runs' stats.json by.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "ipusim/report/run_dir.hpp"
#include "ipusim/util/json_reader.hpp"

namespace ipusim::report {
namespace {

std::map<std::string, double> fields(const std::string& json) {
  std::map<std::string, double> out;
  for (const auto& f : flatten_stats(parse_json(json, "stats.json"))) out[f.path] = f.value;
  return out;
}

// Issue 27: layer rows were matched by their position, so a re-plan that reordered them read
// as new layers ("ipu[0].layers[10].executions 0 -> 618 new"). Items are keyed by what they
// are: a layer row by its layer and pass, a worst tile by its tile, a link by its name.
TEST(StatsFields, ArrayItemsAreKeyedByWhatTheyAreNotWhereTheyStand) {
  const std::string a =
      R"({"ipu": [{"layers": [{"layer": "conv1", "pass": "forward", "executions": 2},
                              {"layer": "fc", "pass": "data_gradient", "executions": 3}],
                   "worst_tiles": [{"tile": 7, "value": 100}, {"tile": 3, "value": 90}]}],
          "links": [{"name": "rail:ipu0->ipu2", "bytes": 5}]})";
  const std::string b =
      R"({"ipu": [{"layers": [{"layer": "fc", "pass": "data_gradient", "executions": 3},
                              {"layer": "conv1", "pass": "forward", "executions": 2}],
                   "worst_tiles": [{"tile": 3, "value": 90}, {"tile": 7, "value": 100}]}],
          "links": [{"name": "rail:ipu0->ipu2", "bytes": 5}]})";
  const auto fa = fields(a), fb = fields(b);
  EXPECT_EQ(fa, fb);
  EXPECT_EQ(fa.at("ipu[0].layers[conv1 forward].executions"), 2);
  EXPECT_EQ(fa.at("ipu[0].layers[fc data_gradient].executions"), 3);
  EXPECT_EQ(fa.at("ipu[0].worst_tiles[tile 3].value"), 90);
  EXPECT_EQ(fa.at("links[rail:ipu0->ipu2].bytes"), 5);
  // The IPUs themselves stay in their order (index = position).
  EXPECT_EQ(fields(R"({"ipu": [{"cycles": 1}, {"cycles": 2}]})").at("ipu[1].cycles"), 2);
}

}  // namespace
}  // namespace ipusim::report
