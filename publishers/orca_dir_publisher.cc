#include "publishers/orca_dir_publisher.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace headroom::publishers {

Result<void> make_directories(const std::string& path, mode_t mode) {
  if (path.empty()) return logic_error("empty directory path");
  std::string partial;
  std::size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    partial = path.substr(0, pos);
    if (partial.empty() || partial == "/") continue;
    if (::mkdir(partial.c_str(), mode) != 0 && errno != EEXIST)
      return system_error(errno, "cannot create directory " + partial);
    struct stat st{};
    if (::stat(partial.c_str(), &st) != 0) return system_error(errno, "cannot create directory " + partial);
    if (!S_ISDIR(st.st_mode)) return logic_error("cannot create directory " + path + ": " + partial + " is not a directory");
  }
  return {};
}

Result<OrcaDirPublisher> OrcaDirPublisher::open(const std::string& dir, orca::WriterOptions options) {
  if (auto made = make_directories(dir); !made) return made.error();
  // access(2) also reports a read-only mount (EROFS) to root.
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return system_error(errno, "cannot write report files into " + dir);
  auto writer = orca::ReportFileWriter::open(dir, options);
  if (!writer) return writer.error();
  writer->remove_stale_temporaries();
  return OrcaDirPublisher(std::move(writer.value()), options);
}

Result<void> OrcaDirPublisher::publish(std::string_view scope, const orca::Report& report) {
  name_.assign(scope);
  name_ += orca::kReportSuffix;
  auto r = writer_.write(name_, report);
  if (!r && r.error().code == ENOENT) {
    // Someone removed the directory: make it again and retry once.
    if (auto made = make_directories(writer_.dir()); !made) return made.error();
    r = writer_.write(name_, report);
  }
  return r;
}

Result<void> OrcaDirPublisher::remove(std::string_view scope) {
  const std::string path = writer_.dir() + "/" + std::string(scope) + std::string(orca::kReportSuffix);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return system_error(errno, "cannot remove " + path);
  return {};
}

}  // namespace headroom::publishers
