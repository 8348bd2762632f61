#include "telemetry/exporter.hpp"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>

#include "base/backoff.hpp"
#include "base/thread_name.hpp"

namespace delayd::telemetry {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

// One HTTP/1.1 connection, kept alive between POSTs; every step is asynchronous on a private
// io_context run here, so that `timeout` bounds the whole POST (a synchronous Beast call has no
// timeout).
class SpanExporter::Poster {
 public:
  explicit Poster(const ExporterOptions& options) : options_(options) {}

  // POSTs `body`; nullopt on a 2xx answer, else what went wrong. A kept-alive connection the
  // collector closed meanwhile is opened again once.
  std::optional<std::string> post(std::string body) {
    http::request<http::string_body> req{http::verb::post, options_.target, 11};
    req.set(http::field::host, options_.host + ":" + std::to_string(options_.port));
    req.set(http::field::content_type, "application/json");
    req.set(http::field::user_agent, "delayd");
    for (const auto& [name, value] : options_.headers) req.set(name, value);
    req.keep_alive(true);
    req.body() = std::move(body);
    req.prepare_payload();
    for (int round = 0; round < 2; ++round) {
      const bool reused = stream_.has_value();
      if (!reused) {
        if (auto error = connect()) return error;
      }
      beast::error_code ec;
      stream_->expires_after(options_.timeout);
      http::async_write(*stream_, req, [&](beast::error_code e, std::size_t) { ec = e; });
      run();
      beast::flat_buffer buffer;
      http::response<http::string_body> res;
      if (!ec) {
        http::async_read(*stream_, buffer, res, [&](beast::error_code e, std::size_t) { ec = e; });
        run();
      }
      if (ec) {
        stream_.reset();
        if (reused && ec != beast::error::timeout) continue;  // the idle connection was closed: once more
        return ec == beast::error::timeout ? "no answer within " + std::to_string(options_.timeout.count()) + " ms"
                                           : ec.message();
      }
      if (!res.keep_alive()) stream_.reset();
      if (res.result_int() / 100 != 2) {
        std::string text = res.body().substr(0, 200);
        return "HTTP " + std::to_string(res.result_int()) + (text.empty() ? "" : ": " + text);
      }
      return std::nullopt;
    }
    return "the connection was closed twice";
  }

 private:
  std::optional<std::string> connect() {
    tcp::resolver resolver(io_);
    beast::error_code ec;
    tcp::resolver::results_type endpoints;
    resolver.async_resolve(options_.host, std::to_string(options_.port),
                           [&](beast::error_code e, tcp::resolver::results_type r) {
                             ec = e;
                             endpoints = std::move(r);
                           });
    io_.restart();
    if (io_.run_for(options_.timeout) == 0 || !io_.stopped()) {
      resolver.cancel();
      io_.restart();
      io_.run();
      if (!ec) ec = net::error::timed_out;
    }
    if (ec) return "cannot resolve " + options_.host + ": " + ec.message();
    stream_.emplace(io_);
    stream_->expires_after(options_.timeout);
    stream_->async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
    run();
    if (ec) {
      stream_.reset();
      return "cannot connect to " + options_.host + ":" + std::to_string(options_.port) + ": " + ec.message();
    }
    return std::nullopt;
  }

  // Runs the step just started to its end (the stream's expiry bounds it).
  void run() {
    io_.restart();
    io_.run();
  }

  const ExporterOptions& options_;
  net::io_context io_;
  std::optional<beast::tcp_stream> stream_;
};

SpanExporter::SpanExporter(ExporterOptions options) : options_(std::move(options)), thread_([this] { run(); }) {}

SpanExporter::~SpanExporter() { shutdown(std::chrono::seconds(2)); }

bool SpanExporter::submit(SpanData span) {
  std::lock_guard lock(mutex_);
  if (stopping_ || queue_.size() >= options_.max_queue) {
    dropped_full_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  queue_.push_back(std::move(span));
  if (queue_.size() == options_.max_batch) wake_.notify_one();  // once per batch, not per span
  return true;
}

void SpanExporter::shutdown(std::chrono::milliseconds timeout) {
  {
    std::lock_guard lock(mutex_);
    if (!stopping_) {
      stopping_ = true;
      deadline_ = std::chrono::steady_clock::now() + timeout;
    }
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

ExporterCounters SpanExporter::counters() const {
  return {exported_.load(std::memory_order_relaxed), dropped_full_.load(std::memory_order_relaxed),
          dropped_failed_.load(std::memory_order_relaxed)};
}

void SpanExporter::run() {
  base::name_this_thread("otel-export");
  // The lowest CPU priority for this thread alone (Linux keeps a nice value per thread): spans
  // are telemetry, so under CPU pressure they wait, and drop once the queue is full, rather than
  // take the CPU the loop, Redis and Kafka need to deliver jobs on time. Best effort: a refusal
  // leaves the thread at the process's priority.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19);
  Poster poster(options_);
  base::Backoff backoff{std::chrono::seconds(1), std::chrono::seconds(30)};
  std::chrono::steady_clock::time_point not_before{};  // after a failure: no POST before this
  std::vector<SpanData> taken;  // the spans of this round; empty between rounds, keeping its capacity
  std::unique_lock lock(mutex_);
  for (;;) {
    const auto wait_until = std::max(not_before, std::chrono::steady_clock::now() + options_.schedule_delay);
    wake_.wait_until(lock, stopping_ ? std::chrono::steady_clock::now() : wait_until, [&] {
      return stopping_ || (queue_.size() >= options_.max_batch && std::chrono::steady_clock::now() >= not_before);
    });
    // At shutdown, a collector that is failing is not waited for again.
    if (stopping_ && (queue_.empty() || failing_ || std::chrono::steady_clock::now() >= deadline_)) {
      dropped_failed_.fetch_add(queue_.size(), std::memory_order_relaxed);
      queue_.clear();
      return;
    }
    if (queue_.empty() || (!stopping_ && std::chrono::steady_clock::now() < not_before)) continue;
    // Everything queued, in one swap: submit() never waits behind more than that (this thread
    // runs at the lowest priority, and must not be preempted while holding the callers' lock
    // for long).
    taken.swap(queue_);
    lock.unlock();
    bool failed = false;
    for (std::size_t at = 0; at < taken.size(); at += options_.max_batch) {
      const std::span<const SpanData> batch(taken.data() + at, std::min(options_.max_batch, taken.size() - at));
      if (failed) {  // the collector failed this round: the rest waits for no POST
        dropped_failed_.fetch_add(batch.size(), std::memory_order_relaxed);
      } else if (send(poster, batch)) {
        backoff.reset();
        not_before = {};
      } else {
        failed = true;
        not_before = std::chrono::steady_clock::now() + backoff.next();
      }
    }
    taken.clear();
    lock.lock();
  }
}

bool SpanExporter::send(Poster& poster, std::span<const SpanData> batch) {
  const std::optional<std::string> error = poster.post(encode_otlp_json(options_.resource, batch));
  if (!error) {
    exported_.fetch_add(batch.size(), std::memory_order_relaxed);
    if (failing_) spdlog::info("traces: exports to {}:{} work again", options_.host, options_.port);
    failing_ = false;
    return true;
  }
  dropped_failed_.fetch_add(batch.size(), std::memory_order_relaxed);
  if (!failing_) {
    spdlog::warn("traces: export to {}:{}{} failed: {}; spans are dropped (and counted) until it works again",
                 options_.host, options_.port, options_.target, *error);
  }
  failing_ = true;
  return false;
}

}  // namespace delayd::telemetry
