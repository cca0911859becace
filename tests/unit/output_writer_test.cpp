// SPDX-License-Identifier: Apache-2.0
// The one output writer (util/fs.hpp, issue 30 defects 1-3): temporaries are created
// exclusively and never written or renamed through a planted name; outputs that are devices or
// FIFOs are written into, never replaced; what the file system refuses is an IoError; a group
// that fails leaves the earlier group's files, stale ones included, as they were.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ipusim/util/error.hpp"
#include "ipusim/util/fs.hpp"

namespace ipusim {
namespace {

namespace fs = std::filesystem;

struct Dir {
  fs::path path;
  Dir() {
    std::string t = (fs::temp_directory_path() / "ipusim-writer-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_plain(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Names in `dir` that contain ".tmp.".
std::vector<std::string> temporaries(const Dir& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir.path))
    if (e.path().filename().string().find(".tmp.") != std::string::npos)
      found.push_back(e.path().filename().string());
  return found;
}

TEST(OutputWriter, APlantedTemporaryNameIsNeverWrittenThrough) {
  // Defect 1: the temporary was the predictable "<out>.tmp.<pid>", opened without O_EXCL, so
  // a symlink planted there sent the output into its target. Plant one at that name (and a
  // few neighbours): the output is written, the victim and the links are untouched.
  Dir d;
  write_plain(d.file("victim"), "precious\n");
  const std::string out = d.file("k.itb");
  for (const std::string& suffix :
       {std::to_string(::getpid()), std::string("0"), std::string("XXXXXX")})
    fs::create_symlink(d.file("victim"), out + ".tmp." + suffix);
  write_file_atomically(out, [](std::ostream& o) { o << "the output\n"; });
  EXPECT_EQ(read(d.file("victim")), "precious\n");
  EXPECT_FALSE(fs::is_symlink(out));
  EXPECT_EQ(read(out), "the output\n");
  EXPECT_EQ(temporaries(d).size(), 3u);  // the three planted links, and no temporary of ours
}

TEST(OutputWriter, ATemporaryReplacedWhileWrittenIsNotRenamedIntoPlace) {
  // While the output is written, its temporary is unlinked and a symlink to the victim put in
  // its place: nothing is written through the link, and the link is not renamed over the
  // output (it would make the output a symlink to the victim).
  Dir d;
  write_plain(d.file("victim"), "precious\n");
  const std::string out = d.file("k.itb");
  try {
    write_file_atomically(out, [&](std::ostream& o) {
      const auto tmps = temporaries(d);
      ASSERT_EQ(tmps.size(), 1u);
      fs::remove(d.path / tmps[0]);
      fs::create_symlink(d.file("victim"), d.path / tmps[0]);
      o << std::string(200000, 'x');  // more than the stream's buffer: written while planted
    });
    FAIL() << "expected an IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("was replaced by another file while it was written"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(read(d.file("victim")), "precious\n");
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::is_symlink(out));
}

TEST(OutputWriter, DevicesAndFifosAreWrittenIntoNeverReplaced) {
  // Defect 2: an output that was a character device or a FIFO was replaced by a regular file
  // (as root, --out /dev/null destroyed /dev/null).
  write_file_atomically("/dev/null", [](std::ostream& o) { o << "gone\n"; });
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  Dir d;
  const std::string fifo = d.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  write_file_atomically(fifo, [](std::ostream& o) { o << "through the pipe\n"; });
  char buf[64] = {};
  EXPECT_EQ(::read(reader, buf, sizeof buf), 17);
  EXPECT_EQ(std::string(buf), "through the pipe\n");
  ::close(reader);
  EXPECT_TRUE(fs::is_fifo(fifo));
  // A FIFO nobody reads is an error at once, not a wait for a reader.
  try {
    write_file_atomically(fifo, [](std::ostream& o) { o << "x"; });
    FAIL() << "expected an IoError";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()), fifo + ": cannot write: it is a FIFO and nothing reads it");
  }
  EXPECT_TRUE(fs::is_fifo(fifo));
  // A directory is refused, by name.
  try {
    write_file_atomically(d.path.string(), [](std::ostream& o) { o << "x"; });
    FAIL() << "expected an IoError";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()),
              d.path.string() + ": cannot write an output here: it is a directory");
  }
  EXPECT_TRUE(temporaries(d).empty());
}

TEST(OutputWriter, AFullDiskIsAnIoErrorAndLeavesNothing) {
  // Defect 3: a write the file system refuses exited with status 3, "bad input". /dev/full
  // refuses every write with ENOSPC, as a full disk does.
  try {
    write_file_atomically("/dev/full", [](std::ostream& o) { o << std::string(100000, 'x'); });
    FAIL() << "expected an IoError";
  } catch (const IoError& e) {
    EXPECT_EQ(std::string(e.what()), "/dev/full: write failed: No space left on device");
    EXPECT_EQ(e.exit_code(), ExitCode::kIo);
  }
}

TEST(OutputWriter, AFailedGroupLeavesTheEarlierGroupAndItsStaleFiles) {
  // Defect 3: rewriting a run directory deleted the earlier run's layers.csv and
  // supersteps.csv before the new files existed; a failure then lost them. Stale files go
  // only with a group that was written whole.
  Dir d;
  for (const std::string f : {"tiles.csv", "layers.csv", "supersteps.csv", "stats.json"})
    write_plain(d.file(f), "old " + f + "\n");
  const std::vector<std::string> stale{d.file("layers.csv"), d.file("supersteps.csv")};
  const auto group = [&](bool fail) {
    return std::vector<FileWriter>{
        {d.file("tiles.csv"), [](std::ostream& o) { o << "new tiles.csv\n"; }},
        {d.file("stats.json"), [fail](std::ostream& o) {
           if (fail) throw IoError("stats.json: write failed: No space left on device");
           o << "new stats.json\n";
         }}};
  };
  EXPECT_THROW(write_files_atomically(group(true), stale), IoError);
  for (const std::string f : {"tiles.csv", "layers.csv", "supersteps.csv", "stats.json"})
    EXPECT_EQ(read(d.file(f)), "old " + f + "\n") << f;
  EXPECT_TRUE(temporaries(d).empty());
  write_files_atomically(group(false), stale);
  EXPECT_EQ(read(d.file("tiles.csv")), "new tiles.csv\n");
  EXPECT_EQ(read(d.file("stats.json")), "new stats.json\n");
  EXPECT_FALSE(fs::exists(d.file("layers.csv")));
  EXPECT_FALSE(fs::exists(d.file("supersteps.csv")));
}

TEST(OutputWriter, AReplacedOutputKeepsTheUsualPermissions) {
  // The temporary is created 0600 (mkostemp); the output gets what a new file gets, 0666 less
  // the umask, as before.
  Dir d;
  const mode_t old = ::umask(022);
  write_file_atomically(d.file("o.txt"), [](std::ostream& o) { o << "x"; });
  ::umask(old);
  EXPECT_EQ(fs::status(d.file("o.txt")).permissions(),
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                fs::perms::others_read);
}

}  // namespace
}  // namespace ipusim
