// What the table methods (table_*.cpp) share: how a family registers its methods and
// rebuilds, progress sub-ranges, accounting from a stored-value count, and the JSON of
// a few fit details. Private to engine/src/methods.
#pragma once

#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/compress.hpp"
#include "embedlab/fourier_embedding.hpp"
#include "embedlab/table_method.hpp"
#include "methods/builtin_methods.hpp"

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

// Defines a method's accessor: its one instance, built on first use from the
// constructor's arguments, if any.
#define EMBEDLAB_TABLE_METHOD_INSTANCE(accessor, Class, ...)                                                 \
    const TableMethod& accessor()                                                                            \
    {                                                                                                        \
        static const Class instance{__VA_ARGS__};                                                            \
        return instance;                                                                                     \
    }

// A family's TableMethods (in the registry's order) and its stored forms' rebuilds.
struct BuiltinTables {
    const char* family; // as builtin_methods.hpp names it: "low_rank"
    std::vector<const TableMethod*> methods;
    std::vector<StoredFormRebuild> rebuilds;
};
// Registers a family's table methods and rebuilds, at the end of its table_<family>.cpp:
//   EMBEDLAB_BUILTIN_TABLES(low_rank, .methods = {&pca_method(), &svd_method()}, .rebuilds = {..})
#define EMBEDLAB_BUILTIN_TABLES(id, ...)                                                                     \
    BuiltinTables id##_tables()                                                                              \
    {                                                                                                        \
        return {.family = #id, __VA_ARGS__};                                                                 \
    }
#define EMBEDLAB_DECLARE_BUILTIN_TABLES(family) BuiltinTables family##_tables();
#define EMBEDLAB_NO_BUILTIN_TABLES(family)
EMBEDLAB_BUILTIN_METHOD_FAMILIES(EMBEDLAB_DECLARE_BUILTIN_TABLES, EMBEDLAB_NO_BUILTIN_TABLES)
#undef EMBEDLAB_DECLARE_BUILTIN_TABLES
#undef EMBEDLAB_NO_BUILTIN_TABLES
// Every family's that has a table half, in builtin_methods.hpp's order (table_methods.cpp).
const std::vector<BuiltinTables>& builtin_tables();

} // namespace embedlab::table_support
