#include "io/weight_arena.hpp"

#include <cstring>
#include <sys/mman.h>

namespace embedlab::io {

namespace {
constexpr uint64_t kHugePage = uint64_t{2} << 20;
constexpr uint64_t kAlignment = 64; // a cache line: the kernels' rows start on one
} // namespace

WeightArena::WeightArena(uint64_t capacity)
{
    if (capacity == 0)
        return;
    // One huge page more than asked, so the start can be moved to a 2 MiB boundary.
    const uint64_t bytes = (capacity + kHugePage - 1) / kHugePage * kHugePage + kHugePage;
    void* p =
        ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return;
    mapping_ = p;
    mapping_bytes_ = bytes;
    const auto start = reinterpret_cast<uintptr_t>(p);
    base_ = reinterpret_cast<uint8_t*>((start + kHugePage - 1) / kHugePage * kHugePage);
    capacity_ = capacity;
    // Advice only: where transparent huge pages are off the copies sit on 4 KiB pages.
    ::madvise(base_, (capacity + kHugePage - 1) / kHugePage * kHugePage, MADV_HUGEPAGE);
}

WeightArena::~WeightArena()
{
    if (mapping_)
        ::munmap(mapping_, mapping_bytes_);
}

void* WeightArena::copy_in(const void* src, uint64_t bytes)
{
    std::lock_guard lock(mutex_);
    const uint64_t at = (used_ + kAlignment - 1) / kAlignment * kAlignment;
    if (!base_ || bytes > capacity_ || at > capacity_ - bytes)
        return nullptr;
    used_ = at + bytes;
    std::memcpy(base_ + at, src, bytes);
    return base_ + at;
}

uint64_t WeightArena::used() const
{
    std::lock_guard lock(mutex_);
    return used_;
}

} // namespace embedlab::io
