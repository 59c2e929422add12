#include "hots3/common/worker_pool.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <thread>

#include "hots3/common/assert.h"
#include "hots3/common/logging.h"

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

int wait_for_stop_signal() {
  std::signal(SIGPIPE, SIG_IGN);  // a vanished client is an error value, not a signal
  asio::io_context context(1);
  asio::signal_set signals(context, SIGINT, SIGTERM);
  int received = 0;
  signals.async_wait([&received](const boost::system::error_code& ec, int signal) {
    if (!ec) received = signal;
  });
  context.run();
  return received;
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
