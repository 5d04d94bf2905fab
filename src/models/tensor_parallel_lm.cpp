// candle::models::load_causal_lm_parallel: one rank of a tensor-parallel model per device, each on
// a thread of its own, behind one CausalLM.
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "candle/models/causal_lm.h"

namespace candle::models {
namespace {

// Rank 0 runs on the caller's thread, ranks 1.. on worker threads that wait for the next job. A job
// runs on every rank; a rank that fails aborts the group (so that none waits for it in a
// collective) and the first failure, in rank order, is rethrown to the caller.
class ParallelLM final : public CausalLM {
 public:
  ParallelLM(const std::string& path, const std::vector<Device>& devices, DType dtype)
      : devices_(devices), comms_(Comm::create_group(devices)), models_(devices.size()) {
    for (size_t r = 1; r < devices.size(); ++r) workers_.emplace_back([this, r] { work(r); });
    try {
      run([&](size_t r) { models_[r] = load_causal_lm(path, devices_[r], dtype, comms_[r]); });
    } catch (...) {
      stop();
      throw;
    }
  }
  ~ParallelLM() override { stop(); }

  Tensor forward(const Tensor& ids, size_t index_pos) override {
    Tensor out;
    run([&](size_t r) {
      Tensor y = models_[r]->forward(ids.to_device(devices_[r]), index_pos);
      if (r == 0) out = y;
    });
    return out;
  }
  void clear_kv_cache() override {
    run([&](size_t r) { models_[r]->clear_kv_cache(); });
  }
  size_t vocab_size() const override { return models_[0]->vocab_size(); }
  size_t max_seq_len() const override { return models_[0]->max_seq_len(); }
  std::string architecture() const override { return models_[0]->architecture(); }

 private:
  // `job(rank)` on every rank; returns when all are done
  void run(const std::function<void(size_t)>& job) {
    {
      std::lock_guard lk(mu_);
      job_ = &job;
      pending_ = workers_.size();
      ++generation_;
      errors_.assign(devices_.size(), nullptr);
    }
    cv_.notify_all();
    one(0, job);
    std::unique_lock lk(mu_);
    done_cv_.wait(lk, [&] { return pending_ == 0; });
    job_ = nullptr;
    for (const auto& e : errors_)
      if (e) std::rethrow_exception(e);
  }
  void one(size_t r, const std::function<void(size_t)>& job) {
    try {
      job(r);
    } catch (const std::exception& e) {
      errors_[r] = std::current_exception();
      comms_[r]->abort(e.what());
    } catch (...) {
      errors_[r] = std::current_exception();
      comms_[r]->abort("an unknown error");
    }
  }
  void work(size_t r) {
    size_t seen = 0;
    for (;;) {
      const std::function<void(size_t)>* job;
      {
        std::unique_lock lk(mu_);
        cv_.wait(lk, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        job = job_;
      }
      one(r, *job);
      {
        std::lock_guard lk(mu_);
        if (--pending_ == 0) done_cv_.notify_all();
      }
    }
  }
  void stop() {
    {
      std::lock_guard lk(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_)
      if (w.joinable()) w.join();
    workers_.clear();
  }

  std::vector<Device> devices_;
  std::vector<std::shared_ptr<Comm>> comms_;
  std::vector<std::unique_ptr<CausalLM>> models_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(size_t)>* job_ = nullptr;
  size_t pending_ = 0, generation_ = 0;
  bool stopping_ = false;
  std::vector<std::exception_ptr> errors_;
};

}  // namespace

std::unique_ptr<CausalLM> load_causal_lm_parallel(const std::string& path, const std::vector<Device>& devices,
                                                  DType dtype) {
  if (devices.size() == 1) return load_causal_lm(path, devices[0], dtype);
  return std::make_unique<ParallelLM>(path, devices, dtype);
}

}  // namespace candle::models
