#include "storage/store_lock.h"

#include "hots3/common/text.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <stdexcept>
#include <sys/file.h>
#include <unistd.h>

namespace hots3::storage::detail {

StoreLock::StoreLock(const std::string& data_dir, Kind kind) {
  const std::string path = (std::filesystem::path(data_dir) / "lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw std::runtime_error("cannot open the store lock " + path + ": " + errno_text(errno));
  const int op = (kind == Kind::kExclusive ? LOCK_EX : LOCK_SH) | LOCK_NB;
  int rc = 0;
  do {
    rc = ::flock(fd_, op);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int error = errno;
    ::close(fd_);
    fd_ = -1;
    if (error == EWOULDBLOCK) {
      throw std::runtime_error(
          "the store in " + data_dir + " is in use (" + path + " is locked by " +
          (kind == Kind::kExclusive ? "a running hots3 server or `hots3 check`"
                                    : "a running hots3 server: stop it first") +
          ")");
    }
    throw std::runtime_error("cannot lock " + path + ": " + errno_text(error));
  }
}

StoreLock::~StoreLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

}  // namespace hots3::storage::detail
