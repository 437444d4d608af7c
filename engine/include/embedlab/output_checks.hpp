// Checks made before EmbedLab writes an output, so that nothing a user made is
// replaced: --force replaces only a file or directory EmbedLab wrote, and an
// input is never an output. Torch-free (the GGUF writer and the fuzzers use it).
//
//   check_output_file(out, force, {data_file}); // before the work starts
//   check_replaceable_directory(dir, force, "use --force to replace it", {model});
//
// Thread safety: reentrant; they read the file system and keep no state.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace embedlab {

// The file every directory EmbedLab writes holds (AtomicDirectory::commit writes it):
// the relative path and size of each file it wrote, so that --force can prove a
// directory holds only what EmbedLab wrote before replacing it.
inline constexpr const char* kWrittenFilesName = ".embedlab-files.json";

// Before writing a directory: `dir` must not exist, or (with `overwrite`) be an
// empty directory, or one that EmbedLab wrote and nobody changed since: its
// kWrittenFilesName lists every file in it with its size. InputError otherwise:
// "<dir>: already exists (<hint>)", "<dir>: is not a directory; not replacing it",
// "<dir>: was not written by EmbedLab (<why>); not replacing it" or "<dir>: holds
// files EmbedLab did not write (a, b, ...); not replacing it". Any of `inputs` that
// is `dir`, or lies inside it, is refused with or without `overwrite`.
void check_replaceable_directory(const std::filesystem::path& dir, bool overwrite,
                                 const std::string& hint = "use --force to replace it",
                                 const std::vector<std::filesystem::path>& inputs = {});

// Why `dir` (an existing directory) may not be replaced, or "" when it holds only
// what EmbedLab wrote (see check_replaceable_directory).
std::string foreign_content(const std::filesystem::path& dir);

// Before writing a file: `out` must not be one of `inputs` (with or without
// `overwrite`), a directory or another non-regular file, and must not exist unless
// `overwrite`; `owned(out)` (when given) returns "" for a file EmbedLab wrote, else
// why it will not be replaced. Its parent directory must exist or be creatable.
// InputError naming `out` otherwise.
void check_output_file(const std::filesystem::path& out, bool overwrite,
                       const std::vector<std::filesystem::path>& inputs = {},
                       const std::function<std::string(const std::filesystem::path&)>& owned = {},
                       const std::string& hint = "use --force to replace it");

// InputError "<out>: <ancestor> is not a directory" when the nearest existing
// ancestor of `out` is a file, so that its parent can never be created.
void check_parent_usable(const std::filesystem::path& out);

// True when `a` and `b` name the same file or directory, or `a` lies inside `b`
// (links resolved; paths that do not exist are compared lexically).
bool same_or_inside(const std::filesystem::path& a, const std::filesystem::path& b);

// Before writing about `bytes` under `out` (which need not exist yet): InputError
// "<what> would take about X GB, but only Y GB are free on <dir> (<hint>)" when the
// file system holding `out` has less room. Silent when the room cannot be known.
void check_fits_on_disk(const std::filesystem::path& out, uint64_t bytes, const std::string& what,
                        const std::string& hint);

} // namespace embedlab
