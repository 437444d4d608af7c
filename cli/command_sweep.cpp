// sweep: one compression per setting on the same tokenized text, one row each,
// so ppl can be read against size (a rank sweep, or TT shapes x ranks / eps).
#include <cmath>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "common.hpp"
#include "embedlab/compress.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/text_format.hpp"
#include "frequency_text.hpp"
#include "progress_printer.hpp"
#include "sweep_table.hpp"
#include "text_eval.hpp"

namespace embedlab::cli {

namespace {

// --shapes 8,8,12:4,4,6,8 (or one --shape) -> shapes.
std::vector<std::vector<int64_t>> shapes_from_args(const Args& args, int64_t d)
{
    std::vector<std::vector<int64_t>> shapes;
    if (auto one = args.get_int_list("--shape", 1, d); !one.empty())
        shapes.push_back(one);
    if (auto many = args.get("--shapes")) {
        std::stringstream in(*many);
        std::string part;
        while (std::getline(in, part, ':')) {
            std::vector<std::string> argv{"--shape", part};
            shapes.push_back(Args("sweep", argv, {"--shape"}, {}).get_int_list("--shape", 1, d));
        }
    }
    if (shapes.empty())
        throw InputError("sweep: --method " + args.get("--method").value_or("tt") +
                         " needs --shape I1,I2,.. or --shapes A:B:..");
    return shapes;
}

std::vector<std::string> split_list(const std::string& s);

std::vector<CompressionSpec> specs_from_args(const Args& args, int64_t d)
{
    const std::string method = args.get("--method").value_or("");
    std::vector<CompressionSpec> specs;
    if (method == "pca" || method == "svd") {
        for (int64_t k : args.get_int_list("--ranks", 1, d))
            specs.push_back({.method = method, .rank = k});
        if (specs.empty())
            throw InputError("sweep: --method " + method + " needs --ranks K1,K2,.. (each 1.." +
                             std::to_string(d) + ")");
        return specs;
    }
    if (method == "tucker") {
        // --ranks A1,..,AN:B1,..,BN: one setting per colon-separated set, r_1..r_N each;
        // a set of one value r is the uniform rank min(r, I_k).
        const auto sets = args.get("--ranks");
        if (!sets)
            throw InputError(
                "sweep: --method tucker needs --ranks r1,..,rN[:r1,..,rN..] (one rank per --shape "
                "factor per setting, or one uniform rank r per setting)");
        if (args.has("--eps") || args.has("--uniform-ranks"))
            throw InputError("sweep: --eps and --uniform-ranks apply to --method tt only");
        std::vector<std::vector<int64_t>> rank_sets;
        std::stringstream in(*sets);
        std::string part;
        while (std::getline(in, part, ':'))
            rank_sets.push_back(
                Args("sweep", {"--ranks", part}, {"--ranks"}, {}).get_int_list("--ranks", 1, d));
        for (const auto& shape : shapes_from_args(args, d))
            for (const auto& set : rank_sets) {
                std::vector<int64_t> rr = set;
                if (set.size() == 1 && shape.size() > 1) {
                    rr.clear();
                    for (int64_t I : shape)
                        rr.push_back(std::min(set[0], I));
                }
                check_tucker_shape_and_ranks(d, shape, rr);
                specs.push_back({.method = "tucker", .shape = shape, .ranks = rr});
            }
        return specs;
    }
    if (method == "quant") {
        // The baseline series (issue 38): the table at each ggml type; check_request refuses a
        // type that is unknown or whose blocks do not divide d, naming those that do.
        for (const auto& type : split_list(args.get("--types").value_or("")))
            specs.push_back({.method = "quant", .type = type});
        if (specs.empty())
            throw InputError(
                "sweep: --method quant needs --types T1,T2,.. (f16, bf16, q8_0, q6_k, q5_k, q5_1, "
                "q5_0, q4_k, q4_1, q4_0, q3_k, q2_k)");
        return specs;
    }
    if (method != "tt")
        throw InputError("sweep: --method pca|svd|tt|tucker|lle|lle-unk|lle-pca|quant|flat is required");
    const auto ranks = args.get_int_list("--ranks", 1, d);
    std::vector<double> eps;
    if (auto e = args.get("--eps")) {
        std::stringstream in(*e);
        std::string part;
        while (std::getline(in, part, ','))
            eps.push_back(Args("sweep", {"--eps", part}, {"--eps"}, {}).get_double("--eps", 0, 0, 1));
    }
    if (ranks.empty() == eps.empty())
        throw InputError("sweep: --method tt needs --ranks R1,R2,.. (uniform inner ranks) or --eps E1,E2,..");
    if (args.has("--uniform-ranks") && eps.empty())
        throw InputError("sweep: --uniform-ranks applies to --eps (given --ranks are every token's)");
    for (const auto& shape : shapes_from_args(args, d)) {
        const auto caps = tt_rank_caps(shape);
        for (int64_t r : ranks) {
            // A uniform inner rank r, clipped to each position's cap.
            std::vector<int64_t> rr(caps.size());
            for (size_t k = 0; k < caps.size(); ++k)
                rr[k] = std::min(r, caps[k]);
            specs.push_back({.method = "tt", .shape = shape, .ranks = rr});
        }
        for (double e : eps)
            specs.push_back(
                {.method = "tt", .shape = shape, .eps = e, .uniform_ranks = args.has("--uniform-ranks")});
    }
    return specs;
}

std::vector<std::string> split_list(const std::string& s)
{
    std::vector<std::string> out;
    std::stringstream in(s);
    std::string part;
    while (std::getline(in, part, ','))
        if (!part.empty())
            out.push_back(part);
    return out;
}

} // namespace

Json sweep_row(const Json& record)
{
    const Json& e = record.contains("evaluation") ? record["evaluation"] : Json::object();
    const Json& fit = record.contains("fit") ? record["fit"] : Json::object();
    Json row = record["spec"];
    row["params"] = record["accounting"]["params_after"];
    row["ratio"] = record["accounting"]["ratio"];
    // Bytes as stored (issue 38): what a quantised baseline is compared at.
    if (record["accounting"].contains("storage")) {
        row["bytes_after"] = record["accounting"]["storage"]["bytes_after"];
        row["bytes_ratio"] = record["accounting"]["storage"]["bytes_ratio"];
    }
    if (fit.contains("explained_variance_at_rank"))
        row["explained_variance"] = fit["explained_variance_at_rank"];
    row["relative_frobenius"] = record["reconstruction"]["relative_frobenius"];
    row["mean_cosine"] = record["reconstruction"]["mean_cosine"];
    if (row.contains("keep_ratio")) {
        row["rare_mean_cosine"] = fit.contains("rare_cosine") ? fit["rare_cosine"].value("mean", 1.0) : 1.0;
        row["token_coverage"] = e["coverage"]["token_coverage"];
        row["line_coverage"] = e["coverage"]["line_coverage"];
        if (fit.contains("knn") && fit["knn"].contains("recall_at_k")) { // lle --knn ivf: the lists as run
            row["nlist"] = fit["knn"]["nlist"];
            row["nprobe"] = fit["knn"]["nprobe"];
            row["knn_recall_at_k"] = fit["knn"]["recall_at_k"];
        }
    }
    row["ppl"] = e["compressed"]["ppl"];
    row["nll_per_token"] = e["compressed"]["nll_per_token"];
    row["delta_ln_ppl"] = e["delta_ln_ppl"];
    row["fit_seconds"] = fit.value("seconds", 0.0);
    sweep_evaluation_columns(e, row);
    return row;
}

void sweep_evaluation_columns(const Json& e, Json& row)
{
    if (e.contains("divergence")) {
        row["kl_mean"] = e["divergence"]["kl_mean"];
        row["top1_agreement"] = e["divergence"]["top1_agreement"];
    }
    if (e.contains("task")) {
        row["task"] = e["task"]["name"];
        row["task_accuracy"] = e["task"]["accuracy"];
        row["task_accuracy_original"] = e["task"]["original"]["accuracy"];
        row["task_n"] = e["task"]["n"];
    }
}

std::string sweep_setting(const Json& row)
{
    const std::string method = row.value("method", "");
    if (method == "tt" || method == "tucker")
        return (method == "tucker" ? "tucker " : "") + joined(row["shape"].get<std::vector<int64_t>>(), "x") +
               " r" + joined(row["ranks"].get<std::vector<int64_t>>(), ",");
    if (method == "quant")
        return "quant " + row.value("type", std::string());
    if (row.contains("keep_ratio"))
        return method + " r=" + std::to_string(row["keep_ratio"].get<double>()).substr(0, 4) +
               " k=" + std::to_string(row.value("k", int64_t{0}));
    return method + " k=" + std::to_string(row.value("rank", int64_t{0}));
}

void sweep_print_header()
{
    std::printf("%-22s %12s %8s %10s %10s %12s %12s %8s\n", "setting", "params", "ratio", "expl.var",
                "mean cos", "ppl", "dlnPPL", "fit s");
}

void sweep_print_row(const Json& row, const std::string& suffix)
{
    std::printf("%-22s %12lld %8.4f %10s %10.6f %12.4f %+12.6f %8.3f", sweep_setting(row).c_str(),
                (long long)row["params"].get<int64_t>(), row["ratio"].get<double>(),
                row.contains("explained_variance")
                    ? std::to_string(row["explained_variance"].get<double>()).substr(0, 8).c_str()
                    : "-",
                row["mean_cosine"].get<double>(), row["ppl"].get<double>(), row["delta_ln_ppl"].get<double>(),
                row["fit_seconds"].get<double>());
    if (row.contains("bytes_after"))
        std::printf("  bytes %.0f (ratio %.4f)", row["bytes_after"].get<double>(),
                    row["bytes_ratio"].get<double>());
    if (row.contains("keep_ratio")) // the paper's Tables 5, 6 and 9
        std::printf("  rare cos %.4f  token cov %.4f  line cov %.4f", row["rare_mean_cosine"].get<double>(),
                    row["token_coverage"].get<double>(), row["line_coverage"].get<double>());
    if (row.contains("kl_mean"))
        std::printf("  KL %.6f  top-1 %.4f", row["kl_mean"].get<double>(),
                    row["top1_agreement"].get<double>());
    if (row.contains("task_accuracy"))
        std::printf("  %s acc %.4f (original %.4f, n %lld)", row["task"].get<std::string>().c_str(),
                    row["task_accuracy"].get<double>(), row["task_accuracy_original"].get<double>(),
                    (long long)row["task_n"].get<int64_t>());
    std::printf("%s\n", suffix.c_str());
    std::fflush(stdout);
}

Json sweep_json(const std::string& model, const Json& first_record, const Json& rows)
{
    const Json& e = first_record["evaluation"];
    return {{"model", model},
            {"method", first_record.value("method", "")},
            {"text", e["text"]},
            {"text_sha256", e["text_sha256"]},
            {"tokens", e["tokens"]},
            {"ctx", e["ctx"]},
            {"stride", e["stride"]},
            {"baseline_ppl", e["baseline"]["ppl"]},
            {"params_before", first_record["accounting"]["params_before"]},
            {"rows", rows}};
}

void sweep_print_original(const Json& sweep)
{
    std::printf("%-22s %12lld %8.4f %10s %10s %12.4f %12s\n", "original",
                (long long)sweep["params_before"].get<int64_t>(), 1.0, "1", "1",
                sweep["baseline_ppl"].get<double>(), "0");
}

int command_sweep(const std::vector<std::string>& argv)
{
    if (peek_option(argv, "--method") == "flat")
        return sweep_flat(argv);
    Args args("sweep", argv,
              {"--method",    "--ranks",  "--shape",         "--shapes",     "--eps",         "--eval-text",
               "--ctx",       "--stride", "--batch",         "--tokenizer",  "--freq-text",   "--keep-ratios",
               "--ks",        "--reg",    "--knn",           "--nlist",      "--nprobe",      "--sweep-dir",
               "--partition", "--time",   "--cpus-per-task", "--mem",        "--array-limit", "--sbatch-arg",
               "--slurm-cli", "--task",   "--task-data",     "--task-limit", "--types"},
              {"--json", "--quiet", "--uniform-ranks", "--divergence", "--slurm", "--no-wait"});
    const auto path = model_argument(args);
    if (!args.has("--eval-text"))
        throw InputError("sweep: --eval-text FILE is required (each row reports its perplexity)");
    auto lm = load_model(path, load_options(args));
    print_warnings(lm.files.warnings);
    auto& model = *lm.model;
    const std::string method = args.get("--method").value_or("");
    const bool lle = method.rfind("lle", 0) == 0;
    const KnnFlags knn = knn_flags(args, "sweep"); // lle's neighbour search
    for (const auto& o : kKnnOptions)
        if (!lle && args.has(o))
            throw InputError("sweep: " + o + " applies to --method lle (its neighbour search)");
    // lle: one split per keep ratio, every k on each (paper Tables 5-9).
    std::vector<CompressionSpec> specs;
    std::optional<FrequencyText> freq;
    if (lle) {
        const auto ks = args.get_int_list("--ks", 1, model.config().hidden_size);
        std::vector<double> ratios;
        for (const auto& r : split_list(args.get("--keep-ratios").value_or("")))
            ratios.push_back(Args("sweep", {"--keep-ratios", r}, {"--keep-ratios"}, {})
                                 .get_double("--keep-ratios", 1, 0, 1));
        warn_if_frequency_text_is_evaluated(args);
        if (ratios.empty() || (ks.empty() && method != "lle-unk"))
            throw InputError("sweep: --method " + method + " needs --keep-ratios R1,R2,.. and --ks K1,K2,..");
        for (double ratio : ratios) {
            freq = FrequencyText::from_args(args, *lm.tokenizer, model.config().vocab_size, ratio);
            for (int64_t k : ks.empty() ? std::vector<int64_t>{1} : ks)
                specs.push_back({.method = method,
                                 .split = freq->split,
                                 .k = k,
                                 .reg = args.get_double("--reg", 1e-3, 0, 1e6),
                                 .unk_id = lm.tokenizer->unk_id().value_or(-1)});
        }
    } else {
        specs = specs_from_args(args, model.config().hidden_size);
    }
    if (!lm.files.embedlab_manifest.empty())
        throw InputError(path.string() + ": sweep needs an uncompressed model");
    // Each setting is an experiment request (experiment.hpp), run by the engine; the
    // original's perplexity is computed once (the engine caches it per model and ids).
    CompressionRequest base;
    base.model = path.string();
    base.tokenizer = args.get("--tokenizer").value_or("");
    eval_flags_into(args, model.max_context(), base);
    std::vector<CompressionRequest> requests;
    for (const auto& spec : specs) {
        CompressionRequest request = base;
        request.method = spec.method;
        request.rank = spec.rank;
        request.shape = spec.shape;
        request.ranks = spec.ranks;
        request.eps = spec.ranks.empty() ? spec.eps : 0;
        request.uniform_ranks = spec.uniform_ranks;
        request.type = spec.type;
        if (spec.split) {
            request.freq_text = *args.get("--freq-text");
            request.keep_ratio = spec.split->keep_ratio;
            request.k = spec.k;
            request.reg = spec.reg;
            request.knn = knn.knn; // check_request refuses ivf on lle-unk and lle-pca
            request.nlist = knn.nlist;
            request.nprobe = knn.nprobe;
        }
        requests.push_back(request);
    }
    // Every setting is checked against the model before any runs (a q4_k on d = 128 fails
    // now, not after the others' evaluations).
    for (const auto& r : requests)
        check_request(r, model.config().embedding_dim(), path.string());
    // A repeated setting runs once; a sweep of more than kMaxSweepRuns settings is
    // refused before any work (each is a compression and an evaluation).
    {
        constexpr size_t kMaxSweepRuns = 256;
        std::set<std::string> seen;
        std::vector<CompressionRequest> unique;
        for (const auto& r : requests)
            if (seen.insert(request_json(r).dump()).second)
                unique.push_back(r);
        if (unique.size() < requests.size() && !args.has("--quiet"))
            std::fprintf(stderr, "sweep: %zu repeated settings run once\n", requests.size() - unique.size());
        if (unique.size() > kMaxSweepRuns)
            throw InputError("sweep: " + std::to_string(unique.size()) +
                             " settings, each a compression and an evaluation; a sweep runs at most " +
                             std::to_string(kMaxSweepRuns) + ": split it");
        requests = std::move(unique);
    }
    if (args.has("--slurm")) {
        lm = LoadedModel{}; // the nodes load it; nothing here needs it any more
        return sweep_on_slurm(args, requests, path.string());
    }
    for (const char* option : {"--sweep-dir", "--partition", "--time", "--cpus-per-task", "--mem",
                               "--array-limit", "--sbatch-arg", "--slurm-cli", "--no-wait"})
        if (args.has(option))
            throw InputError(std::string("sweep: ") + option + " applies to --slurm sweeps");
    const bool quiet = args.has("--quiet");
    std::optional<LoadedModel> loaded(std::move(lm)); // the first run takes it; later runs load again

    Json rows = Json::array(), first_record;
    if (!args.has("--json"))
        sweep_print_header();
    for (const auto& request : requests) {
        StagePrinter stages(quiet);
        const auto run =
            loaded ? run_compression(request, std::exchange(loaded, std::nullopt).value(), stages.callback())
                   : run_compression(request, stages.callback());
        const Json record = run_json(run);
        if (first_record.is_null())
            first_record = record;
        Json row = sweep_row(record);
        if (!args.has("--json"))
            sweep_print_row(row);
        rows.push_back(row);
    }
    const Json sweep = sweep_json(path.string(), first_record, rows);
    if (args.has("--json"))
        print_json(sweep);
    else
        sweep_print_original(sweep);
    return 0;
}

} // namespace embedlab::cli
