#include "storage/device/uring_ring.h"

#include "hots3/common/assert.h"
#include "hots3/common/logging.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <array>
#include <atomic>
#include <cerrno>
#include <sys/eventfd.h>
#include <system_error>
#include <unistd.h>

namespace hots3::storage::detail {

namespace asio = boost::asio;

asio::execution_context::id UringRing::id;

namespace {
constexpr unsigned kDefaultEntries = 256;
constexpr unsigned kDefaultInflightMax = 128;
}  // namespace

UringRing::UringRing(asio::execution_context& context)
    : UringRing(context, kDefaultEntries, kDefaultInflightMax) {}

UringRing::UringRing(asio::execution_context& context, unsigned entries, unsigned inflight_max)
    : service(context),
      context_(static_cast<asio::io_context&>(context)),
      inflight_max_(inflight_max) {
  H3_ASSERT(inflight_max_ > 0 && inflight_max_ <= entries);
  // COOP_TASKRUN: a completion does not interrupt a running worker with an IPI to post its CQE;
  // the kernel posts it the next time the worker enters it (epoll_wait, io_uring_enter), which
  // it does before it could look at the CQE anyway. A worker asleep in epoll_wait is woken as
  // before. Kernels before 5.19 refuse the flag.
  io_uring_params params{};
  params.flags = IORING_SETUP_CLAMP | IORING_SETUP_COOP_TASKRUN;
  int rc = io_uring_queue_init_params(entries, &ring_, &params);
  if (rc == -EINVAL) {
    params = io_uring_params{};
    params.flags = IORING_SETUP_CLAMP;
    rc = io_uring_queue_init_params(entries, &ring_, &params);
  }
  if (rc < 0) throw std::system_error(-rc, std::generic_category(), "io_uring_setup");
  event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (event_fd_ < 0 || io_uring_register_eventfd(&ring_, event_fd_) < 0) {
    const int error = errno;
    if (event_fd_ >= 0) ::close(event_fd_);
    io_uring_queue_exit(&ring_);
    throw std::system_error(error, std::generic_category(), "io_uring eventfd");
  }
  event_.emplace(context_, event_fd_);  // owns the descriptor from here on
}

UringRing::~UringRing() {
  if (!shut_down_) shutdown();
}

UringRing& UringRing::of(asio::io_context& context) {
  // Asio's registry (one uncontended mutex): no thread-local cache, since a new io_context can
  // reuse a destroyed one's address.
  return asio::use_service<UringRing>(context);
}

bool UringRing::register_region(std::span<std::byte> region) {
  iovec iov{region.data(), region.size()};
  const int rc = io_uring_register_buffers(&ring_, &iov, 1);
  if (rc < 0) {
    log::info("io_uring: buffers not registered ({}); I/O works without fixed buffers",
              std::generic_category().message(-rc));
    return false;
  }
  region_ = region.data();
  region_bytes_ = region.size();
  return true;
}

int UringRing::fixed_index(const void* address, std::size_t length) const noexcept {
  const auto* p = static_cast<const std::byte*>(address);
  if (region_ == nullptr || p < region_ || p + length > region_ + region_bytes_) return -1;
  return 0;
}

void UringRing::submit(Op* op) {
  H3_ASSERT(!shut_down_, "I/O submitted after the ring shut down");
  if (inflight_ >= inflight_max_) {
    waiting_.push_back(op);
    return;
  }
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  H3_ASSERT(sqe != nullptr, "SQ full below the in-flight cap");
  start_submitting(op, sqe);
}

void UringRing::start_submitting(Op* op, io_uring_sqe* sqe) {
  op->prepare(sqe, *this);
  io_uring_sqe_set_data(sqe, op);
  ++inflight_;
  if (!completing_) submit_now();  // else on_completions submits them together at its end
  arm();
}

void UringRing::schedule_submit() {
  if (submit_scheduled_) return;
  submit_scheduled_ = true;
  asio::post(context_, [this] {
    submit_scheduled_ = false;
    submit_now();
  });
}

void UringRing::submit_now() {
  if (shut_down_) return;
  for (;;) {
    const int rc = io_uring_submit(&ring_);
    if (rc >= 0) return;
    if (rc == -EINTR) continue;
    if (rc == -EAGAIN || rc == -EBUSY) {
      // The kernel is short of resources or the CQ is full: try again on the next turn,
      // after completions have been reaped.
      schedule_submit();
      return;
    }
    H3_UNREACHABLE("io_uring_submit failed");
  }
}

void UringRing::arm() {
  if (armed_ || inflight_ == 0) return;
  armed_ = true;
  // Armed only while something is in flight, so an io_context with no I/O pending can run out
  // of work and return (tests rely on that).
  event_->async_wait(asio::posix::stream_descriptor::wait_read,
                     [this](const boost::system::error_code& ec) {
                       armed_ = false;
                       if (ec || shut_down_) return;  // shutdown drains synchronously instead
                       on_completions();
                     });
}

namespace {
std::atomic<UringRing::CompletionFault> completion_fault{nullptr};
}  // namespace

void UringRing::inject_completion_fault(CompletionFault fault) noexcept {
  completion_fault.store(fault);
}

void UringRing::on_completions() {
  std::uint64_t counter = 0;
  // Resets the eventfd; a CQE posted after this read signals it again, so none is missed.
  [[maybe_unused]] const auto n = ::read(event_fd_, &counter, sizeof counter);
  std::array<io_uring_cqe*, 64> cqes{};
  // What the completions submit goes to the kernel in one io_uring_submit when the drain ends,
  // however it ends (a handler that throws leaves the worker's loop running).
  struct Drain {
    UringRing& ring;
    explicit Drain(UringRing& r) : ring(r) { ring.completing_ = true; }
    ~Drain() {
      ring.completing_ = false;
      if (ring.unsubmitted() > 0) ring.submit_now();
    }
    Drain(const Drain&) = delete;
    Drain& operator=(const Drain&) = delete;
    Drain(Drain&&) = delete;
    Drain& operator=(Drain&&) = delete;
  } drain(*this);
  for (;;) {
    const unsigned count = io_uring_peek_batch_cqe(&ring_, cqes.data(), cqes.size());
    if (count == 0) break;
    // Copy out before advancing: completing an operation may submit new ones.
    std::array<std::pair<Op*, int>, 64> done{};
    const CompletionFault fault = completion_fault.load(std::memory_order_relaxed);
    for (unsigned i = 0; i < count; ++i) {
      done[i] = {static_cast<Op*>(io_uring_cqe_get_data(cqes[i])),
                 fault ? fault(cqes[i]->res) : cqes[i]->res};
    }
    io_uring_cq_advance(&ring_, count);
    inflight_ -= count;
    for (unsigned i = 0; i < count; ++i) {
      auto [op, result] = done[i];
      if (!op->complete(result)) {
        submit(op);  // short transfer or -EAGAIN: the rest goes again
      }
    }
  }
  while (!waiting_.empty() && inflight_ < inflight_max_) {
    Op* op = waiting_.front();
    waiting_.pop_front();
    submit(op);
  }
  arm();
}

void UringRing::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // Submit what was prepared, then wait for every operation the kernel has: their buffers may
  // be freed only after that.
  io_uring_submit(&ring_);
  while (inflight_ > 0) {
    io_uring_cqe* cqe = nullptr;
    const int rc = io_uring_wait_cqe(&ring_, &cqe);
    if (rc == -EINTR) continue;
    H3_ASSERT(rc == 0, "io_uring_wait_cqe failed during shutdown");
    auto* op = static_cast<Op*>(io_uring_cqe_get_data(cqe));
    io_uring_cqe_seen(&ring_, cqe);
    --inflight_;
    op->destroy();
  }
  for (Op* op : waiting_) op->destroy();
  waiting_.clear();
  boost::system::error_code ignored;  // closing our own eventfd
  if (event_) event_->close(ignored);
  event_.reset();
  io_uring_queue_exit(&ring_);
}

}  // namespace hots3::storage::detail
