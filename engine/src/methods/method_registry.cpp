// The method registry (method_registry.hpp). Torch-free: the job checker and its
// fuzzer read it. One row per method; a field left out keeps its default.
#include "embedlab/method_registry.hpp"

#include <stdexcept>

#include "embedlab/error.hpp"
#include "embedlab/name_table.hpp"

namespace embedlab {

const std::vector<MethodDescriptor>& method_registry()
{
    using P = CompressedPart;
    static const std::vector<MethodDescriptor> methods{
        {.id = Method::PCA,
         .name = "pca",
         .part = P::TokenEmbedding,
         .summary = "centred low-rank factors E ~ mu + Z P (METHODS 1)",
         .tied_head_from_factors = true,
         .positions = true,
         .lora = true},
        {.id = Method::SVD,
         .name = "svd",
         .part = P::TokenEmbedding,
         .summary = "uncentred truncated SVD E ~ Z P (METHODS 1)",
         .tied_head_from_factors = true,
         .positions = true,
         .lora = true},
        {.id = Method::TT,
         .name = "tt",
         .part = P::TokenEmbedding,
         .summary = "per-token Tensor-Train cores (METHODS 5)",
         .tied_head_from_factors = true,
         .positions = true,
         .lora = true},
        {.id = Method::Tucker,
         .name = "tucker",
         .part = P::TokenEmbedding,
         .summary = "Tucker (HOSVD) of the tensorised table: shared factors, a core per token (METHODS 5)",
         .tied_head_from_factors = true,
         .positions = true,
         .lora = true},
        {.id = Method::LLE,
         .name = "lle",
         .part = P::TokenEmbedding,
         .summary = "rare rows as LLE mixtures of common rows (METHODS 2)",
         .needs_frequency_text = true,
         .tied_head_from_factors = true,
         .lora = true},
        {.id = Method::LLEUnk,
         .name = "lle-unk",
         .part = P::TokenEmbedding,
         .summary = "rare rows replaced by one fallback row (METHODS 2)",
         .needs_frequency_text = true,
         .tied_head_from_factors = true,
         .lora = true},
        {.id = Method::LLEPCA,
         .name = "lle-pca",
         .part = P::TokenEmbedding,
         .summary = "rare rows in the common rows' PCA basis (METHODS 2)",
         .needs_frequency_text = true,
         .tied_head_from_factors = true,
         .lora = true},
        {.id = Method::Fourier,
         .name = "fourier",
         .part = P::TokenEmbedding,
         .summary = "an MLP of Fourier features of the id (METHODS 4)",
         .tied_head_from_factors = true,
         .lora = true},
        {.id = Method::Flat,
         .name = "flat",
         .part = P::AttentionValues,
         .summary = "head-wise PCA of the values, IPRS ranks (METHODS 3)",
         .needs_calibration_text = true,
         .target_compresses_mlp = true},
    };
    return methods;
}

std::string method_names(const char* separator)
{
    std::string s;
    for (const auto& m : method_registry())
        s += (s.empty() ? "" : separator) + std::string(m.name);
    return s;
}

const MethodDescriptor* find_method(const std::string& name)
{
    return row_with_name(method_registry(), name);
}

const MethodDescriptor& method_descriptor(const std::string& name)
{
    if (const auto* m = find_method(name))
        return *m;
    throw InputError("unknown method '" + name + "' (" + method_names() + ")");
}

const MethodDescriptor& method_descriptor(Method id)
{
    for (const auto& m : method_registry())
        if (m.id == id)
            return m;
    throw std::logic_error("method_descriptor: a Method without a registry row");
}

} // namespace embedlab
