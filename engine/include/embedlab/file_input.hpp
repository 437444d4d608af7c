// Reading small whole files (configs, manifests, tokenizers, texts) safely: only
// regular files (a FIFO or a device never blocks or floods memory), and never
// more than a cap that the message names. Torch-free.
//
//   const auto text = io::read_regular_file(dir / "config.json", io::metadata_file_cap, "config file");
//
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace embedlab::io {

constexpr uint64_t metadata_file_cap = 64ull << 20;  // config.json, embedlab.json, an index, a job
constexpr uint64_t tokenizer_file_cap = 64ull << 20; // tokenizer.json (Gemma 3: 33 MB), merges.txt, .model
constexpr uint64_t text_file_cap = 1ull << 30;       // evaluation, frequency and calibration texts

// The file's bytes. InputError "<path>: ..." when it is missing, a directory, not
// a regular file (FIFO, socket, device; opened O_NONBLOCK, so nothing waits), larger
// than `max_bytes` ("<n> MB is above the <cap> MB EmbedLab reads for a <what>"), or
// unreadable.
std::string read_regular_file(const std::filesystem::path& path, uint64_t max_bytes, const char* what);

} // namespace embedlab::io
