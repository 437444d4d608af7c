// bench: figures, not tests. Nothing here asserts a time or a size; each mode
// prints what it measured so that runs can be compared by hand.
//
//   bench eval [MODEL...]  perplexity throughput one window at a time (what a
//                          PyTorch eager loop does) and with windows batched, on
//                          the same ids. --compare-llamacpp adds llama.cpp's
//                          llamacpp-ppl on an f32 GGUF export of the same model
//                          (llamacpp_compare.hpp): tokens/s side by side, and
//                          its perplexity next to ours.
//   bench onnx [MODEL...]  the model exported as ONNX and run in ONNX Runtime (x64, or arm64
//                          under qemu) beside EmbedLab on one window: bytes, RSS, tokens/s,
//                          both perplexities (command_bench_onnx.cpp).
//   bench scale --like NAME  seconds and peak RSS of inspect, eval and four compressions
//                          of a synthesized full-size model, each in a child process
//                          (command_bench_scale.cpp).
//
// The other modes run on a synthetic GPT-2-sized table, --vocab V (50257) by
// --dim d (768), float32, anisotropic like a trained table:
//   torch::manual_seed(--seed); E = randn(V, d) * linspace(1, 0.05, d) + 0.01
//   bench pca     wall time of fit_low_rank (mean, covariance, eigh, projection):
//                 best and median of --repeat fits, rows per second, and the
//                 relative Frobenius error of the last fit (computed once).
//   bench tt      wall time of fit_tensor_train over every row: best and median,
//                 microseconds per token, rows per second, relative Frobenius error.
//   bench lookup  wall time of embedding.lookup(ids) on --repeat batches of
//                 --batch seeded random ids, after one untimed fit of any table
//                 method that needs only the table (its flags, else its example
//                 setting), or of the dense table itself: microseconds per row.
//   bench lle     wall time of the LLE fit with the first --common ids common and
//                 --k neighbours: the exact k-NN search plus the per-row solves.
// Every synthetic mode reports peak RSS (VmHWM), the RSS right after the table was
// built (it is part of the peak), and the peak over the table's size. In lookup
// the peak is reset after the fit and the table released (unless it is the dense
// embedding), so it covers the lookups. Figures depend on the machine and its
// load; the thread count is printed with them.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <optional>

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "common.hpp"
#include "embedlab/accounting.hpp"
#include "embedlab/compress.hpp"
#include "embedlab/eval.hpp"
#include "embedlab/low_rank.hpp"
#include "embedlab/name_table.hpp"
#include "embedlab/partial_sparse.hpp"
#include "embedlab/peer_environment.hpp"
#include "embedlab/table_method.hpp"
#include "embedlab/tensor_train.hpp"
#include "frequency_text.hpp"
#include "llamacpp_compare.hpp"
#include "machine_limits.hpp"
#include "method_flags.hpp"
#include "progress_printer.hpp"

namespace embedlab::cli {

int bench_onnx(const std::vector<std::string>& argv); // bench onnx (command_bench_onnx.cpp)

namespace {

// bench machine: the limits the other benches' figures are read against (issue 63).
int bench_machine(const std::vector<std::string>& argv)
{
    Args args("bench machine", argv, {}, {"--json"});
    const auto m = measure_machine();
    if (args.has("--json")) {
        print_json({{"bench", "machine"}, {"machine", machine_json(m)}});
        return 0;
    }
    std::printf("bench machine: %s, %d threads\n", cpu_model_name().c_str(), m.threads);
    std::printf("  memory read     %8.1f GB/s  (sum of a %lld MiB float32 array, best of 5)\n", m.read_gbps,
                (long long)(m.array_bytes >> 20));
    std::printf("  memory triad    %8.1f GB/s  (a = b + s c over three such arrays, STREAM's count)\n",
                m.triad_gbps);
    std::printf("  float32 GEMM    %8.1f GFLOP/s  (%lld x %lld products, libtorch's BLAS)\n", m.gemm_gflops,
                (long long)m.gemm_n, (long long)m.gemm_n);
    return 0;
}

int bench_eval(const std::vector<std::string>& argv)
{
    Args args("bench eval", argv, {"--text", "--ctx", "--batch", "--tokenizer", "--llamacpp"},
              {"--json", "--quiet", "--compare-llamacpp"});
    std::vector<std::filesystem::path> models;
    for (const auto& m : args.positional())
        models.emplace_back(m);
    if (models.empty())
        models.push_back(default_model_path());
    const std::filesystem::path text = args.get("--text").value_or(default_sample_text_path().string());
    const int64_t ctx = args.get_int("--ctx", 128, 1, 1 << 20);
    const int64_t batch = args.get_int("--batch", 0, 0, 1 << 16);
    const std::string content = read_text_file(text);
    const auto llamacpp =
        requested_llamacpp(args.get("--llamacpp"), args.has("--compare-llamacpp"), "bench eval");

    const MachineLimits limits = measure_machine(); // each row's share of the GEMM peak (issue 63)
    Json results = Json::array();
    for (const auto& path : models) {
        auto lm = load_model(path, load_options(args));
        const auto ids = lm.tokenizer->encode(content);
        // Warm-up: first calls pay for allocator and thread-pool start-up.
        evaluate_perplexity(*lm.model, std::span(ids).first(std::min<size_t>(ids.size(), ctx + 1)),
                            {.ctx = ctx, .stride = ctx, .batch_windows = 1});
        PerplexityResult one, batched;
        {
            ProgressPrinter p("bench " + path.filename().string() + " (1 window/batch)", "tokens",
                              args.has("--quiet"));
            one = evaluate_perplexity(*lm.model, ids, {.ctx = ctx, .stride = ctx, .batch_windows = 1},
                                      p.callback());
        }
        {
            ProgressPrinter p("bench " + path.filename().string() + " (batched)", "tokens",
                              args.has("--quiet"));
            batched = evaluate_perplexity(*lm.model, ids, {.ctx = ctx, .stride = ctx, .batch_windows = batch},
                                          p.callback());
        }
        Json row = {{"model", path.string()},
                    {"tokens", batched.tokens},
                    {"ppl", batched.ppl},
                    {"one_window_tokens_per_second", one.tokens_per_second},
                    {"batched_tokens_per_second", batched.tokens_per_second},
                    {"batch_windows", batched.batch_windows},
                    {"speedup", batched.tokens_per_second / one.tokens_per_second}};
        {
            const auto b = lm.model->parameter_breakdown();
            const auto cost =
                token_cost(b.attention, b.mlp, b.norms,
                           lm.model->config().tied_embeddings ? b.token_embedding : b.output_head);
            row["batched_gflops"] = batched.tokens_per_second * cost.flops / 1e9;
            row["share_of_gemm_peak"] = batched.tokens_per_second * cost.flops / 1e9 / limits.gemm_gflops;
        }
        if (llamacpp) {
            if (!args.has("--quiet"))
                std::fprintf(stderr, "bench %s: llama.cpp (f32 GGUF export, %s)\n",
                             path.filename().string().c_str(), llamacpp->string().c_str());
            const auto ref = run_llamacpp_ppl(*llamacpp, lm, ids, ctx, at::get_num_threads());
            if (!ref.skipped.empty()) {
                row["llamacpp"] = {{"skipped", ref.skipped}};
            } else {
                row["llamacpp"] = {{"tokens", ref.tokens},
                                   {"ppl", ref.ppl},
                                   {"seconds", ref.seconds},
                                   {"tokens_per_second", ref.tokens_per_second}};
                // Ours (batched) over llama.cpp's: above 1 is faster.
                row["speed_vs_llamacpp"] = batched.tokens_per_second / ref.tokens_per_second;
                row["ppl_relative_difference"] = batched.ppl / ref.ppl - 1;
            }
        }
        results.push_back(row);
    }
    Json j = {{"bench", "eval"},
              {"text", text.string()},
              {"ctx", ctx},
              {"threads", at::get_num_threads()},
              {"openmp_wait_policy", openmp_wait_policy()},
              {"llamacpp_openmp_wait_policy", peer_openmp_wait_policy()},
              {"machine", machine_json(limits)},
              {"results", results}};
    if (args.has("--json")) {
        print_json(j);
        return 0;
    }
    std::printf("bench eval: %s, ctx %lld, %d threads, OMP_WAIT_POLICY %s (llama.cpp: %s)\n", text.c_str(),
                (long long)ctx, at::get_num_threads(), openmp_wait_policy().c_str(),
                peer_openmp_wait_policy().c_str());
    for (const auto& r : results)
        std::printf("  %s: %.1f GFLOP/s batched, %.0f%% of this machine's float32 GEMM peak (%.1f)\n",
                    r["model"].get<std::string>().c_str(), r["batched_gflops"].get<double>(),
                    100 * r["share_of_gemm_peak"].get<double>(), limits.gemm_gflops);
    std::printf("%-40s %8s %10s %14s %14s %8s\n", "model", "tokens", "ppl", "1-window tok/s", "batched tok/s",
                "batch");
    for (const auto& r : results)
        std::printf("%-40s %8lld %10.4f %14.0f %14.0f %8lld\n", r["model"].get<std::string>().c_str(),
                    (long long)r["tokens"].get<int64_t>(), r["ppl"].get<double>(),
                    r["one_window_tokens_per_second"].get<double>(),
                    r["batched_tokens_per_second"].get<double>(),
                    (long long)r["batch_windows"].get<int64_t>());
    if (!llamacpp)
        return 0;
    std::printf(
        "\nllama.cpp (llamacpp-ppl, f32 GGUF export, same ids, ctx and threads; one window a call)\n");
    std::printf("%-40s %8s %12s %16s %14s %12s\n", "model", "tokens", "ppl", "llama.cpp tok/s",
                "EmbedLab/l.cpp", "ppl rel diff");
    for (const auto& r : results) {
        const auto& l = r["llamacpp"];
        if (l.contains("skipped")) {
            std::printf("%-40s skipped: %s\n", r["model"].get<std::string>().c_str(),
                        l["skipped"].get<std::string>().c_str());
            continue;
        }
        std::printf("%-40s %8lld %12.4f %16.0f %13.2fx %12.2e\n", r["model"].get<std::string>().c_str(),
                    (long long)l["tokens"].get<int64_t>(), l["ppl"].get<double>(),
                    l["tokens_per_second"].get<double>(), r["speed_vs_llamacpp"].get<double>(),
                    r["ppl_relative_difference"].get<double>());
    }
    return 0;
}

// ---- the synthetic-table modes ----

const std::set<std::string> kSwitches = {"--json", "--quiet"};

std::set<std::string> with_table_options(std::set<std::string> options)
{
    options.insert({"--vocab", "--dim", "--seed", "--repeat"});
    return options;
}

// A "Key:  N kB" line of /proc/self/status, in bytes; 0 where unavailable.
int64_t proc_status_bytes(const std::string& key)
{
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
        if (line.rfind(key + ":", 0) == 0)
            return std::strtoll(line.c_str() + key.size() + 1, nullptr, 10) * 1024;
    return 0;
}

// Linux >= 4.0: writing 5 to clear_refs resets VmHWM to the current RSS. Freed
// heap is first handed back (glibc keeps it), so the RSS is what is still live.
bool reset_peak_rss()
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    std::ofstream out("/proc/self/clear_refs");
    out << "5" << std::flush;
    return static_cast<bool>(out);
}

struct Table {
    int64_t vocab = 0, dim = 0, seed = 0;
    torch::Tensor E;          // [V, d] float32
    int64_t baseline_rss = 0; // VmRSS right after E was built
};

// Sizes and seed only; build_table() fills E once the mode's options are checked.
Table table_spec(const Args& args, const std::string& command)
{
    if (!args.positional().empty())
        throw InputError(command + ": unexpected argument '" + args.positional().front() + "'");
    Table t;
    t.vocab = args.get_int("--vocab", 50257, 1, int64_t{1} << 26);
    t.dim = args.get_int("--dim", 768, 1, 1 << 16);
    t.seed = args.get_int("--seed", 0, 0, std::numeric_limits<int64_t>::max());
    return t;
}

// In place, so no V x d temporaries raise the peak RSS above the table itself.
void build_table(Table& t)
{
    torch::manual_seed(static_cast<uint64_t>(t.seed));
    t.E = torch::randn({t.vocab, t.dim}, torch::kFloat32);
    t.E.mul_(torch::linspace(1.0, 0.05, t.dim, torch::kFloat32)).add_(0.01);
    t.baseline_rss = proc_status_bytes("VmRSS");
}

struct Timing {
    double best = 0, median = 0; // seconds
};

// Wall time of run(0) .. run(repeat - 1), each on its own.
Timing time_runs(int64_t repeat, const std::function<void(int64_t)>& run)
{
    std::vector<double> seconds;
    for (int64_t i = 0; i < repeat; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        run(i);
        seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(seconds.begin(), seconds.end());
    const size_t n = seconds.size();
    return {seconds.front(), n % 2 ? seconds[n / 2] : (seconds[n / 2 - 1] + seconds[n / 2]) / 2};
}

// ||E - E_hat||_F / ||E||_F, E_hat from emb.lookup in blocks of 8192 ids.
double relative_frobenius(const TokenEmbedding& emb, const torch::Tensor& E)
{
    c10::InferenceMode guard;
    double err2 = 0, norm2 = 0;
    for (int64_t lo = 0; lo < E.size(0); lo += 8192) {
        const int64_t hi = std::min(E.size(0), lo + 8192);
        const auto rows = E.slice(0, lo, hi);
        err2 += (rows - emb.lookup(torch::arange(lo, hi, torch::kLong)))
                    .square()
                    .sum(torch::kDouble)
                    .item<double>();
        norm2 += rows.square().sum(torch::kDouble).item<double>();
    }
    return norm2 > 0 ? std::sqrt(err2 / norm2) : 0.0;
}

struct LowRankChoice {
    LowRankKind kind = LowRankKind::PCA;
    int64_t rank = 0;
};

// bench pca times fit_low_rank itself; --method picks its centring.
constexpr Named<LowRankKind> kLowRankKinds[]{{LowRankKind::PCA, "pca"}, {LowRankKind::SVD, "svd"}};

LowRankChoice low_rank_choice(const Args& args, int64_t dim)
{
    const std::string name = args.get("--method").value_or("pca");
    return {value_named(kLowRankKinds, name, "bench pca: --method must be pca or svd, got '" + name + "'"),
            args.get_int("--rank", std::min<int64_t>(128, dim), 1, dim)};
}

// --shape (default 8,8,12 for d = 768, else the first 3-factor shape of d) with
// --ranks (default 1,4,..,4,1 clipped to the caps) or --eps; checked against d.
TensorTrainOptions tt_options(const Args& args, const std::string& command, int64_t dim)
{
    TensorTrainOptions o;
    o.shape = args.get_int_list("--shape", 1, dim);
    if (o.shape.empty() && dim == 768)
        o.shape = {8, 8, 12};
    if (o.shape.empty()) {
        const auto shapes = tt_shapes(dim, 3);
        if (shapes.empty())
            throw InputError(command + ": d = " + std::to_string(dim) +
                             " has no 3-factor shape; give --shape I1,I2,... (product = d)");
        o.shape = shapes.front();
    }
    if (args.has("--eps") && args.has("--ranks"))
        throw InputError(command + ": give --ranks or --eps, not both");
    if (args.has("--eps")) {
        o.eps = args.get_double("--eps", 0, 0, 1);
        if (o.eps <= 0 || o.eps >= 1)
            throw InputError(command + ": --eps must lie strictly between 0 and 1, got " +
                             *args.get("--eps"));
    } else {
        o.ranks = args.get_int_list("--ranks", 1, dim);
        if (o.ranks.empty()) {
            o.ranks = tt_rank_caps(o.shape);
            for (size_t k = 1; k + 1 < o.ranks.size(); ++k)
                o.ranks[k] = std::min<int64_t>(4, o.ranks[k]);
        }
    }
    try {
        check_tt_shape_and_ranks(dim, o.shape, o.ranks.empty() ? tt_rank_caps(o.shape) : o.ranks);
    } catch (const InputError& e) {
        throw InputError(command + ": " + e.what());
    }
    return o;
}

LowRankFit run_low_rank(const Table& t, const LowRankChoice& c, const std::string& what, bool quiet)
{
    ProgressPrinter p(what, "steps", quiet);
    return fit_low_rank(t.E, c.kind, c.rank, p.callback());
}

TensorTrainFit run_tensor_train(const Table& t, const TensorTrainOptions& o, const std::string& what,
                                bool quiet)
{
    ProgressPrinter p(what, "blocks", quiet);
    return fit_tensor_train(t.E, o, p.callback());
}

Json low_rank_json(const LowRankFit& fit)
{
    return {{"method", fit.kind == LowRankKind::PCA ? "pca" : "svd"},
            {"rank", fit.rank},
            {"explained_variance", fit.explained_variance[static_cast<size_t>(fit.rank - 1)]}};
}

Json tt_json(const TensorTrainFit& fit)
{
    Json j = {{"method", "tt"}, {"shape", fit.shape}, {"ranks", fit.ranks}};
    if (fit.eps > 0) {
        j["eps"] = fit.eps;
        j["rank_mode"] = fit.token_ranks.defined() ? "per_token" : "uniform";
        j["mean_ranks"] = fit.mean_needed_ranks;
    }
    return j;
}

std::string repeat_label(const std::string& what, int64_t i, int64_t repeat)
{
    return what + " " + std::to_string(i + 1) + "/" + std::to_string(repeat);
}

std::string human_value(const std::string& key, const Json& v)
{
    char buf[64];
    if (v.is_array()) {
        std::string s;
        for (const auto& x : v) {
            if (!s.empty())
                s += key == "shape" ? "x" : ",";
            s += x.dump();
        }
        return s;
    }
    if (v.is_string())
        return v.get<std::string>();
    if (key.size() > 6 && key.ends_with("_bytes"))
        std::snprintf(buf, sizeof buf, "%.1f MiB", v.get<double>() / (1 << 20));
    else if (v.is_number_float())
        std::snprintf(buf, sizeof buf, std::abs(v.get<double>()) >= 1e4 ? "%.0f" : "%.4g", v.get<double>());
    else
        return v.dump();
    return buf;
}

// The common fields, then the mode's; JSON or a short block of "key value" lines.
int report(const Args& args, const std::string& bench, const Table& t, int64_t peak_rss, const Json& figures)
{
    const int64_t table_bytes = t.vocab * t.dim * 4;
    Json j = {{"bench", bench},
              {"vocab", t.vocab},
              {"dim", t.dim},
              {"seed", t.seed},
              {"threads", at::get_num_threads()},
              {"table_bytes", table_bytes},
              {"baseline_rss_bytes", t.baseline_rss},
              {"peak_rss_bytes", peak_rss},
              {"peak_rss_over_table", static_cast<double>(peak_rss) / static_cast<double>(table_bytes)}};
    for (auto it = figures.begin(); it != figures.end(); ++it)
        j[it.key()] = it.value();
    if (args.has("--json")) {
        print_json(j);
        return 0;
    }
    std::printf("bench %s: V = %lld, d = %lld, seed %lld, %d threads\n", bench.c_str(), (long long)t.vocab,
                (long long)t.dim, (long long)t.seed, at::get_num_threads());
    for (auto it = std::next(j.begin(), 5); it != j.end(); ++it)
        std::printf("  %-22s %s\n", it.key().c_str(), human_value(it.key(), it.value()).c_str());
    return 0;
}

int bench_pca(const std::vector<std::string>& argv)
{
    Args args("bench pca", argv, with_table_options({"--rank", "--method"}), kSwitches);
    Table t = table_spec(args, "bench pca");
    const LowRankChoice choice = low_rank_choice(args, t.dim);
    const int64_t repeat = args.get_int("--repeat", 3, 1, 10000);
    build_table(t);
    LowRankFit fit;
    const Timing time = time_runs(repeat, [&](int64_t i) {
        fit = {}; // one fit alive at a time, so the peak is one fit's
        fit = run_low_rank(t, choice, repeat_label("bench pca: fit", i, repeat), args.has("--quiet"));
    });
    const int64_t peak = proc_status_bytes("VmHWM");
    Json figures = low_rank_json(fit);
    figures.update({{"repeat", repeat},
                    {"seconds_best", time.best},
                    {"seconds_median", time.median},
                    {"rows_per_second", static_cast<double>(t.vocab) / time.best},
                    {"relative_frobenius", relative_frobenius(LowRankTokenEmbedding(fit), t.E)}});
    return report(args, "pca", t, peak, figures);
}

int bench_tt(const std::vector<std::string>& argv)
{
    auto switches = kSwitches;
    switches.insert("--uniform-ranks");
    Args args("bench tt", argv, with_table_options({"--shape", "--ranks", "--eps"}), switches);
    Table t = table_spec(args, "bench tt");
    TensorTrainOptions options = tt_options(args, "bench tt", t.dim);
    if (args.has("--uniform-ranks") && options.eps <= 0)
        throw InputError("bench tt: --uniform-ranks goes with --eps (fixed --ranks are uniform already)");
    options.uniform_ranks = args.has("--uniform-ranks");
    const int64_t repeat = args.get_int("--repeat", 3, 1, 10000);
    build_table(t);
    TensorTrainFit fit;
    const Timing time = time_runs(repeat, [&](int64_t i) {
        fit = {};
        fit = run_tensor_train(t, options, repeat_label("bench tt: fit", i, repeat), args.has("--quiet"));
    });
    const int64_t peak = proc_status_bytes("VmHWM");
    Json figures = tt_json(fit);
    figures.update(
        {{"repeat", repeat},
         {"seconds_best", time.best},
         {"seconds_median", time.median},
         {"us_per_token", 1e6 * time.best / static_cast<double>(t.vocab)},
         {"rows_per_second", static_cast<double>(t.vocab) / time.best},
         {"params_per_token", static_cast<double>(TensorTrainTokenEmbedding(fit).parameter_count()) /
                                  static_cast<double>(t.vocab)},
         {"relative_frobenius", relative_frobenius(TensorTrainTokenEmbedding(fit), t.E)}});
    return report(args, "tt", t, peak, figures);
}

// The lle fit at the paper's scale: the first --common ids are common, the rest rare
// (the split itself is cheap; the exact k-NN search and the solves are timed).
int bench_lle(const std::vector<std::string>& argv)
{
    Args args(
        "bench lle", argv,
        with_table_options({"--common", "--k", "--reg", "--knn", "--nlist", "--nprobe", "--recall-sample"}),
        kSwitches);
    Table t = table_spec(args, "bench lle");
    const int64_t common = args.get_int("--common", std::min<int64_t>(10000, t.vocab), 1, t.vocab);
    const int64_t k = args.get_int("--k", 5, 1, common);
    const double reg = args.get_double("--reg", 1e-3, 0, 1e6);
    const auto flags = knn_flags(args, "bench lle");
    const KnnOptions knn{.kind = parse_knn_kind(flags.knn),
                         .nlist = flags.nlist,
                         .nprobe = flags.nprobe,
                         .seed = static_cast<uint64_t>(t.seed),
                         .recall_sample = args.get_int("--recall-sample", 1000, 0, t.vocab)};
    const int64_t repeat = args.get_int("--repeat", 1, 1, 10000);
    build_table(t);
    FrequencySplit split;
    split.counts.assign(static_cast<size_t>(t.vocab), 0);
    for (int64_t id = 0; id < t.vocab; ++id)
        (id < common ? split.common : split.rare).push_back(id);
    PartialSparseFit fit;
    const Timing time = time_runs(repeat, [&](int64_t i) {
        fit = {};
        ProgressPrinter p(repeat_label("bench lle: fit", i, repeat), "%", args.has("--quiet"));
        fit = fit_partial_sparse(t.E, split, {.kind = PartialSparseKind::LLE, .k = k, .reg = reg, .knn = knn},
                                 p.callback());
    });
    const int64_t peak = proc_status_bytes("VmHWM");
    const PartialSparseTokenEmbedding embedding(fit);
    Json figures = {{"common", common},
                    {"rare", t.vocab - common},
                    {"k", k},
                    {"reg", reg},
                    {"repeat", repeat},
                    {"seconds_best", time.best},
                    {"seconds_median", time.median},
                    {"knn", knn_json(fit.knn)},
                    {"parameters", embedding.parameter_count()},
                    {"relative_frobenius", relative_frobenius(embedding, t.E)}};
    return report(args, "lle", t, peak, figures);
}

// The dense table itself: the baseline bench lookup compares a method's lookup with.
constexpr const char* kDenseBaseline = "dense";

int bench_lookup(const std::vector<std::string>& argv)
{
    std::set<std::string> valued = with_table_options({"--method", "--batch"}), switches = kSwitches;
    add_method_flags(valued, switches);
    Args args("bench lookup", argv, valued, switches);
    Table t = table_spec(args, "bench lookup");
    const std::string method = args.get("--method").value_or("tt");
    const int64_t batch = args.get_int("--batch", 4096, 1, 1 << 24);
    const int64_t repeat = args.get_int("--repeat", 20, 1, 100000);
    const bool dense = method == kDenseBaseline;
    // A method's setting: its flags, else its example (TableMethod::fill_example), checked.
    CompressionRequest request;
    request.method = method;
    method_flags_into(args, request);
    if (dense) {
        CompressionRequest bare;
        bare.method = method;
        if (request_json(request) != request_json(bare))
            throw InputError(
                "bench lookup: --method dense takes no method flags (it times the table itself)");
    } else {
        const TableMethod* m = nullptr;
        try {
            m = &table_method(method);
        } catch (const InputError& e) {
            throw InputError("bench lookup: " + std::string(e.what()) + " (or --method dense)");
        }
        if (method_descriptor(method).needs_frequency_text)
            throw InputError("bench lookup: --method " + method +
                             " needs token frequencies (its common/rare split); bench lle times its fit");
        m->fill_example(request, t.dim);
        check_request(request, t.dim, "bench lookup", field_flag);
    }
    build_table(t);
    const auto ids = torch::randint(t.vocab, {repeat, batch}, torch::kLong); // seeded by build_table

    // The untimed fit; then the table is released unless it is the embedding.
    std::shared_ptr<const TokenEmbedding> emb;
    Json figures;
    const bool quiet = args.has("--quiet");
    if (dense) {
        figures = {{"method", kDenseBaseline}};
        emb = std::make_shared<DenseTokenEmbedding>(t.E);
    } else {
        ProgressPrinter p("bench lookup: fit", "steps", quiet);
        const auto c = compress_table(t.E, embedlab::table_spec(request, t.dim), 0, p.callback());
        figures = {{"method", method},
                   {"setting", table_method(method).parameters(c.spec)},
                   {"spec", spec_json(c.spec)},
                   {"relative_frobenius", c.reconstruction.relative_frobenius}};
        emb = c.embedding;
        t.E = torch::Tensor();
    }
    figures["parameters"] = emb->parameter_count();

    c10::InferenceMode guard;
    emb->lookup(ids[0]); // warm-up: allocator and thread pool
    const bool reset = reset_peak_rss();
    const Timing time = time_runs(repeat, [&](int64_t i) { emb->lookup(ids[i]); });
    const int64_t peak = proc_status_bytes("VmHWM");
    const double per_row = 1e6 / static_cast<double>(batch);
    figures.update({{"batch", batch},
                    {"repeat", repeat},
                    {"seconds_best", time.best},
                    {"seconds_median", time.median},
                    {"us_per_row_best", per_row * time.best},
                    {"us_per_row_median", per_row * time.median},
                    {"rows_per_second", static_cast<double>(batch) / time.best},
                    {"peak_rss_scope", reset ? "lookups (reset after the fit)" : "whole run"}});
    return report(args, "lookup", t, peak, figures);
}

} // namespace

int command_bench(const std::vector<std::string>& argv)
{
    using Mode = int (*)(const std::vector<std::string>&);
    static const std::map<std::string, Mode> modes = {
        {"eval", bench_eval}, {"pca", bench_pca},        {"tt", bench_tt},       {"lookup", bench_lookup},
        {"lle", bench_lle},   {"train", bench_train},    {"scale", bench_scale}, {"generate", bench_generate},
        {"onnx", bench_onnx}, {"machine", bench_machine}};
    const auto mode = argv.empty() ? modes.end() : modes.find(argv[0]);
    if (mode == modes.end())
        throw InputError(
            "bench: " + (argv.empty() ? std::string("no mode given") : "unknown mode '" + argv[0] + "'") +
            "; expected bench eval|generate|onnx|pca|tt|lookup|lle|train|scale|machine (see embedlab-cli "
            "help)");
    return mode->second(std::vector<std::string>(argv.begin() + 1, argv.end()));
}

} // namespace embedlab::cli
