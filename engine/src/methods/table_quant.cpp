// quant (issue 38): the table in a ggml block format, the baseline at equal bytes.
// Its values are all stored (params_after = V d); what falls is their bits, which
// the accounting's storage block carries (bits_per_value_after, bytes_after).
#include <chrono>

#include "embedlab/quant_types.hpp"
#include "embedlab/quantised_table.hpp"
#include "methods/accounting_counts.hpp"
#include "methods/table_method_support.hpp"

namespace embedlab::table_support {

namespace {

// Types with a per-block minimum dequantise as d * q - m: two operations a value.
bool has_minimum(const std::string& type)
{
    for (const char* t : {"q4_1", "q5_1", "q2_k", "q4_k", "q5_k"})
        if (type == t)
            return true;
    return false;
}

// Every value stored at the type's bits; a lookup dequantises a row, the tied head every row.
EmbeddingAccounting quant_accounting(const QuantType& t, int64_t V, int64_t d, int64_t model_params)
{
    const std::string type = t.name;
    using accounting_counts::Count;
    const int64_t per_value = type == "f16" || type == "bf16" ? 0 : has_minimum(type) ? 2 : 1;
    // Checked before account_stored sees them (accounting_counts.hpp): within 2^62.
    const Count vocab(V, "vocab"), dim(d, "dim"), ops(per_value, "operations per value");
    const Count values = multiply(vocab, dim, "parameters");
    auto a = account_stored("quant", V, d, values.value(), model_params, (ops * dim).value(),
                            (2 * values + ops * values).value());
    a.bits_per_value_after = t.bits_per_value;
    return a;
}

class QuantMethod final : public TableMethod {
public:
    std::string name() const override { return "quant"; }
    double fit_work(const CompressionRequest&, double v, double d) const override { return 20 * v * d; }

    void fit(const torch::Tensor& table, CompressedEmbedding& out, int64_t model_params,
             const ProgressFn& progress) const override
    {
        const auto t0 = std::chrono::steady_clock::now();
        auto e = quantise_table(table, out.spec.type, progress);
        out.fit_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        out.spec.type = e->type(); // the canonical (lower-case) name
        out.accounting =
            quant_accounting(*find_quant_type(e->type()), table.size(0), table.size(1), model_params);
        out.fit = {{"type", e->type()},
                   {"bits_per_value", e->bits_per_value()},
                   {"row_bytes", e->blocks().size(1)},
                   {"reference", "ggml's quantize_row_*_ref (llama-quantize --token-embedding-type, no "
                                 "importance matrix)"},
                   {"tied_head", "the dequantised rows, as llama.cpp multiplies them"}};
        out.embedding = std::move(e);
    }

    void spec_fields(const CompressionSpec& spec, nlohmann::ordered_json& j) const override
    {
        j["type"] = spec.type;
    }

    void accounting_fields(const EmbeddingAccounting& a, nlohmann::ordered_json& j) const override
    {
        j["flops_note"] = "lookup: a row dequantised (a multiply a value, and an add where the block has a "
                          "minimum; f16/bf16 a conversion); tied head: every row dequantised, then 2 V d";
    }

    std::string parameters(const CompressionSpec& spec) const override { return "type " + spec.type; }

    void fill_account_defaults(CompressionRequest&) const override {} // counted as given

    void fill_example(CompressionRequest& r, int64_t) const override
    {
        if (r.type.empty())
            r.type = "q8_0";
    }

    EmbeddingAccounting account(const CompressionRequest& r, int64_t vocab, int64_t dim,
                                int64_t model_params) const override
    {
        return quant_accounting(*find_quant_type(r.type), vocab, dim, model_params); // checked: known, fits d
    }
};

} // namespace

EMBEDLAB_TABLE_METHOD_INSTANCE(quant_method, QuantMethod)

// quant's stored form (request_quant.cpp): the blocks as bytes.
StoredFormRebuild quant_rebuild()
{
    return {.form = "quant", .rebuild = [](const TableLayout& t, StoredTensors& f) {
                return std::make_shared<QuantisedTokenEmbedding>(t.parameters.at("type").get<std::string>(),
                                                                 t.dim, f.at("quant.blocks"));
            }};
}

// Registers the family (builtin_methods.hpp lists it).
EMBEDLAB_BUILTIN_TABLES(quant, .methods = {&quant_method()}, .rebuilds = {quant_rebuild()})

} // namespace embedlab::table_support

namespace embedlab {

// uint8: the bytes llama.cpp's blocks are.
std::vector<std::pair<std::string, torch::Tensor>> QuantisedTokenEmbedding::stored_tensors() const
{
    return {{"quant.blocks", blocks_}};
}

} // namespace embedlab
