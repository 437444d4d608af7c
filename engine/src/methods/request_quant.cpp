// quant's registry row (issue 38): the table itself in one of ggml's block formats,
// the baseline a method is read against at equal bytes. A type whose blocks do not
// divide d is refused (llama.cpp asserts there), naming the types that fit. Its
// stored form.
#include "embedlab/quant_types.hpp"
#include "io/gguf_quants.hpp"
#include "methods/request_support.hpp"

namespace embedlab::method_rows {

MethodDescriptor quant()
{
    return {
        .id = Method::Quant,
        .name = "quant",
        .part = CompressedPart::TokenEmbedding,
        .summary = "the table itself in a ggml block format (f16 .. q2_k), bit-identical to llama-quantize's "
                   "--token-embedding-type: the baseline at equal bytes (issue 38)",
        .tied_head_from_factors = true,
        .positions = true,
        .bytes_baseline = true,
        .stored_as = "quant",
        .fields = {"type"},
        .check =
            [](const CompressionRequest& r, int64_t d, const RequestFail& fail) {
                const auto* t = find_quant_type(r.type);
                if (!t)
                    fail("type",
                         (r.type.empty() ? std::string("is required") : "'" + r.type + "' is not one") +
                             ": quant takes " + quant_type_names());
                if (const std::string misfit = quant_type_misfit(*t, d); !misfit.empty())
                    fail("type", misfit);
            },
        .describe = [](const CompressionRequest& r) { return "quant " + r.type; },
        // The baseline series: the table at each ggml type (check_request refuses one
        // that is unknown or whose blocks do not divide d, naming those that do).
        .sweep = {.options = {"--types"},
                  .usage = "--types T1,T2,.. (" + quant_type_names() + ")",
                  .settings =
                      [](const SweepValues& values, const CompressionRequest& base, int64_t) {
                          const auto types = values.words("--types");
                          if (types.empty())
                              throw InputError("sweep: --method quant needs --types T1,T2,.. (" +
                                               quant_type_names() + ")");
                          return each_setting(
                              types, base, [](CompressionRequest& r, const std::string& t) { r.type = t; });
                      }},
        .example = R"({"type": "q8_0"})"};
}

} // namespace embedlab::method_rows

namespace embedlab::method_rows {

// quant.blocks [V, row bytes]: the ggml blocks of every row as bytes (uint8), the bytes
// llama.cpp's blocks are; the type fixes a row's length.
StoredForm quant_form()
{
    return {
        .name = "quant", .value_bytes = 1, .layout = [](const StoredBlock& b, TableLayout& t) {
            const auto& type = b.field("type");
            const auto* q = type.is_string() ? find_quant_type(type.get<std::string>()) : nullptr;
            if (!q)
                b.fail("quant type " + type.dump() + " is not one EmbedLab reads (" + quant_type_names() +
                       ")");
            if (t.dim % q->block_values != 0)
                b.fail(std::string("quant type ") + q->name +
                       " does not fit rows of d = " + std::to_string(t.dim));
            t.needs("quant.blocks", {t.rows, static_cast<int64_t>(io::ggml_row_bytes(q->ggml_type, t.dim))});
            t.parameters = {{"type", q->name}};
        }};
}

// Registers the family (builtin_methods.hpp lists it).
EMBEDLAB_BUILTIN_ROWS(quant, .methods = {quant()}, .forms = {quant_form()})

} // namespace embedlab::method_rows
