#include "broker/handover.hpp"

#include <spdlog/spdlog.h>

#include <exception>
#include <utility>

namespace delayd::broker {

void Handover::push(Op op) {
  std::lock_guard lock(mutex_);
  ops_.push_back(std::move(op));
}

// The owner is woken once per flush, not per op: woken at each op, it preempted the ingest
// thread on two cores and took the queue one op at a time (a context switch per job accepted).
void Handover::flush() noexcept {
  bool any = false;
  {
    std::lock_guard lock(mutex_);
    any = !ops_.empty();
  }
  if (any) queued_.notify_one();
}

void Handover::offer(const std::string& shard, const std::string& job_id, std::int64_t deliver_at) {
  push(Op{Op::Kind::offer, shard, job_id, deliver_at, {}, 0});
}

void Handover::cancel(const std::string& shard, const std::string& job_id) {
  push(Op{Op::Kind::cancel, shard, job_id, 0, {}, 0});
}

void Handover::move(const std::string& shard, const std::string& job_id, std::int64_t at) {
  push(Op{Op::Kind::move, shard, job_id, at, {}, 0});
}

void Handover::relay(Rebalance what, const std::vector<connectors::TopicPartition>& partitions) {
  std::unique_lock lock(mutex_);
  if (closed_) return;
  const std::uint64_t ticket = ++next_ticket_;
  Op::Kind kind = Op::Kind::lost;
  switch (what) {
    case Rebalance::assigned:
      kind = Op::Kind::assigned;
      break;
    case Rebalance::revoked:
      kind = Op::Kind::revoked;
      break;
    case Rebalance::lost:
      kind = Op::Kind::lost;
      break;
    case Rebalance::left:
      kind = Op::Kind::left;
      break;
  }
  ops_.push_back(Op{kind, {}, {}, 0, partitions, ticket});
  queued_.notify_one();
  served_.wait(lock, [&] { return closed_ || served_ticket_ >= ticket; });
}

std::size_t Handover::serve(Scheduler& scheduler, const Listener& listener) {
  std::vector<Op> ops;
  {
    std::lock_guard lock(mutex_);
    ops.swap(ops_);
  }
  for (Op& op : ops) {
    switch (op.kind) {
      case Op::Kind::offer:
        scheduler.offer(op.shard, op.job_id, op.at);
        break;
      case Op::Kind::cancel:
        scheduler.cancel(op.shard, op.job_id);
        break;
      case Op::Kind::move:
        scheduler.move(op.shard, op.job_id, op.at);
        break;
      case Op::Kind::assigned:
      case Op::Kind::revoked:
      case Op::Kind::lost:
      case Op::Kind::left: {
        try {
          const auto& g = listener.group;
          if (op.kind == Op::Kind::left && listener.left) {
            listener.left(op.partitions);
          } else if (op.kind == Op::Kind::assigned) {
            if (g.assigned) g.assigned(op.partitions);
          } else if (op.kind != Op::Kind::revoked && g.lost) {
            g.lost(op.partitions);
          } else if (g.revoked) {
            g.revoked(op.partitions);
          }
        } catch (const std::exception& e) {
          spdlog::error("handling a rebalance: {}", e.what());
        }
        {
          std::lock_guard lock(mutex_);
          served_ticket_ = op.ticket;  // tickets are queued in order, so all before it are served
        }
        served_.notify_all();
        break;
      }
    }
  }
  return ops.size();
}

void Handover::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  queued_.wait_for(lock, timeout, [&] { return !ops_.empty() || woken_; });
  woken_ = false;
}

void Handover::notify() {
  {
    std::lock_guard lock(mutex_);
    woken_ = true;
  }
  queued_.notify_one();
}

void Handover::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  served_.notify_all();
}

}  // namespace delayd::broker
