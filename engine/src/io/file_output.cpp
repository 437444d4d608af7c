#include "embedlab/file_output.hpp"
#include "io/atomic_stream.hpp"
#include "io/safetensors_output.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>

#include <cctype>
#include <csignal>
#include <cstdio>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "embedlab/name_table.hpp"

namespace embedlab {

namespace fs = std::filesystem;

namespace {

// Tensor bytes are written as they lie in memory; safetensors is little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors output needs a little-endian host");

std::atomic<uint64_t> temp_counter{0};

// "<kind><pid>-<n>", unique within the process and, through the pid, between processes.
std::string unique_suffix(const char* kind)
{
    return kind + std::to_string(::getpid()) + "-" + std::to_string(temp_counter++);
}

// `path` as the user named it: a file inside an AtomicDirectory's temp
// (`out.tmp-<pid>-<n>/model.safetensors`) is reported as `out/model.safetensors`,
// so a full disk names the user's --out, not an internal name.
fs::path user_path(const fs::path& path)
{
    fs::path out;
    for (const fs::path& part : path) {
        std::string name = part.string();
        const size_t at = name.rfind(".tmp-");
        if (at != std::string::npos && at > 0) {
            const std::string rest = name.substr(at + 5);
            const size_t dash = rest.find('-');
            const auto digits = [](const std::string& s) {
                return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
            };
            if (dash != std::string::npos && digits(rest.substr(0, dash)) && digits(rest.substr(dash + 1)))
                name.erase(at);
        }
        out /= name;
    }
    return out;
}

[[noreturn]] void fail(const fs::path& path, const std::string& what, int err)
{
    throw InputError(user_path(path).string() + ": " + what + ": " + std::strerror(err));
}

fs::path parent_of(const fs::path& p)
{
    return p.parent_path().empty() ? fs::path(".") : p.parent_path();
}

// Temporaries `<name>.tmp-<pid>-<n>` and `<name>.old-<pid>` beside `target` whose
// process is gone (SIGKILL, power loss): remove them, so a killed job leaves no
// litter once the next write to the same place runs.
void remove_stale_temporaries(const fs::path& target)
{
    std::error_code ec;
    const std::string base = target.filename().string();
    for (const auto& entry : fs::directory_iterator(parent_of(target), ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(base, 0) != 0)
            continue;
        const std::string rest = name.substr(base.size());
        size_t digits = 0;
        for (const char* kind : {".tmp-", ".old-"})
            if (rest.rfind(kind, 0) == 0)
                digits = std::strlen(kind);
        if (digits == 0 || digits >= rest.size() || !std::isdigit(static_cast<unsigned char>(rest[digits])))
            continue;
        const long pid = std::strtol(rest.c_str() + digits, nullptr, 10);
        if (pid <= 0 || pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)
            continue; // ours, or a live process's (possibly another user's: EPERM)
        fs::remove_all(entry.path(), ec);
    }
}

// fsyncs a file or directory; fails on error unless `best_effort`.
void sync_path(const fs::path& p, bool best_effort)
{
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0) {
        const int err = errno;
        if (fd >= 0)
            ::close(fd);
        if (!best_effort)
            fail(p, "cannot flush to disk", err);
        return;
    }
    ::close(fd);
}

// Makes a rename durable. Some file systems cannot fsync a directory; the rename
// itself has already happened, so this is best effort.
void sync_directory(const fs::path& dir)
{
    sync_path(dir, true);
}

// A file at `<target>.tmp-<pid>-<n>` that replaces `target` on commit() and is
// removed otherwise.
class TempFile {
public:
    explicit TempFile(fs::path target) : target_(std::move(target))
    {
        remove_stale_temporaries(target_);
        do {
            tmp_ = target_;
            tmp_ += unique_suffix(".tmp-");
            fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        } while (fd_ < 0 && errno == EEXIST); // a leftover of a crashed process with our pid
        if (fd_ < 0)
            fail(target_, "cannot create " + tmp_.filename().string(), errno);
    }
    ~TempFile()
    {
        if (fd_ >= 0)
            ::close(fd_);
        if (!committed_)
            ::unlink(tmp_.c_str());
    }
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;

    void write(const void* data, size_t size)
    {
        const char* p = static_cast<const char*>(data);
        while (size > 0) {
            const ssize_t n = ::write(fd_, p, std::min<size_t>(size, size_t{1} << 30));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                fail(target_, "cannot write", n < 0 ? errno : EIO);
            p += n;
            size -= static_cast<size_t>(n);
        }
    }

    void commit()
    {
        if (::fsync(fd_) != 0)
            fail(target_, "cannot flush to disk", errno);
        if (::close(std::exchange(fd_, -1)) != 0)
            fail(target_, "cannot write", errno);
        if (::rename(tmp_.c_str(), target_.c_str()) != 0)
            fail(target_, "cannot rename " + tmp_.filename().string() + " into place", errno);
        committed_ = true;
        sync_directory(parent_of(target_));
    }

private:
    fs::path target_;
    fs::path tmp_;
    int fd_ = -1;
    bool committed_ = false;
};

// The dtypes the writer takes: the tensor type, its safetensors name, its size.
struct SafetensorsDtype {
    torch::ScalarType value;
    const char* name;
    uint64_t size;
};
constexpr SafetensorsDtype kSafetensorsDtypes[]{{torch::kFloat32, "F32", 4},   {torch::kFloat16, "F16", 2},
                                                {torch::kBFloat16, "BF16", 2}, {torch::kInt64, "I64", 8},
                                                {torch::kInt32, "I32", 4},     {torch::kInt16, "I16", 2},
                                                {torch::kUInt8, "U8", 1}};

const char* safetensors_dtype(torch::ScalarType t)
{
    return name_of(kSafetensorsDtypes, t, nullptr);
}

uint64_t safetensors_element_size(const std::string& dtype)
{
    const auto* row = row_with_name(kSafetensorsDtypes, dtype);
    return row ? row->size : 0;
}

struct SafetensorsLayout {
    std::string header;          // JSON, space-padded so the data starts 8-byte aligned
    std::vector<uint64_t> bytes; // per tensor
    uint64_t data_size = 0;
};

// Validates names, dtypes and shapes, so bad input fails before a file exists.
SafetensorsLayout safetensors_layout(const fs::path& path, const std::vector<StreamedTensor>& tensors,
                                     const std::map<std::string, std::string>& metadata)
{
    nlohmann::json header = nlohmann::json::object();
    if (!metadata.empty())
        header["__metadata__"] = metadata;
    SafetensorsLayout layout;
    for (const StreamedTensor& t : tensors) {
        const std::string where = path.string() + ": tensor '" + t.name + "': ";
        if (t.name == "__metadata__")
            throw InputError(where + "the name is reserved for metadata");
        if (header.contains(t.name))
            throw InputError(where + "duplicate name");
        const uint64_t element = safetensors_element_size(t.dtype);
        if (element == 0)
            throw InputError(where + "dtype " + t.dtype +
                             " cannot be written (supported: F32, F16, BF16, I64, I32)");
        uint64_t bytes = element;
        for (const int64_t n : t.shape) {
            if (n < 0)
                throw InputError(where + "negative dimension " + std::to_string(n));
            bytes *= static_cast<uint64_t>(n);
        }
        header[t.name] = {{"dtype", t.dtype},
                          {"shape", t.shape},
                          {"data_offsets", {layout.data_size, layout.data_size + bytes}}};
        layout.bytes.push_back(bytes);
        layout.data_size += bytes;
    }
    layout.header = header.dump();
    layout.header.append((8 - layout.header.size() % 8) % 8,
                         ' '); // keeps the data 8-byte aligned for mmap readers
    return layout;
}

} // namespace

void write_file_atomic(const fs::path& path, std::string_view bytes)
{
    TempFile file(path);
    file.write(bytes.data(), bytes.size());
    file.commit();
}

void io::write_file_atomic_streamed(const fs::path& path,
                                    const std::function<void(const io::ByteSink&)>& write)
{
    TempFile file(path);
    write([&](std::string_view bytes) { file.write(bytes.data(), bytes.size()); });
    file.commit();
}

void create_parent_directories(const fs::path& out)
{
    const auto parent = fs::absolute(out).parent_path();
    std::error_code ec;
    if (fs::exists(parent, ec))
        return;
    fs::create_directories(parent, ec);
    if (ec)
        throw InputError(parent.string() + ": cannot create the output's parent directory (" + ec.message() +
                         ")");
}

void write_safetensors(const fs::path& path,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata, const ProgressFn& progress)
{
    io::write_safetensors_as(path, tensors, {}, metadata, progress);
}

void io::write_safetensors_as(const fs::path& path,
                              const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                              const std::map<std::string, torch::ScalarType>& stored_dtypes,
                              const std::map<std::string, std::string>& metadata, const ProgressFn& progress)
{
    auto stored_type = [&](const std::string& name, const torch::Tensor& t) {
        const auto it = stored_dtypes.find(name);
        return it == stored_dtypes.end() ? t.scalar_type() : it->second;
    };
    std::vector<StreamedTensor> specs;
    for (const auto& [name, t] : tensors) {
        const std::string where = path.string() + ": tensor '" + name + "': ";
        if (!t.defined() || t.layout() != torch::kStrided)
            throw InputError(where + "not a dense tensor");
        const char* dtype = safetensors_dtype(stored_type(name, t));
        if (!dtype)
            throw InputError(where + "dtype " + std::string(c10::toString(t.scalar_type())) +
                             " cannot be written (supported: float32, float16, bfloat16, int64, int32)");
        specs.push_back({name, dtype, t.sizes().vec()});
    }
    // The streamed writer, fed one contiguous CPU copy at a time (made at its first
    // chunk), in 64 MB chunks so progress and cancellation stay responsive.
    size_t current = tensors.size();
    torch::Tensor contiguous;
    write_safetensors_streamed(
        path, specs,
        [&](size_t i, uint64_t offset, std::span<char> out) {
            if (i != current) {
                const auto& [name, t] = tensors[i];
                contiguous = t.cpu().to(stored_type(name, t)).contiguous();
                current = i;
            }
            std::memcpy(out.data(), static_cast<const char*>(contiguous.data_ptr()) + offset, out.size());
        },
        metadata, progress, size_t{64} << 20);
}

void write_safetensors_streamed(const fs::path& path, const std::vector<StreamedTensor>& tensors,
                                const TensorBytesFn& fill, const std::map<std::string, std::string>& metadata,
                                const ProgressFn& progress, size_t chunk_bytes)
{
    if (chunk_bytes == 0 || chunk_bytes % 8 != 0)
        throw std::invalid_argument(
            "write_safetensors_streamed: chunk_bytes must be a positive multiple of 8");
    const SafetensorsLayout layout = safetensors_layout(path, tensors, metadata);
    const uint64_t header_len = layout.header.size();
    const auto total = static_cast<int64_t>(8 + header_len + layout.data_size);

    TempFile file(path);
    file.write(&header_len, 8);
    file.write(layout.header.data(), layout.header.size());
    int64_t done = static_cast<int64_t>(8 + header_len);
    report_progress(progress, done, total);
    std::vector<char> buffer(static_cast<size_t>(std::min<uint64_t>(chunk_bytes, layout.data_size)));
    for (size_t i = 0; i < tensors.size(); ++i) {
        for (uint64_t at = 0; at < layout.bytes[i]; at += chunk_bytes) {
            const auto n = static_cast<size_t>(std::min<uint64_t>(chunk_bytes, layout.bytes[i] - at));
            const std::span<char> out(buffer.data(), n);
            fill(i, at, out);
            file.write(out.data(), out.size());
            done += static_cast<int64_t>(n);
            report_progress(progress, done, total);
        }
    }
    file.commit();
}

AtomicDirectory::AtomicDirectory(fs::path final_dir, bool overwrite)
    : final_(std::move(final_dir)), overwrite_(overwrite)
{
    if (final_.empty())
        throw InputError("the output directory name is empty");
    if (!final_.has_filename()) // "out/model/" means out/model, not a child of it
        final_ = final_.parent_path();
    std::error_code ec;
    check_replaceable_directory(final_, overwrite_);
    const fs::path parent = parent_of(final_);
    if (!fs::is_directory(parent, ec))
        throw InputError(final_.string() + ": parent directory " + parent.string() + " does not exist");
    remove_stale_temporaries(final_);
    int rc = 0;
    do {
        tmp_ = final_;
        tmp_ += unique_suffix(".tmp-");
        rc = ::mkdir(tmp_.c_str(), 0777);
    } while (rc != 0 && errno == EEXIST);
    if (rc != 0)
        fail(final_, "cannot create " + tmp_.string(), errno);
}

AtomicDirectory::~AtomicDirectory()
{
    if (committed_)
        return;
    std::error_code ec;
    fs::remove_all(tmp_, ec);
}

void AtomicDirectory::commit()
{
    if (committed_)
        return;
    // The list of what we wrote, so that a later --force can tell our files from a
    // user's; then files written by other means (ofstream, libraries) must be on
    // disk before the rename publishes them.
    try {
        nlohmann::json files = nlohmann::json::object();
        for (const auto& entry : fs::recursive_directory_iterator(tmp_))
            if (entry.is_regular_file() && entry.path().filename() != kWrittenFilesName)
                files[entry.path().lexically_relative(tmp_).generic_string()] = entry.file_size();
        write_file_atomic(tmp_ / kWrittenFilesName,
                          nlohmann::json{{"written_by", "EmbedLab"},
                                         {"note", "the files EmbedLab wrote here, with their sizes: --force "
                                                  "replaces this directory only while it holds just these"},
                                         {"files", files}}
                                  .dump(1) +
                              "\n");
        for (const auto& entry : fs::recursive_directory_iterator(tmp_))
            if (entry.is_regular_file() || entry.is_directory())
                sync_path(entry.path(), false);
    } catch (const fs::filesystem_error& e) {
        fail(final_, "cannot list " + tmp_.string(), e.code().value());
    }
    sync_path(tmp_, false);

    std::error_code ec;
    fs::path old;
    if (fs::exists(fs::symlink_status(final_, ec))) {
        check_replaceable_directory(final_, overwrite_); // it may have appeared or changed since
        // One atomic swap: a kill at any point leaves the old or the new directory
        // under the final name, never neither. The temp name then holds the old one.
        if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, final_.c_str(), RENAME_EXCHANGE) == 0) {
            committed_ = true;
            sync_directory(parent_of(final_));
            fs::remove_all(tmp_, ec);
            return;
        }
        // File systems without RENAME_EXCHANGE: move aside, then rename.
        old = final_;
        old += ".old-" + std::to_string(::getpid());
        fs::remove_all(old, ec); // a leftover of a crashed process with our pid
        if (::rename(final_.c_str(), old.c_str()) != 0)
            fail(final_, "cannot move it aside to " + old.string(), errno);
    }
    if (::rename(tmp_.c_str(), final_.c_str()) != 0) {
        const int err = errno;
        if (!old.empty())
            ::rename(old.c_str(), final_.c_str()); // put the old content back
        fail(final_, "cannot rename " + tmp_.string() + " into place", err);
    }
    committed_ = true;
    sync_directory(parent_of(final_));
    if (!old.empty())
        fs::remove_all(old, ec); // the new content is in place; a failure leaves only litter
}

} // namespace embedlab
