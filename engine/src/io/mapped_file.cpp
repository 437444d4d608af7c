#include "io/mapped_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "embedlab/error.hpp"

namespace embedlab::io {

namespace {

// Closes the descriptor on every path out of open(); the mapping stays valid.
struct FdCloser {
    int fd;
    ~FdCloser()
    {
        if (fd >= 0)
            ::close(fd);
    }
};

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what, int err)
{
    throw InputError(path.string() + ": " + what + ": " + std::strerror(err));
}

// Live mappings by start address, for release_if_mapped. Never destroyed: a
// mapping may outlive static destruction (a tensor held by a static or by
// objects torn down after main), and its destructor still unregisters.
struct Registry {
    std::mutex mutex;
    std::map<uintptr_t, const MappedFile*> mappings;
};
Registry& registry()
{
    static auto* r = new Registry;
    return *r;
}

} // namespace

std::shared_ptr<MappedFile> MappedFile::open(const std::filesystem::path& path)
{
    // O_NONBLOCK: a FIFO in place of a model file must not block the open.
    FdCloser fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
    if (fd.fd < 0)
        fail(path, "cannot open", errno);

    struct stat st {};
    if (::fstat(fd.fd, &st) != 0)
        fail(path, "cannot stat", errno);
    if (!S_ISREG(st.st_mode))
        throw InputError(path.string() + ": not a regular file (a FIFO, socket, device or directory)");

    std::shared_ptr<MappedFile> file(new MappedFile());
    file->path_ = path;
    file->size_ = static_cast<uint64_t>(st.st_size);
    if (file->size_ == 0)
        return file;

    void* p = ::mmap(nullptr, file->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd.fd, 0);
    if (p == MAP_FAILED)
        fail(path, "cannot map into memory", errno);
    file->data_ = static_cast<uint8_t*>(p);
    auto& r = registry();
    std::lock_guard lock(r.mutex);
    r.mappings[reinterpret_cast<uintptr_t>(p)] = file.get();
    return file;
}

void MappedFile::release(uint64_t offset, uint64_t length) const
{
    static const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    if (!data_ || offset >= size_)
        return;
    const uint64_t end = std::min(size_, offset + length);
    const uint64_t base = reinterpret_cast<uintptr_t>(data_);
    const uint64_t first = (base + offset + page - 1) / page * page, last = (base + end) / page * page;
    // Advice only: a failure leaves the pages resident, which costs memory, not correctness.
    if (first < last)
        ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

void MappedFile::release_if_mapped(const void* p, uint64_t bytes)
{
    const auto at = reinterpret_cast<uintptr_t>(p);
    auto& r = registry();
    std::lock_guard lock(r.mutex);
    auto& m = r.mappings;
    auto it = m.upper_bound(at);
    if (it == m.begin())
        return;
    --it;
    const MappedFile* file = it->second;
    if (at + bytes <= it->first + file->size_)
        file->release(at - it->first, bytes);
}

MappedFile::~MappedFile()
{
    if (!data_)
        return;
    {
        auto& r = registry();
        std::lock_guard lock(r.mutex);
        r.mappings.erase(reinterpret_cast<uintptr_t>(data_));
    }
    ::munmap(data_, size_);
}

} // namespace embedlab::io
