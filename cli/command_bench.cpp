// bench eval: perplexity throughput one window at a time (what a PyTorch eager
// loop does) and with windows batched, on the same ids.
#include "common.hpp"
#include "embedlab/eval.hpp"
#include "progress_printer.hpp"

namespace embedlab::cli {

namespace {

int bench_eval(const std::vector<std::string>& argv)
{
    Args args("bench eval", argv, {"--text", "--ctx", "--batch", "--tokenizer"}, {"--json", "--quiet"});
    std::vector<std::filesystem::path> models;
    for (const auto& m : args.positional())
        models.emplace_back(m);
    if (models.empty())
        models.push_back(default_model_path());
    const std::filesystem::path text = args.get("--text").value_or(default_sample_text_path().string());
    const int64_t ctx = args.get_int("--ctx", 128, 1, 1 << 20);
    const int64_t batch = args.get_int("--batch", 0, 0, 1 << 16);
    const std::string content = read_text_file(text);

    Json results = Json::array();
    for (const auto& path : models) {
        auto lm = load_model(path, load_options(args));
        const auto ids = lm.tokenizer->encode(content);
        // Warm-up: first calls pay for allocator and thread-pool start-up.
        evaluate_perplexity(*lm.model, std::span(ids).first(std::min<size_t>(ids.size(), ctx + 1)),
                            {.ctx = ctx, .stride = ctx, .batch_windows = 1});
        PerplexityResult one, batched;
        {
            ProgressPrinter p("bench " + path.filename().string() + " (1 window/batch)", "windows",
                              args.has("--quiet"));
            one = evaluate_perplexity(*lm.model, ids, {.ctx = ctx, .stride = ctx, .batch_windows = 1},
                                      p.callback());
        }
        {
            ProgressPrinter p("bench " + path.filename().string() + " (batched)", "windows",
                              args.has("--quiet"));
            batched = evaluate_perplexity(*lm.model, ids,
                                          {.ctx = ctx, .stride = ctx, .batch_windows = batch}, p.callback());
        }
        results.push_back({{"model", path.string()},
                           {"tokens", batched.tokens},
                           {"ppl", batched.ppl},
                           {"one_window_tokens_per_second", one.tokens_per_second},
                           {"batched_tokens_per_second", batched.tokens_per_second},
                           {"batch_windows", batched.batch_windows},
                           {"speedup", batched.tokens_per_second / one.tokens_per_second}});
    }
    Json j = {{"bench", "eval"},      {"text", text.string()}, {"ctx", ctx},
              {"threads", at::get_num_threads()}, {"results", results}};
    if (args.has("--json")) {
        print_json(j);
        return 0;
    }
    std::printf("bench eval: %s, ctx %lld, %d threads\n", text.c_str(), (long long)ctx,
                at::get_num_threads());
    std::printf("%-40s %8s %10s %14s %14s %8s\n", "model", "tokens", "ppl", "1-window tok/s",
                "batched tok/s", "batch");
    for (const auto& r : results)
        std::printf("%-40s %8lld %10.4f %14.0f %14.0f %8lld\n", r["model"].get<std::string>().c_str(),
                    (long long)r["tokens"].get<int64_t>(), r["ppl"].get<double>(),
                    r["one_window_tokens_per_second"].get<double>(),
                    r["batched_tokens_per_second"].get<double>(),
                    (long long)r["batch_windows"].get<int64_t>());
    return 0;
}

} // namespace

int command_bench(const std::vector<std::string>& argv)
{
    if (argv.empty() || argv[0] != "eval")
        throw InputError("bench: expected 'bench eval [MODEL...]'");
    return bench_eval(std::vector<std::string>(argv.begin() + 1, argv.end()));
}

} // namespace embedlab::cli
