// compress: fit a method to the model's token embedding, optionally evaluate it,
// and write the compressed-model directory (engine/include/embedlab/compressed_model.hpp).
#include <limits>
#include <optional>

#include "common.hpp"
#include "compress_chain.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/fourier_mlp.hpp"
#include "embedlab/table_method.hpp"
#include "frequency_text.hpp"
#include "method_flags.hpp"
#include "progress_printer.hpp"
#include "text_eval.hpp"

namespace embedlab::cli {

namespace {

// compress's lines for a person: the accounting, the reconstruction, what the fit
// found (as the method words it) and the evaluation.
void print_summary(const CompressionRun& run, const Json& manifest, const std::string& out, bool dense)
{
    const CompressedEmbedding& c = *run.embedding;
    const auto& positions = run.positions;
    const auto& a = c.accounting;
    std::printf("%s: %s %s\n", out.c_str(), c.spec.method.c_str(), spec_json(c.spec).dump().c_str());
    std::printf("  embedding params %lld -> %lld (ratio %.4f, eta_emb %.4f); model %lld -> %lld\n",
                (long long)a.params_before, (long long)a.params_after, a.ratio, a.eta_emb,
                (long long)manifest["model_params"]["before"].get<int64_t>(),
                (long long)manifest["model_params"]["after"].get<int64_t>());
    if (a.bits_per_value_before > 0)
        std::printf(
            "  storage: the table's %s values take %.4g bits, the compressed model's %.4g: bytes %.0f -> "
            "%.0f (ratio %.4f)%s\n",
            a.stored_type_before.c_str(), a.bits_per_value_before, a.bits_per_value_after, a.bytes_before,
            a.bytes_after, a.bytes_ratio, a.bytes_ratio >= 1 ? ": LARGER than the stored table" : "");
    std::printf("  reconstruction: relative Frobenius %.6f, mean cosine %.6f, worst cosine %.6f (row %lld)\n",
                c.reconstruction.relative_frobenius, c.reconstruction.mean_cosine,
                c.reconstruction.worst_cosine, (long long)c.reconstruction.worst_row);
    if (a.energy.omega > 0) {
        std::printf(
            "  energy (TensorSLM eqs. 2-5, %s nu %g, tau %g, nu/tau %.3g (paper default 5), l %lld): omega "
            "%.4f%s\n",
            a.energy_options.device.empty() ? "" : (a.energy_options.device + ":").c_str(),
            a.energy_options.nu, a.energy_options.tau,
            a.energy_options.tau > 0 ? a.energy_options.nu / a.energy_options.tau : 0.0,
            (long long)a.energy_options.tokens, a.energy.omega,
            a.energy.omega_high > 0 ? (" (" + std::to_string(a.energy.omega_low).substr(0, 6) + ".." +
                                       std::to_string(a.energy.omega_high).substr(0, 6) + " over its ranges)")
                                          .c_str()
                                    : "");
        if (!a.shape.empty()) // tt: eq. 3's r_max^2 sum I_k against the values stored
            std::printf("    tt: omega %.4f from eq. 3's r_max^2 sum I_k = %.1f per token (the paper's "
                        "complexity); %.4f from the %.1f values stored per token\n",
                        a.energy.omega, a.energy_size, a.energy_stored.omega, a.energy_size_stored);
    }
    if (positions) {
        const auto& p = positions->accounting;
        std::printf("  positions params %lld -> %lld (ratio %.4f), mean cosine %.6f\n",
                    (long long)p.params_before, (long long)p.params_after, p.ratio,
                    positions->reconstruction.mean_cosine);
    }
    // What the fit found, as the method words it (table_method.hpp's fit_summary).
    for (const auto& line : table_method(c.spec.method).fit_summary(c))
        std::printf("  %s\n", line.c_str());
    if (manifest.contains("example_coverage")) {
        const auto& e = manifest["example_coverage"];
        std::printf("  coverage of %s (%s, %lld examples) by V_C: tokens %.4f, whole examples %.4f\n",
                    e["data"].get<std::string>().c_str(), e["task"].get<std::string>().c_str(),
                    (long long)e["examples"].get<int64_t>(), e["token_coverage"].get<double>(),
                    e["example_coverage"].get<double>());
    }
    std::printf("  fit %.3f s, total %.3f s\n", c.fit_seconds, manifest["wall_seconds"].get<double>());
    if (!run.evaluation.is_null())
        TextEval::print(run.evaluation);
    if (dense)
        std::printf("  dense export: %s\n", (std::filesystem::path(out) / "dense").c_str());
}

} // namespace

int command_compress(const std::vector<std::string>& argv)
{
    if (peek_option(argv, "--method") == "trim" || !peek_option(argv, "--then").empty())
        return compress_chain(argv); // trim, alone or with a method after it
    // A method of the attention values (flat) has its own flags and path.
    const auto* peeked = find_method(peek_option(argv, "--method"));
    if (peeked && peeked->part == CompressedPart::AttentionValues)
        return compress_flat(argv);
    // compress's own flags, then every method's fields as flags (method_flags.hpp).
    std::set<std::string> valued{"--method",     "--out",         "--eval-text", "--ctx",  "--stride",
                                 "--batch",      "--tokenizer",   "--seed",      "--task", "--task-data",
                                 "--task-limit", "--eval-tokens", "--then-store"},
        switches{"--dense", "--force", "--positions", "--json", "--quiet", "--divergence"};
    add_method_flags(valued, switches);
    Args args("compress", argv, valued, switches);
    const std::string method_name = args.required("--method", method_names("|"));
    const auto* method = find_method(method_name);
    if (!method)
        throw InputError("compress: unknown --method '" + method_name + "' (" + method_names() + ")");
    const bool lle = method->needs_frequency_text;
    const auto path = model_argument(args);
    const std::string out = args.required("--out", "DIR");
    prepare_output_directory(out, args.has("--force"), input_paths(args, {path})); // now, not after the fit
    LoadOptions options = load_options(args);
    options.need_tokenizer = args.has("--eval-text") || lle || args.has("--task");
    auto lm = load_model(path, options);
    print_warnings(lm.files.warnings);
    if (!lm.files.embedlab_manifest.empty())
        throw InputError(path.string() +
                         ": is already an EmbedLab compressed model; compress the original model");
    auto& model = *lm.model;
    // The flags as an experiment request (experiment.hpp): the engine checks and runs it.
    CompressionRequest request;
    request.model = path.string();
    request.tokenizer = args.get("--tokenizer").value_or("");
    request.method = method_name;
    request.positions = args.has("--positions");
    // The method's fields, by their flags (--rank is "rank"; TensorSLM's energy model's
    // --nu, --tau, --device, --tokens too): check_request refuses one the method does not take.
    args.get_double("--nu", request.nu, 0, 1e12);
    args.get_double("--tau", request.tau, 0, 1e12);
    args.get_int("--tokens", request.energy_tokens, 0, int64_t{1} << 40);
    method_flags_into(args, request);
    if (const auto store = args.get("--then-store")) { // a chain of one method: its stored type
        if (args.has("--store"))
            throw InputError("compress: --store and --then-store name the same step's stored type; give one");
        request.store = *store;
    }
    for (const auto& o : kKnnOptions)
        if (!lle && args.has(o))
            throw InputError("compress: " + o + " applies to --method lle (its neighbour search)");
    if (!lle && (args.has("--coverage-task") || args.has("--coverage-data")))
        throw InputError(
            "compress: --coverage-task/--coverage-data work with the lle methods (V_C's coverage)");
    if (lle) {
        if (args.has("--positions"))
            throw InputError(
                "compress: --positions works with pca, svd, tt and tucker (positions have no token "
                "frequencies)");
        const auto freq_text = args.get("--freq-text");
        if (!freq_text)
            throw InputError(
                "the lle methods need --freq-text FILE (token frequencies decide common vs rare)");
        warn_if_frequency_text_is_evaluated(args);
        args.get_double("--keep-ratio", 1.0, 0, 1); // its flag's message for a value outside [0, 1]
        // The neighbour search (lle only: check_request refuses it on lle-unk and lle-pca).
        const auto knn = knn_flags(args, "compress");
        if (knn.knn == "ivf")
            request.seed =
                static_cast<uint64_t>(args.get_int("--seed", 0, 0, std::numeric_limits<int64_t>::max()));
    } else if (args.has("--seed")) // fourier's fit (and LoRA's adapters) start from it
        request.seed =
            static_cast<uint64_t>(args.get_int("--seed", 0, 0, std::numeric_limits<int64_t>::max()));
    check_method_flags(args, method_name, "compress");
    eval_flags_into(args, model.max_context(), request);
    // One checker, the engine's, naming the flags (--rank for "rank").
    check_request(request, model.config().hidden_size, "compress", method_field_flag);
    const bool quiet = args.has("--quiet");
    StagePrinter stages(quiet);
    const auto run = run_compression(request, std::move(lm), stages.callback());
    Json manifest;
    {
        ProgressPrinter p("write " + out, "bytes", quiet);
        manifest = export_run(run, out, {.dense = args.has("--dense"), .overwrite = args.has("--force")},
                              p.callback());
    }
    if (args.has("--json")) {
        print_json(manifest);
        return 0;
    }
    // The directory is written and complete: a summary that cannot be printed is a
    // warning, never an error that makes a rerun collide with the finished output.
    try {
        print_summary(run, manifest, out, args.has("--dense"));
    } catch (const std::exception& e) {
        std::fprintf(stderr,
                     "embedlab-cli: warning: %s is written and complete, but its summary could not be "
                     "printed (%s); embedlab.json holds every figure\n",
                     out.c_str(), e.what());
    }
    return 0;
}

} // namespace embedlab::cli
