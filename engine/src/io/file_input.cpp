#include "embedlab/file_input.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "embedlab/error.hpp"

namespace embedlab::io {

namespace {

std::string megabytes(uint64_t bytes)
{
    return std::to_string((bytes + (1u << 20) - 1) >> 20) + " MB";
}

// What a cap is and why, after "... EmbedLab reads for a <what>".
std::string cap_reason(uint64_t cap)
{
    if (cap != text_file_cap)
        return "";
    // Measured (tokenizer_test.cpp, TokenizingCostsAFewBytesPerByte; the worst was
    // SentencePiece on random bytes): the text itself, plus 1 to 9 bytes per byte
    // while it is tokenized (4 per token id).
    return " (1 GiB = " + std::to_string(cap) +
           " bytes: a text is read whole and tokenized in memory, which takes 2 to 10 bytes of memory per "
           "byte of text at the peak, so up to about 10 GB for 1 GiB); split the text into smaller files";
}

} // namespace

std::string read_regular_file(const std::filesystem::path& path, uint64_t max_bytes, const char* what)
{
    const std::string name = path.string();
    // O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        const int err = errno;
        if (err == ENOENT)
            throw InputError(name + ": no such file or directory");
        throw InputError(name + ": cannot open (" + std::strerror(err) + ")");
    }
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        throw InputError(name + ": cannot stat (" + std::strerror(errno) + ")");
    if (S_ISDIR(st.st_mode))
        throw InputError(name + ": is a directory, expected a " + what);
    if (!S_ISREG(st.st_mode))
        throw InputError(name + ": not a regular file (a FIFO, socket or device); expected a " + what);
    const auto size = static_cast<uint64_t>(st.st_size);
    if (size > max_bytes)
        throw InputError(name + ": " + megabytes(size) + " is above the " + megabytes(max_bytes) +
                         " EmbedLab reads for a " + what + cap_reason(max_bytes));
    std::string bytes(size, '\0');
    size_t done = 0;
    while (done < size) {
        const ssize_t n = ::read(fd, bytes.data() + done, size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            throw InputError(name + ": read error (" + std::strerror(errno) + ")");
        if (n == 0)
            break; // shrank while reading: keep what is there
        done += static_cast<size_t>(n);
    }
    bytes.resize(done);
    return bytes;
}

} // namespace embedlab::io
