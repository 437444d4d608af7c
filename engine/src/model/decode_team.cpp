#include "model/decode_team.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <sched.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <ATen/Parallel.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace embedlab::detail {

namespace {

// At most this many parts (threads) a product: the claims are bits of one word.
constexpr int kMostParts = 32;

// The part the thread on this CPU takes first: a product's rows are read on the same core
// every time, whichever thread runs there now, so they stay in that core's cache (a
// thread the kernel moved would otherwise read the other half: tinyllama's 16 MB head at
// 28 GB/s instead of 68-78 in a harness, 2026-11-30).
int preferred_part(int parts)
{
    const int cpu = ::sched_getcpu();
    return cpu < 0 ? 0 : cpu % parts;
}

void pause_briefly()
{
#if defined(__x86_64__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
}

// One process's workers. Each thread takes its CPU's part first (preferred_part), then
// any part nobody has started: a worker not woken yet (or put aside by the kernel) costs
// the caller its part, never a wait. Never destroyed: detached workers may
// still spin in it while the program exits, and a forked child must not destroy its
// parent's threads' objects.
class Team {
public:
    void run(int parts, const std::function<void(int)>& part)
    {
        while (static_cast<int>(workers_) < parts - 1)
            start_worker();
        job_ = &part;
        parts_ = parts;
        done_.store(0, std::memory_order_relaxed);
        const uint64_t generation = ++generation_;
        ticket_.store(generation << 32); // seq_cst: paired with the sleepers' count below
        if (sleeping_.load() > 0)
            ticket_.notify_all();
        take_all(generation, parts);
        while (done_.load(std::memory_order_acquire) < parts)
            pause_briefly();
    }

    std::mutex busy;

private:
    // Part `index` of `generation`'s product, unless someone claimed it. A claim succeeds
    // only while the ticket is this generation's, so the product (and job_) outlive
    // every claimed part: run() returns only once each is done.
    void take(uint64_t generation, int index)
    {
        const uint64_t bit = uint64_t{1} << index;
        for (uint64_t t = ticket_.load(std::memory_order_acquire); t >> 32 == generation && !(t & bit);)
            if (ticket_.compare_exchange_weak(t, t | bit, std::memory_order_acq_rel,
                                              std::memory_order_acquire)) {
                (*job_)(index);
                done_.fetch_add(1, std::memory_order_release);
                return;
            }
    }

    // This CPU's part first, then any left.
    void take_all(uint64_t generation, int parts)
    {
        take(generation, preferred_part(parts));
        for (int i = 0; i < parts; ++i)
            take(generation, i);
    }

    // Before run() moves the generation on: the worker serves the next one from here.
    void start_worker()
    {
        ++workers_;
        const uint64_t served = generation_;
        std::thread([this, served] { work(served); }).detach();
    }

    // Spins for kSpinMicroseconds after each product (yielding to other runnable threads),
    // then sleeps on the ticket until the next.
    void work(uint64_t served)
    {
        for (;;) {
            const auto deadline =
                std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicroseconds);
            uint64_t t;
            for (int spins = 1; ((t = ticket_.load(std::memory_order_acquire)) >> 32) == served; ++spins) {
                pause_briefly();
                if (spins % 64 != 0)
                    continue;
                if (std::chrono::steady_clock::now() > deadline) {
                    sleeping_.fetch_add(1); // seq_cst: run() sees it, or wait() sees the new ticket
                    ticket_.wait(t);
                    sleeping_.fetch_sub(1);
                } else {
                    // Another runnable thread on this core (an OpenMP worker of the caller's
                    // next operation) runs now instead of after this spin.
                    std::this_thread::yield();
                }
            }
            served = t >> 32;
            take_all(served, parts_.load(std::memory_order_relaxed));
        }
    }

    const std::function<void(int)>* job_ = nullptr;
    std::atomic<int> parts_{0}; // read by a worker that may still see the product before
    unsigned workers_ = 0;
    uint64_t generation_ = 0;         // counted by the caller, which holds `busy`
    std::atomic<uint64_t> ticket_{0}; // generation << 32 | a bit for each claimed part
    std::atomic<int> done_{0};
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
    const int parts = static_cast<int>(std::min<int64_t>({at::get_num_threads(), blocks, kMostParts}));
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
