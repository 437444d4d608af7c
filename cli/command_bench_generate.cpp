// bench generate: prompt processing and generation tokens/s over the KV cache,
// beside llama.cpp's llama-bench (pp / tg) on the same f32 weights and threads.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common.hpp"
#include "embedlab/generate.hpp"
#include "embedlab/generation_weights.hpp"
#include "embedlab/peer_environment.hpp"
#include "llamacpp_compare.hpp"
#include "machine_limits.hpp"

namespace embedlab::cli {

namespace {

struct Speed {
    double mean = 0, stddev = 0;
};

Speed speed_of(const std::vector<double>& tokens_per_second)
{
    Speed s;
    for (double v : tokens_per_second)
        s.mean += v / static_cast<double>(tokens_per_second.size());
    for (double v : tokens_per_second)
        s.stddev += (v - s.mean) * (v - s.mean) /
                    static_cast<double>(std::max<size_t>(1, tokens_per_second.size() - 1));
    s.stddev = std::sqrt(s.stddev);
    return s;
}

} // namespace

int bench_generate(const std::vector<std::string>& argv)
{
    Args args("bench generate", argv,
              {"--prompt-tokens", "--tokens", "--repeat", "--tokenizer", "--llamacpp", "--weights"},
              {"--json", "--quiet", "--compare-llamacpp"});
    std::vector<std::filesystem::path> models;
    for (const auto& m : args.positional())
        models.emplace_back(m);
    if (models.empty())
        models.push_back(default_model_path());
    const int64_t prompt_tokens = args.get_int("--prompt-tokens", 128, 1, 1 << 16);
    const int64_t tokens = args.get_int("--tokens", 128, 1, 1 << 16);
    const int repeat = static_cast<int>(args.get_int("--repeat", 3, 1, 100));
    const auto llamacpp =
        requested_llamacpp(args.get("--llamacpp"), args.has("--compare-llamacpp"), "bench generate");
    const auto weights = parse_generation_weights(args.get("--weights").value_or("half"));

    // The machine's limits first, on a quiet machine: each row's share of them (issue 63).
    const MachineLimits limits = measure_machine();
    Json results = Json::array();
    for (const auto& path : models) {
        // The GGUF export needs the tokenizer.
        const auto lm = load_model_for_generation(path, load_options(args), weights);
        const bool half = holds_half_weights(*lm.model);
        const int64_t V = lm.model->config().vocab_size;
        if (prompt_tokens + tokens > lm.model->max_context())
            throw InputError("bench generate: " + std::to_string(prompt_tokens) + " + " +
                             std::to_string(tokens) + " tokens exceed " + path.string() + "'s context of " +
                             std::to_string(lm.model->max_context()));
        // pp: a prompt of arbitrary ids read in one call, as llama-bench does; tg: tokens
        // decoded one by one from a 1-token prompt with an empty cache before it.
        std::vector<int32_t> prompt(static_cast<size_t>(prompt_tokens));
        for (size_t i = 0; i < prompt.size(); ++i)
            prompt[i] = static_cast<int32_t>((i * 7919 + 11) % static_cast<size_t>(V));
        const GenerationOptions pp_options{.max_tokens = 1, .stop_at_eos = false, .top_n = 0};
        const GenerationOptions tg_options{.max_tokens = tokens, .stop_at_eos = false, .top_n = 0};
        generate(*lm.model, nullptr, std::span(prompt).first(std::min<size_t>(prompt.size(), 8)),
                 {.max_tokens = 8, .stop_at_eos = false, .top_n = 0}); // warm-up
        std::vector<double> pp, tg;
        for (int r = 0; r < repeat; ++r) {
            pp.push_back(generate(*lm.model, nullptr, prompt, pp_options).prompt_tokens_per_second);
            tg.push_back(
                generate(*lm.model, nullptr, std::span(prompt).first(1), tg_options).tokens_per_second);
        }
        const auto ours_pp = speed_of(pp), ours_tg = speed_of(tg);
        const auto b = lm.model->parameter_breakdown();
        auto cost = token_cost(b.attention, b.mlp, b.norms,
                               lm.model->config().tied_embeddings ? b.token_embedding : b.output_head);
        if (half) // 2 bytes a weight (the norms' few float32 values aside)
            cost.weight_bytes /= 2;
        Json row = {{"model", path.string()},
                    {"embedding", lm.model->token_embedding().kind()},
                    {"weights", half ? "half" : "f32"},
                    {"pp_tokens_per_second", ours_pp.mean},
                    {"pp_stddev", ours_pp.stddev},
                    {"tg_tokens_per_second", ours_tg.mean},
                    {"tg_stddev", ours_tg.stddev},
                    // tg reads every weight once a token; pp multiplies them by a prompt's tokens.
                    {"weight_bytes_per_token", cost.weight_bytes},
                    {"tg_gbps", ours_tg.mean * cost.weight_bytes / 1e9},
                    {"tg_share_of_read_bandwidth", ours_tg.mean * cost.weight_bytes / 1e9 / limits.read_gbps},
                    // The head multiplies only the prompt's last row.
                    {"pp_gflops", ours_pp.mean * cost.prompt_flops(prompt_tokens) / 1e9},
                    {"pp_share_of_gemm_peak",
                     ours_pp.mean * cost.prompt_flops(prompt_tokens) / 1e9 / limits.gemm_gflops}};
        if (llamacpp) {
            if (!args.has("--quiet"))
                std::fprintf(stderr, "bench %s: llama-bench (%s GGUF export)\n",
                             path.filename().string().c_str(), half ? "f16" : "f32");
            const auto ref =
                run_llama_bench(*llamacpp, lm, prompt_tokens, tokens, repeat, at::get_num_threads(),
                                half ? GgufExportType::F16 : GgufExportType::F32);
            if (!ref.skipped.empty()) {
                row["llamacpp"] = {{"skipped", ref.skipped}};
            } else {
                row["llamacpp"] = {{"pp_tokens_per_second", ref.pp.tokens_per_second},
                                   {"pp_stddev", ref.pp.stddev},
                                   {"tg_tokens_per_second", ref.tg.tokens_per_second},
                                   {"tg_stddev", ref.tg.stddev}};
                // Ours over llama.cpp's: above 1 is faster.
                row["pp_vs_llamacpp"] = ours_pp.mean / ref.pp.tokens_per_second;
                row["tg_vs_llamacpp"] = ours_tg.mean / ref.tg.tokens_per_second;
            }
        }
        results.push_back(row);
    }
    Json j = {{"bench", "generate"},
              {"prompt_tokens", prompt_tokens},
              {"tokens", tokens},
              {"repeat", repeat},
              {"threads", at::get_num_threads()},
              {"openmp_wait_policy", openmp_wait_policy()},
              {"llamacpp_openmp_wait_policy", peer_openmp_wait_policy()},
              {"machine", machine_json(limits)},
              {"results", results}};
    if (args.has("--json")) {
        print_json(j);
        return 0;
    }
    std::printf(
        "bench generate: pp%lld, tg%lld, %d repeats, %d threads, OMP_WAIT_POLICY %s (llama.cpp: %s)\n",
        (long long)prompt_tokens, (long long)tokens, repeat, at::get_num_threads(),
        openmp_wait_policy().c_str(), peer_openmp_wait_policy().c_str());
    std::printf("machine: read %.1f GB/s, float32 GEMM %.1f GFLOP/s (bench machine)\n", limits.read_gbps,
                limits.gemm_gflops);
    std::printf("%-36s %-12s %18s %18s %18s %18s\n", "model", "embedding", "pp tok/s", "tg tok/s",
                "llama.cpp pp", "llama.cpp tg");
    for (const auto& r : results) {
        const auto cell = [&](const Json& o, const char* mean, const char* sd) {
            char buf[64];
            std::snprintf(buf, sizeof buf, "%.1f +- %.1f", o[mean].get<double>(), o[sd].get<double>());
            return std::string(buf);
        };
        std::string lpp = "-", ltg = "-";
        if (r.contains("llamacpp") && !r["llamacpp"].contains("skipped")) {
            lpp = cell(r["llamacpp"], "pp_tokens_per_second", "pp_stddev");
            ltg = cell(r["llamacpp"], "tg_tokens_per_second", "tg_stddev");
        } else if (r.contains("llamacpp")) {
            lpp = ltg = "skipped";
        }
        const std::string embedding =
            r["embedding"].get<std::string>() + (r["weights"] == "half" ? " (half)" : "");
        std::printf("%-36s %-12s %18s %18s %18s %18s\n", r["model"].get<std::string>().c_str(),
                    embedding.c_str(), cell(r, "pp_tokens_per_second", "pp_stddev").c_str(),
                    cell(r, "tg_tokens_per_second", "tg_stddev").c_str(), lpp.c_str(), ltg.c_str());
        // Above 100%: a small model's weights stay in the caches from one token to the next.
        const double read_share = r["tg_share_of_read_bandwidth"].get<double>();
        const std::string cached =
            read_share > 1
                ? ", more than memory gives: the " +
                      std::to_string(std::lround(r["weight_bytes_per_token"].get<double>() / 1e6)) +
                      " MB a token reads stay in the caches"
                : "";
        std::printf(
            "  tg reads %.2f GB/s of weights (%.0f%% of the read bandwidth%s); pp computes %.1f GFLOP/s "
            "(%.0f%% of the GEMM peak)\n",
            r["tg_gbps"].get<double>(), 100 * read_share, cached.c_str(), r["pp_gflops"].get<double>(),
            100 * r["pp_share_of_gemm_peak"].get<double>());
        if (r.contains("llamacpp") && r["llamacpp"].contains("skipped"))
            std::printf("  llama.cpp skipped: %s\n", r["llamacpp"]["skipped"].get<std::string>().c_str());
    }
    return 0;
}

} // namespace embedlab::cli
