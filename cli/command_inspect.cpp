#include "common.hpp"
#include "embedlab/error.hpp"
#include "embedlab/experiment_request.hpp"
#include "embedlab/text_format.hpp"

namespace embedlab::cli {

Json parameter_json(const ParameterBreakdown& p)
{
    const double total = static_cast<double>(p.total());
    auto share = [&](int64_t n) { return total > 0 ? 100.0 * static_cast<double>(n) / total : 0.0; };
    Json counts = {{"token_embedding", p.token_embedding},
                   {"position_embedding", p.position_embedding},
                   {"attention", p.attention},
                   {"mlp", p.mlp},
                   {"norms", p.norms},
                   {"output_head", p.output_head},
                   {"total", p.total()}};
    if (p.adapters > 0) // unmerged LoRA adapters (finetune)
        counts["adapters"] = p.adapters;
    Json shares = Json::object();
    for (auto& [k, v] : counts.items())
        if (k != "total")
            shares[k] = share(v.get<int64_t>());
    return {{"counts", counts}, {"share_percent", shares}};
}

void print_warnings(const std::vector<std::string>& warnings)
{
    for (const auto& w : warnings)
        std::fprintf(stderr, "embedlab-cli: warning: %s\n", printable(w, w.size()).c_str());
}

int command_inspect(const std::vector<std::string>& argv)
{
    Args args("inspect", argv, {"--tokenizer"}, {"--json", "--quiet", "--no-verify"});
    const auto path = model_argument(args);
    LoadOptions weights_only;
    weights_only.need_tokenizer = false; // inspect works on weights alone; a missing tokenizer is reported
    weights_only.values = WeightValues::ShapesOnly; // shapes and counts: nothing to convert
    weights_only.verify = !args.has("--no-verify");
    auto lm = load_model(path, weights_only);
    std::unique_ptr<Tokenizer> tokenizer;
    std::string tokenizer_problem;
    try {
        tokenizer = load_model_tokenizer(lm.files, load_options(args));
    } catch (const InputError& e) {
        tokenizer_problem = e.what();
    }
    const auto& c = lm.files.config;
    const auto params = lm.model->parameter_breakdown();

    Json files = Json::array();
    for (const auto& f : lm.files.files)
        files.push_back(
            {{"path", f.string()}, {"bytes", std::filesystem::file_size(f)}, {"sha256", sha256_file(f)}});
    Json j = {{"path", path.string()},
              {"format", model_format_name(lm.files.format)},
              {"architecture", c.type_name()},
              {"family", architecture_name(c.arch)},
              {"architecture_facts", architecture_facts(c)},
              {"vocab_size", c.vocab_size},
              {"hidden_size", c.hidden_size},
              {"layers", c.num_layers},
              {"heads", c.num_heads},
              {"kv_heads", c.num_kv_heads},
              {"head_dim", c.head_dim()},
              {"intermediate_size", c.intermediate_size},
              {"max_positions", c.max_positions},
              {"tied_embeddings", c.tied_embeddings},
              {"activation", c.activation},
              {"norm_eps", c.norm_eps},
              {"dtype", lm.files.stored_dtype},
              {"parameters", parameter_json(params)},
              {"sha256", files.empty() ? "" : files[0]["sha256"]},
              {"files", files}};
    if (c.arch == Architecture::Llama)
        j["rope_theta"] = c.rope_theta;
    if (!lm.files.tensor_types_by_kind.empty())
        j["tensor_types_by_kind"] = lm.files.tensor_types_by_kind;
    Json methods = Json::object();
    for (const auto& m : method_applicability(c))
        methods[m.method] = m.applies ? Json("yes") : Json(m.reason);
    j["methods"] = methods;
    if (!c.value_head_dims.empty()) // FLAT-LLM
        j["value_head_dims"] = c.value_head_dims;
    if (!c.mlp_widths.empty())
        j["mlp_widths"] = c.mlp_widths;
    if (tokenizer)
        j["tokenizer"] = {{"kind", tokenizer->kind()}, {"vocab_size", tokenizer->vocab_size()}};
    else
        j["tokenizer"] = {{"error", tokenizer_problem}};
    j["warnings"] = lm.files.warnings;
    j["notes"] = lm.files.notes;

    if (args.has("--json")) {
        print_json(j);
        return 0;
    }
    print_warnings(lm.files.warnings);
    std::printf("%s  (%s, %s, stored %s)\n", path.c_str(), j["format"].get<std::string>().c_str(),
                c.type_name().c_str(), lm.files.stored_dtype.c_str());
    std::printf("  %s\n", joined(architecture_facts(c), "; ").c_str());
    std::printf("  vocab %lld, d %lld, %lld layers, %lld heads (%lld KV), head dim %lld, MLP %lld, "
                "context %lld, %s head\n",
                (long long)c.vocab_size, (long long)c.hidden_size, (long long)c.num_layers,
                (long long)c.num_heads, (long long)c.num_kv_heads, (long long)c.head_dim(),
                (long long)c.intermediate_size, (long long)c.max_positions,
                c.is_encoder()      ? (c.encoder_head == EncoderHead::MaskedLM         ? "masked-LM (tied)"
                                       : c.encoder_head == EncoderHead::Classification ? "classifier"
                                                                                       : "no")
                : c.tied_embeddings ? "tied"
                                    : "untied");
    if (j.contains("value_head_dims"))
        std::printf("  FLAT-LLM: value dims per layer %s%s\n", j["value_head_dims"].dump().c_str(),
                    j.contains("mlp_widths") ? (", MLP widths " + j["mlp_widths"].dump()).c_str() : "");
    for (const auto& note : lm.files.notes)
        std::printf("  note: %s\n", note.c_str());
    if (!lm.files.tensor_types_by_kind.empty()) {
        std::vector<std::string> kinds;
        for (const auto& [kind, type] : lm.files.tensor_types_by_kind)
            kinds.push_back(kind + " " + type);
        std::printf("  stored types: %s\n", joined(kinds, ", ").c_str());
    }
    {
        std::vector<std::string> yes, no;
        for (const auto& m : method_applicability(c))
            (m.applies ? yes : no).push_back(m.applies ? m.method : m.method + " (" + m.reason + ")");
        std::printf("  methods: %s%s%s\n", joined(yes, ", ").c_str(),
                    no.empty() ? "" : "; not: ", joined(no, ", ").c_str());
    }
    std::printf("  tokenizer: %s\n",
                tokenizer
                    ? (tokenizer->kind() + ", " + std::to_string(tokenizer->vocab_size()) + " tokens").c_str()
                    : tokenizer_problem.c_str());
    std::printf("  parameters:\n");
    for (auto& [k, v] : j["parameters"]["counts"].items()) {
        if (k == "total")
            continue;
        std::printf("    %-20s %12lld  %6.2f%%\n", k.c_str(), (long long)v.get<int64_t>(),
                    j["parameters"]["share_percent"][k].get<double>());
    }
    std::printf("    %-20s %12lld\n", "total", (long long)params.total());
    for (const auto& f : files)
        std::printf("  %s  %s\n", f["sha256"].get<std::string>().c_str(),
                    f["path"].get<std::string>().c_str());
    return 0;
}

} // namespace embedlab::cli
