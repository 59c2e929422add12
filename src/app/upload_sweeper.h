#pragma once

// Removal of abandoned multipart uploads ([multipart] abort_after): a checkpoint writer that
// dies between CreateMultipartUpload and Complete leaves parts behind, gigabytes of them, that
// nobody will ever complete or abort. S3 keeps them until a lifecycle rule removes them; a hot
// tier on a bounded device aborts them after a configured age, and their space is free at once.

#include <chrono>
#include <memory>

namespace boost::asio {
class io_context;
}

namespace hots3::storage {
class ObjectStore;
}

namespace hots3::app {

class UploadSweeper {
 public:
  // Every `interval`, aborts the uploads created more than `abort_after` ago. Runs on `worker`,
  // one of the store's workers. REQUIRES: abort_after and interval > 0; `store` and `worker`
  // outlive the sweeper.
  UploadSweeper(storage::ObjectStore& store, boost::asio::io_context& worker,
                std::chrono::milliseconds abort_after, std::chrono::milliseconds interval);
  ~UploadSweeper();
  UploadSweeper(const UploadSweeper&) = delete;
  UploadSweeper& operator=(const UploadSweeper&) = delete;
  UploadSweeper(UploadSweeper&&) = delete;
  UploadSweeper& operator=(UploadSweeper&&) = delete;

  void start();
  // Ends the loop and waits until it has ended (a sweep under way completes first). Call while
  // the worker runs and before the store shuts down. Blocking; idempotent.
  void stop();

  struct State;  // shared with the loop (upload_sweeper.cc)

 private:
  std::shared_ptr<State> state_;
  bool running_ = false;
};

}  // namespace hots3::app
