// SPDX-License-Identifier: Apache-2.0
// Instruction-level tile model (docs/tile-model.md): the operation table.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "ipusim/config/chip.hpp"
#include "ipusim/tile/ops.hpp"

namespace ipusim {
namespace {

using tile::OpClass;

TEST(TileOps, TableCoversEveryClassInOrder) {
  const auto table = tile::op_table();
  EXPECT_GE(table.size(), 40u);
  for (std::size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(static_cast<std::size_t>(table[i].op), i);
    EXPECT_FALSE(table[i].source.empty()) << table[i].name;
    EXPECT_GE(table[i].turns, 1u);
  }
  // The paced AMP feed: two 64-bit loads and one 64-bit store (ipu-hardware.md §1).
  EXPECT_EQ(tile::op_info(OpClass::kLd2xSt64Pace).load_bytes, 16u);
  EXPECT_EQ(tile::op_info(OpClass::kLd2xSt64Pace).store_bytes, 8u);
}

TEST(TileConfig, ChipsGiveTheTileSectionAndOlderConfigsGetItsDefaults) {
  const std::string file = std::string(IPUSIM_SOURCE_DIR) + "/configs/chips/gc200.yaml";
  const ChipSpec c = load_chip(file).spec;
  EXPECT_EQ(c.tile_model, TileModel::kClosedForm);
  EXPECT_EQ(c.tile.issue_width, 2u);  // main + aux (ipu-hardware.md §3 rule 4)
  EXPECT_EQ(c.tile.result_latency, 6u);
  EXPECT_EQ(c.tile.store_bytes_per_cycle.value, 8.0);
  EXPECT_EQ(c.tile.supervisor_simple_cycles, 1u);
  EXPECT_EQ(c.tile.supervisor_control_cycles, 6u);
  EXPECT_EQ(c.amp.pipeline_depth, 4u);

  // The same chip with the tile keys removed, as a config written before them.
  std::ifstream in(file);
  std::stringstream old;
  for (std::string line; std::getline(in, line);) {
    bool tile_key = line.find("tile_model:") != std::string::npos ||
                    line.find("pipeline_depth:") != std::string::npos ||
                    line.rfind("  tile:", 0) == 0;
    for (const char* key :
         {"issue_width", "result_latency", "store_bytes_per_cycle", "supervisor_", "rpt_count_max"})
      tile_key = tile_key || line.find(key) != std::string::npos;
    if (!tile_key) old << line << "\n";
  }
  const std::string old_file =
      (std::filesystem::temp_directory_path() / "ipusim-tile-old-chip.yaml").string();
  std::ofstream(old_file) << old.str();
  const ChipSpec d = load_chip(old_file).spec;
  std::filesystem::remove(old_file);
  EXPECT_EQ(d.tile_model, c.tile_model);
  EXPECT_EQ(d.tile.issue_width, c.tile.issue_width);
  EXPECT_EQ(d.tile.result_latency, c.tile.result_latency);
  EXPECT_EQ(d.tile.store_bytes_per_cycle, c.tile.store_bytes_per_cycle);
  EXPECT_EQ(d.tile.supervisor_control_cycles, c.tile.supervisor_control_cycles);
  EXPECT_EQ(d.tile.rpt_count_max, c.tile.rpt_count_max);
  EXPECT_EQ(d.amp.pipeline_depth, c.amp.pipeline_depth);
}

}  // namespace
}  // namespace ipusim
