// A token-embedding compression method behind one interface: how it fits a table, what
// its stored parameters and accounting look like in JSON, and how a results row names
// its settings. compress_table, spec_json, accounting_json and the experiment API call
// these; none of them dispatches on a method name. Each method is one file in
// engine/src/methods/table_*.cpp, listed once in table_methods.cpp.
//
//   const auto& m = embedlab::table_method("pca");      // InputError: unknown, or not a table method
//   m.fit(table, out, model_params, progress);          // out.embedding, accounting, fit record
//   m.parameters(out.spec);                             // "rank 32"
//
// Thread safety: the methods are stateless singletons; fit is reentrant.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/compress.hpp"
#include "embedlab/method_registry.hpp"

namespace embedlab {

class TableMethod {
public:
    virtual ~TableMethod() = default;
    // The registry row this method implements (method_registry.hpp).
    virtual Method id() const = 0;
    // Fits `table` [V, d] as out.spec asks: sets out.embedding, out.accounting, out.fit,
    // out.fit_seconds, and the spec's values the fit chose (tt eps: the ranks). Progress
    // runs 0..100 over the fit.
    virtual void fit(const torch::Tensor& table, CompressedEmbedding& out, int64_t model_params,
                     const ProgressFn& progress) const = 0;
    // The spec's own fields, after "method", as embedlab.json's "parameters" hold them.
    virtual void spec_fields(const CompressionSpec& spec, nlohmann::ordered_json& j) const = 0;
    // Accounting fields beyond the common ones (accounting_json); none by default.
    virtual void accounting_fields(const EmbeddingAccounting&, nlohmann::ordered_json&) const {}
    // The settings as run in a few words, e.g. "rank 32", "shape 4x8x4, ranks 1,4,4,1".
    virtual std::string parameters(const CompressionSpec& spec) const = 0;
};

// Every table method, in the registry's order.
const std::vector<const TableMethod*>& table_methods();
// The table method called `name`: InputError for an unknown name, or for a method that
// compresses another part (flat: the attention values).
const TableMethod& table_method(const std::string& name);

} // namespace embedlab
