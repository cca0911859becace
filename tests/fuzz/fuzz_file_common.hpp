// SPDX-License-Identifier: Apache-2.0
// A private temporary directory per fuzz process, for targets whose loader reads files
// (model files, run configs, run directories). Removed at exit.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace ipusim::fuzz {

inline const std::filesystem::path& private_dir(const char* name) {
  static const std::filesystem::path dir = [name] {
    const auto d = std::filesystem::temp_directory_path() /
                   (std::string("ipusim-fuzz-") + name + "-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    static std::string remove_at_exit = d.string();
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(remove_at_exit, ec);
    });
    return d;
  }();
  return dir;
}

inline void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

}  // namespace ipusim::fuzz
