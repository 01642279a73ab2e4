#pragma once
// The files one command writes (--svg, --trace), staged beside their destinations and put in place together
// only when the whole command has succeeded: a run that fails late (bad input found after a picture was drawn,
// a full disk, an unwritable standard output or output device) leaves no partial file, no stale sibling and no
// directory it made.
#include <filesystem>
#include <string_view>
#include <system_error>
#include <vector>

#include "sluice/core/error.hpp"
#include "sluice/io/files.hpp"

namespace sluice::cli {

class Outputs {
public:
  Outputs() = default;
  Outputs(const Outputs&) = delete;
  Outputs& operator=(const Outputs&) = delete;
  ~Outputs() {
    staged_.clear();  // removes the temporaries, so that the directories made for them are empty again
    std::error_code ignored;
    for (auto it = created_.rbegin(); it != created_.rend(); ++it) std::filesystem::remove(*it, ignored);
  }

  // `directory` and its missing parents; the ones this run made are removed if the run fails.
  void directory(const std::filesystem::path& directory) {
    std::vector<std::filesystem::path> missing;
    std::error_code error;
    for (std::filesystem::path path = directory; !path.empty() && !std::filesystem::exists(path, error);
         path = path.parent_path()) {
      missing.push_back(path);
      if (path == path.parent_path()) break;
    }
    for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
      std::filesystem::create_directory(*it, error);
      sluice::require(!error, directory.string(), ": cannot create directory (", error.message(), ")");
      created_.push_back(*it);
    }
    sluice::require(std::filesystem::is_directory(directory, error), directory.string(), ": not a directory");
  }

  void write(const std::filesystem::path& path, std::string_view text) { staged_.emplace_back(path, text); }

  // Puts every staged file in place; after this the run's outputs stay. Streams (a device, a FIFO, standard
  // output) are written first: one that fails leaves every regular file as it was, its temporary removed.
  void commit() {
    for (io::StagedFile& file : staged_)
      if (!file.renames()) file.commit();
    for (io::StagedFile& file : staged_)
      if (file.renames()) file.commit();
    staged_.clear();
    created_.clear();
  }

private:
  std::vector<io::StagedFile> staged_;
  std::vector<std::filesystem::path> created_;
};

}  // namespace sluice::cli
