#include "embedlab/quantised_table.hpp"

#include <ATen/Parallel.h>

#include "embedlab/quant_types.hpp"
#include "io/ggml_quantize.hpp"
#include "io/gguf_quants.hpp"
#include "methods/table_checks.hpp"

namespace embedlab {

namespace {

const QuantType& known_type(const std::string& type)
{
    const auto* t = find_quant_type(type);
    if (!t)
        throw InputError("quant type '" + type + "' is not one EmbedLab writes (" + quant_type_names() + ")");
    return *t;
}

int64_t row_bytes(const QuantType& t, int64_t dim)
{
    const int64_t block = t.block_values;
    if (dim < 1 || dim % block != 0)
        throw InputError(std::string(t.name) + " stores blocks of " + std::to_string(block) +
                         " values; a row of " + std::to_string(dim) + " is not a whole number of blocks (" +
                         "the types that fit: " + quant_type_names(dim) + ")");
    return static_cast<int64_t>(io::ggml_row_bytes(t.ggml_type, dim));
}

} // namespace

QuantisedTokenEmbedding::QuantisedTokenEmbedding(const std::string& type, int64_t dim, torch::Tensor blocks)
    : dim_(dim)
{
    const auto& t = known_type(type);
    type_ = t.name;
    ggml_type_ = t.ggml_type;
    const int64_t bytes = row_bytes(t, dim);
    if (blocks.scalar_type() != torch::kUInt8 || blocks.dim() != 2 || blocks.size(1) != bytes)
        throw InputError("quant.blocks must be uint8 [V, " + std::to_string(bytes) + "] (" + type_ +
                         " rows of " + std::to_string(dim) + " values)");
    blocks_ = blocks.contiguous();
}

double QuantisedTokenEmbedding::bits_per_value() const
{
    return known_type(type_).bits_per_value;
}

torch::Tensor QuantisedTokenEmbedding::lookup(const torch::Tensor& ids) const
{
    const torch::Tensor flat = ids.reshape({-1}).to(torch::kLong).contiguous();
    const int64_t n = flat.numel(), vocab = vocab_size(), bytes = blocks_.size(1);
    const int64_t* id = flat.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i)
        if (id[i] < 0 || id[i] >= vocab)
            throw InputError("token id " + std::to_string(id[i]) + " is outside the table's 0.." +
                             std::to_string(vocab - 1));
    auto out = torch::empty({n, dim_}, torch::kFloat32);
    const uint8_t* src = blocks_.data_ptr<uint8_t>();
    float* dst = out.data_ptr<float>();
    at::parallel_for(0, n, 256, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
            io::dequantize_row(ggml_type_, src + id[i] * bytes, dim_, dst + i * dim_);
    });
    auto sizes = ids.sizes().vec();
    sizes.push_back(dim_);
    return out.reshape(sizes);
}

torch::Tensor QuantisedTokenEmbedding::rebuilt_rows() const
{
    return lookup(torch::arange(vocab_size(), torch::kLong));
}

torch::Tensor QuantisedTokenEmbedding::project(const torch::Tensor& hidden) const
{
    return torch::matmul(hidden, rebuilt_rows().t());
}

std::shared_ptr<QuantisedTokenEmbedding> quantise_table(const torch::Tensor& table, const std::string& type,
                                                        const ProgressFn& progress)
{
    const auto& t = known_type(type);
    if (table.dim() != 2)
        throw InputError("quant: the table must be [V, d], got " + std::to_string(table.dim()) +
                         " dimensions");
    const int64_t vocab = table.size(0), dim = table.size(1), bytes = row_bytes(t, dim);
    const torch::Tensor rows = table.to(torch::kFloat32).contiguous();
    methods::check_finite_rows(rows);
    auto blocks = torch::empty({vocab, bytes}, torch::kUInt8);
    const float* src = rows.data_ptr<float>();
    uint8_t* dst = blocks.data_ptr<uint8_t>();
    // In chunks, so a progress callback can cancel between them.
    const int64_t chunk = std::max<int64_t>(1, (int64_t(1) << 22) / dim);
    for (int64_t first = 0; first < vocab; first += chunk) {
        const int64_t last = std::min(vocab, first + chunk);
        at::parallel_for(first, last, 64, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i)
                io::quantize_row(t.ggml_type, src + i * dim, dim, dst + i * bytes);
        });
        report_progress(progress, last, vocab);
    }
    return std::make_shared<QuantisedTokenEmbedding>(t.name, dim, std::move(blocks));
}

} // namespace embedlab
