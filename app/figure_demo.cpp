// `demo`: the headless face of the workbench. Runs pca, svd and tt at a few
// settings on the bundled model (the Results tab's job, app::compress_and_evaluate),
// renders every view's figure, and writes a one-page report linking them. Every
// file is written atomically, so an interrupted demo leaves complete files only.
// libtorch (through file_output.hpp) before any Qt header: Qt's `slots` macro breaks it.
#include "embedlab/file_output.hpp"
#include "embedlab/method_registry.hpp"

#include <QDateTime>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "analyses.hpp"
#include "args.hpp"
#include "figure_tool.hpp"
#include "model_summary.hpp"
#include "results_view.hpp"

namespace embedlab::app {

namespace fs = std::filesystem;

namespace {

struct Figure {
    std::string kind, title, caption;
};

// Numbers for people: "—" where a number does not apply (a flat row's cosine),
// scientific notation beyond 1e6 (a far-off fit's perplexity), else fixed digits.
std::string fixed(double v, int digits)
{
    if (!std::isfinite(v))
        return "\u2014";
    char buf[64];
    if (std::fabs(v) >= 1e6 && digits > 0)
        std::snprintf(buf, sizeof buf, "%.3e", v);
    else
        std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

std::string html_escaped(const std::string& s)
{
    std::string out;
    for (char c : s) {
        switch (c) {
        case '&':
            out += "&amp;";
            break;
        case '<':
            out += "&lt;";
            break;
        case '>':
            out += "&gt;";
            break;
        case '"':
            out += "&quot;";
            break;
        default:
            out += c;
        }
    }
    return out;
}

// In a build tree (the executable in <build>/app) the demo goes to <build>/demo.
std::string default_demo_directory()
{
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
        const fs::path build = exe.parent_path().parent_path();
        if (fs::exists(build / "CMakeCache.txt"))
            return (build / "demo").string();
    }
    return "embedlab-demo";
}

// A paper's single or double column: the width each figure is drawn at.
double figure_width_in(const std::string& kind)
{
    const bool wide = kind == "neighbours" || kind == "fourier" || kind == "tt";
    return wide ? views::kDoubleColumnInches : views::kSingleColumnInches;
}

std::vector<Figure> demo_figures(const DemoRequest& request, const std::string& text_name)
{
    return {
        {"spectrum", "Spectrum",
         "Covariance eigenvalues of the token embedding (log scale) and the cumulative explained variance; "
         "the marker is PCA at k = d/4."},
        {"iprs", "IPRS allocation",
         "FLAT-LLM importance of each decoder layer on " + text_name +
             " and the IPRS remaining-rank ratio per layer at an average of 0.5, against the uniform "
             "allocation."},
        {"neighbours", "LLE neighbours",
         "Every token on the first two principal components; rare tokens (keep ratio 0.5 of " + text_name +
             ") coloured by LLE reconstruction cosine, one typical rare token's 5 common neighbours, and the "
             "histogram of reconstruction cosines."},
        {"fourier", "Fourier token map",
         "Fourier features T and the original rows for token ids 0-255, one dimension against the id, and "
         "the "
         "cosine of neighbouring ids."},
        {"tt", "Tensor-Train",
         std::string("Reconstruction error against compression ratio for factorisations of d as eps varies") +
             (request.quick ? " (quick: eps 0.2 and 0.4, two shapes)" : "") +
             ", and the energy model of the original table, the TT (the most accurate candidate that stores "
             "less than the table; its bar marked larger when none is smaller) and the equal-size SVD."},
        {"pareto", "Pareto",
         "Bytes ratio (the compressed part's bytes as stored, after / before) against delta ln PPL for every "
         "run in the table, one series per method: a method is read against the quantised table (quant) at "
         "equal bytes."},
    };
}

// The practitioner's question in one sentence per budget (issue 38): at or below each
// baseline's bytes (the quantised tables), the row of its part with the lowest delta ln PPL.
std::string byte_budgets(const std::vector<RunSummary>& rows)
{
    std::string out;
    for (const auto& budget : rows) {
        const auto* m = find_method(budget.method);
        if (!m || !m->bytes_baseline || !(budget.bytes_after > 0))
            continue;
        const RunSummary* best = nullptr;
        for (const auto& r : rows)
            if (r.part == budget.part && r.bytes_after <= budget.bytes_after &&
                std::isfinite(r.delta_ln_ppl) && (!best || r.delta_ln_ppl < best->delta_ln_ppl))
                best = &r;
        out += std::string(out.empty() ? "" : " ") + "At or below " + fixed(budget.bytes_after, 0) +
               " bytes of the table (" + budget.parameters + "), the lowest delta ln PPL is " + best->method +
               " " + best->parameters + "'s (" + fixed(best->delta_ln_ppl, 4) + ").";
    }
    return out;
}

// A per-token TT that stores fewer values than the table at width d: the most
// balanced three factors of d and the largest equal inner rank r with
// I1 r + I2 r^2 + I3 r < d (d = 128: 4x4x8 at ranks 1,4,4,1, 112 values a token,
// where eps 0.4 needs more than 128). Without one (d has no three factors, or
// only rank 1 fits) eps 0.4, and the report says why.
CompressionRequest compressing_tt(int64_t d)
{
    std::vector<int64_t> shape;
    for (int64_t a = 2; a * a * a <= d; ++a)
        for (int64_t b = a; d % a == 0 && a * b * b <= d; ++b)
            if ((d / a) % b == 0 && d / a / b >= b && (shape.empty() || d / a / b - a < shape[2] - shape[0]))
                shape = {a, b, d / a / b};
    int64_t rank = 0;
    for (int64_t r = 2; !shape.empty() && shape[0] * r + shape[1] * r * r + shape[2] * r < d; ++r)
        rank = r;
    if (rank < 2)
        return {.method = "tt", .eps = 0.4};
    // At the table's f16: fewer bytes as well as fewer values (float32 cores would take 1.75x its bytes).
    return {.method = "tt", .shape = shape, .ranks = {1, rank, rank, 1}, .store = "f16"};
}

// Why a row stores more than the table, under the table (a TT at a small d).
std::string over_one_note(const std::vector<RunSummary>& rows, int64_t d)
{
    std::string out;
    for (const auto& r : rows)
        if (r.method == "tt" && (r.ratio > 1 || (r.bytes_before > 0 && r.bytes_after > r.bytes_before)))
            out += " " + r.method + " " + r.parameters + " stores " + fixed(r.ratio, 2) +
                   "x the table: a per-token TT costs I1 r1 + I2 r1 r2 + I3 r2 values a token against d = " +
                   std::to_string(d) +
                   ", and at this width the ranks eps asks for exceed that; the compressing " +
                   "setting is the row with fixed ranks.";
    return out;
}

// A fit that went nowhere (fourier's MLP after a few hundred steps): its perplexity is
// not finite, or more than this many times the original's (delta ln PPL above 6.9).
constexpr double kDivergedFactor = 1000;

bool diverged(const RunSummary& r)
{
    return !std::isfinite(r.ppl) || !std::isfinite(r.delta_ln_ppl) ||
           (r.ppl_original > 0 && r.ppl > kDivergedFactor * r.ppl_original);
}

// The PPL cell: a diverged fit's number is marked, the note under the table says why.
std::string ppl_cell(const RunSummary& r)
{
    return fixed(r.ppl, 3) + (diverged(r) ? " (diverged)" : "");
}

// Why a diverged row is not the method's cost, under the table.
std::string diverged_note(const std::vector<RunSummary>& rows)
{
    std::string out;
    for (const auto& r : rows) {
        if (!diverged(r))
            continue;
        out += " " + r.method + " " + r.parameters + " diverged: its perplexity is ";
        if (std::isfinite(r.ppl) && r.ppl_original > 0) {
            char times[32];
            std::snprintf(times, sizeof times, "%.1e", r.ppl / r.ppl_original);
            out += times;
            out += " times the original's";
        } else {
            out += "not finite";
        }
        out += " (a fit is marked diverged beyond ";
        out += fixed(kDivergedFactor, 0);
        out += " times, or when its perplexity is not finite): the fit did not reach the table, so the row "
               "is a failed fit, not what the method costs at a full fit.";
    }
    return out;
}

std::string markdown_report(const ModelSummary& model, const std::string& intro,
                            const std::vector<RunSummary>& rows, const std::vector<Figure>& figures)
{
    std::ostringstream md;
    md << "# EmbedLab demo: " << fs::path(model.path).filename().string() << "\n\n" << intro << "\n\n";
    md << "| method | parameters | stored values | bytes | ratio | PPL | delta ln PPL | KL (nats/token) | "
          "top-1 "
          "agreement | SST-2 accuracy "
          "| mean cosine | time (s) |\n"
       << "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    if (!rows.empty()) // the uncompressed model on the same tokens and sentences
        md << "| original | uncompressed | " << fixed(double(rows.front().params_before), 0) << " | "
           << fixed(rows.front().bytes_before, 0) << " | 1 | " << fixed(rows.front().ppl_original, 3)
           << " | 0 | 0 | 1 | " << fixed(rows.front().task_accuracy_original, 4) << " | 1 | \u2014 |\n";
    for (const auto& r : rows)
        md << "| " << r.method << " | " << r.parameters << " | " << fixed(double(r.params_after), 0) << " | "
           << fixed(r.bytes_after, 0) << " | " << fixed(r.ratio, 4) << " | " << ppl_cell(r) << " | "
           << fixed(r.delta_ln_ppl, 4) << " | " << fixed(r.kl_mean, 4) << " | " << fixed(r.top1_agreement, 4)
           << " | " << fixed(r.task_accuracy, 4) << " | " << fixed(r.mean_cosine, 4) << " | "
           << fixed(r.seconds, 1) << " |\n";
    md << "\n"
       << byte_budgets(rows) << over_one_note(rows, model.hidden_size) << diverged_note(rows)
       << " The table as [CSV](results.csv) and [JSON](results.json).\n";
    for (size_t i = 0; i < figures.size(); ++i) {
        const auto& f = figures[i];
        md << "\n## " << f.title << "\n\n![" << f.title << "](" << f.kind << ".png)\n\n*Figure " << i + 1
           << ".* " << f.caption << " ([PDF](" << f.kind << ".pdf))\n";
    }
    return md.str();
}

std::string html_report(const ModelSummary& model, const std::string& intro,
                        const std::vector<RunSummary>& rows, const std::vector<Figure>& figures)
{
    const std::string name = html_escaped(fs::path(model.path).filename().string());
    std::ostringstream h;
    h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>EmbedLab demo: "
      << name << "</title>\n<style>\n"
      << "body { font-family: sans-serif; max-width: 60em; margin: 2em auto; padding: 0 1em; line-height: "
         "1.4; }\n"
      << "table { border-collapse: collapse; font-size: 90%; }\n"
      << "th, td { border-bottom: 1px solid #ccc; padding: 0.2em 0.6em; }\n"
      << "td.n { text-align: right; font-variant-numeric: tabular-nums; }\n"
      << "figure { margin: 2em 0; } figure img { max-width: 100%; border: 1px solid #eee; }\n"
      << "figcaption { font-size: 90%; }\n</style>\n</head>\n<body>\n";
    h << "<h1>EmbedLab demo: " << name << "</h1>\n<p>" << html_escaped(intro) << "</p>\n";
    h << "<table>\n<tr><th>method</th><th>parameters</th><th>stored values</th><th>bytes</th><th>ratio</th>"
      << "<th>PPL</th>"
      << "<th>delta ln PPL</th><th>KL (nats/token)</th><th>top-1 agreement</th><th>SST-2 accuracy</th>"
      << "<th>mean cosine</th><th>time (s)</th></tr>\n";
    if (!rows.empty())
        h << "<tr><td>original</td><td>uncompressed</td><td class=\"n\">"
          << fixed(double(rows.front().params_before), 0) << "</td><td class=\"n\">"
          << fixed(rows.front().bytes_before, 0) << "</td><td class=\"n\">1</td><td class=\"n\">"
          << fixed(rows.front().ppl_original, 3)
          << "</td><td class=\"n\">0</td><td class=\"n\">0</td><td class=\"n\">1</td><td class=\"n\">"
          << fixed(rows.front().task_accuracy_original, 4)
          << "</td><td class=\"n\">1</td><td class=\"n\">\u2014</td></tr>\n";
    for (const auto& r : rows)
        h << "<tr><td>" << html_escaped(r.method) << "</td><td>" << html_escaped(r.parameters)
          << "</td><td class=\"n\">" << fixed(double(r.params_after), 0) << "</td><td class=\"n\">"
          << fixed(r.bytes_after, 0) << "</td><td class=\"n\">" << fixed(r.ratio, 4)
          << "</td><td class=\"n\">" << ppl_cell(r) << "</td><td class=\"n\">" << fixed(r.delta_ln_ppl, 4)
          << "</td><td class=\"n\">" << fixed(r.kl_mean, 4) << "</td><td class=\"n\">"
          << fixed(r.top1_agreement, 4) << "</td><td class=\"n\">" << fixed(r.task_accuracy, 4)
          << "</td><td class=\"n\">" << fixed(r.mean_cosine, 4) << "</td><td class=\"n\">"
          << fixed(r.seconds, 1) << "</td></tr>\n";
    h << "</table>\n<p>"
      << html_escaped(byte_budgets(rows) + over_one_note(rows, model.hidden_size) + diverged_note(rows))
      << " The table as <a href=\"results.csv\">CSV</a> and <a "
         "href=\"results.json\">JSON</a>.</p>\n";
    for (size_t i = 0; i < figures.size(); ++i) {
        const auto& f = figures[i];
        h << "<figure id=\"" << f.kind << "\">\n<a href=\"" << f.kind << ".pdf\"><img src=\"" << f.kind
          << ".png\" style=\"width: " << figure_width_in(f.kind) << "in\" alt=\"" << html_escaped(f.title)
          << "\"></a>\n<figcaption><b>Figure " << i + 1 << ".</b> " << html_escaped(f.caption)
          << " (<a href=\"" << f.kind << ".pdf\">PDF</a>)</figcaption>\n</figure>\n";
    }
    h << "</body>\n</html>\n";
    return h.str();
}

} // namespace

DemoRequest parse_demo_arguments(const std::vector<std::string>& argv)
{
    const std::vector<std::string> rest(argv.begin() + (argv.empty() ? 0 : 1), argv.end());
    const cli::Args args("demo", rest, {"--out"}, {"--quick", "--force"});
    if (!args.positional().empty())
        throw InputError("demo: unexpected argument '" + args.positional()[0] +
                         "' (the demo runs on the bundled model)");
    DemoRequest r;
    r.out = args.get("--out").value_or(default_demo_directory());
    r.quick = args.has("--quick");
    r.force = args.has("--force");
    if (fs::exists(r.out) && !fs::is_directory(r.out))
        throw InputError(r.out + ": exists and is not a directory");
    // Before any work: an existing directory is replaced only with --force, and only
    // while it holds just what EmbedLab wrote (an earlier demo's report).
    check_replaceable_directory(r.out, r.force);
    return r;
}

void run_demo(const DemoRequest& request, const std::function<bool()>& interrupted)
{
    using Clock = std::chrono::steady_clock;
    const auto started = Clock::now();
    const std::string model = default_model(), text = default_sample_text();
    // Built beside its final name and swapped in at the end: a cancel or a crash
    // leaves the earlier report (or nothing), never half of one.
    create_parent_directories(request.out);
    AtomicDirectory dir(request.out, request.force);
    const fs::path out = dir.path();
    const auto summary = summarize_model(model);
    if (!summary.error.empty())
        throw InputError(summary.error);
    const CompressionRequest tt = compressing_tt(summary.hidden_size);

    // Every method at a few settings; the quick run keeps each one to seconds. The
    // texts a method reads are the bundled sample text; flat's calibration is the
    // method panel's (32 windows of 128 tokens) unless said.
    using R = CompressionRequest;
    const std::vector<R> settings =
        request.quick
            ? std::vector<
                  R>{{.method = "pca", .rank = 16},
                     {.method = "svd", .rank = 16},
                     tt,
                     {.method = "lle", .freq_text = text, .keep_ratio = 0.5, .k = 4},
                     {.method = "fourier", .mlp = "linear", .steps = 20},
                     {.method = "flat", .remaining = 0.5, .calib_text = text, .samples = 8, .seqlen = 64},
                     {.method = "pca", .rank = 16, .lora_rank = 4, .lora_steps = 10, .train_text = text},
                     {.method = "quant", .type = "q8_0"},
                     {.method = "quant", .type = "q4_0"}}
            : std::vector<R>{
                  {.method = "pca", .rank = 8},
                  {.method = "pca", .rank = 16},
                  {.method = "pca", .rank = 32},
                  {.method = "pca", .rank = 64},
                  {.method = "svd", .rank = 16},
                  {.method = "svd", .rank = 32},
                  tt,
                  {.method = "tt", .eps = 0.4},
                  {.method = "lle", .freq_text = text, .keep_ratio = 0.5, .k = 8},
                  {.method = "lle", .freq_text = text, .keep_ratio = 0.25, .k = 8},
                  {.method = "fourier", .mlp = "linear", .steps = 300},
                  {.method = "fourier", .mlp = "geglu", .steps = 300},
                  {.method = "flat",
                   .remaining = 0.5,
                   .allocation = "iprs",
                   .calib_text = text,
                   .samples = 32,
                   .seqlen = 128},
                  {.method = "flat",
                   .remaining = 0.5,
                   .allocation = "uniform",
                   .calib_text = text,
                   .samples = 32,
                   .seqlen = 128},
                  {.method = "pca", .rank = 16, .lora_rank = 8, .lora_steps = 50, .train_text = text},
                  {.method = "quant", .type = "q8_0"},
                  {.method = "quant", .type = "q5_0"},
                  {.method = "quant", .type = "q4_0"}};
    const int64_t eval_tokens = request.quick ? 512 : 4096;
    // SST-2 zero-shot on the first sentences of the GLUE dev set (../shared), when it is there.
    const std::string sst2 = sst2_dev_path();
    const int64_t sst2_limit = request.quick ? 20 : 200;
    const auto figures = demo_figures(request, fs::path(text).filename().string());
    const size_t steps = settings.size() + figures.size();
    size_t step = 0;
    auto run_step = [&](const std::string& what, const std::function<void(const ProgressFn&)>& work) {
        if (interrupted())
            throw Cancelled();
        const std::string label =
            "demo [" + std::to_string(++step) + "/" + std::to_string(steps) + "] " + what;
        const auto t0 = Clock::now();
        work(stderr_progress(label, interrupted));
        step_done(label, std::chrono::duration<double>(Clock::now() - t0).count());
    };

    std::vector<RunSummary> rows; // the results table, without a widget
    double ppl_original = 0;
    for (auto setting : settings) {
        setting.model = model;
        setting.eval_text = text;
        setting.eval_tokens = eval_tokens;
        setting.divergence = true; // KL from the original and top-1 agreement beside perplexity
        if (!sst2.empty()) {
            setting.task = "sst2";
            setting.task_data = sst2;
            setting.task_limit = sst2_limit;
        }
        run_step(describe_run(setting) + " + perplexity", [&](const ProgressFn& progress) {
            const auto r = compress_and_evaluate(setting, {}, progress);
            ppl_original = r.ppl_original;
            rows.push_back(r);
        });
    }
    write_file((out / "results.csv").string(), results_csv(rows));
    write_file((out / "results.json").string(), results_json(rows));

    for (const auto& f : figures) {
        FigureRequest r;
        r.kind = f.kind;
        r.input = f.kind == "pareto" ? (out / "results.json").string() : model;
        r.x = "bytes"; // pareto: each method against the quantised table at equal bytes
        r.text = text;
        r.outs = {(out / (f.kind + ".png")).string(), (out / (f.kind + ".pdf")).string()};
        r.options.width_in = figure_width_in(f.kind);
        r.options.dpi = 300; // print resolution, as everywhere; the report shows it at its size in inches
        if (request.quick) {
            r.samples = 8;
            r.seqlen = 64;
            r.eps = {0.2, 0.4};
            r.max_shapes = 2;
        }
        run_step(f.kind + " figure", [&](const ProgressFn& progress) { render_figure(r, progress); });
    }

    const double minutes = std::chrono::duration<double>(Clock::now() - started).count() / 60.0;
    const std::string intro =
        "The bundled model " + summary.path + " (" + summary.architecture + ", vocabulary " +
        std::to_string(summary.vocab_size) + ", d = " + std::to_string(summary.hidden_size) + ", " +
        std::to_string(summary.layers) + " layers, " + std::to_string(summary.total_parameters) +
        " parameters), compressed by every method of METHODS.md: the token embedding by PCA (with and "
        "without "
        "LoRA recovery), SVD, Tensor-Train, LLE partial sparse coding of rare tokens and the Fourier MLP, "
        "the attention values by FLAT-LLM; and the baseline a practitioner uses anyway, the table quantised "
        "as llama.cpp stores it (quant). Bytes are the compressed part's as stored. "
        "Perplexity on the first " +
        std::to_string(eval_tokens) + " tokens of " + text + " (original: " + fixed(ppl_original, 3) +
        "); ratio = stored values after / before of the part compressed (the embedding; for flat the "
        "value and output projections), "
        "delta ln PPL = ln PPL compressed - ln PPL original; KL = KL(P_original || P_compressed) per "
        "scored token and top-1 agreement the share of positions whose most likely next token is the "
        "original's (as llama-perplexity --kl-divergence reports them); " +
        (sst2.empty() ? std::string("SST-2 was not measured (../shared/data/glue/SST-2/dev.tsv not found); ")
                      : "SST-2 accuracy is zero-shot (lm-evaluation-harness's prompt and log-likelihood "
                        "scoring) on the "
                        "first " +
                            std::to_string(sst2_limit) +
                            " sentences of the GLUE dev set, the original's on the same "
                            "sentences (" +
                            fixed(rows.empty() ? std::nan("") : rows.front().task_accuracy_original, 4) +
                            "; a model this small is near chance, 0.5); ") +
        "a ratio above 1 means the factors store more "
        "values than the table (per-token TT at a small d). Run on " +
        (rows.empty() ? std::string("this computer") : rows.front().host) + " at " +
        QDateTime::currentDateTime().toString(Qt::ISODate).toStdString() + " in " + fixed(minutes, 1) +
        " minutes; the figures are the workbench's views (embedlab-cli figure).";
    write_file((out / "report.md").string(), markdown_report(summary, intro, rows, figures));
    write_file((out / "report.html").string(), html_report(summary, intro, rows, figures));
    dir.commit();
    std::fprintf(stderr, "demo: wrote %s\n", (fs::path(request.out) / "report.html").string().c_str());
}

} // namespace embedlab::app
