// embedlab-cli generate: a model's continuation of a prompt, streamed; with
// --compare, the original's beside it and where the two part.
#include <cmath>
#include <cstdio>

#include "common.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/generate.hpp"
#include "embedlab/generation_weights.hpp"
#include "embedlab/text_format.hpp"
#include "progress_printer.hpp"

namespace embedlab::cli {

namespace {

void print_stats(const char* who, const Generation& g)
{
    std::fprintf(stderr,
                 "%s: prompt %zu tokens in %.3f s (%.1f tokens/s); %zu generated in %.3f s (%.1f tokens/s); "
                 "stop: %s\n",
                 who, g.prompt.size(), g.prompt_seconds, g.prompt_tokens_per_second, g.tokens.size(),
                 g.generate_seconds, g.tokens_per_second, g.stop_reason.c_str());
}

// The first generated position where the two continuations differ (-1: none within both).
int64_t first_difference(const Generation& a, const Generation& b)
{
    const size_t n = std::min(a.tokens.size(), b.tokens.size());
    for (size_t i = 0; i < n; ++i)
        if (a.tokens[i].id != b.tokens[i].id)
            return static_cast<int64_t>(i);
    return a.tokens.size() == b.tokens.size() ? -1 : static_cast<int64_t>(n);
}

void print_comparison(const std::string& prompt, const Generation& model, const Generation& original,
                      const Tokenizer& tokenizer)
{
    const int64_t differ = first_difference(model, original);
    std::printf("\n--- original:\n%s%s\n---\n", prompt.c_str(), original.text.c_str());
    if (differ < 0)
        std::printf("the continuations are the same token for token\n");
    else
        std::printf("the continuations part at generated token %lld\n", static_cast<long long>(differ));
    double kl = 0;
    for (const auto& t : model.tokens)
        kl += t.kl;
    std::printf("mean KL(original || model) per generated token: %.4g nats\n\n",
                kl / static_cast<double>(model.tokens.size()));
    std::printf("%4s  %-16s %9s %9s %6s  %s\n", "#", "model's token", "logprob", "KL", "rank",
                "original's top");
    for (size_t i = 0; i < model.tokens.size(); ++i) {
        const auto& t = model.tokens[i];
        const auto top =
            t.reference_top.empty() ? std::string() : tokenizer.token_text(t.reference_top[0].id);
        std::printf("%4zu  %-16s %9.3f %9.4f %6lld  %s\n", i, printable(t.piece, 16).c_str(), t.logprob, t.kl,
                    static_cast<long long>(t.reference_rank), printable(top, 16).c_str());
    }
}

} // namespace

int command_generate(const std::vector<std::string>& argv)
{
    Args args("generate", argv,
              {"--prompt", "--prompt-file", "--max-tokens", "--temperature", "--top-k", "--top-p", "--min-p",
               "--sampler", "--seed", "--stop", "--compare", "--tokenizer", "--top-n", "--weights"},
              {"--json", "--quiet", "--no-verify", "--no-bos", "--ignore-eos"});
    if (args.has("--prompt") == args.has("--prompt-file"))
        throw InputError("generate: give exactly one of --prompt TEXT or --prompt-file FILE");
    GenerationOptions options;
    options.max_tokens = args.get_int("--max-tokens", 64, 1, 1'000'000);
    options.sampling.temperature = args.get_double("--temperature", 0, 0, 100);
    options.sampling.top_k = args.get_int("--top-k", 0, 0, INT32_MAX);
    options.sampling.top_p = args.get_double("--top-p", 1, 0, 1);
    if (options.sampling.top_p == 0)
        throw InputError("generate: --top-p must be above 0 (1 keeps every token)");
    if (args.has("--min-p"))
        options.sampling.min_p = args.get_double("--min-p", 0, 0, 1);
    options.sampling.sampler = args.get("--sampler").value_or("llamacpp");
    if (options.sampling.sampler != "llamacpp" && options.sampling.sampler != "hf")
        throw InputError("generate: --sampler must be llamacpp or hf, not '" + options.sampling.sampler +
                         "'");
    options.stop_at_eos = !args.has("--ignore-eos");
    options.sampling.seed = static_cast<uint64_t>(args.get_int("--seed", 0, 0, INT64_MAX));
    options.top_n = args.get_int("--top-n", 5, 0, 100);
    options.stop = args.get_all("--stop");
    for (const auto& stop : options.stop)
        if (stop.empty())
            throw InputError("generate: --stop needs a non-empty string");
    const bool json = args.has("--json"), quiet = args.has("--quiet");
    const std::string prompt =
        args.has("--prompt") ? *args.get("--prompt") : read_text_file(*args.get("--prompt-file"));

    const auto path = model_argument(args);
    const auto options_load = load_options(args);
    const auto weights = parse_generation_weights(args.get("--weights").value_or("half"));
    auto lm = load_model_for_generation(path, options_load, weights);
    print_warnings(lm.files.warnings);
    const auto ids = prompt_ids(*lm.tokenizer, prompt, !args.has("--no-bos"));
    if (ids.empty())
        throw InputError("generate: the prompt has no tokens");

    std::optional<LoadedModel> original;
    if (const auto compare = args.get("--compare")) {
        original = load_model_for_generation(*compare, options_load, weights);
        print_warnings(original->files.warnings);
        if (prompt_ids(*original->tokenizer, prompt, !args.has("--no-bos")) != ids)
            throw InputError("generate: " + path.string() + " and " + *compare +
                             " tokenize the prompt differently; a comparison needs one tokenizer");
    }

    // The prompt is echoed once generation has accepted it (its first token, or its end):
    // a prompt refused for the context is not printed first (a 100 MB prompt was).
    bool echoed = json;
    auto echo_prompt = [&] {
        if (echoed)
            return;
        echoed = true;
        if (original)
            std::printf("--- %s:\n", path.string().c_str());
        std::fputs(prompt.c_str(), stdout);
        std::fflush(stdout);
    };
    TokenFn stream = [&](const GeneratedToken& t) {
        if (!json) {
            echo_prompt();
            std::fputs(t.text.c_str(), stdout);
            std::fflush(stdout);
        }
        return !interrupted();
    };
    const auto g = generate(*lm.model, lm.tokenizer.get(), ids, options, stream,
                            original ? original->model.get() : nullptr);
    echo_prompt();
    std::optional<Generation> og;
    if (original)
        og = generate(*original->model, original->tokenizer.get(), ids, options,
                      [](const GeneratedToken&) { return !interrupted(); });

    if (json) {
        Json j = {{"model", path.string()},
                  {"prompt", prompt},
                  {"bos", ids.size() > lm.tokenizer->encode(prompt).size()},
                  {"max_tokens", options.max_tokens},
                  {"temperature", options.sampling.temperature},
                  {"top_k", options.sampling.top_k},
                  {"top_p", options.sampling.top_p},
                  {"min_p", effective_min_p(options.sampling)},
                  {"sampler", options.sampling.sampler},
                  {"ignore_eos", !options.stop_at_eos},
                  {"seed", options.sampling.seed},
                  {"stop", options.stop},
                  {"embedding", lm.model->token_embedding().kind()}};
        j.update(generation_json(g));
        if (og) {
            Json o = {{"model", *args.get("--compare")}};
            o.update(generation_json(*og));
            j["original"] = o;
            const int64_t differ = first_difference(g, *og);
            j["first_difference"] = differ < 0 ? Json(nullptr) : Json(differ);
            double kl = 0;
            for (const auto& t : g.tokens)
                kl += t.kl;
            j["kl_mean"] = kl / static_cast<double>(g.tokens.size());
            j["kl_note"] = "per generated token of the model: KL(P_original || P_model) of the next-token "
                           "distributions on the model's own prefix; reference_rank: tokens the original "
                           "prefers to the model's choice";
        }
        print_json(j);
        return 0;
    }
    std::printf("\n");
    if (og)
        print_comparison(prompt, g, *og, *lm.tokenizer);
    std::fflush(stdout); // the statistics follow the text, also when both go to one terminal
    if (!quiet) {
        print_stats("generate", g);
        if (og)
            print_stats("original", *og);
    }
    return 0;
}

} // namespace embedlab::cli
