#pragma once

// The worker threads: one io_context per thread (thread-per-core, STYLE.md "Async model").
// Connections, device rings and buffer pools attach to a worker's context and stay there.

#include <memory>
#include <string>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace hots3 {

class WorkerPool {
 public:
  // `threads` workers; 0 means one per core.
  explicit WorkerPool(unsigned threads);
  ~WorkerPool();  // stop() if still running
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  WorkerPool(WorkerPool&&) = delete;
  WorkerPool& operator=(WorkerPool&&) = delete;

  [[nodiscard]] unsigned size() const noexcept;
  [[nodiscard]] std::vector<boost::asio::io_context*> contexts() const;

  // Starts one thread per context; they run until stop(). An exception escaping a handler is
  // logged and the worker goes on.
  void start();

  // Stops every context and joins the threads. Work still queued is dropped, so stop the
  // users of the contexts (HTTP server, store) first.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Blocks the calling thread until SIGINT or SIGTERM arrives; returns the signal number.
// SIGPIPE is ignored from the first call on.
int wait_for_stop_signal();

// Writes `content` to `path` through a temporary file and a rename, so a reader sees the old
// file or the whole new one. Throws std::runtime_error.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace hots3
