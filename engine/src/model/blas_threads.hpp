// OpenBLAS's own thread count for a scope, where EmbedLab's kernels do the heavy
// products on libtorch's threads (generation on half weights): attention's small sgemm
// calls then run on the calling thread instead of waking OpenBLAS's workers, which
// afterwards spin in sched_yield on the cores the prompt tiles need (a fifth of a
// Qwen2.5-0.5B prompt's samples, issue 63).
// Usage: { const OpenBlasThreads one(1); ... } (the previous count comes back)
// Thread safety: the count is process-wide; another thread's OpenBLAS products in the
// scope run on fewer threads (the same results, slower). Where the BLAS is not OpenBLAS
// it does nothing.
#pragma once

namespace embedlab::detail {

class OpenBlasThreads {
public:
    explicit OpenBlasThreads(int threads);
    ~OpenBlasThreads();
    OpenBlasThreads(const OpenBlasThreads&) = delete;
    OpenBlasThreads& operator=(const OpenBlasThreads&) = delete;

private:
    int previous_ = 0; // 0: nothing to restore
};

} // namespace embedlab::detail
