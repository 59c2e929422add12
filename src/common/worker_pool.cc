#include "hots3/common/worker_pool.h"

#include "hots3/common/assert.h"
#include "hots3/common/logging.h"
#include "hots3/common/text.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <poll.h>
#include <pthread.h>
#include <span>
#include <stdexcept>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <thread>
#include <unistd.h>

namespace hots3 {

namespace asio = boost::asio;

struct WorkerPool::Impl {
  using Guard = asio::executor_work_guard<asio::io_context::executor_type>;
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::vector<Guard> guards;
  std::vector<std::thread> threads;
};

WorkerPool::WorkerPool(unsigned threads) : impl_(std::make_unique<Impl>()) {
  if (threads == 0) threads = std::max(1U, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < threads; ++i) {
    // Concurrency hint 1: each context is run by exactly one thread, so Asio can skip locking.
    impl_->contexts.push_back(std::make_unique<asio::io_context>(1));
  }
}

WorkerPool::~WorkerPool() { stop(); }

unsigned WorkerPool::size() const noexcept { return static_cast<unsigned>(impl_->contexts.size()); }

std::vector<asio::io_context*> WorkerPool::contexts() const {
  std::vector<asio::io_context*> result;
  for (const auto& c : impl_->contexts) result.push_back(c.get());
  return result;
}

void WorkerPool::start() {
  H3_ASSERT(impl_->threads.empty(), "WorkerPool started twice");
  for (std::size_t i = 0; i < impl_->contexts.size(); ++i) {
    asio::io_context& context = *impl_->contexts[i];
    impl_->guards.push_back(asio::make_work_guard(context));
    impl_->threads.emplace_back([&context, i] {
      const std::string name = "h3-worker-" + std::to_string(i);
      pthread_setname_np(pthread_self(), name.c_str());
      for (;;) {
        try {
          context.run();
          return;
        } catch (const std::exception& e) {
          log::error("worker {}: uncaught exception: {}", i, e.what());
        }
      }
    });
  }
}

void WorkerPool::stop() {
  impl_->guards.clear();
  for (auto& context : impl_->contexts) context->stop();
  for (auto& thread : impl_->threads) thread.join();
  impl_->threads.clear();
}

StopSignals::StopSignals() {
  std::signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  const int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr);
  H3_ASSERT(rc == 0, "pthread_sigmask failed");
  // Non-blocking: wait() and the Watch poll first, so a signal is taken by whoever reads it and
  // the other finds nothing instead of blocking.
  signal_fd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd_ < 0) throw std::runtime_error(std::string("signalfd: ") + errno_text(errno));
}

StopSignals::~StopSignals() { ::close(signal_fd_); }

namespace {

// Takes one pending stop signal from the signalfd; 0 if none is pending.
int take_signal(int fd) {
  signalfd_siginfo info{};
  for (;;) {
    const ssize_t n = ::read(fd, &info, sizeof info);
    if (n == static_cast<ssize_t>(sizeof info)) return static_cast<int>(info.ssi_signo);
    H3_ASSERT(n < 0 && (errno == EINTR || errno == EAGAIN), "signalfd read failed");
    if (errno == EAGAIN) return 0;
  }
}

// Waits until one of `fds` is readable (EINTR is retried).
void wait_readable(std::span<pollfd> fds) {
  while (::poll(fds.data(), fds.size(), -1) < 0) H3_ASSERT(errno == EINTR, "poll failed");
}

}  // namespace

int StopSignals::wait() {
  for (;;) {
    pollfd fd{signal_fd_, POLLIN, 0};
    wait_readable(std::span(&fd, 1));
    if (const int signal = take_signal(signal_fd_); signal != 0) return signal;
  }
}

StopSignals::Watch::Watch(const StopSignals& signals, std::function<void(int)> on_signal)
    : wake_fd_(::eventfd(0, EFD_CLOEXEC)) {
  if (wake_fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + errno_text(errno));
  thread_ = std::thread(
      [signal_fd = signals.signal_fd_, wake_fd = wake_fd_, on_signal = std::move(on_signal)] {
        pthread_setname_np(pthread_self(), "h3-signals");
        for (;;) {
          std::array<pollfd, 2> fds{{{signal_fd, POLLIN, 0}, {wake_fd, POLLIN, 0}}};
          wait_readable(fds);
          if (fds[1].revents != 0) return;  // the Watch is being destroyed
          // A reload asked for while stopping has nothing left to reload.
          if (const int signal = take_signal(signal_fd); signal != 0 && signal != SIGHUP) {
            on_signal(signal);
          }
        }
      });
}

StopSignals::Watch::~Watch() {
  const std::uint64_t one = 1;
  // Adding 1 to an eventfd counter far from its maximum cannot fail.
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
  thread_.join();
  ::close(wake_fd_);
}

const char* signal_name(int signal) noexcept {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "signal";
  }
}

void write_file_atomically(const std::string& path, const std::string& content) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    out << content;
    if (!out.flush()) throw std::runtime_error("cannot write " + temp);
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) throw std::runtime_error("cannot rename " + temp + " to " + path + ": " + ec.message());
}

}  // namespace hots3
