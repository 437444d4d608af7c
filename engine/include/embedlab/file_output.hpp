// Crash-safe file output: a file or a directory appears complete under its final
// name or not at all (write a sibling temp, fsync, rename).
//
//   embedlab::AtomicDirectory dir("out/model", /*overwrite=*/force);
//   embedlab::write_file_atomic(dir.path() / "config.json", config_text);
//   embedlab::write_safetensors(dir.path() / "model.safetensors", {{"wte.weight", wte}},
//                               {{"format", "pt"}});
//   dir.commit();                  // without it the destructor removes everything
//
// Thread safety: the functions are reentrant (temp names carry the pid and a
// process-wide atomic counter); one AtomicDirectory is not to be shared between threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "embedlab/error.hpp"
#include "embedlab/output_checks.hpp"

namespace embedlab {

// Writes `bytes` to `path.tmp-<pid>-<n>`, fsyncs and renames it over `path`. On any
// failure the temp file is removed and InputError names `path` and the OS error.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// Creates the missing parent directories of an output; InputError "<parent>: cannot
// create the output's parent directory (<reason>)".
void create_parent_directories(const std::filesystem::path& out);

// Writes a safetensors file atomically like write_file_atomic, streaming tensor by
// tensor in the given order. float32/float16/bfloat16/int64/int32 are stored as
// F32/F16/BF16/I64/I32; any other dtype or a duplicate name throws InputError before
// anything is created. progress(bytes written, file size); Cancelled leaves no file.
void write_safetensors(const std::filesystem::path& path,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {},
                       const ProgressFn& progress = {});

// One tensor of write_safetensors_streamed: its bytes are produced while writing.
struct StreamedTensor {
    std::string name;
    std::string dtype; // "F32", "F16", "BF16", "I64" or "I32"
    std::vector<int64_t> shape;
};

// fill(index, offset, out): bytes [offset, offset + out.size()) of tensor `index`.
using TensorBytesFn = std::function<void(size_t index, uint64_t offset, std::span<char> out)>;

// write_safetensors for tensors too large to hold: the header comes from the
// shapes, then `fill` produces each tensor in order, chunk_bytes at a time
// (offsets are multiples of chunk_bytes, which must be a multiple of 8). Bad
// names, dtypes or shapes throw InputError before anything is created.
void write_safetensors_streamed(const std::filesystem::path& path, const std::vector<StreamedTensor>& tensors,
                                const TensorBytesFn& fill,
                                const std::map<std::string, std::string>& metadata = {},
                                const ProgressFn& progress = {}, size_t chunk_bytes = size_t{8} << 20);

// A directory built in `<final_dir>.tmp-<pid>-<n>` and renamed to `final_dir` by
// commit(); removed by the destructor if commit() was never reached.
class AtomicDirectory {
public:
    // Throws InputError if final_dir exists (unless overwrite; with it, unless
    // check_replaceable_directory allows replacing it) or its parent is missing or
    // not writable.
    explicit AtomicDirectory(std::filesystem::path final_dir, bool overwrite = false);
    ~AtomicDirectory();
    AtomicDirectory(const AtomicDirectory&) = delete;
    AtomicDirectory& operator=(const AtomicDirectory&) = delete;

    // The temp directory to write into.
    const std::filesystem::path& path() const { return tmp_; }
    // Writes kWrittenFilesName (every file in the directory with its size), fsyncs
    // the contents and renames the temp directory to final_dir; with
    // overwrite an existing final_dir is swapped out atomically (RENAME_EXCHANGE;
    // where the file system lacks it, moved to `<final_dir>.old-<pid>` first) and
    // removed once the new one is in place. A process killed at any point leaves
    // the old or the new directory; its temporaries are removed by the next
    // AtomicDirectory or write_file_atomic for the same path.
    void commit();

private:
    std::filesystem::path final_;
    std::filesystem::path tmp_;
    bool overwrite_ = false;
    bool committed_ = false;
};

} // namespace embedlab
