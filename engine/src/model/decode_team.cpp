#include "model/decode_team.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

#include <ATen/Parallel.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace embedlab::detail {

namespace {

void pause_briefly()
{
#if defined(__x86_64__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
}

// One process's workers. Never destroyed: detached workers may still spin in it while
// the program exits, and a forked child must not destroy its parent's threads' objects.
class Team {
public:
    // body's parts 1 .. parts-1 by the workers, part 0 by the caller.
    void run(int parts, const std::function<void(int)>& part)
    {
        while (static_cast<int>(workers_) < parts - 1)
            start_worker();
        job_ = &part;
        parts_ = parts;
        remaining_.store(workers_, std::memory_order_relaxed);
        generation_.fetch_add(1); // seq_cst: paired with the sleepers' count below
        if (sleeping_.load() > 0)
            generation_.notify_all();
        part(0);
        while (remaining_.load(std::memory_order_acquire) > 0)
            pause_briefly();
    }

    std::mutex busy;

private:
    // Before run() moves the generation on: the worker waits for the next one from here.
    void start_worker()
    {
        const int index = static_cast<int>(++workers_);
        const uint64_t seen = generation_.load();
        std::thread([this, index, seen] { work(index, seen); }).detach();
    }

    void work(int index, uint64_t seen)
    {
        for (;;) {
            const auto deadline =
                std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicroseconds);
            for (int spins = 1; generation_.load(std::memory_order_acquire) == seen; ++spins) {
                pause_briefly();
                if (spins % 64 == 0 && std::chrono::steady_clock::now() > deadline) {
                    sleeping_.fetch_add(1); // seq_cst: run() sees it, or wait() sees the new generation
                    generation_.wait(seen);
                    sleeping_.fetch_sub(1);
                }
            }
            seen = generation_.load(std::memory_order_acquire);
            if (index < parts_)
                (*job_)(index);
            remaining_.fetch_sub(1, std::memory_order_release);
        }
    }

    const std::function<void(int)>* job_ = nullptr;
    int parts_ = 0;
    unsigned workers_ = 0;
    std::atomic<uint64_t> generation_{0};
    std::atomic<unsigned> remaining_{0};
    std::atomic<int> sleeping_{0};
};

Team& this_process_team()
{
    static std::mutex mutex;
    static pid_t owner = 0;
    static Team* team = nullptr;
    std::lock_guard lock(mutex);
    if (!team || owner != ::getpid()) { // a forked child: its parent's workers are not here
        team = new Team;                // NOLINT: never destroyed (see Team)
        owner = ::getpid();
    }
    return *team;
}

} // namespace

void run_split(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& body)
{
    grain = std::max<int64_t>(grain, 1);
    const int64_t blocks = (count + grain - 1) / grain;
    const int parts = static_cast<int>(std::min<int64_t>(at::get_num_threads(), blocks));
    if (parts <= 1) {
        if (count > 0)
            body(0, count);
        return;
    }
    Team& team = this_process_team();
    std::unique_lock lock(team.busy, std::try_to_lock);
    if (!lock.owns_lock()) { // another thread's products have the workers
        body(0, count);
        return;
    }
    team.run(parts, [&](int part) {
        const int64_t begin = blocks * part / parts * grain,
                      end = std::min(count, blocks * (part + 1) / parts * grain);
        if (begin < end)
            body(begin, end);
    });
}

} // namespace embedlab::detail
