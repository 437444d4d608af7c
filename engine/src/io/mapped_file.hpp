// A whole file mapped into memory, unmapped when the last owner goes away.
//
// Tensors that wrap mapped bytes zero-copy hold a std::shared_ptr<MappedFile>,
// so the mapping outlives the reader. The mapping is private copy-on-write: the
// file itself is never modified, but a caller that edits a weight tensor in
// place gets its own copy of the touched pages instead of a segfault.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

namespace embedlab::io {

class MappedFile {
public:
    // Throws InputError "<path>: <reason>" when the file cannot be opened or mapped.
    static std::shared_ptr<MappedFile> open(const std::filesystem::path& path);

    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return data_; }
    uint64_t size() const { return size_; }
    const std::filesystem::path& path() const { return path_; }
    std::string label() const { return path_.string(); }

    // Drops the resident pages that lie wholly inside [offset, offset + length)
    // once their bytes were converted: a 16-bit model's mapped pages would
    // otherwise stay resident beside its float32 copy until the file is unmapped
    // (1.5x the float32 weights at the peak). Pages shared with a neighbouring
    // tensor stay; the bytes read back from the file if touched again. Never call
    // it on a range a zero-copy tensor wraps: an edited page would revert.
    void release(uint64_t offset, uint64_t length) const;

    // release() for bytes given by address: drops the pages of [p, p + bytes) if
    // they lie in a live mapping, else does nothing (anonymous memory would be
    // zeroed). For a reader's scan of zero-copy tensors before anyone holds them:
    // a float32 model's pages then fault back in from the page cache when a forward
    // pass reads them, instead of staying resident for analyses that need one table.
    static void release_if_mapped(const void* p, uint64_t bytes);

private:
    MappedFile() = default;

    std::filesystem::path path_;
    uint8_t* data_ = nullptr; // nullptr for an empty file (mmap rejects length 0)
    uint64_t size_ = 0;
};

} // namespace embedlab::io
