// Anonymous memory on transparent huge pages for the weight matrices a generation load
// keeps as stored (KeepHalfMatrices, dtype_convert.hpp): copied out of the mapped file
// instead of wrapped over it.
//
// Why: token-by-token decoding streams every matrix once a token, so its speed is the
// speed at which the cores read them. Over the page cache's 4 KiB pages the same AVX2
// kernel on two threads read Qwen2.5-0.5B's f16 matrices at 32 GB/s; copied into
// anonymous 4 KiB pages at 45 GB/s, into 2 MiB pages at 58 GB/s (a throwaway harness,
// 2026-11-30; fewer TLB misses, and the hardware prefetcher stops at page boundaries).
// One arena per mapped file, sized by it: matrices lie back to back (64-byte aligned),
// so the small ones share huge pages too; address space never written costs no memory.
// The file's pages are released as each matrix is copied, so the peak stays the
// weights plus one matrix.
//
// Usage: auto arena = std::make_shared<WeightArena>(file.size());
//        if (void* p = arena->copy_in(src, bytes)) ... (the tensor's deleter holds arena)
// Thread safety: copy_in locks; the memory it returns is the caller's.
#pragma once

#include <cstdint>
#include <mutex>

namespace embedlab::io {

class WeightArena {
public:
    // Reserves `capacity` bytes of address space (nothing resident until written). Where
    // the kernel refuses, the arena is empty and copy_in returns nullptr.
    explicit WeightArena(uint64_t capacity);
    ~WeightArena();
    WeightArena(const WeightArena&) = delete;
    WeightArena& operator=(const WeightArena&) = delete;

    // A 64-byte aligned copy of `bytes` at `src`; nullptr when the arena has no room.
    void* copy_in(const void* src, uint64_t bytes);

    uint64_t used() const;

private:
    mutable std::mutex mutex_;
    uint8_t* base_ = nullptr; // 2 MiB aligned
    uint64_t capacity_ = 0, used_ = 0;
    void* mapping_ = nullptr; // what munmap gets back
    uint64_t mapping_bytes_ = 0;
};

} // namespace embedlab::io
