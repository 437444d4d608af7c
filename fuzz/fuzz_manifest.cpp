// A compressed model's embedlab.json: format version, method blocks and their
// parameters, the factor-tensor list, recorded digests and FLAT-LLM layer widths.
// Every table layout the parser accepts must need only tensors of non-negative
// extent under the table's prefix: those shapes are what the file is held to.
#include <cstdlib>

#include "fuzz_support.hpp"
#include "model/manifest_layout.hpp"

namespace {

void check_table(const embedlab::detail::TableLayout& t)
{
    if (t.tensors.empty())
        std::abort();
    for (const auto& [name, shape] : t.tensors) {
        if (name.rfind(t.prefix, 0) != 0)
            std::abort();
        for (int64_t extent : shape)
            if (extent < 0)
                std::abort();
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
    using namespace embedlab;
    const std::string text(fuzz::as_text(data, size));
    // The bundled tinygpt2 (whose real manifests seed the corpus) and a llama-like model.
    static const detail::ManifestDims gpt2{.vocab = 50257,
                                           .max_positions = 256,
                                           .dim = 128,
                                           .has_position_table = true,
                                           .architecture = "gpt2",
                                           .token_prefix = "wte."};
    static const detail::ManifestDims llama{.vocab = 512,
                                            .max_positions = 512,
                                            .dim = 64,
                                            .has_position_table = false,
                                            .architecture = "llama",
                                            .token_prefix = "embed_tokens."};
    for (const auto* dims : {&gpt2, &llama})
        fuzz::expect_input_errors([&] {
            const auto layout = detail::parse_manifest_layout(text, *dims, "model");
            if (layout.flat != (layout.tokens == std::nullopt))
                std::abort();
            if (layout.tokens)
                check_table(*layout.tokens);
            if (layout.positions)
                check_table(*layout.positions);
        });
    fuzz::expect_input_errors([&] {
        for (const auto& record : detail::parse_weights_files(text, "model/embedlab.json"))
            if (record.file.empty() || record.file.find('/') != std::string::npos)
                std::abort();
    });
    fuzz::expect_input_errors([&] { detail::parse_layer_dims(text, "model/embedlab.json"); });
    return 0;
}
