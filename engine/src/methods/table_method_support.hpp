// What the table methods (table_*.cpp) share: progress sub-ranges, accounting from a
// stored-value count, and the JSON of a few fit details. Private to engine/src/methods.
#pragma once

#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/compress.hpp"
#include "embedlab/fourier_embedding.hpp"
#include "embedlab/table_method.hpp"

namespace embedlab::table_support {

// printf's formatting of one value into a string, for fit_summary's lines.
template <class T> std::string format_number(const char* format, T value)
{
    char buf[64];
    if constexpr (std::is_integral_v<T>)
        std::snprintf(buf, sizeof buf, format, static_cast<long long>(value));
    else
        std::snprintf(buf, sizeof buf, format, static_cast<double>(value));
    return buf;
}

// progress(from + (to - from) * done / total, 100): a part of the whole bar.
ProgressFn sub_progress(const ProgressFn& progress, int64_t from, int64_t to);

// Accounting from a stored-value count, for methods without a closed form.
EmbeddingAccounting account_stored(const std::string& method, int64_t V, int64_t d, int64_t params_after,
                                   int64_t model_params, int64_t flops_lookup, int64_t flops_head);

// Cosine of rebuilt to original rare rows: the LLE paper's Table 9 distribution.
nlohmann::ordered_json rare_cosine_json(const torch::Tensor& table, const PartialSparseTokenEmbedding& e);

// At most `limit` points of the loss curve, evenly spaced, first and last kept.
nlohmann::ordered_json loss_curve_json(const std::vector<FourierLossPoint>& curve, size_t limit = 200);

// An EnergyEstimate's fields (TensorSLM eqs. 2-5) for accounting_json.
nlohmann::ordered_json energy_json(const EnergyEstimate& e);

// Defines a method's accessor (the list below): its one instance, built on first use
// from the constructor's arguments, if any.
#define EMBEDLAB_TABLE_METHOD_INSTANCE(accessor, Class, ...)                                                 \
    const TableMethod& accessor()                                                                            \
    {                                                                                                        \
        static const Class instance{__VA_ARGS__};                                                            \
        return instance;                                                                                     \
    }

// The methods, one function per file (table_methods.cpp lists them).
const TableMethod& pca_method();
const TableMethod& svd_method();
const TableMethod& tensor_train_method();
const TableMethod& tucker_method();
const TableMethod& aq_method();
const TableMethod& lle_method();
const TableMethod& lle_unk_method();
const TableMethod& lle_pca_method();
const TableMethod& fourier_method();
const TableMethod& quant_method();

// The stored forms' rebuilds, beside each method (table_methods.cpp lists them):
// pca, svd and lrf; lle, lle-unk and lle-pca.
std::vector<StoredFormRebuild> low_rank_rebuilds();
StoredFormRebuild tensor_train_rebuild();
StoredFormRebuild tucker_rebuild();
std::vector<StoredFormRebuild> partial_sparse_rebuilds();
StoredFormRebuild fourier_rebuild();
StoredFormRebuild quant_rebuild();
StoredFormRebuild aq_rebuild();

} // namespace embedlab::table_support
