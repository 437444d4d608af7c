#include "model_summary.hpp"

#include <filesystem>

#include <torch/version.h>

#include "embedlab/experiment_request.hpp"
#include "embedlab/model.hpp"
#include "embedlab/resources.hpp"

namespace embedlab::app {

ModelSummary summarize_model(const std::string& path)
{
    ModelSummary s;
    s.path = path;
    try {
        // Shapes and counts only (as inspect): a 0.5B model's weights are not
        // converted just to be counted, and the analyses that follow load their own.
        auto lm = load_model(path, {.values = WeightValues::ShapesOnly});
        const auto& c = lm.files.config;
        s.format = model_format_name(lm.files.format);
        s.architecture = c.type_name();
        s.facts = architecture_facts(c);
        for (const auto& m : method_applicability(c))
            if (!m.applies)
                s.not_applicable.push_back(m.method + " (" + m.reason + ")");
        s.dtype = lm.files.stored_dtype;
        s.tokenizer = lm.tokenizer->kind();
        s.vocab_size = c.vocab_size;
        s.hidden_size = c.hidden_size;
        s.layers = c.num_layers;
        s.heads = c.num_heads;
        s.kv_heads = c.num_kv_heads;
        s.tied = c.tied_embeddings;
        s.encoder = c.is_encoder();
        s.masked_lm = c.is_encoder() && c.encoder_head == EncoderHead::MaskedLM;
        const auto p = lm.model->parameter_breakdown();
        s.parameters = {{"token embedding", p.token_embedding},
                        {"position embedding", p.position_embedding},
                        {"attention", p.attention},
                        {"MLP", p.mlp},
                        {"norms", p.norms},
                        {"output head", p.output_head}};
        s.total_parameters = p.total();
        s.warnings = lm.files.warnings;
    } catch (const std::exception& e) {
        s.error = e.what();
    }
    return s;
}

std::string default_model()
{
    return default_model_path().string();
}

std::string library_versions()
{
    return std::string("EmbedLab ") + EMBEDLAB_VERSION + ", libtorch " + TORCH_VERSION;
}

std::string docs_page_path(const std::string& page)
{
    // resources/models/<model> -> the repository (or install prefix) holding docs/.
    const auto file = default_model_path().parent_path().parent_path().parent_path() / "docs" / page;
    std::error_code ec;
    return std::filesystem::is_regular_file(file, ec) ? file.string() : std::string();
}

} // namespace embedlab::app
