#pragma once

// The worker threads: one io_context per thread (thread-per-core, docs/STYLE.md "Threads and
// coroutines"). Connections, device rings and buffer pools attach to a worker's context and stay
// there.

#include <functional>
#include <memory>
#include <string>
#include <thread>
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

// SIGINT and SIGTERM as requests to stop, and SIGHUP as one to reload, with no moment at which
// they kill the process.
//
// The constructor blocks both signals in the calling thread, and every thread started after it
// inherits that mask, so a stop signal stays pending until wait() takes it: one sent while the
// server is still starting, or the instant its port file appears, is neither lost nor does it
// run the default action (death by signal, with the catalog left open). It also ignores SIGPIPE
// (a vanished client is an error value, not a signal).
// REQUIRES: constructed before the process starts any other thread; the signals stay blocked
// for the rest of the process's life.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  StopSignals(StopSignals&&) = delete;
  StopSignals& operator=(StopSignals&&) = delete;

  // Blocks until SIGINT, SIGTERM or SIGHUP (reload) arrives, or returns at once if one is
  // pending; returns the signal number.
  int wait();

  // Calls a function on a thread of its own for every SIGINT or SIGTERM (SIGHUP is ignored
  // then) that arrives while it
  // lives (after the first, taken by wait(): "stop now, not gracefully"). The destructor stops
  // and joins the thread, so declare it after everything the function touches.
  class Watch {
   public:
    Watch(const StopSignals& signals, std::function<void(int)> on_signal);
    ~Watch();
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;
    Watch(Watch&&) = delete;
    Watch& operator=(Watch&&) = delete;

   private:
    int wake_fd_;
    std::thread thread_;
  };

 private:
  int signal_fd_;  // signalfd(2) for SIGINT, SIGTERM and SIGHUP
};

// The name of a signal for logs: "SIGTERM", "SIGINT", "SIGHUP".
const char* signal_name(int signal) noexcept;

// Writes `content` to `path` through a temporary file and a rename, so a reader sees the old
// file or the whole new one. Throws std::runtime_error.
void write_file_atomically(const std::string& path, const std::string& content);

}  // namespace hots3
