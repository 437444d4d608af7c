// embedlab-figure: the workbench's views rendered headless, for scripted paper
// figures (`embedlab-cli figure ...`) and the demo (`embedlab-cli demo ...`).
// Each figure is computed by the same analyses.hpp call the GUI makes, shown in
// the same view widget, and written with views::exportFigure (temp + rename).
//
//   auto request = parse_figure_arguments(argv);     // throws InputError (exit 2)
//   render_figure(request, progress);                // throws InputError / Cancelled
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "embedlab/error.hpp"
#include "figure_export.hpp"

namespace embedlab::app {

const std::vector<std::string>& figure_kinds(); // spectrum, iprs, neighbours, fourier, tt, pareto

struct FigureRequest {
    std::string kind;
    std::string input;             // a model, or for pareto a results file (.json or .csv)
    std::vector<std::string> outs; // one figure per file, the format by suffix
    views::FigureOptions options;
    std::string text;                 // iprs, neighbours: calibration / frequency text
    int64_t rank = 0;                 // spectrum: the rank marker (0: d / 4, as the GUI starts)
    std::vector<std::string> compare; // spectrum: other models overlaid
    bool value_heads = false;         // spectrum: FLAT-LLM per-head value spectra overlaid
    double ratio = 0.5;               // iprs: the highlighted average remaining ratio
    bool overlay = false;             // iprs: every ratio overlaid
    int64_t samples = 32;             // iprs: calibration windows (the GUI's setting)
    int64_t seqlen = 128;             // iprs: tokens per window
    double keep_ratio = 0.5;          // neighbours: the common share of the tokens seen
    int64_t k = 5;                    // neighbours: common neighbours per rare token
    std::string token;                // neighbours: a rare token's text or id (empty: the median-cosine one)
    int64_t first = 0, count = 256;   // fourier: ids [first, first + count)
    std::string fourier_dir;          // fourier: a fitted --method fourier directory
    int64_t dimension = 0;            // fourier: the dimension of the line plot
    std::vector<double> eps{0.1, 0.2, 0.3, 0.4, 0.5}; // tt candidates
    int max_shapes = 6;
    // pareto: the x axis, "params" (values ratio) or "bytes" (as stored); empty: bytes
    // when the rows have them (ResultsView's default)
    std::string x;
};

// `figure KIND [MODEL | RESULTS] --out FILE [...]` (argv after the program name,
// starting at "figure"). Checks everything that can be checked before any work:
// the kind, the options, the input exists, the output suffix and directory.
FigureRequest parse_figure_arguments(const std::vector<std::string>& argv);

// Computes the figure's data and writes every file of request.outs.
void render_figure(const FigureRequest& request, const ProgressFn& progress);

struct DemoRequest {
    std::string out;    // directory
    bool quick = false; // fewer settings, shorter evaluation: for tests
    bool force = false; // replace an earlier demo's directory (only what EmbedLab wrote)
};
DemoRequest parse_demo_arguments(const std::vector<std::string>& argv);
// Every method at a few settings on the bundled model: results.csv/.json, every
// figure as PNG and PDF, report.md and report.html. Progress lines on stderr.
void run_demo(const DemoRequest& request, const std::function<bool()>& interrupted);

// Progress on stderr for one step: a live percentage on a terminal, nothing
// otherwise; returns false (cancel) once `interrupted` says so.
ProgressFn stderr_progress(const std::string& what, const std::function<bool()>& interrupted);
void step_done(const std::string& what, double seconds); // "what: done in 1.2 s"

} // namespace embedlab::app
