// write_file_atomic (file_output.hpp) for bytes produced piece by piece, such as a
// serialiser's output, so they are never held whole. Internal to the engine.
//
//   io::write_file_atomic_streamed(path, [&](const io::ByteSink& sink) { sink(part); sink(more); });
//
// Thread safety: as write_file_atomic.
#pragma once

#include <filesystem>
#include <functional>
#include <string_view>

namespace embedlab::io {

using ByteSink = std::function<void(std::string_view)>;
// `write` calls the sink any number of times; the same temp file, fsync, rename and
// cleanup as write_file_atomic (InputError naming `path`; an exception leaves no file).
void write_file_atomic_streamed(const std::filesystem::path& path,
                                const std::function<void(const ByteSink&)>& write);

} // namespace embedlab::io
