// `figure KIND ...`: one workbench view, computed and exported headless. The
// data comes from the same analyses.hpp calls the GUI's jobs make, converted to
// the views' structs as app/main_window_jobs.cpp converts them.
#include "figure_tool.hpp"

#include <QApplication>
#include <QFile>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <unistd.h>

#include "analyses.hpp"
#include "args.hpp"
#include "embedlab/output_checks.hpp"
#include "figure_layout.hpp"
#include "fourier_map_view.hpp"
#include "model_summary.hpp"
#include "neighbour_graph_view.hpp"
#include "rank_allocation_view.hpp"
#include "results_view.hpp"
#include "spectrum_view.hpp"
#include "tensor_train_view.hpp"
#include "view_data.hpp"

namespace embedlab::app {

namespace fs = std::filesystem;

namespace {

// Which kinds each kind-specific option applies to.
const std::map<std::string, std::set<std::string>>& option_kinds()
{
    static const std::map<std::string, std::set<std::string>> m{
        {"--text", {"iprs", "neighbours", "spectrum"}},
        {"--rank", {"spectrum"}},
        {"--compare", {"spectrum"}},
        {"--value-heads", {"spectrum"}},
        {"--ratio", {"iprs"}},
        {"--overlay", {"iprs"}},
        {"--samples", {"iprs", "spectrum"}},
        {"--seqlen", {"iprs", "spectrum"}},
        {"--keep-ratio", {"neighbours"}},
        {"--k", {"neighbours"}},
        {"--token", {"neighbours"}},
        {"--id", {"neighbours"}},
        {"--ids", {"fourier"}},
        {"--dir", {"fourier"}},
        {"--dimension", {"fourier"}},
        {"--eps", {"tt"}},
        {"--shapes", {"tt"}},
        {"--x", {"pareto"}},
    };
    return m;
}

std::string kind_list()
{
    std::string s;
    for (const auto& k : figure_kinds())
        s += (s.empty() ? "" : ", ") + k;
    return s;
}

void require_exists(const std::string& path, const std::string& what)
{
    if (!fs::exists(path))
        throw InputError(path + ": " + what + " does not exist");
}

void check_output(const std::string& out)
{
    if (views::figureFormat(QString::fromStdString(out)) == views::FigureFormat::Unknown)
        throw InputError(out + ": unknown figure format (use .png, .pdf or .svg)");
    const fs::path parent = fs::absolute(out).parent_path();
    if (!fs::is_directory(parent))
        throw InputError(out + ": the directory " + parent.string() + " does not exist");
    if (fs::is_directory(out))
        throw InputError(out + ": is a directory");
}

// An existing figure file is replaced only with --force, and an input never.
void check_figure_output(const std::string& out, bool force, const FigureRequest& r)
{
    std::vector<fs::path> inputs{r.input};
    for (const std::string* p : {&r.text, &r.fourier_dir})
        if (!p->empty())
            inputs.emplace_back(*p);
    inputs.insert(inputs.end(), r.compare.begin(), r.compare.end());
    check_output_file(out, force, inputs);
}

std::vector<double> eps_list(const cli::Args& args)
{
    const auto v = args.get("--eps");
    if (!v)
        return FigureRequest{}.eps;
    std::vector<double> out;
    size_t start = 0;
    while (start <= v->size()) {
        const size_t comma = std::min(v->find(',', start), v->size());
        const std::string item = v->substr(start, comma - start);
        size_t used = 0;
        double e = 0;
        try {
            e = std::stod(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || used != item.size() || !(e > 0 && e < 1))
            throw InputError("figure: --eps expects comma-separated numbers in (0, 1), got '" + *v + "'");
        out.push_back(e);
        start = comma + 1;
    }
    return out;
}

void parse_ids(const std::string& v, FigureRequest& r)
{
    const auto colon = v.find(':');
    long long a = -1, b = -1;
    char tail = 0;
    if (colon == std::string::npos || std::sscanf(v.c_str(), "%lld:%lld%c", &a, &b, &tail) != 2)
        throw InputError("figure: --ids expects A:B (two integers, e.g. 0:256), got '" + v + "'");
    if (a < 0 || b <= a || b - a < 2 || b - a > 4096)
        throw InputError("figure: --ids " + v + " must satisfy 0 <= A and 2 <= B - A <= 4096");
    r.first = a;
    r.count = b - a;
}

// A results file as File > Export results writes it (JSON, or CSV by suffix).
std::vector<RunSummary> load_results(const std::string& path)
{
    QFile file(QString::fromStdString(path));
    if (!file.open(QIODevice::ReadOnly))
        throw InputError(path + ": cannot read (" + file.errorString().toStdString() + ")");
    const std::string bytes = file.readAll().toStdString();
    std::vector<RunSummary> rows;
    try {
        rows = QString::fromStdString(path).endsWith(".csv", Qt::CaseInsensitive) ? results_from_csv(bytes)
                                                                                  : results_from_json(bytes);
    } catch (const InputError& e) {
        throw InputError(path + ": " + e.what());
    }
    if (rows.empty())
        throw InputError(path + ": holds no results rows (as File > Export results writes them)");
    for (size_t i = 0; i < rows.size(); ++i)
        if (rows[i].method.empty() || !std::isfinite(rows[i].ratio) || !std::isfinite(rows[i].delta_ln_ppl))
            throw InputError(path + ": results[" + std::to_string(i) +
                             "] lacks a method, ratio or delta_ln_ppl");
    return rows;
}

// Lays the widget out offscreen at a size like the window's, then writes
// every requested file from its plot. A figure whose texts leave the canvas, are
// cut or overlap (figure_layout.hpp) is still written, with a warning naming them.
void export_view(QWidget& view, QCustomPlot* plot, const FigureRequest& r)
{
    view.setAttribute(Qt::WA_DontShowOnScreen);
    view.resize(1000, 700);
    view.show();
    QApplication::processEvents();
    for (const QString& problem : views::figureLayoutProblems(plot, r.options))
        std::fprintf(stderr, "figure %s: warning: %s\n", r.kind.c_str(), problem.toStdString().c_str());
    for (const auto& out : r.outs) {
        const QString error = views::exportFigure(plot, QString::fromStdString(out), r.options);
        if (!error.isEmpty())
            throw InputError(error.toStdString());
    }
}

// Part `part` of `parts` equal parts of one progress bar.
ProgressFn part_of(const ProgressFn& progress, int64_t part, int64_t parts)
{
    if (!progress)
        return {};
    return [=](int64_t done, int64_t total) {
        return progress(part * 1000 + (total > 0 ? 1000 * done / total : 0), parts * 1000);
    };
}

void spectrum_figure(const FigureRequest& r, const ProgressFn& progress)
{
    const int64_t parts = static_cast<int64_t>(r.compare.size()) + (r.value_heads ? 1 : 0) + 1;
    const auto s = embedding_spectrum(r.input, part_of(progress, 0, parts));
    const int d = static_cast<int>(s.eigenvalues.size());
    if (r.rank > d)
        throw InputError("figure: --rank " + std::to_string(r.rank) + " exceeds d = " + std::to_string(d));
    const auto data = spectrum_view_data(s, QString::fromStdString(r.input));
    // Overlays, as the Spectrum tab's "Compare with model" and "value-head spectra".
    QVector<views::SpectrumOverlay> overlays;
    int64_t part = 1;
    for (const auto& other : r.compare) {
        const auto o = embedding_spectrum(other, part_of(progress, part++, parts));
        overlays.push_back(spectrum_overlay(o, QString::fromStdString(fs::path(other).filename().string())));
    }
    if (r.value_heads)
        overlays += value_head_overlays(
            importance_allocations(r.input, r.text, r.samples, r.seqlen, part_of(progress, part++, parts)));
    views::SpectrumView view;
    view.setData(data);
    if (!overlays.isEmpty())
        view.setOverlays(overlays);
    view.setRank(r.rank > 0 ? static_cast<int>(r.rank) : std::max(1, d / 4));
    export_view(view, view.plot(), r);
}

void iprs_figure(const FigureRequest& r, const ProgressFn& progress)
{
    const auto a = importance_allocations(r.input, r.text, r.samples, r.seqlen, progress);
    const auto data = allocation_view_data(a, QString::fromStdString(r.input));
    int nearest = 0;
    for (int i = 0; i < data.allocations.size(); ++i)
        if (std::abs(data.allocations[i].remaining - r.ratio) <
            std::abs(data.allocations[nearest].remaining - r.ratio))
            nearest = i;
    views::RankAllocationView view;
    view.setData(data);
    view.setSelected(nearest);
    view.setOverlay(r.overlay);
    export_view(view, view.plot(), r);
}

void neighbours_figure(const FigureRequest& r, const ProgressFn& progress)
{
    const auto g = neighbour_graph(r.input, r.text, r.keep_ratio, r.k, progress);
    const auto data = lle_view_data(g, QString::fromStdString(r.input));
    views::NeighbourGraphView view;
    view.setData(data);
    if (!r.token.empty()) {
        if (!view.search(QString::fromStdString(r.token)))
            throw InputError("figure: --token/--id '" + r.token + "' is not a rare token at keep ratio " +
                             std::to_string(r.keep_ratio) + " (only rare tokens have neighbours)");
    } else if (!g.rare.empty()) { // a typical rare token: the median reconstruction cosine
        std::vector<size_t> order(g.rare.size());
        std::iota(order.begin(), order.end(), size_t{0});
        const auto mid = order.begin() + static_cast<std::ptrdiff_t>(order.size() / 2);
        std::nth_element(order.begin(), mid, order.end(),
                         [&](size_t a, size_t b) { return g.cosine[a] < g.cosine[b]; });
        view.selectToken(static_cast<int>(g.rare[*mid]));
    }
    export_view(view, view.plot(), r);
}

void fourier_figure(const FigureRequest& r, const ProgressFn& progress)
{
    const auto f = fourier_map(r.input, r.fourier_dir, r.first, r.first + r.count, progress);
    const auto data = fourier_view_data(f, QString::fromStdString(r.input));
    if (r.dimension >= f.dim)
        throw InputError("figure: --dimension " + std::to_string(r.dimension) +
                         " exceeds d - 1 = " + std::to_string(f.dim - 1));
    views::FourierMapView view;
    view.setData(data);
    view.setDimension(static_cast<int>(r.dimension));
    export_view(view, view.plot(), r);
}

void tt_figure(const FigureRequest& r, const ProgressFn& progress)
{
    const auto t = tensor_train_candidates(r.input, r.eps, r.max_shapes, progress);
    const auto data = tt_view_data(t, QString::fromStdString(r.input));
    views::TensorTrainView view;
    view.setData(data);
    export_view(view, view.plot(), r);
}

void pareto_figure(const FigureRequest& r)
{
    views::ResultsView view;
    view.setBaselineMethods(baseline_methods());
    if (!r.x.empty())
        view.setXAxis(r.x == "bytes" ? "bytes ratio" : "parameter ratio");
    for (const auto& row : load_results(r.input))
        view.addRow(row);
    export_view(view, view.plot(), r);
}

} // namespace

const std::vector<std::string>& figure_kinds()
{
    static const std::vector<std::string> kinds{"spectrum", "iprs", "neighbours", "fourier", "tt", "pareto"};
    return kinds;
}

FigureRequest parse_figure_arguments(const std::vector<std::string>& argv)
{
    std::set<std::string> valued{"--out", "--width", "--aspect", "--dpi"}, switches{"--force"};
    for (const auto& [option, kinds] : option_kinds())
        (option == "--overlay" || option == "--value-heads" ? switches : valued).insert(option);
    const std::vector<std::string> rest(argv.begin() + (argv.empty() ? 0 : 1), argv.end());
    const cli::Args args("figure", rest, valued, switches);
    const auto& pos = args.positional();
    if (pos.empty())
        throw InputError("figure: which figure? (" + kind_list() + ")");
    FigureRequest r;
    r.kind = pos[0];
    const auto& kinds = figure_kinds();
    if (std::find(kinds.begin(), kinds.end(), r.kind) == kinds.end())
        throw InputError("figure: unknown figure kind '" + r.kind + "' (" + kind_list() + ")");
    if (pos.size() > 2)
        throw InputError("figure: expected one MODEL or RESULTS file, got " + std::to_string(pos.size() - 1) +
                         " arguments");
    for (const auto& [option, applies] : option_kinds())
        if (args.has(option) && !applies.count(r.kind))
            throw InputError("figure " + r.kind + ": " + option + " does not apply to this figure");

    const auto out = args.get("--out");
    if (!out)
        throw InputError("figure: --out FILE is required (.png, .pdf or .svg)");
    check_output(*out);
    r.outs = {*out};
    const std::string width = args.get("--width").value_or(
        r.kind == "neighbours" || r.kind == "fourier" || r.kind == "tt" ? "double" : "single");
    static const std::map<std::string, double> widths{{"single", views::kSingleColumnInches},
                                                      {"double", views::kDoubleColumnInches},
                                                      {"slide", views::kSlideInches}};
    if (!widths.count(width))
        throw InputError("figure: --width must be single, double or slide, got '" + width + "'");
    r.options.width_in = widths.at(width);
    r.options.aspect = args.get_double("--aspect", r.options.aspect, 0.1, 3.0);
    r.options.dpi = static_cast<int>(args.get_int("--dpi", r.options.dpi, 10, 2400));

    if (r.kind == "pareto") {
        if (pos.size() < 2)
            throw InputError("figure pareto: RESULTS.json is required (as File > Export results writes it)");
        r.input = pos[1];
        require_exists(r.input, "the results file");
        load_results(r.input); // fail on a malformed file before rendering
        r.x = args.get("--x").value_or("");
        if (!r.x.empty() && r.x != "params" && r.x != "bytes")
            throw InputError("figure pareto: --x must be params or bytes, got '" + r.x + "'");
        check_figure_output(*out, args.has("--force"), r);
        return r;
    }
    r.input = pos.size() == 2 ? pos[1] : default_model();
    require_exists(r.input, "the model");
    r.text = args.get("--text").value_or(default_sample_text());
    require_exists(r.text, "the text");
    r.rank = args.get_int("--rank", 0, 1, 1 << 20);
    r.ratio = args.get_double("--ratio", r.ratio, 0.1, 1.0);
    r.overlay = args.has("--overlay");
    r.value_heads = args.has("--value-heads");
    if (const auto compare = args.get("--compare")) {
        size_t start = 0;
        while (start <= compare->size()) {
            const size_t comma = std::min(compare->find(',', start), compare->size());
            const std::string model = compare->substr(start, comma - start);
            if (model.empty())
                throw InputError("figure: --compare expects MODEL[,MODEL...], got '" + *compare + "'");
            require_exists(model, "the model to compare with");
            r.compare.push_back(model);
            start = comma + 1;
        }
    }
    r.samples = args.get_int("--samples", r.samples, 1, 1 << 16);
    r.seqlen = args.get_int("--seqlen", r.seqlen, 2, 1 << 16);
    r.keep_ratio = args.get_double("--keep-ratio", r.keep_ratio, 0.001, 1.0);
    r.k = args.get_int("--k", r.k, 1, 64);
    if (args.has("--token") && args.has("--id"))
        throw InputError("figure: give --token or --id, not both");
    r.token = args.get("--token").value_or("");
    if (args.has("--id"))
        r.token = std::to_string(args.get_int("--id", 0, 0, 1 << 30));
    if (auto ids = args.get("--ids"))
        parse_ids(*ids, r);
    r.fourier_dir = args.get("--dir").value_or("");
    if (!r.fourier_dir.empty())
        require_exists(r.fourier_dir, "the fourier directory");
    r.dimension = args.get_int("--dimension", 0, 0, 1 << 20);
    r.eps = eps_list(args);
    r.max_shapes = static_cast<int>(args.get_int("--shapes", r.max_shapes, 1, 64));
    check_figure_output(*out, args.has("--force"), r);
    return r;
}

void render_figure(const FigureRequest& r, const ProgressFn& progress)
{
    if (r.kind == "spectrum")
        spectrum_figure(r, progress);
    else if (r.kind == "iprs")
        iprs_figure(r, progress);
    else if (r.kind == "neighbours")
        neighbours_figure(r, progress);
    else if (r.kind == "fourier")
        fourier_figure(r, progress);
    else if (r.kind == "tt")
        tt_figure(r, progress);
    else if (r.kind == "pareto")
        pareto_figure(r);
    else
        throw InputError("figure: unknown figure kind '" + r.kind + "' (" + kind_list() + ")");
}

ProgressFn stderr_progress(const std::string& what, const std::function<bool()>& interrupted)
{
    const bool tty = ::isatty(2);
    return [what, interrupted, tty, last = -1](int64_t done, int64_t total) mutable {
        if (interrupted && interrupted())
            return false;
        if (tty && total > 0) {
            const int percent = static_cast<int>(100 * done / total);
            if (percent != last)
                std::fprintf(stderr, "\r%s: %3d%%", what.c_str(), percent);
            last = percent;
        }
        return true;
    };
}

void step_done(const std::string& what, double seconds)
{
    // On a terminal this overwrites the live percentage (the line is longer).
    std::fprintf(stderr, "%s%s: done in %.1f s\n", ::isatty(2) ? "\r" : "", what.c_str(), seconds);
}

} // namespace embedlab::app
