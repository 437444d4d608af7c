// Element types the readers accept on disk, and turning mapped bytes into
// float32 tensors: F32 is wrapped zero-copy when aligned, F16/BF16 converted.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "io/mapped_file.hpp"
#include "io/weight_arena.hpp"

namespace embedlab::io {

enum class StoredType { F32, F16, BF16 };

const char* stored_type_name(StoredType t);                               // "F32", "F16", "BF16"
uint64_t stored_type_size(StoredType t);                                  // bytes per element
std::optional<StoredType> stored_type_from_name(const std::string& name); // "F32" ... ; none for others

float f16_to_f32(uint16_t bits);
float bf16_to_f32(uint16_t bits);

// Float32 contiguous tensor of `shape` from the bytes at `offset` in `file`.
// The caller has checked that the bytes lie inside the file. Aligned F32 data is
// wrapped without copying (the tensor keeps `file` mapped while it lives), or, for a
// matrix under KeepHalfMatrices, copied into the scope's arena.
// Converted bytes are released from memory (MappedFile::release).
torch::Tensor tensor_from_mapped(const std::shared_ptr<MappedFile>& file, uint64_t offset, StoredType type,
                                 const std::vector<int64_t>& shape);

// While one lives on a thread, the safetensors and GGUF readers keep f16/bf16 matrices (2-D
// tensors) in their stored type instead of converting them to float32
// (load_model_for_generation: generation reads half the bytes per token).
// The matrices kept, and float32 ones, are copied into one WeightArena per file (huge
// pages: weight_arena.hpp).
class KeepHalfMatrices {
public:
    KeepHalfMatrices();
    ~KeepHalfMatrices();
    KeepHalfMatrices(const KeepHalfMatrices&) = delete;
    KeepHalfMatrices& operator=(const KeepHalfMatrices&) = delete;
    static bool active(); // on this thread
    // The arena for `file`'s matrices in the innermost scope on this thread (made on
    // first use, as large as the file); nullptr outside every scope.
    static std::shared_ptr<WeightArena> arena_for(const MappedFile& file);

private:
    KeepHalfMatrices* previous_;
    std::vector<std::pair<const MappedFile*, std::shared_ptr<WeightArena>>> arenas_;
};

// A kHalf (F16) or kBFloat16 (BF16) tensor of `shape` from the bytes at `offset`:
// copied into the scope's WeightArena under KeepHalfMatrices (the file's pages
// released), else wrapped without copying when 2-byte aligned (the tensor keeps
// `file` mapped).
torch::Tensor half_tensor_from_mapped(const std::shared_ptr<MappedFile>& file, uint64_t offset,
                                      StoredType type, const std::vector<int64_t>& shape);

// Whether `n` stored values at `src` hold NaN or Inf, read straight from their
// bits (no float32 copy; inspect scans 16-bit files this way).
struct NonFinite {
    bool nan = false, inf = false;
};
NonFinite scan_non_finite(const uint8_t* src, StoredType type, int64_t n);
// "NaN in tensor NAME" / "Inf in ..." / "NaN and Inf in ..."; "" when `f` found neither.
std::string non_finite_warning(const std::string& name, NonFinite f);

// "F32" when one type was stored, "mixed" for several, "" for none.
std::string summarize_stored_types(const std::set<std::string>& names);

} // namespace embedlab::io
