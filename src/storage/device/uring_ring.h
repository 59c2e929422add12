#pragma once

// Private to src/storage: one io_uring per worker, bridged into the worker's io_context.
//
// The ring is an Asio service of the worker's io_context, so it lives and dies with it. Its
// completions are signalled through an eventfd (io_uring_register_eventfd) that the io_context
// waits on; the waiting handler drains every CQE and completes the operations on the worker.
// An operation goes to the kernel as soon as it is submitted, as fio's does: held back to the
// end of the event loop's turn, the reads of 32 random 4 KiB readers went in bursts and kept
// the disk's queue shorter than fio's at depth 32 (21 against 23 on average: 73% of its IOPS;
// 82% without). Only what the completions of one drain submit (resubmitted short transfers,
// queued operations, handlers that start I/O) goes in one io_uring_submit at its end.
//
// In-flight operations are capped (well below the ring size); further operations queue and are
// submitted as earlier ones complete: waiters queue, never spin. On shutdown the ring waits for
// every submitted operation to complete before anything is freed: the kernel never writes into
// memory that has been released (docs/STYLE.md, "Threads and coroutines").

#include <boost/asio/execution_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <liburing.h>

#include <cstddef>
#include <deque>
#include <optional>
#include <span>

namespace boost::asio {
class io_context;
}

namespace hots3::storage::detail {

class UringRing final : public boost::asio::execution_context::service {
 public:
  // One operation; owned by whoever submitted it until complete() or destroy() is called.
  class Op {
   public:
    virtual ~Op() = default;
    Op() = default;
    Op(const Op&) = delete;
    Op& operator=(const Op&) = delete;
    Op(Op&&) = delete;
    Op& operator=(Op&&) = delete;

    // Fills `sqe` for the (remaining part of the) operation. Called once per (re)submission.
    virtual void prepare(io_uring_sqe* sqe, const UringRing& ring) = 0;
    // The CQE result; returns true when the operation is finished (it has then completed its
    // handler and deleted itself) and false to be submitted again (short transfer, -EAGAIN).
    virtual bool complete(int result) = 0;
    // Shutdown: drop the operation without calling its handler.
    virtual void destroy() noexcept = 0;
  };

  using key_type = UringRing;
  static boost::asio::execution_context::id id;  // NOLINT: Asio's service identification

  // Throws std::system_error when io_uring_setup is refused.
  UringRing(boost::asio::execution_context& context, unsigned entries, unsigned inflight_max);
  explicit UringRing(boost::asio::execution_context& context);
  ~UringRing() override;
  UringRing(const UringRing&) = delete;
  UringRing& operator=(const UringRing&) = delete;
  UringRing(UringRing&&) = delete;
  UringRing& operator=(UringRing&&) = delete;

  // The ring of the io_context the calling thread is running, creating it on first use.
  // REQUIRES: the caller runs on a worker (an io_context thread).
  static UringRing& of(boost::asio::io_context& context);

  void shutdown() override;

  // Queues `op` for submission (now, or when in-flight operations drop below the cap).
  void submit(Op* op);

  // Registers `region` as fixed buffer 0; later reads and writes inside it use the *_FIXED
  // opcodes. Returns false (and leaves the ring usable) when the kernel refuses, e.g. over
  // RLIMIT_MEMLOCK.
  bool register_region(std::span<std::byte> region);
  // The fixed buffer index for [address, address + length), or -1.
  [[nodiscard]] int fixed_index(const void* address, std::size_t length) const noexcept;

  [[nodiscard]] unsigned inflight() const noexcept { return inflight_; }
  // SQEs prepared but not yet handed to the kernel.
  [[nodiscard]] unsigned unsubmitted() const noexcept { return io_uring_sq_ready(&ring_); }

  // Tests only: every ring passes each completion's result through `fault` before its operation
  // sees it, to inject -EAGAIN, short transfers and end-of-device. nullptr (the default): off.
  using CompletionFault = int (*)(int result);
  static void inject_completion_fault(CompletionFault fault) noexcept;

 private:
  void start_submitting(Op* op, io_uring_sqe* sqe);
  void schedule_submit();
  void submit_now();
  void arm();
  void on_completions();

  boost::asio::io_context& context_;
  io_uring ring_{};
  int event_fd_ = -1;
  std::optional<boost::asio::posix::stream_descriptor> event_;
  bool armed_ = false;
  bool submit_scheduled_ = false;  // a retry of a refused io_uring_submit is posted
  bool completing_ = false;        // draining the CQ: submissions wait for the drain to end
  bool shut_down_ = false;
  unsigned inflight_ = 0;
  unsigned inflight_max_;
  std::deque<Op*> waiting_;
  std::byte* region_ = nullptr;
  std::size_t region_bytes_ = 0;
};

}  // namespace hots3::storage::detail
