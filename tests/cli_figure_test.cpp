// embedlab-cli figure and demo (run through embedlab-figure, the GUI build):
// non-blank figures from the bundled model and from a results JSON, bad input
// refused with nothing written, and the quick demo's directory.
#include <algorithm>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

// libtorch (through cli_support.hpp) before any Qt header.
#include "cli_in_process.hpp"
#include "cli_support.hpp"

#include <QImage>

#include "render_check.hpp"

namespace {

using embedlab::test::cli;
using embedlab::test::cli_here;
using embedlab::test::CliRun;
using embedlab::test::TempDir;
namespace fs = std::filesystem;

std::set<std::string> files_in(const fs::path& dir)
{
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir))
        names.insert(e.path().filename().string());
    return names;
}

// A PNG with something drawn on it: axes, ticks, series in several colours.
void expect_drawn_png(const fs::path& file, int width_px)
{
    QImage image;
    ASSERT_TRUE(image.load(QString::fromStdString(file.string()))) << file;
    EXPECT_NEAR(image.width(), width_px, 2) << file; // width in inches x dpi, rounded
    const auto s = embedlab::test::image_stats(image);
    EXPECT_GT(s.drawn, 0.01) << file;
    EXPECT_GT(s.colours, 8) << file;
}

void write(const fs::path& file, const std::string& text)
{
    std::ofstream(file) << text;
}

const char* kResults = R"({"results": [
  {"method": "pca", "parameters": "rank 16", "params": 806240, "ratio": 0.126, "ppl": 201.5,
   "delta_ln_ppl": 0.37, "cosine": 0.81, "seconds": 4.2, "host": "test"},
  {"method": "pca", "parameters": "rank 32", "params": 1612352, "ratio": 0.252, "ppl": 160.1,
   "delta_ln_ppl": 0.14, "cosine": 0.9, "seconds": 4.4, "host": "test"},
  {"method": "svd", "parameters": "rank 32", "params": 1612224, "ratio": 0.251, "ppl": 170.3,
   "delta_ln_ppl": 0.2, "cosine": 0.89, "seconds": 4.0, "host": "test"},
  {"method": "tt", "parameters": "shape 4x4x8, eps 0.3", "params": 2400000, "ratio": 0.37, "ppl": 150.2,
   "delta_ln_ppl": 0.08, "cosine": 0.95, "seconds": 6.0, "host": "test"}]})";

} // namespace

TEST(CliFigure, SpectrumOfTheBundledModelAsPngAndPdf)
{
    TempDir dir;
    const auto png = dir / "spectrum.png", pdf = dir / "spectrum.pdf";
    const auto a = cli({"figure", "spectrum", "--out", png.string(), "--dpi", "200", "--rank", "16"});
    ASSERT_EQ(a.exit_code, 0) << a.err;
    expect_drawn_png(png, 700); // 3.5 in at 200 dpi
    const auto b =
        cli({"figure", "spectrum", (fs::path(EMBEDLAB_SOURCE_DIR) / "resources/models/tinygpt2-f16").string(),
             "--out", pdf.string(), "--width", "double"});
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(embedlab::test::read_text(pdf).substr(0, 4), "%PDF");
    EXPECT_EQ(files_in(dir.path()), (std::set<std::string>{"spectrum.png", "spectrum.pdf"}));
}

// The Spectrum tab's overlays headless: another model and the value heads.
TEST(CliFigure, SpectrumComparesModelsAndOverlaysTheValueHeads)
{
    TempDir dir;
    const auto svg = dir / "spectra.svg";
    const auto other = (fs::path(EMBEDLAB_SOURCE_DIR) / "resources/models/stories260K.gguf").string();
    const auto r = cli({"figure", "spectrum", "--out", svg.string(), "--compare", other, "--value-heads",
                        "--samples", "8", "--seqlen", "64"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string text = embedlab::test::read_text(svg);
    EXPECT_NE(text.find("stories260K.gguf"), std::string::npos) << "the compared model's legend entry";
    EXPECT_NE(text.find("layer 3"), std::string::npos) << "value heads are legended by layer";
    EXPECT_NE(text.find("share of variance"), std::string::npos) << "curves of different models as shares";
}

TEST(CliFigure, ParetoFromAResultsJsonAsPngAndSvg)
{
    TempDir dir;
    write(dir / "results.json", kResults);
    const auto r = cli({"figure", "pareto", (dir / "results.json").string(), "--out",
                        (dir / "p.png").string(), "--dpi", "100", "--width", "slide"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    expect_drawn_png(dir / "p.png", 1000);
    const auto svg =
        cli({"figure", "pareto", (dir / "results.json").string(), "--out", (dir / "p.svg").string()});
    ASSERT_EQ(svg.exit_code, 0) << svg.err;
    EXPECT_NE(embedlab::test::read_text(dir / "p.svg").find("<svg"), std::string::npos);
    // The bytes axis (issue 38): its label is in the figure.
    const auto bytes = cli({"figure", "pareto", (dir / "results.json").string(), "--out",
                            (dir / "b.svg").string(), "--x", "bytes"});
    ASSERT_EQ(bytes.exit_code, 0) << bytes.err;
    EXPECT_NE(embedlab::test::read_text(dir / "b.svg").find("bytes ratio"), std::string::npos);
}

TEST(CliFigure, BadInputExitsTwoNamingTheProblemAndWritesNothing)
{
    TempDir dir;
    write(dir / "garbage.json", "{\"results\": [1, 2");
    write(dir / "other.json", "{\"rows\": []}");
    const std::string png = (dir / "f.png").string();
    const std::string missing = (dir / "no-such-model").string();
    const struct {
        std::vector<std::string> args;
        std::string names;
    } cases[] = {
        {{"figure", "histogram", "--out", png}, "unknown figure kind 'histogram'"},
        {{"figure", "spectrum"}, "--out"},
        {{"figure", "spectrum", "--out", (dir / "f.jpg").string()}, "f.jpg: unknown figure format"},
        {{"figure", "spectrum", missing, "--out", png}, missing},
        {{"figure", "pareto", (dir / "garbage.json").string(), "--out", png}, "garbage.json: not JSON"},
        {{"figure", "pareto", (dir / "other.json").string(), "--out", png}, "other.json: not a results JSON"},
        {{"figure", "spectrum", "--out", png, "--x", "bytes"}, "--x does not apply"},
        {{"figure", "spectrum", "--out", png, "--width", "poster"}, "--width"},
        {{"figure", "spectrum", "--out", png, "--compare", missing}, missing},
        {{"figure", "iprs", "--out", png, "--value-heads"}, "--value-heads does not apply"},
        {{"figure", "spectrum", "--out", png, "--keep-ratio", "0.5"}, "--keep-ratio does not apply"},
        {{"figure", "tt", "--out", png, "--eps", "0.2,2"}, "--eps"},
        {{"demo", "--out", (dir / "garbage.json").string()}, "garbage.json: exists and is not a directory"},
    };
    for (const auto& c : cases) {
        const auto r = cli_here(c.args);
        EXPECT_EQ(r.exit_code, 2) << c.names << "\n" << r.err;
        EXPECT_NE(r.err.find(c.names), std::string::npos) << r.err;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err; // one line
    }
    EXPECT_EQ(files_in(dir.path()), (std::set<std::string>{"garbage.json", "other.json"}));
}

TEST(CliFigure, WithoutTheGuiBuildTheCommandSaysSo)
{
    TempDir dir; // a copy of embedlab-cli with no embedlab-figure beside it
    const auto copy = dir / "embedlab-cli";
    fs::copy_file(EMBEDLAB_CLI_PATH, copy);
    const auto out = dir / "f.png";
    const std::string command = embedlab::test::quote(copy.string()) + " figure spectrum --out " +
                                embedlab::test::quote(out.string()) + " 2>" +
                                embedlab::test::quote((dir / "err").string());
    const int status = std::system(command.c_str());
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 2);
    EXPECT_NE(embedlab::test::read_text(dir / "err").find("figure: needs the GUI build"), std::string::npos);
    EXPECT_FALSE(fs::exists(out));
}

TEST(CliFigure, QuickDemoWritesResultsEveryFigureAndTheReport)
{
    TempDir dir;
    const auto out = dir / "demo";
    const auto r = cli({"demo", "--out", out.string(), "--quick"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Every figure passed the layout check (figure_layout.hpp): nothing off the canvas,
    // clipped or overlapping, else "figure KIND: warning: ..." names it.
    EXPECT_EQ(r.err.find("warning:"), std::string::npos) << r.err;
    const auto results = nlohmann::json::parse(embedlab::test::read_text(out / "results.json"));
    std::set<std::string> methods;
    int lora_rows = 0;
    for (const auto& row : results.at("results")) {
        methods.insert(row.at("method").get<std::string>());
        lora_rows += row.at("parameters").get<std::string>().find("LoRA") != std::string::npos;
        EXPECT_GT(row.at("ratio").get<double>(), 0);
        if (row.at("method") == "quant") { // every value kept, in fewer bytes
            EXPECT_EQ(row.at("ratio").get<double>(), 1);
            EXPECT_LT(row.at("bytes_after").get<double>(), row.at("bytes_before").get<double>());
        } else if (row.at("method") != "tt") { // per-token TT at d = 128 stores more than the table
            EXPECT_LT(row.at("ratio").get<double>(), 1);
        }
        EXPECT_GT(row.at("bytes_after").get<double>(), 0)
            << row.at("method"); // every row in bytes (issue 38)
        EXPECT_GT(row.at("ppl").get<double>(), 1);
    }
    EXPECT_EQ(methods, (std::set<std::string>{"pca", "svd", "tt", "lle", "fourier", "flat", "quant"}));
    EXPECT_EQ(lora_rows, 1) << "pca with LoRA recovery";
    EXPECT_EQ(embedlab::test::read_text(out / "results.csv").substr(0, 18), "method,parameters,");

    // .embedlab-files.json: the list of what EmbedLab wrote, which lets --force replace it.
    std::set<std::string> expected{"results.json", "results.csv", "report.md", "report.html",
                                   ".embedlab-files.json"};
    const std::string html = embedlab::test::read_text(out / "report.html");
    const std::string md = embedlab::test::read_text(out / "report.md");
    for (const std::string kind : {"spectrum", "iprs", "neighbours", "fourier", "tt", "pareto"}) {
        expected.insert(kind + ".png");
        expected.insert(kind + ".pdf");
        // 300 dpi, as every figure by default: 3.5 or 7.2 in wide.
        expect_drawn_png(out / (kind + ".png"),
                         kind == "spectrum" || kind == "iprs" || kind == "pareto" ? 1050 : 2160);
        EXPECT_NEAR(QImage(QString::fromStdString((out / (kind + ".png")).string())).dotsPerMeterX(), 11811,
                    2)
            << kind;
        EXPECT_EQ(embedlab::test::read_text(out / (kind + ".pdf")).substr(0, 4), "%PDF") << kind;
        EXPECT_NE(html.find("src=\"" + kind + ".png\""), std::string::npos) << kind;
        EXPECT_NE(html.find("href=\"" + kind + ".pdf\""), std::string::npos) << kind;
        EXPECT_NE(md.find("(" + kind + ".png)"), std::string::npos) << kind;
    }
    EXPECT_EQ(files_in(out), expected); // no temporary files left behind
    // Numbers for people: a flat row's cosine is a dash, never "nan".
    EXPECT_EQ(md.find("| nan |"), std::string::npos) << md;
    EXPECT_NE(md.find("\u2014"), std::string::npos) << md;
    // Issue 61: fourier at 20 steps is far off (PPL ~1e25 against ~240): its PPL is marked
    // diverged in both reports, and the note under the table says why; no other row is.
    for (const auto& row : results.at("results")) {
        const bool far_off = row.at("ppl").get<double>() > 1000 * row.at("ppl_original").get<double>();
        const std::string cell = "| " + row.at("method").get<std::string>() + " | " +
                                 row.at("parameters").get<std::string>() + " | ";
        const size_t at = md.find(cell);
        ASSERT_NE(at, std::string::npos) << cell;
        const std::string line = md.substr(at, md.find('\n', at) - at);
        EXPECT_EQ(line.find(" (diverged) |") != std::string::npos, far_off) << line;
    }
    EXPECT_NE(md.find("fourier linear MLP, 20 steps diverged: its perplexity is "), std::string::npos) << md;
    EXPECT_NE(md.find("times the original's (a fit is marked diverged beyond 1000 times"), std::string::npos);
    EXPECT_NE(html.find(" (diverged)</td>"), std::string::npos);
    // The practitioner's question, answered per quantised table's bytes (issue 38).
    EXPECT_NE(md.find("At or below "), std::string::npos) << md;
    EXPECT_NE(md.find("bytes of the table (type q4_0), the lowest delta ln PPL is "), std::string::npos)
        << md;
    // Every row names its model and evaluation text in the results files, and its
    // divergence from the original (issue 19: KL and top-1 agreement in the report).
    for (const auto& row : results.at("results")) {
        EXPECT_FALSE(row.at("model").get<std::string>().empty());
        EXPECT_FALSE(row.at("eval_text").get<std::string>().empty());
        ASSERT_TRUE(row.at("kl_mean").is_number()) << row.dump();
        EXPECT_GE(row.at("kl_mean").get<double>(), 0) << row.dump();
        EXPECT_GE(row.at("top1_agreement").get<double>(), 0) << row.dump(); // fourier at 20 steps: 0
        EXPECT_LE(row.at("top1_agreement").get<double>(), 1) << row.dump();
    }
    EXPECT_NE(md.find("| KL (nats/token) | top-1 agreement |"), std::string::npos) << md;
    EXPECT_NE(html.find("<th>KL (nats/token)</th><th>top-1 agreement</th>"), std::string::npos);
    // SST-2 accuracy for every method and the original's (issue 19 item 5), when ../shared has it.
    if (!embedlab::test::have_shared())
        return;
    for (const auto& row : results.at("results")) {
        EXPECT_EQ(row.at("task"), "sst2") << row.dump();
        EXPECT_EQ(row.at("task_n"), 20) << row.dump(); // --quick: the first 20 dev sentences
        EXPECT_GE(row.at("task_accuracy").get<double>(), 0) << row.dump();
        EXPECT_LE(row.at("task_accuracy").get<double>(), 1) << row.dump();
        EXPECT_EQ(row.at("task_accuracy_original"), results.at("results")[0].at("task_accuracy_original"));
    }
    EXPECT_NE(md.find("| top-1 agreement | SST-2 accuracy |"), std::string::npos) << md;
    EXPECT_NE(md.find("| original | uncompressed |"), std::string::npos) << md;
    EXPECT_NE(md.find("first 20 sentences of the GLUE dev set"), std::string::npos) << md;
}
