// FLAT-LLM on the command line (METHODS.md 3): importance, allocate, and the
// flat branches of compress and sweep.
#include <cmath>
#include <optional>
#include <sstream>
#include <utility>

#include "common.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/flat_llm.hpp"
#include "embedlab/sweep_list.hpp"
#include "embedlab/text_format.hpp"
#include "progress_printer.hpp"
#include "sweep_table.hpp"
#include "text_eval.hpp"

namespace embedlab::cli {

namespace {

namespace fs = std::filesystem;

// --calib-text FILE with --samples, --seqlen, --seed: tokenized once, recorded with its sha256.
struct CalibrationText {
    fs::path path;
    std::string sha256;
    std::vector<int32_t> ids;
    CalibrationOptions options;

    static CalibrationText from_args(const Args& args, const Tokenizer& tokenizer, const LanguageModel& model,
                                     bool mlp)
    {
        const auto file = args.get("--calib-text");
        if (!file)
            throw InputError(
                "FLAT-LLM needs --calib-text FILE (the value and hidden-state statistics come from it)");
        const int64_t context = calibration_context(model);
        CalibrationText t;
        t.path = *file;
        t.ids = tokenizer.encode(read_text_file(t.path));
        if (t.ids.empty())
            throw InputError(t.path.string() + ": the calibration text has no tokens");
        t.sha256 = sha256_file(t.path);
        t.options.samples = args.get_int("--samples", 128, 1, 1 << 20);
        t.options.seqlen = args.get_int("--seqlen", std::min<int64_t>(256, context), 1, context);
        t.options.seed = static_cast<uint64_t>(args.get_int("--seed", 0, 0, INT64_MAX));
        t.options.mlp = mlp;
        // Too short a text: say which file.
        try {
            calibration_window_starts(static_cast<int64_t>(t.ids.size()), t.options.samples, t.options.seqlen,
                                      t.options.seed);
        } catch (const InputError& e) {
            throw InputError(t.path.string() + ": " + e.what());
        }
        return t;
    }

    Calibration run(const LanguageModel& model, bool quiet) const
    {
        ProgressPrinter p("calibrate", "windows", quiet);
        return calibrate(model, ids, options, p.callback());
    }

    Json json() const
    {
        return {{"path", fs::absolute(path).lexically_normal().string()},
                {"sha256", sha256},
                {"tokens", ids.size()}};
    }
};

std::vector<double> double_list(const Args& args, const std::string& command, const std::string& option,
                                double min, double max)
{
    // A list or a range (sweep_list.hpp, as the workbench's number boxes read them).
    const auto v = args.get(option);
    return v ? sweep_numbers(*v, min, max, command + ": " + option) : std::vector<double>{};
}

std::vector<RankAllocation> allocations_from(const Args& args, const char* fallback)
{
    std::vector<RankAllocation> out;
    std::stringstream in(args.get("--allocation").value_or(fallback));
    std::string part;
    while (std::getline(in, part, ','))
        out.push_back(parse_rank_allocation(part));
    return out;
}

// (0, 1]: the range check of get_double is closed, so 0 needs its own message.
double remaining_ratio(double r, const std::string& option)
{
    if (!(r > 0.0 && r <= 1.0))
        throw InputError(option + ": remaining ratio " + std::to_string(r) +
                         " is outside (0, 1] (1 keeps everything)");
    return r;
}

LoadedModel load_for_flat(const Args& args, const fs::path& path)
{
    auto lm = load_model(path, load_options(args));
    print_warnings(lm.files.warnings);
    if (!lm.model->config().value_head_dims.empty())
        throw InputError(path.string() + ": is already FLAT-compressed; use the original model");
    return lm;
}

void print_layers(const FlatResult& r)
{
    std::printf("  %-5s %10s %10s %8s %6s %10s %6s\n", "layer", "importance", "normalised", "w", "rank",
                "dropped", "mlp");
    for (size_t l = 0; l < r.layers.size(); ++l) {
        const auto& x = r.layers[l];
        std::printf("  %-5zu %10.6f %10.6f %8.4f %6lld %10.6f %6lld\n", l, x.importance, x.normalised, x.w,
                    (long long)x.rank, x.dropped_share, (long long)x.mlp_width);
    }
}

} // namespace

int command_importance(const std::vector<std::string>& argv)
{
    Args args("importance", argv, {"--calib-text", "--samples", "--seqlen", "--seed", "--tokenizer"},
              {"--json", "--quiet", "--no-verify"});
    const auto path = model_argument(args);
    auto lm = load_model(path, load_options(args));
    print_warnings(lm.files.warnings);
    const auto& model = *lm.model;
    const auto text = CalibrationText::from_args(args, *lm.tokenizer, model, false);
    const auto cal = text.run(model, args.has("--quiet"));
    const auto scores = cal.scores();
    double total = 0;
    for (double t : scores)
        total += t;
    Json normalised = Json::array(), spectra = Json::array(), eq9 = Json::array();
    for (size_t l = 0; l < scores.size(); ++l) {
        normalised.push_back(total > 0 ? scores[l] / total : 0.0);
        eq9.push_back(cal.layers[l].importance_eq9);
        Json heads = Json::array();
        for (const auto& cov : cal.layers[l].value_covariance) {
            const auto lam = eigen_basis(cov).eigenvalues.clamp_min(0.0);
            heads.push_back(
                std::vector<double>(lam.data_ptr<double>(), lam.data_ptr<double>() + lam.numel()));
        }
        spectra.push_back(heads);
    }
    Json calibration = calibration_json(cal);
    calibration["text"] = text.json();
    Json out = {{"model", path.string()},
                {"architecture", architecture_name(model.config().arch)},
                {"layers", model.config().num_layers},
                {"d_head", model.config().head_dim()},
                {"kv_heads", model.config().num_kv_heads},
                {"calibration", calibration},
                {"scores", scores},
                {"normalised", normalised},
                // METHODS 3: `scores` is the reference code's mean(arccos(cos))/pi, which IPRS
                // uses; the paper's eq. 9 writes arccos(mean cos)/pi, shown for comparison.
                {"scores_definition", "mean over tokens of arccos(clamp(cos(x_in, x_out), 0, 1)) / pi"},
                {"scores_eq9", eq9},
                {"value_spectra", spectra}};
    if (args.has("--json")) {
        print_json(out);
        return 0;
    }
    std::printf(
        "%s: importance of %zu decoder layers from %lld windows of %lld tokens (%s, seed %llu, %.2f s)\n",
        path.c_str(), scores.size(), (long long)text.options.samples, (long long)text.options.seqlen,
        text.path.c_str(), (unsigned long long)text.options.seed, cal.seconds);
    std::printf("  %-5s %12s %12s %14s %14s\n", "layer", "importance", "normalised", "value energy",
                "eq. 9 (paper)");
    for (size_t l = 0; l < scores.size(); ++l) {
        double energy = 0;
        for (const auto& head : spectra[l])
            for (const auto& x : head)
                energy += x.get<double>();
        std::printf("  %-5zu %12.6f %12.6f %14.6g %14.6f\n", l, scores[l], normalised[l].get<double>(),
                    energy, eq9[l].get<double>());
    }
    std::printf("  importance: mean of arccos(cos)/pi over tokens (the reference code; IPRS uses it); "
                "eq. 9: arccos of the mean cosine / pi (the paper's formula)\n");
    return 0;
}

int command_allocate(const std::vector<std::string>& argv)
{
    Args args("allocate", argv, {"--scores", "--ratios", "--d-head", "--allocation"}, {"--json"});
    if (!args.positional().empty())
        throw InputError("allocate: needs no model (--scores FILE.json gives the importance scores)");
    const std::string file =
        args.required("--scores", "FILE.json", "the output of importance, or {\"scores\": [t_1, ..., t_L]}");
    std::vector<double> scores;
    Json in;
    try {
        in = Json::parse(read_text_file(file));
        scores = in.at("scores").get<std::vector<double>>();
    } catch (const nlohmann::json::exception& e) {
        throw InputError(file + ": needs a \"scores\" array of numbers (" + e.what() + ")");
    }
    if (scores.empty())
        throw InputError(file + ": \"scores\" is empty");
    for (double t : scores)
        if (!std::isfinite(t) || t < 0)
            throw InputError(file + ": scores must be finite and non-negative, found " + std::to_string(t));
    const bool given_d = args.has("--d-head");
    if (!given_d && !in.contains("d_head"))
        throw InputError("allocate: --d-head D is required (the head dimension ranks are counted in)");
    const int64_t d = given_d ? args.get_int("--d-head", 0, 1, 1 << 20) : in["d_head"].get<int64_t>();
    const auto ratios = double_list(args, "allocate", "--ratios", -1e300, 1e300);
    if (ratios.empty())
        throw InputError(
            "allocate: --ratios R1,R2,.. (average remaining ratios 1 - s, in (0, 1]) is required");
    const auto allocation = allocations_from(args, "iprs");
    if (allocation.size() != 1)
        throw InputError("allocate: --allocation takes one of iprs, uniform");

    double total = 0;
    for (double t : scores)
        total += t;
    Json normalised = Json::array();
    for (double t : scores)
        normalised.push_back(total > 0 ? t / total : 0.0);
    Json rows = Json::array();
    for (double r : ratios) {
        remaining_ratio(r, "--ratios");
        const auto w = allocation[0] == RankAllocation::IPRS ? iprs_allocation(scores, r)
                                                             : uniform_allocation(scores.size(), r);
        const auto ranks = ranks_from_ratios(w, d);
        int64_t kept = 0;
        for (int64_t k : ranks)
            kept += k;
        rows.push_back(
            {{"remaining", r},
             {"w", w},
             {"ranks", ranks},
             {"kept_rank_ratio", static_cast<double>(kept) / static_cast<double>(d * ranks.size())}});
    }
    if (args.has("--json")) {
        print_json({{"scores", scores},
                    {"normalised", normalised},
                    {"d_head", d},
                    {"allocation", rank_allocation_name(allocation[0])},
                    {"allocations", rows},
                    {"conventions", {{"ranks", kFlatRankConvention}}}});
        return 0;
    }
    std::printf("%s allocation of %zu layers, d_head %lld (w, then rank)\n",
                rank_allocation_name(allocation[0]), scores.size(), (long long)d);
    std::printf("%-10s", "remaining");
    for (size_t l = 0; l < scores.size(); ++l)
        std::printf(" %12s", ("layer " + std::to_string(l)).c_str());
    std::printf("\n");
    for (const auto& row : rows) {
        std::printf("%-10.4f", row["remaining"].get<double>());
        for (size_t l = 0; l < scores.size(); ++l)
            std::printf(" %6.4f %5lld", row["w"][l].get<double>(), (long long)row["ranks"][l].get<int64_t>());
        std::printf("\n");
    }
    return 0;
}

int compress_flat(const std::vector<std::string>& argv)
{
    Args args("compress", argv,
              {"--method",     "--remaining", "--target-ratio", "--allocation",  "--mlp-lambda",
               "--calib-text", "--samples",   "--seqlen",       "--seed",        "--out",
               "--eval-text",  "--ctx",       "--stride",       "--batch",       "--tokenizer",
               "--task",       "--task-data", "--task-limit",   "--calibration", "--mlp-calibration",
               "--eval-tokens"},
              {"--mlp", "--no-mlp", "--force", "--json", "--quiet", "--dense", "--divergence"});
    if (args.has("--dense"))
        throw InputError(
            "compress: --dense does not apply to --method flat: DIR/model.safetensors already holds "
            "standard tensors, with the value heads (and MLPs) at the narrowed shapes listed in "
            "embedlab.json");
    const auto path = model_argument(args);
    const std::string out = args.required("--out", "DIR");
    prepare_output_directory(out, args.has("--force"), input_paths(args, {path}));
    const bool target = args.has("--target-ratio");
    if (args.has("--remaining") == target)
        throw InputError("compress: --method flat needs one of --remaining R (average remaining value rank "
                         "ratio, in (0, 1]) or --target-ratio T (share of the decoder's weights to keep, as "
                         "the paper's compute_rank.py)");
    if (args.has("--mlp") && args.has("--no-mlp"))
        throw InputError("compress: --mlp and --no-mlp contradict each other");
    CompressionRequest request;
    request.model = path.string();
    request.tokenizer = args.get("--tokenizer").value_or("");
    request.method = method_descriptor(Method::Flat).name;
    if (target)
        request.target_ratio =
            remaining_ratio(args.get_double("--target-ratio", 1, -1e300, 1e300), "--target-ratio");
    else
        request.remaining = remaining_ratio(args.get_double("--remaining", 1, -1e300, 1e300), "--remaining");
    request.allocation = rank_allocation_name(allocations_from(args, "iprs").at(0));
    // A whole-decoder target compresses the MLPs too, as the paper does (the registry's
    // default, shared with the job API and the GUI); --remaining keeps its meaning
    // (attention only unless --mlp).
    request.compress_mlp = args.has("--mlp");
    request.no_mlp = target && args.has("--no-mlp");
    request.mlp_lambda = args.get_double("--mlp-lambda", 1.0, 1e-300, 1e300);
    // Issue 36 item 2: layer by layer as the reference (default), or all from the original.
    request.calibration = flat_calibration_name(
        parse_flat_calibration(args.get("--calibration").value_or(request.calibration)));
    // Issue 62: layer l's MLP covariance from its values' pass (default, as the reference)
    // or from a pass after its attention is narrowed.
    request.mlp_calibration = flat_mlp_calibration_name(
        parse_flat_mlp_calibration(args.get("--mlp-calibration").value_or(request.mlp_calibration)));
    auto lm = load_for_flat(args, path);
    if (!lm.files.embedlab_manifest.empty())
        throw InputError(path.string() +
                         ": is already an EmbedLab compressed model; compress the original model");
    if (lm.files.format != ModelFormat::HuggingFace) // before the calibration, not after it
        throw InputError(path.string() + ": compressed models are written from Hugging Face directories; " +
                         model_format_name(lm.files.format) +
                         " sources are not supported yet (importance and allocate work on them)");
    const auto& model = *lm.model;
    const bool quiet = args.has("--quiet");
    // The calibration and evaluation flags, checked against the model (messages name the flags).
    const auto text = CalibrationText::from_args(args, *lm.tokenizer, model, request_compresses_mlp(request));
    request.calib_text = text.path.string();
    request.samples = text.options.samples;
    request.seqlen = text.options.seqlen;
    request.seed = text.options.seed;
    eval_flags_into(args, model.max_context(), request);
    StagePrinter stages(quiet);
    const auto run = run_compression(request, std::move(lm), stages.callback());
    const FlatResult& flat = *run.flat;
    const Calibration& cal = *run.calibration;
    const FlatOptions& options = flat.options;
    Json manifest;
    {
        ProgressPrinter p("write " + out, "bytes", quiet);
        manifest = export_run(run, out, {.overwrite = args.has("--force")}, p.callback());
    }
    if (args.has("--json")) {
        print_json(manifest);
        return 0;
    }
    const auto& params = manifest["model_params"];
    if (target)
        std::printf("%s: flat target %.4f of the decoder's weights: kept %.4f (%lld -> %lld)\n", out.c_str(),
                    request.target_ratio, params["decoder_ratio"].get<double>(),
                    (long long)params["decoder_before"].get<int64_t>(),
                    (long long)params["decoder_after"].get<int64_t>());
    std::printf("%s: flat remaining %.4f (%s%s), value dims per layer %s of %lld\n", out.c_str(),
                options.remaining, rank_allocation_name(options.allocation), options.mlp ? ", mlp" : "",
                joined(flat.model->config().value_head_dims).c_str(),
                (long long)run.model.model->config().head_dim());
    std::printf("  model params %lld -> %lld (ratio %.4f); attention %lld -> %lld, mlp %lld -> %lld\n",
                (long long)params["before"].get<int64_t>(), (long long)params["after"].get<int64_t>(),
                params["ratio"].get<double>(), (long long)params["attention_before"].get<int64_t>(),
                (long long)params["attention_after"].get<int64_t>(),
                (long long)params["mlp_before"].get<int64_t>(),
                (long long)params["mlp_after"].get<int64_t>());
    print_layers(flat);
    std::printf("  calibration %lld windows x %lld tokens: %.3f s; compress %.3f s\n",
                (long long)text.options.samples, (long long)text.options.seqlen, cal.seconds, flat.seconds);
    if (!run.evaluation.is_null())
        TextEval::print(run.evaluation);
    return 0;
}

int sweep_flat(const std::vector<std::string>& argv)
{
    Args args("sweep", argv, {"--method",     "--remainings", "--target-ratios", "--allocation",
                              "--mlp-lambda", "--calib-text", "--samples",       "--seqlen",
                              "--seed",       "--eval-text",  "--ctx",           "--stride",
                              "--batch",      "--tokenizer",  "--calibration",   "--mlp-calibration",
                              "--task",       "--task-data",  "--task-limit",    "--eval-tokens"},
              {"--mlp", "--no-mlp", "--json", "--quiet", "--divergence"});
    const auto path = model_argument(args);
    if (!args.has("--eval-text"))
        throw InputError("sweep: --eval-text FILE is required (each row reports its perplexity)");
    // Rows by average remaining value rank ratio, or (as compress) by a decoder target.
    const bool targets = args.has("--target-ratios");
    if (args.has("--remainings") == targets)
        throw InputError(
            "sweep: --method flat needs --remainings R1,R2,.. (average remaining ratios, in (0, 1]) "
            "or --target-ratios T1,T2,.. (shares of the decoder's weights to keep)");
    if (args.has("--mlp") && args.has("--no-mlp"))
        throw InputError("sweep: --mlp and --no-mlp contradict each other");
    if (args.has("--no-mlp") && !targets)
        throw InputError("sweep: --no-mlp applies with --target-ratios (which compress the MLPs by default)");
    const auto settings =
        double_list(args, "sweep", targets ? "--target-ratios" : "--remainings", -1e300, 1e300);
    for (double r : settings)
        remaining_ratio(r, targets ? "--target-ratios" : "--remainings");
    const auto allocations = allocations_from(args, "iprs,uniform");
    const auto calibration_mode = parse_flat_calibration(args.get("--calibration").value_or("sequential"));
    auto lm = load_for_flat(args, path);
    // Each row is an experiment request run by the engine, as compress runs one (issue 37):
    // the same numbers, and --divergence and --task as every sweep; the original's
    // perplexity is computed once (the engine caches it per model and ids).
    CompressionRequest base;
    base.model = path.string();
    base.tokenizer = args.get("--tokenizer").value_or("");
    base.method = method_descriptor(Method::Flat).name;
    base.compress_mlp = args.has("--mlp");
    base.no_mlp = targets && args.has("--no-mlp");
    base.target_ratio = targets ? 1 : 0; // for request_compresses_mlp; each row sets its own
    base.mlp_lambda = args.get_double("--mlp-lambda", 1.0, 1e-300, 1e300);
    base.calibration = flat_calibration_name(calibration_mode);
    base.mlp_calibration = flat_mlp_calibration_name(
        parse_flat_mlp_calibration(args.get("--mlp-calibration").value_or(base.mlp_calibration)));
    const bool mlp = request_compresses_mlp(base);
    const auto text =
        CalibrationText::from_args(args, *lm.tokenizer, *lm.model, mlp); // messages name the flags
    base.calib_text = text.path.string();
    base.samples = text.options.samples;
    base.seqlen = text.options.seqlen;
    base.seed = text.options.seed;
    eval_flags_into(args, lm.model->max_context(), base);
    const bool quiet = args.has("--quiet");
    const int64_t before = lm.model->parameter_breakdown().total();
    // METHODS 0: the ratio is of the part compressed (V and O, and the MLPs with --mlp).
    const int64_t part_before = flat_compressed_params(*lm.model, mlp);
    const std::string part = mlp ? "attention_values_and_mlp" : "attention_values";
    std::optional<LoadedModel> loaded(std::move(lm)); // the first run takes it; later runs load again

    Json rows = Json::array(), evaluation, calibration, scores;
    if (!args.has("--json"))
        std::printf("%-10s %-10s %-8s %-20s %12s %8s %8s %8s %12s %12s\n", targets ? "target" : "-",
                    "remaining", "alloc", "ranks", "params", "ratio", "part", "attn", "ppl", "dlnPPL");
    for (double setting : settings)
        for (auto allocation : allocations) {
            CompressionRequest request = base;
            (targets ? request.target_ratio : request.remaining) = setting;
            request.allocation = rank_allocation_name(allocation);
            StagePrinter stages(quiet);
            const auto run = loaded ? run_compression(request, std::exchange(loaded, std::nullopt).value(),
                                                      stages.callback())
                                    : run_compression(request, stages.callback());
            const FlatResult& flat = *run.flat;
            const Json& e = run.evaluation;
            if (evaluation.is_null()) {
                evaluation = e;
                calibration = calibration_json(*run.calibration);
                calibration["text"] = text.json();
                scores = run.calibration->scores();
            }
            const auto params = flat_params_json(flat);
            const int64_t part_after = run.summary.params_after;
            Json row = {{"remaining", flat.options.remaining},
                        {"allocation", rank_allocation_name(allocation)},
                        {"ranks", flat.model->config().value_head_dims},
                        {"params", params["after"]},
                        {"ratio", params["ratio"]},
                        {"part", part},
                        {"part_params_before", part_before},
                        {"part_params_after", part_after},
                        {"part_ratio", static_cast<double>(part_after) / static_cast<double>(part_before)},
                        {"attention_ratio", static_cast<double>(flat.after.attention) /
                                                static_cast<double>(flat.before.attention)},
                        {"ppl", e["compressed"]["ppl"]},
                        {"nll_per_token", e["compressed"]["nll_per_token"]},
                        {"delta_ln_ppl", e["delta_ln_ppl"]},
                        {"compress_seconds", flat.seconds}};
            if (targets) {
                row["target_ratio"] = setting;
                row["decoder_ratio"] = params["decoder_ratio"];
            }
            if (mlp)
                row["mlp_widths"] = flat.model->config().mlp_widths;
            sweep_evaluation_columns(e, row);
            if (!args.has("--json")) {
                std::printf("%-10s %-10.4f %-8s %-20s %12lld %8.4f %8.4f %8.4f %12.4f %+12.6f\n",
                            targets ? short_number(setting).c_str() : "-", flat.options.remaining,
                            rank_allocation_name(allocation),
                            joined(flat.model->config().value_head_dims).c_str(),
                            (long long)flat.after.total(), row["ratio"].get<double>(),
                            row["part_ratio"].get<double>(), row["attention_ratio"].get<double>(),
                            row["ppl"].get<double>(), row["delta_ln_ppl"].get<double>());
                std::fflush(stdout);
            }
            rows.push_back(row);
        }
    const double baseline_ppl = evaluation["baseline"]["ppl"].get<double>();
    if (args.has("--json")) {
        print_json({{"model", path.string()},
                    {"method", "flat"},
                    {"mlp", mlp},
                    {"part", part},
                    {"calibration_mode", flat_calibration_name(calibration_mode)},
                    {"calibration", calibration},
                    {"scores", scores},
                    {"text", evaluation["text"]},
                    {"text_sha256", evaluation["text_sha256"]},
                    {"tokens", evaluation["tokens"]},
                    {"ctx", evaluation["ctx"]},
                    {"stride", evaluation["stride"]},
                    {"baseline_ppl", baseline_ppl},
                    {"params_before", before},
                    {"rows", rows}});
    } else {
        std::printf("%-10s %-10s %-8s %-20s %12lld %8.4f %8.4f %8.4f %12.4f %12s\n", "original", "-", "-",
                    "-", (long long)before, 1.0, 1.0, 1.0, baseline_ppl, "0");
        std::printf("part: %s (%lld parameters); ratio: whole model, part: the part compressed\n",
                    part.c_str(), (long long)part_before);
    }
    return 0;
}

} // namespace embedlab::cli
