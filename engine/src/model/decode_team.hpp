// Token-by-token products split over libtorch's thread count by a small team of workers
// that spin between products instead of sleeping.
//
// Why not at::parallel_for: its OpenMP threads sleep between regions (the CLI, GUI and
// module run with OMP_WAIT_POLICY=PASSIVE: libgomp's spinning idle threads took the
// cores OpenBLAS's threads needed, model.hpp), and a token's 169 products on the
// Qwen2.5-0.5B shape each waited for a woken thread: two such threads decoded at
// 0.88x-1.2x one thread's speed. A worker here spins for kSpinMicroseconds after each
// product (yielding to any other runnable thread: the next product of the same token, or
// of the next token, follows within that), then sleeps on a futex, so an idle program
// spins for nothing. Each thread takes the part of the rows that belongs to its CPU, then
// any part nobody started: a late worker costs the caller its part, never a wait.
//
// Usage: run_split(out, 64, [&](int64_t begin, int64_t end) { kernel(begin, end); });
// Thread safety: callable from any thread; one call at a time gets the workers, a
// concurrent caller runs its whole range on its own thread (the same results). The body
// must not throw. A forked child starts its own workers.
#pragma once

#include <cstdint>
#include <functional>

namespace embedlab::detail {

constexpr int64_t kSpinMicroseconds = 2000;

// body(begin, end) over [0, count) in at::get_num_threads() (at most 32) contiguous parts,
// each a multiple of `grain` long but the last. Returns when
// every part is done. Each index is in exactly one part, so a body that writes only its
// own indices gives the same bits whatever the split.
void run_split(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

} // namespace embedlab::detail
