// compress: fit a method to the model's token embedding, optionally evaluate it,
// and write the compressed-model directory (engine/include/embedlab/compressed_model.hpp).
#include <limits>
#include <optional>

#include "common.hpp"
#include "embedlab/compressed_model.hpp"
#include "embedlab/fourier_mlp.hpp"
#include "frequency_text.hpp"
#include "progress_printer.hpp"
#include "text_eval.hpp"

namespace embedlab::cli {

namespace {

CompressionSpec spec_from_args(const Args& args, int64_t d)
{
    CompressionSpec spec;
    const auto method = args.get("--method");
    if (!method)
        throw InputError("compress: --method pca|svd|tt|lle|lle-unk|lle-pca|fourier|flat is required");
    spec.method = *method;
    if (spec.method == "pca" || spec.method == "svd") {
        if (!args.has("--rank"))
            throw InputError("compress: --method " + spec.method + " needs --rank K (1.." +
                             std::to_string(d) + ")");
        spec.rank = args.get_int("--rank", 0, 1, d);
    } else if (spec.method == "tt") {
        spec.shape = args.get_int_list("--shape", 1, d);
        if (spec.shape.empty())
            throw InputError("compress: --method tt needs --shape I1,I2,.. with product d = " +
                             std::to_string(d) + " (embedlab-cli account lists the factorisations)");
        spec.ranks = args.get_int_list("--ranks", 1, d);
        if (args.has("--eps") == !spec.ranks.empty())
            throw InputError("compress: --method tt needs exactly one of --ranks 1,r1,..,1 or --eps E");
        spec.eps = args.get_double("--eps", 0, 0, 1);
    } else if (spec.method == "lle" || spec.method == "lle-unk" || spec.method == "lle-pca") {
        if (spec.method != "lle-unk" && !args.has("--k"))
            throw InputError("compress: --method " + spec.method +
                             " needs --k K (neighbours, or basis size)");
        spec.k = args.get_int("--k", 1, 1, d);
        spec.reg = args.get_double("--reg", 1e-3, 0, 1e6);
    } else if (spec.method == "fourier") {
        const auto mlp = args.get("--mlp");
        if (!mlp)
            throw InputError("compress: --method fourier needs --mlp linear|geglu");
        if (*mlp != "linear" && *mlp != "geglu")
            throw InputError("compress: --mlp must be linear or geglu, got '" + *mlp + "'");
        spec.mlp = *mlp;
        if (args.has("--hidden-ratio") && spec.mlp != "geglu")
            throw InputError("compress: --hidden-ratio applies to --mlp geglu only");
        spec.hidden_ratio = args.get_double("--hidden-ratio", 0.25, 0, kMaxFourierHiddenRatio);
        if (!(spec.hidden_ratio > 0))
            throw InputError("compress: --hidden-ratio must be positive, got " + *args.get("--hidden-ratio"));
        spec.norm = args.has("--norm");
        spec.loss = args.get("--loss").value_or("mse");
        if (spec.loss != "mse" && spec.loss != "cosine")
            throw InputError("compress: --loss must be mse or cosine, got '" + spec.loss + "'");
        if (!args.has("--steps"))
            throw InputError("compress: --method fourier needs --steps N (AdamW steps, e.g. 2000)");
        spec.steps = args.get_int("--steps", 0, 1, 100'000'000);
        spec.lr = args.get_double("--lr", 1e-3, 0, 10);
        if (!(spec.lr > 0))
            throw InputError("compress: --lr must be positive, got " + *args.get("--lr"));
        spec.batch = args.get_int("--fit-batch", 4096, 1, 1'000'000'000);
        spec.weight_decay = args.get_double("--weight-decay", 0.01, 0, 10);
        spec.seed = static_cast<uint64_t>(args.get_int("--seed", 0, 0, std::numeric_limits<int64_t>::max()));
    } else {
        throw InputError("compress: unknown --method '" + spec.method +
                         "' (pca, svd, tt, lle, lle-unk, lle-pca, fourier, flat)");
    }
    if (spec.method != "fourier")
        for (const char* o : {"--mlp", "--hidden-ratio", "--norm", "--loss", "--steps", "--lr", "--fit-batch",
                              "--weight-decay", "--seed"})
            if (args.has(o))
                throw InputError(std::string("compress: ") + o + " applies to --method fourier only");
    return spec;
}

} // namespace

int command_compress(const std::vector<std::string>& argv)
{
    if (peek_option(argv, "--method") == "flat")
        return compress_flat(argv);
    Args args("compress", argv,
              {"--method",     "--rank", "--shape",     "--ranks",        "--eps",          "--out",
               "--eval-text",  "--ctx",  "--stride",    "--batch",        "--tokenizer",    "--freq-text",
               "--keep-ratio", "--k",    "--reg",       "--mlp",          "--hidden-ratio", "--loss",
               "--steps",      "--lr",   "--fit-batch", "--weight-decay", "--seed"},
              {"--dense", "--force", "--positions", "--json", "--quiet", "--norm"});
    const bool lle = args.get("--method").value_or("").rfind("lle", 0) == 0;
    const auto path = model_argument(args);
    const auto out = args.get("--out");
    if (!out)
        throw InputError("compress: --out DIR is required");
    prepare_output_directory(*out, args.has("--force")); // now, not after the fit
    LoadOptions options = load_options(args);
    options.need_tokenizer = args.has("--eval-text") || lle;
    auto lm = load_model(path, options);
    print_warnings(lm.files.warnings);
    if (!lm.files.embedlab_manifest.empty())
        throw InputError(path.string() +
                         ": is already an EmbedLab compressed model; compress the original model");
    auto& model = *lm.model;
    auto spec = spec_from_args(args, model.config().hidden_size);
    std::optional<FrequencyText> freq;
    if (lle) {
        if (args.has("--positions"))
            throw InputError(
                "compress: --positions works with pca, svd and tt (positions have no token frequencies)");
        freq = FrequencyText::from_args(args, *lm.tokenizer, model.config().vocab_size);
        spec.split = freq->split;
        spec.unk_id = lm.tokenizer->unk_id().value_or(-1);
    }
    // Before the fit: a bad text should fail in a second, not after the work.
    const TextEval eval = TextEval::from_args(args, lm.tokenizer.get(), model.max_context());
    const bool quiet = args.has("--quiet");

    CompressedEmbedding c;
    {
        ProgressPrinter p("compress " + spec.method, "%", quiet);
        c = compress_table(dense_token_table(model, path.string()), spec, model.parameter_breakdown().total(),
                           p.callback());
    }
    // gpt2's learned position table, with the same method and parameters.
    std::optional<CompressedEmbedding> positions;
    if (args.has("--positions")) {
        if (model.config().arch != Architecture::GPT2)
            throw InputError(path.string() + ": --positions: " + architecture_name(model.config().arch) +
                             " models have no learned position table");
        ProgressPrinter p("compress positions", "%", quiet);
        positions = compress_table(model.weights().at("wpe.weight"), spec, 0, p.callback());
    }
    SaveCompressedOptions save{.dense = args.has("--dense"), .overwrite = args.has("--force")};
    if (freq)
        save.extra["frequency_text"] = freq->json();
    save.positions = positions ? &*positions : nullptr;
    if (eval.enabled()) {
        const auto baseline = eval.run(model, "eval original");
        model.set_token_embedding(c.embedding);
        if (positions)
            model.set_position_embedding(positions->embedding);
        const auto compressed = eval.run(model, "eval compressed");
        save.evaluation = eval.json(baseline, compressed);
        if (freq) {
            const auto cov = coverage_of(*freq->split, *lm.tokenizer, read_text_file(eval.text));
            save.evaluation["coverage"] = {{"token_coverage", cov.token_coverage},
                                           {"line_coverage", cov.line_coverage},
                                           {"tokens", cov.tokens},
                                           {"lines", cov.lines}};
        }
    }
    Json manifest;
    {
        ProgressPrinter p("write " + *out, "bytes", quiet);
        manifest = save_compressed_model(lm, c, *out, save, p.callback());
    }
    if (args.has("--json")) {
        print_json(manifest);
        return 0;
    }
    const auto& a = c.accounting;
    std::printf("%s: %s %s\n", out->c_str(), spec.method.c_str(), spec_json(c.spec).dump().c_str());
    std::printf("  embedding params %lld -> %lld (ratio %.4f, eta_emb %.4f); model %lld -> %lld\n",
                (long long)a.params_before, (long long)a.params_after, a.ratio, a.eta_emb,
                (long long)manifest["model_params"]["before"].get<int64_t>(),
                (long long)manifest["model_params"]["after"].get<int64_t>());
    std::printf("  reconstruction: relative Frobenius %.6f, mean cosine %.6f, worst cosine %.6f (row %lld)\n",
                c.reconstruction.relative_frobenius, c.reconstruction.mean_cosine,
                c.reconstruction.worst_cosine, (long long)c.reconstruction.worst_row);
    if (positions) {
        const auto& p = positions->accounting;
        std::printf("  positions params %lld -> %lld (ratio %.4f), mean cosine %.6f\n",
                    (long long)p.params_before, (long long)p.params_after, p.ratio,
                    positions->reconstruction.mean_cosine);
    }
    if (c.fit.contains("rare_cosine") && c.fit["rare_cosine"].contains("mean"))
        std::printf("  %lld common, %lld rare rows; rare-row cosine mean %.6f (p05 %.4f, p50 %.4f)\n",
                    (long long)c.fit["common"].get<int64_t>(), (long long)c.fit["rare"].get<int64_t>(),
                    c.fit["rare_cosine"]["mean"].get<double>(), c.fit["rare_cosine"]["p05"].get<double>(),
                    c.fit["rare_cosine"]["p50"].get<double>());
    if (spec.method == "fourier") {
        const auto& f = c.fit;
        const std::string shape =
            (spec.mlp == "geglu" ? " (hidden " + std::to_string(f["hidden"].get<int64_t>()) + ")"
                                 : std::string()) +
            (spec.norm ? " + rmsnorm" : "");
        std::printf("  fourier %s%s: %s loss %.6g -> %.6g after %lld steps (full-table MSE %.6g); "
                    "%lld stored parameters\n",
                    spec.mlp.c_str(), shape.c_str(), spec.loss.c_str(), f["initial_loss"].get<double>(),
                    f["final_loss"].get<double>(), (long long)spec.steps, f["final_mse"].get<double>(),
                    (long long)f["parameters"].get<int64_t>());
        std::printf("  tied head: all %lld rows rebuilt at every head call (%.3f s a call)\n",
                    (long long)f["tied_head"]["rows_rebuilt_per_call"].get<int64_t>(),
                    f["tied_head"]["seconds_per_call"].get<double>());
    }
    if (c.fit.contains("explained_variance_at_rank"))
        std::printf("  explained variance at rank %lld: %.6f\n", (long long)spec.rank,
                    c.fit["explained_variance_at_rank"].get<double>());
    std::printf("  fit %.3f s, total %.3f s\n", c.fit_seconds, manifest["wall_seconds"].get<double>());
    if (eval.enabled()) {
        const auto& e = save.evaluation;
        std::printf("  perplexity %.6f -> %.6f (delta ln PPL %+.6f) on %lld tokens, ctx %lld\n",
                    e["baseline"]["ppl"].get<double>(), e["compressed"]["ppl"].get<double>(),
                    e["delta_ln_ppl"].get<double>(), (long long)e["tokens"].get<int64_t>(),
                    (long long)e["ctx"].get<int64_t>());
    }
    if (save.dense)
        std::printf("  dense export: %s\n", (std::filesystem::path(*out) / "dense").c_str());
    return 0;
}

} // namespace embedlab::cli
