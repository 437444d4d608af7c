// The workbench's compression runs and lazy views on the bundled model: a job
// through the controller adds a results row with the engine's numbers, exports
// round-trip through the atomic file output, a finished row exports as a
// compressed model directory the engine loads (a cancelled export leaves
// nothing), and the Fourier, Tensor-Train and LLE computations match the engine.
//
// libtorch before Qt (brief).
#include "embedlab/compress.hpp"
#include "embedlab/experiment.hpp"
#include "embedlab/model.hpp"
#include "embedlab/resources.hpp"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QComboBox>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QSettings>
#include <QSignalBlocker>
#include <QSplitter>
#include <QStatusBar>
#include <QTableView>
#include <QTemporaryDir>
#include <QTimer>
#include <cmath>
#include <gtest/gtest.h>
#include <utility>

#include <QSet>
#include <QTabWidget>
#include <qcustomplot.h>

#include "analyses.hpp"
#include "cli_support.hpp"
#include "fourier_map_view.hpp"
#include "gui_test_support.hpp"
#include "main_window.hpp"
#include "method_flags.hpp"
#include "method_panel.hpp"
#include "neighbour_graph_view.hpp"
#include "rank_allocation_view.hpp"
#include "render_check.hpp"
#include "results_view.hpp"
#include "spectrum_view.hpp"
#include "tensor_train_view.hpp"
#include "token_damage_view.hpp"
#include "view_data.hpp"
#include "workbench_support.hpp"

using embedlab::app::MainWindow;

namespace {

using embedlab::test::wait_for;

using embedlab::test::open_bundled;
using embedlab::test::open_shown;

TEST(Workbench, CompressionJobsAddResultRowsThatExportAndReadBack)
{
    MainWindow window;
    open_bundled(window);
    // Opening remembers the model.
    EXPECT_EQ(QSettings().value("models/recent").toStringList().value(0),
              QString::fromStdString(embedlab::app::default_model()));
    const int pca = window.runCompression("pca", 16, 0);
    const int tt = window.runCompression("tt", 0, 0.3);
    ASSERT_GT(pca, 0);
    ASSERT_GT(tt, 0);
    auto* results = window.resultsView();
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(results->rows().size(), 2u);
    const auto& r = results->rows()[0];
    const double V = 50257, d = 128;
    EXPECT_EQ(r.method, "pca");
    EXPECT_EQ(r.parameters, "rank 16");
    EXPECT_DOUBLE_EQ(double(r.params_after), V * 16 + d * 16 + d); // METHODS 1
    EXPECT_NEAR(r.ratio, (V * 16 + d * 16 + d) / (V * d), 1e-12);
    EXPECT_TRUE(std::isfinite(r.ppl) && r.ppl > 1);
    EXPECT_GT(r.delta_ln_ppl, 0.0) << "a rank-16 of 128 embedding costs perplexity";
    EXPECT_GT(r.mean_cosine, 0.3);
    EXPECT_LT(r.mean_cosine, 1.0);
    EXPECT_FALSE(r.host.empty());
    EXPECT_EQ(r.model, embedlab::app::default_model()); // every row names its model
    const auto& t = results->rows()[1];
    EXPECT_EQ(t.method, "tt");
    EXPECT_EQ(t.parameters.rfind("shape 4x4x8, eps 0.3", 0), 0u) << t.parameters;
    EXPECT_NEAR(t.ratio, double(t.params_after) / (V * d), 1e-12); // per-token TT at d = 128 may exceed 1
    EXPECT_EQ(results->selectedRow(), 1);                          // the newest run is selected

    QTemporaryDir dir;
    const QString csv = dir.filePath("results.csv"), json = dir.filePath("results.json");
    embedlab::app::write_file(csv.toStdString(), embedlab::results_csv(results->rows()));
    embedlab::app::write_file(json.toStdString(), embedlab::results_json(results->rows()));
    QFile c(csv), j(json);
    ASSERT_TRUE(c.open(QIODevice::ReadOnly));
    ASSERT_TRUE(j.open(QIODevice::ReadOnly));
    const auto from_csv = embedlab::results_from_csv(c.readAll().toStdString());
    const auto from_json = embedlab::results_from_json(j.readAll().toStdString());
    ASSERT_EQ(from_csv.size(), 2u);
    ASSERT_EQ(from_json.size(), 2u);
    for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(from_csv[i].parameters, results->rows()[i].parameters);
        EXPECT_DOUBLE_EQ(from_csv[i].delta_ln_ppl, results->rows()[i].delta_ln_ppl);
        EXPECT_DOUBLE_EQ(from_json[i].ppl, results->rows()[i].ppl);
        EXPECT_EQ(from_json[i].host, results->rows()[i].host);
    }
    // A request the engine would refuse is not queued; the status bar says why.
    EXPECT_EQ(window.runCompression("pca", 129, 0), -1);
    EXPECT_TRUE(window.statusBar()->currentMessage().contains("rank"))
        << window.statusBar()->currentMessage().toStdString();
    EXPECT_EQ(window.runCompression("quantise", 8, 0), -1);
    EXPECT_TRUE(window.statusBar()->currentMessage().contains("flat")) << "lists the methods";
    EXPECT_TRUE(window.jobs().idle());
    EXPECT_EQ(results->rows().size(), 2u);
}

// Every method of the panel runs through the window: lle, fourier and flat rows,
// a LoRA-recovered pca row, and a re-run that repeats a row's numbers.
TEST(Workbench, EveryPanelMethodAddsARowAndReRunRepeatsIt)
{
    MainWindow window;
    open_bundled(window);
    auto* panel = window.methodPanel();
    QString failure;
    QObject::connect(&window.jobs(), &embedlab::app::JobController::failed,
                     [&](int, const QString& m) { failure = m; });
    const auto run = [&](const embedlab::CompressionRequest& r) { // empty texts: the bundled sample text
        panel->setRequest(r);
        EXPECT_EQ(panel->request().method, r.method);
        panel->run();
        EXPECT_TRUE(wait_for([&] { return window.jobs().idle(); }));
        EXPECT_TRUE(failure.isEmpty()) << failure.toStdString();
    };
    int last_queued = -1;
    QObject::connect(&window.jobs(), &embedlab::app::JobController::queued,
                     [&](int id, const QString&) { last_queued = id; });
    run({.method = "lle", .keep_ratio = 0.5, .k = 4, .eval_tokens = 512});
    const int lle_job = last_queued;
    run({.method = "fourier", .steps = 20, .eval_tokens = 512});
    run({.method = "flat", .remaining = 0.5, .samples = 8, .seqlen = 64, .eval_tokens = 512});
    run({.method = "pca", .rank = 8, .lora_rank = 4, .lora_steps = 10, .eval_tokens = 512});
    const auto& rows = window.resultsView()->rows();
    ASSERT_EQ(rows.size(), 4u);
    EXPECT_EQ(rows[0].method, "lle");
    EXPECT_EQ(rows[1].method, "fourier");
    EXPECT_EQ(rows[2].method, "flat");
    EXPECT_EQ(rows[3].method, "pca");
    EXPECT_NE(rows[3].parameters.find("LoRA"), std::string::npos) << rows[3].parameters;
    for (const auto& r : rows) {
        EXPECT_TRUE(std::isfinite(r.ppl) && r.ppl > 1) << r.method;
        EXPECT_GT(r.ratio, 0.0) << r.method;
    }
    EXPECT_LT(rows[0].ratio, 1.0);
    EXPECT_NEAR(rows[2].ratio, 0.5, 0.1) << "flat keeps about half the value/output parameters";

    // Re-run the lle job: a new row with the same numbers (the fit is deterministic).
    ASSERT_GT(window.jobs().resubmit(lle_job), lle_job);
    EXPECT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(rows.size(), 5);
    EXPECT_EQ(rows[4].method, "lle");
    EXPECT_EQ(rows[4].parameters, rows[0].parameters);
    EXPECT_DOUBLE_EQ(rows[4].ratio, rows[0].ratio);
    EXPECT_NEAR(rows[4].ppl, rows[0].ppl, 1e-9 * rows[0].ppl);
    EXPECT_EQ(window.jobs().resubmit(9999), -1) << "no such job";
}

QJsonObject manifest(const QString& dir)
{
    QFile f(QDir(dir).filePath("embedlab.json"));
    if (!f.open(QIODevice::ReadOnly))
        return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

// What a directory holds besides `keep` (an aborted write would leave a temporary).
QStringList entries_except(const QTemporaryDir& dir, const QStringList& keep)
{
    QStringList left = QDir(dir.path()).entryList(QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden);
    for (const auto& k : keep)
        left.removeAll(k);
    return left;
}

TEST(Workbench, ExportsAFinishedRowAsACompressedModelTheEngineLoads)
{
    MainWindow window;
    open_bundled(window);
    EXPECT_EQ(window.exportCompressed(0, "/tmp/x", false, false), -1);        // no row yet
    window.methodPanel()->setRequest({.method = "pca", .eval_tokens = 4096}); // not what an earlier test left
    window.spectrumView()->setRank(16); // the dragged rank is the one a run uses
    EXPECT_EQ(window.methodPanel()->rank(), 16);
    window.methodPanel()->run();
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(window.resultsView()->rows().size(), 1);

    QString failure;
    int finished = 0;
    QObject::connect(&window.jobs(), &embedlab::app::JobController::failed,
                     [&](int, const QString& m) { failure = m; });
    QObject::connect(&window.jobs(), &embedlab::app::JobController::finished,
                     [&](int, double) { ++finished; });
    QTemporaryDir tmp;
    const QString out = tmp.filePath("tinygpt2-pca16");
    ASSERT_GT(window.exportCompressed(0, out, false, false), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_TRUE(failure.isEmpty()) << failure.toStdString();
    EXPECT_EQ(finished, 1);
    for (const char* f : {"embedlab.json", "model.safetensors", "config.json"})
        EXPECT_TRUE(QFile::exists(QDir(out).filePath(f))) << f;
    EXPECT_FALSE(QFile::exists(QDir(out).filePath("dense")));
    EXPECT_EQ(manifest(out)["method"].toString(), "pca");
    EXPECT_EQ(manifest(out)["parameters"].toObject()["rank"].toInt(), 16);
    {
        auto lm = embedlab::load_model(out.toStdString(), {.need_tokenizer = false});
        const auto& e = lm.model->token_embedding();
        EXPECT_EQ(e.kind(), "pca");
        EXPECT_EQ(e.parameter_count(), 50257 * 16 + 128 * 16 + 128); // METHODS 1: V k + d k + d
    }

    // Taken name: refused, the directory untouched; confirmed: replaced, with dense/.
    ASSERT_GT(window.exportCompressed(0, out, true, false), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    EXPECT_TRUE(failure.contains("already exists")) << failure.toStdString();
    EXPECT_FALSE(QFile::exists(QDir(out).filePath("dense")));
    failure.clear();
    ASSERT_GT(window.exportCompressed(0, out, true, true), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_TRUE(failure.isEmpty()) << failure.toStdString();
    EXPECT_EQ(manifest(out)["dense_export"].toString(), "dense");
    {
        auto dense =
            embedlab::load_model(QDir(out).filePath("dense").toStdString(), {.need_tokenizer = false});
        EXPECT_EQ(dense.model->token_embedding().kind(), "dense");
        EXPECT_EQ(dense.model->token_embedding().parameter_count(), 50257 * 128);
    }

    // Cancelled as it starts (the flag is set before the engine thread runs it).
    std::vector<int> cancelled;
    bool cancel_next = true;
    QObject::connect(&window.jobs(), &embedlab::app::JobController::started, [&](int id) {
        if (std::exchange(cancel_next, false))
            window.jobs().cancel(id);
    });
    QObject::connect(&window.jobs(), &embedlab::app::JobController::cancelled,
                     [&](int id) { cancelled.push_back(id); });
    const int job = window.exportCompressed(0, tmp.filePath("cancelled"), true, false);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    EXPECT_EQ(cancelled, std::vector<int>{job});
    EXPECT_EQ(entries_except(tmp, {"tinygpt2-pca16"}), QStringList{});
}

TEST(Workbench, ACancelledExportLeavesNothingOrThePreviousDirectory)
{
    using embedlab::app::export_compressed;
    const std::string model = embedlab::app::default_model(), text = embedlab::app::default_sample_text();
    const embedlab::CompressionRequest pca8{
        .model = model, .method = "pca", .rank = 8, .eval_text = text, .eval_tokens = 4096},
        pca4{.model = model, .method = "pca", .rank = 4, .eval_text = text, .eval_tokens = 4096};
    QTemporaryDir tmp;
    const std::string out = tmp.filePath("m").toStdString();
    ASSERT_EQ(export_compressed(pca8, out, false, false, {}), "pca rank 8");
    ASSERT_EQ(manifest(tmp.filePath("m"))["parameters"].toObject()["rank"].toInt(), 8);
    // How many progress calls a pca4 + dense export makes (deterministic: by sizes).
    int calls = 0;
    const std::string counted = tmp.filePath("counted").toStdString();
    export_compressed(pca4, counted, true, false, [&](int64_t, int64_t) { return ++calls > 0; });
    ASSERT_GT(calls, 3);
    ASSERT_TRUE(QDir(tmp.filePath("counted")).removeRecursively());

    // Cancelled mid-way and at the very last call (just before the rename), into a
    // new directory and over the existing one: only "m" is left, still rank 8.
    for (int stop : {calls / 2, calls})
        for (const std::string& target : {tmp.filePath("new").toStdString(), out}) {
            int n = 0;
            EXPECT_THROW(
                export_compressed(pca4, target, true, true, [&](int64_t, int64_t) { return ++n < stop; }),
                embedlab::Cancelled)
                << "stop at call " << stop << " of " << calls << ", " << target;
            EXPECT_EQ(n, stop);
            EXPECT_EQ(entries_except(tmp, {"m"}), QStringList{}) << target;
            EXPECT_EQ(manifest(tmp.filePath("m"))["parameters"].toObject()["rank"].toInt(), 8);
        }
    // A taken name without confirmation, a directory that is not a model even with
    // it, and a method the workbench does not run.
    EXPECT_THROW(export_compressed(pca4, out, false, false, {}), embedlab::InputError);
    ASSERT_TRUE(QDir(tmp.path()).mkdir("notes"));
    embedlab::app::write_file(tmp.filePath("notes/keep.txt").toStdString(), "mine");
    EXPECT_THROW(export_compressed(pca4, tmp.filePath("notes").toStdString(), false, true, {}),
                 embedlab::InputError);
    EXPECT_TRUE(QFile::exists(tmp.filePath("notes/keep.txt")));
    EXPECT_THROW(export_compressed({.model = model, .method = "bogus", .rank = 4},
                                   tmp.filePath("bogus").toStdString(), false, false, {}),
                 embedlab::InputError);
    EXPECT_EQ(entries_except(tmp, {"m", "notes"}), QStringList{});
}

TEST(Workbench, FourierAndNeighbourViewsAreComputedWhenShown)
{
    MainWindow window;
    open_bundled(window);
    window.showView("fourier");
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    const auto& f = window.fourierView()->data();
    ASSERT_EQ(f.matrices.size(), 2); // no fitted model: T and the original rows
    EXPECT_EQ(f.matrices[0].name, "T");
    EXPECT_EQ(f.matrices[1].name, "original");
    EXPECT_EQ(f.first, 0);
    EXPECT_EQ(f.count, 256);
    ASSERT_EQ(f.matrices[0].values.size(), 256 * 128);
    EXPECT_NEAR(f.matrices[0].values[1], -1.0, 1e-6); // cos(pi x(0)) = cos(-pi)
    EXPECT_EQ(f.tokens.value(11), ",");               // gpt2's token 11
    auto lm = embedlab::load_model(embedlab::app::default_model(), {.need_tokenizer = false});
    const auto& table =
        dynamic_cast<const embedlab::DenseTokenEmbedding&>(lm.model->token_embedding()).table();
    EXPECT_FLOAT_EQ(static_cast<float>(f.matrices[1].values[3 * 128 + 7]), table[3][7].item<float>());

    window.showView("lle");
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    const auto& g = window.neighbourView()->data();
    ASSERT_EQ(g.x.size(), 50257);
    EXPECT_EQ(g.common.size() + g.rare.size(), 50257);
    EXPECT_EQ(g.neighbours.size(), g.rare.size() * 5);
    double histogram = 0;
    for (double h : g.histogram)
        histogram += h;
    EXPECT_EQ(histogram, g.rare.size());
    for (int i : {0, static_cast<int>(g.rare.size()) / 2}) {
        double sum = 0;
        for (int j = 0; j < 5; ++j)
            sum += g.weights[i * 5 + j];
        EXPECT_NEAR(sum, 1.0, 1e-5); // LLE weights sum to one
    }
    EXPECT_TRUE(window.neighbourView()->selectToken(g.rare[0]));
}

TEST(Workbench, TensorTrainCandidatesMeetTheirAccuracy)
{
    const auto r = embedlab::app::tensor_train_candidates(embedlab::app::default_model(), {0.3}, 2, {}, 0);
    EXPECT_EQ(r.dim, 128);
    EXPECT_EQ(r.fitted_rows, 50257);
    ASSERT_EQ(r.candidates.size(), 2);
    for (const auto& c : r.candidates) {
        int64_t product = 1;
        for (auto f : c.shape)
            product *= f;
        EXPECT_EQ(product, 128);
        EXPECT_LE(c.relative_error, 0.3 + 1e-6); // every row within eps, so the table too
        // METHODS 5 / eq. 14: each token pays sum_k r_{k-1} I_k r_k of its own ranks, plus
        // its N - 1 stored ranks; never more than the cores' (padded) sizes.
        ASSERT_EQ(c.ranks.size(), c.shape.size() + 1);
        ASSERT_EQ(c.mean_ranks.size(), c.shape.size() - 1);
        int64_t padded = 0;
        for (size_t k = 0; k < c.shape.size(); ++k)
            padded += c.ranks[k] * c.shape[k] * c.ranks[k + 1];
        const int64_t V = 50257, N = static_cast<int64_t>(c.shape.size());
        EXPECT_LE(c.params_after, V * (padded + N - 1));
        if (N == 2) { // linear in the one inner rank: the mean gives the count exactly
            EXPECT_NEAR(static_cast<double>(c.params_after),
                        V * (c.mean_ranks[0] * static_cast<double>(c.shape[0] + c.shape[1]) + 1), 0.5);
        }
        EXPECT_DOUBLE_EQ(c.ratio, static_cast<double>(c.params_after) / (V * 128.0));
        // METHODS 5, eq. 2: original E_nu = nu (d V + l d), E_tau = 0, with nu = 5, l = 50.
        EXPECT_DOUBLE_EQ(c.energy_original, 5.0 * (128 * 50257 + 50 * 128));
        EXPECT_GT(c.energy_tt, 0.0);
        EXPECT_GT(c.energy_svd, 0.0);
        EXPECT_GT(c.svd_rank, 0);
    }
    // A large vocabulary's candidates come from evenly spaced rows: every token's TT
    // is its own, so 4,096 of 50,257 rows estimate the full table's numbers closely,
    // and the counts are still of all V tokens.
    const auto s = embedlab::app::tensor_train_candidates(embedlab::app::default_model(), {0.3}, 2, {}, 4096);
    EXPECT_EQ(s.vocab, 50257);
    EXPECT_EQ(s.fitted_rows, 4096);
    ASSERT_EQ(s.candidates.size(), r.candidates.size());
    for (size_t i = 0; i < s.candidates.size(); ++i) {
        const auto &full = r.candidates[i], &est = s.candidates[i];
        EXPECT_EQ(est.shape, full.shape);
        EXPECT_NEAR(est.ratio, full.ratio, 0.03 * full.ratio);
        // The table's Frobenius error is dominated by its few largest rows: a looser estimate.
        EXPECT_NEAR(est.relative_error, full.relative_error, 0.2 * full.relative_error);
        EXPECT_NEAR(est.mean_cosine, full.mean_cosine, 0.01);
        EXPECT_DOUBLE_EQ(est.ratio, static_cast<double>(est.params_after) / (50257 * 128.0));
        EXPECT_DOUBLE_EQ(est.energy_original, full.energy_original);
        EXPECT_NEAR(est.energy_tt, full.energy_tt, 0.05 * full.energy_tt);
    }
    const auto view = embedlab::app::tt_view_data(s, "tinygpt2");
    embedlab::views::TensorTrainView tt_view;
    tt_view.setData(view);
    tt_view.setSelected(0);
    EXPECT_TRUE(tt_view.summary().contains("estimated from 4096 evenly spaced of 50257 rows"))
        << tt_view.summary().toStdString();
}

} // namespace

// The Spectrum tab overlays another model's spectrum and FLAT-LLM's per-head
// value spectra from the importance job (one curve per layer and KV head).
TEST(Workbench, SpectrumOverlaysAnotherModelAndTheValueHeads)
{
    MainWindow window;
    open_bundled(window);
    auto* spectrum = window.spectrumView();
    EXPECT_TRUE(spectrum->overlays().isEmpty());
    window.showValueHeadSpectra(true);
    const int layers = static_cast<int>(window.allocationView()->data().normalised.size());
    ASSERT_EQ(layers, 4);
    ASSERT_EQ(spectrum->overlays().size() % layers, 0);
    const int heads = static_cast<int>(spectrum->overlays().size()) / layers;
    EXPECT_EQ(heads, 4) << "tinygpt2: 4 heads of 32";
    for (const auto& o : spectrum->overlays()) {
        EXPECT_TRUE(o.group.startsWith("layer ")) << o.group.toStdString();
        EXPECT_EQ(o.eigenvalues.size(), 32);
    }
    const QString other = QString(EMBEDLAB_SOURCE_DIR) + "/resources/models/stories260K.gguf";
    ASSERT_GT(window.compareSpectrum(other), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    window.showValueHeadSpectra(false);
    ASSERT_EQ(spectrum->overlays().size(), 1);
    EXPECT_EQ(spectrum->overlays()[0].name, "stories260K.gguf");
    EXPECT_EQ(spectrum->overlays()[0].eigenvalues.size(), 64) << "stories260K: d = 64";
    EXPECT_EQ(spectrum->data().eigenvalues.size(), 128) << "the shown model's own curve is unchanged";
}

// Issue 23 item 5: the panel's tt eps compresses the loaded model (eps 0.3, the old
// default, stored more than tinygpt2's table), and a ratio above 1 is flagged in the
// Tensor-Train view and the results table.
TEST(Workbench, TheDefaultTensorTrainEpsCompressesAndRatiosAboveOneAreFlagged)
{
    const auto picked = embedlab::app::table_default(embedlab::app::default_model(), {.method = "tt"}, {});
    ASSERT_TRUE(picked);
    struct {
        double eps, sample_ratio;
    } chosen{picked->request.eps, picked->measured["sample_ratio"].get<double>()};
    EXPECT_LE(chosen.sample_ratio, 0.9);
    EXPECT_EQ(picked->measured["sample_rows"], 4096);
    EXPECT_NE(picked->how.find("on a 4096-row sample"), std::string::npos) << picked->how;
    EXPECT_FALSE(embedlab::app::table_default(embedlab::app::default_model(), {.method = "pca"}, {}))
        << "pca picks no default from the table";
    auto lm = embedlab::load_model(embedlab::app::default_model(), {.need_tokenizer = false});
    const auto table = embedlab::dense_table(&lm.model->token_embedding())->to(torch::kFloat);
    const auto at = [&](double eps) {
        return embedlab::compress_table(table, {.method = "tt", .shape = {4, 4, 8}, .eps = eps}, 0, {})
            .accounting.ratio;
    };
    EXPECT_GT(at(0.3), 1.0) << "the old default did not compress";
    const double full = at(chosen.eps);
    std::printf("tt default eps %.1f: sample ratio %.3f, whole table %.3f\n", chosen.eps, chosen.sample_ratio,
                full);
    EXPECT_LT(full, 1.0) << "eps " << chosen.eps << " on the whole table";

    MainWindow window;
    open_bundled(window);
    window.methodPanel()->setMethod("pca");
    window.methodPanel()->setMethod("tt"); // choosing tt chooses its eps for the model
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    EXPECT_DOUBLE_EQ(window.methodPanel()->eps(), chosen.eps);
    window.methodPanel()->setMethod("pca");

    embedlab::views::TensorTrainData data;
    data.candidates = {{.shape = "4x4x8", .ranks = "1,4,7,1", .eps = 0.3, .ratio = 1.44},
                       {.shape = "4x4x8", .ranks = "1,3,4,1", .eps = 0.7, .ratio = 0.67}};
    window.tensorTrainView()->setData(data);
    window.tensorTrainView()->setSelected(0);
    EXPECT_TRUE(window.tensorTrainView()->summary().startsWith("NOT COMPRESSING (ratio > 1: stores 1.44x"))
        << window.tensorTrainView()->summary().toStdString();
    window.tensorTrainView()->setSelected(1);
    EXPECT_FALSE(window.tensorTrainView()->summary().contains("NOT COMPRESSING"));

    embedlab::RunSummary over;
    over.method = "tt";
    over.ratio = 1.44;
    embedlab::RunSummary under = over;
    under.ratio = 0.67;
    auto* results = window.resultsView();
    const int a = results->addRow(over), b = results->addRow(under);
    auto* model = results->table()->model();
    EXPECT_EQ(model->index(a, 3).data(Qt::ForegroundRole).value<QBrush>().color(), QColor(176, 0, 0));
    EXPECT_TRUE(model->index(a, 3).data(Qt::ToolTipRole).toString().contains("not a compression"));
    EXPECT_FALSE(model->index(b, 3).data(Qt::ForegroundRole).isValid());
}

namespace {

// The method panel's every page, method and target, to put back before a window
// saves its settings on destruction.
struct PanelChoice {
    QString method;
    embedlab::app::RunTarget target;
    std::vector<embedlab::CompressionRequest> requests;
};
PanelChoice panel_choice(const embedlab::app::MethodPanel& panel)
{
    PanelChoice c{panel.method(), panel.target(), {}};
    for (const QString& m : embedlab::app::MethodPanel::methods())
        c.requests.push_back(panel.request(m));
    return c;
}
void restore(embedlab::app::MethodPanel& panel, const PanelChoice& c)
{
    // Quietly: passing through tt must not make the window choose a tt eps for its model.
    const QSignalBlocker quiet(&panel);
    for (const auto& r : c.requests)
        panel.setRequest(r);
    panel.setMethod(c.method);
    panel.setTarget(c.target);
}

} // namespace

// Issue 23 item 12: a session (results rows, the method panel's request and
// target, the model) saves to JSON and reopens in another window; a file that is
// not one is refused. Issue 37: the request is stored as request_json.
TEST(Workbench, ASessionSavesAndReopensResultsAndSettings)
{
    QTemporaryDir tmp;
    const QString file = tmp.filePath("session.embedlab.json");
    PanelChoice initial;
    {
        MainWindow window;
        window.setAskBeforeDiscarding(false);
        initial = panel_choice(*window.methodPanel());
        embedlab::RunSummary r;
        r.method = "pca";
        r.parameters = "rank 16";
        r.part = "token_embedding";
        r.params_before = 6432896;
        r.params_after = 806288;
        r.ratio = 0.1253;
        r.ppl = 61.2;
        r.ppl_original = 40.0;
        r.delta_ln_ppl = std::log(61.2 / 40.0);
        r.mean_cosine = 0.96;
        window.resultsView()->addRow(r);
        auto chosen = window.methodPanel()->request("pca");
        chosen.rank = 24;
        window.methodPanel()->setRequest(chosen);
        window.methodPanel()->setTarget({.host = "pi@raspberrypi"});
        ASSERT_TRUE(window.saveSession(file));
        restore(*window.methodPanel(), initial);
    }
    {
        QFile f(file);
        ASSERT_TRUE(f.open(QIODevice::ReadOnly));
        const QJsonObject saved = QJsonDocument::fromJson(f.readAll()).object();
        EXPECT_EQ(saved["version"].toInt(), 2);
        EXPECT_EQ(saved["request"].toObject()["method"].toString(), "pca");
        EXPECT_EQ(saved["request"].toObject()["rank"].toInt(), 24);
        EXPECT_EQ(saved["target"].toObject()["host"].toString(), "pi@raspberrypi");
    }
    MainWindow other;
    other.setAskBeforeDiscarding(false);
    ASSERT_TRUE(other.openSession(file));
    ASSERT_EQ(other.resultsView()->rows().size(), 1u);
    EXPECT_EQ(other.resultsView()->rows()[0].parameters, "rank 16");
    EXPECT_DOUBLE_EQ(other.resultsView()->rows()[0].ppl, 61.2);
    EXPECT_EQ(other.methodPanel()->method(), "pca");
    EXPECT_EQ(other.methodPanel()->rank(), 24);
    EXPECT_EQ(other.methodPanel()->target().host, "pi@raspberrypi");
    EXPECT_FALSE(other.openSession(tmp.filePath("missing.json")));
    EXPECT_TRUE(other.statusBar()->currentMessage().contains("not an EmbedLab session file"));
    restore(*other.methodPanel(), initial);
}

// Issue 37: a session saved by the version before requests (version 1: the panel's
// fields under "method", every method's at once, "" texts meaning the bundled sample
// text), as that version's File > Save session wrote it, still opens: its rows, and
// the panel's requests of every method.
TEST(Workbench, ASessionOfTheFirstVersionStillOpens)
{
    QTemporaryDir tmp;
    const QString file = tmp.filePath("v1.embedlab.json");
    embedlab::app::write_file(file.toStdString(), R"({
    "format": "embedlab-session",
    "method": {
        "allocation": "uniform",
        "calibration_text": "",
        "divergence": true,
        "eps": 0.4,
        "eval_text": "/data/eval.txt",
        "eval_tokens": 2048,
        "frequency_text": "/data/freq.txt",
        "k": 6,
        "keep_ratio": 0.3,
        "lora_rank": 4,
        "lora_steps": 25,
        "method": "lle",
        "mlp": "geglu",
        "no_mlp": false,
        "rank": 24,
        "remaining": 0.35,
        "samples": 16,
        "seqlen": 64,
        "steps": 40,
        "target_ratio": 0,
        "task": "mc",
        "task_data": "/data/piqa.jsonl",
        "task_limit": 50,
        "train_text": ""
    },
    "model": "",
    "results": {
        "results": [
            {
                "cosine": 0.96,
                "delta_ln_ppl": 0.42526773540434409,
                "eval_text": "/data/eval.txt",
                "eval_tokens": 2048,
                "host": "workstation",
                "kl_mean": null,
                "method": "pca",
                "model": "/models/tinygpt2-f16",
                "parameters": "rank 16",
                "params": 806288,
                "params_before": 6432896,
                "part": "token_embedding",
                "ppl": 61.2,
                "ppl_original": 40,
                "ratio": 0.1253,
                "seconds": 3.5,
                "task": "",
                "task_accuracy": null,
                "task_accuracy_original": null,
                "task_n": 0,
                "top1_agreement": null
            },
            {
                "cosine": 0.81,
                "delta_ln_ppl": 0.05,
                "eval_text": "/data/eval.txt",
                "eval_tokens": 2048,
                "host": "workstation",
                "kl_mean": 0.012,
                "method": "lle",
                "model": "/models/tinygpt2-f16",
                "parameters": "keep 0.3, k 6, 35180 rare + LoRA r 4, 25 steps",
                "params": 2403455,
                "params_before": 6432896,
                "part": "token_embedding",
                "ppl": 42.05,
                "ppl_original": 40,
                "ratio": 0.3736,
                "seconds": 12.25,
                "task": "mc",
                "task_accuracy": 0.52,
                "task_accuracy_original": 0.54,
                "task_n": 50,
                "top1_agreement": 0.91
            }
        ]
    },
    "version": 1
}
)");
    MainWindow window;
    window.setAskBeforeDiscarding(false);
    auto* panel = window.methodPanel();
    const PanelChoice initial = panel_choice(*panel);
    ASSERT_TRUE(window.openSession(file)) << window.statusBar()->currentMessage().toStdString();
    const auto& rows = window.resultsView()->rows();
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].method, "pca");
    EXPECT_EQ(rows[0].parameters, "rank 16");
    EXPECT_EQ(rows[0].params_after, 806288);
    EXPECT_DOUBLE_EQ(rows[0].ppl, 61.2);
    EXPECT_TRUE(std::isnan(rows[0].kl_mean));
    EXPECT_EQ(rows[1].method, "lle");
    EXPECT_EQ(rows[1].task_n, 50);
    EXPECT_DOUBLE_EQ(rows[1].top1_agreement, 0.91);
    EXPECT_EQ(rows[1].model, "/models/tinygpt2-f16");

    // The saved method's request, complete: "" texts are the bundled sample text's path.
    const std::string bundled = embedlab::app::default_sample_text();
    const auto lle = panel->request();
    EXPECT_EQ(lle.method, "lle");
    EXPECT_EQ(lle.freq_text, "/data/freq.txt");
    EXPECT_DOUBLE_EQ(lle.keep_ratio, 0.3);
    EXPECT_EQ(lle.k, 6);
    EXPECT_EQ(lle.lora_rank, 4);
    EXPECT_EQ(lle.lora_steps, 25);
    EXPECT_EQ(lle.train_text, bundled);
    EXPECT_EQ(lle.eval_text, "/data/eval.txt");
    EXPECT_EQ(lle.eval_tokens, 2048);
    EXPECT_TRUE(lle.divergence);
    EXPECT_EQ(lle.task, "mc");
    EXPECT_EQ(lle.task_data, "/data/piqa.jsonl");
    EXPECT_EQ(lle.task_limit, 50);
    // Every other method's page took its fields too.
    EXPECT_EQ(panel->request("pca").rank, 24);
    EXPECT_DOUBLE_EQ(panel->request("tt").eps, 0.4);
    EXPECT_EQ(panel->request("fourier").mlp, "geglu");
    EXPECT_EQ(panel->request("fourier").steps, 40);
    const auto flat = panel->request("flat");
    EXPECT_DOUBLE_EQ(flat.remaining, 0.35);
    EXPECT_EQ(flat.target_ratio, 0);
    EXPECT_EQ(flat.allocation, "uniform");
    EXPECT_EQ(flat.calib_text, bundled);
    EXPECT_EQ(flat.samples, 16);
    EXPECT_EQ(flat.seqlen, 64);
    EXPECT_EQ(flat.lora_rank, 0) << "flat has no LoRA recovery";
    // And every one is a request the engine runs (tucker's shape fitted to d = 128).
    panel->setDimension(128);
    for (const QString& m : embedlab::app::MethodPanel::methods())
        EXPECT_NO_THROW(embedlab::check_request(panel->request(m), 128)) << m.toStdString();
    EXPECT_TRUE(window.statusBar()->currentMessage().startsWith("Opened the session"));
    restore(*panel, initial);
}

// Issue 23's screenshot check: every tab of the workbench on tinyllama, grabbed as
// a user sees it and compared with a golden rendering only loosely: the tab is laid
// out, and every plot on it has data and draws more than its background. The
// PNGs land next to the test binary (workbench_<tab>.png) to look at.
// The LLE tab's damage-by-frequency plot stays empty until a run is measured (Compute
// damage); test_damage checks it drawn.
namespace {
bool in_damage_view(QWidget* plot)
{
    for (QWidget* w = plot; w; w = w->parentWidget())
        if (qobject_cast<embedlab::views::TokenDamageView*>(w))
            return true;
    return false;
}
} // namespace

// Every tab of `window` shown in turn: laid out at a readable size, each plot with
// data and ink of several colours inside its axes (not blank); `skipped` tabs are
// checked by the caller. Screenshots go to workbench_<prefix><tab>.png.
void expect_every_tab_drawn(MainWindow& window, const QSet<QString>& skipped, const QString& prefix,
                            const QElapsedTimer& clock)
{
    auto* tabs = window.findChild<QTabWidget*>();
    ASSERT_NE(tabs, nullptr);
    EXPECT_EQ(tabs->count(), MainWindow::viewNames().size());
    for (const QString& name : MainWindow::viewNames()) {
        SCOPED_TRACE(name.toStdString());
        ASSERT_TRUE(window.showView(name));
        ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); })); // the lazy tabs compute
        QApplication::processEvents();
        QWidget* tab = tabs->currentWidget();
        if (name == "compare" || skipped.contains(name))
            continue; // compare: text, no plot (test_compare checks what it draws)
        const auto plots = tab->findChildren<QCustomPlot*>();
        ASSERT_FALSE(plots.isEmpty());
        for (auto* plot : plots)
            plot->replot();
        EXPECT_GE(tab->width(), 600);
        EXPECT_GE(tab->height(), 400);
        const auto tab_stats = embedlab::test::image_stats(tab->grab().toImage());
        tab->grab().save("workbench_" + prefix + name + ".png");
        EXPECT_GT(tab_stats.colours, 50) << "text, controls and plots";
        for (auto* plot : plots) {
            if (!plot->isVisible() || in_damage_view(plot))
                continue;
            EXPECT_GE(plot->width(), 200);
            EXPECT_GE(plot->height(), 150);
            // Data on the plot: points of graphs, curves and bars, cells of heatmaps.
            int64_t points = 0;
            for (int i = 0; i < plot->plottableCount(); ++i) {
                QCPAbstractPlottable* p = plot->plottable(i);
                if (auto* map = qobject_cast<QCPColorMap*>(p))
                    points += static_cast<int64_t>(map->data()->keySize()) * map->data()->valueSize();
                else if (p->interface1D())
                    points += p->interface1D()->dataCount();
            }
            EXPECT_GT(points, 0) << "an empty plot";
            // Not blank: inside the axes (where a blank plot has only its background
            // and grid) the data put ink of several colours.
            const QImage image = plot->grab().toImage();
            const auto stats = embedlab::test::image_stats(image);
            const qreal dpr = image.devicePixelRatio();
            double inked = 0;
            int64_t ink_pixels = 0;
            int colours = 0;
            for (QCPAxisRect* rect : plot->axisRects()) {
                const QRect inside = rect->rect().adjusted(2, 2, -2, -2);
                const QImage area = image.copy(QRect(inside.topLeft() * dpr, inside.size() * dpr))
                                        .convertToFormat(QImage::Format_RGB32);
                QSet<QRgb> seen;
                int64_t ink = 0;
                for (int y = 0; y < area.height(); ++y)
                    for (int x = 0; x < area.width(); ++x) {
                        const QColor c = area.pixelColor(x, y);
                        // White background and the grid's light grey are not data.
                        const bool grey = c.red() == c.green() && c.green() == c.blue() && c.red() >= 190;
                        if (!grey) {
                            ++ink;
                            seen.insert(c.rgb());
                        }
                    }
                inked = std::max(inked,
                                 area.isNull() ? 0.0 : double(ink) / (double(area.width()) * area.height()));
                ink_pixels = std::max(ink_pixels, ink);
                colours = std::max(colours, static_cast<int>(seen.size()));
            }
            EXPECT_GE(ink_pixels, 60) << "a blank plot"; // one marked point of the Pareto plot is ~150
            EXPECT_GE(colours, 8) << "a blank plot";
            EXPECT_GT(stats.drawn, 0.01);
            std::printf("%s: %lld points, %.1f%% drawn, inside the axes %.1f%% in %d colours (%.1f s)\n",
                        name.toUtf8().constData(), static_cast<long long>(points), 100 * stats.drawn,
                        100 * inked, colours, clock.elapsed() / 1000.0);
        }
    }
}

TEST(Workbench, EveryTabOnTinyllamaIsLaidOutWithNoBlankPlot)
{
    const QString model = QString(EMBEDLAB_SOURCE_DIR) + "/../shared/models/tinyllama";
    if (!QFileInfo::exists(model + "/config.json"))
        GTEST_SKIP() << "needs the shared tinyllama model (not found at " << model.toStdString() << ")";
    MainWindow window;
    window.setAskBeforeDiscarding(false);
    const PanelChoice initial = panel_choice(*window.methodPanel()); // the model changes the panel's tt eps
    window.resize(1280, 860);
    window.setAttribute(Qt::WA_DontShowOnScreen);
    window.show();
    QElapsedTimer clock;
    clock.start();
    open_shown(window, model);
    std::printf("tinyllama loaded and analysed in %.1f s\n", clock.elapsed() / 1000.0);
    // One run, so the Results tab has a row and a point.
    ASSERT_GE(window.runCompression("pca", 16, 0.0), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(window.resultsView()->rows().size(), 1u);

    expect_every_tab_drawn(window, {}, "", clock);
    restore(*window.methodPanel(), initial);
}

// Issue 42: an encoder (sentence-transformers MiniLM layout) opens with every tab filled
// but IPRS, which says why it has nothing (FLAT-LLM is decoder work), and a run scores
// its table without perplexity.
TEST(Workbench, EveryTabOnAnEncoderIsFilledAndIprsSaysWhyNot)
{
    const QString model = QString(EMBEDLAB_SOURCE_DIR) + "/tests/data/encoders/minilm-st";
    MainWindow window;
    window.setAskBeforeDiscarding(false);
    const PanelChoice initial = panel_choice(*window.methodPanel());
    window.resize(1280, 860);
    window.setAttribute(Qt::WA_DontShowOnScreen);
    window.show();
    QElapsedTimer clock;
    clock.start();
    open_shown(window, model);
    ASSERT_GE(window.runCompression("pca", 16, 0.0), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(window.resultsView()->rows().size(), 1u) << "the run failed: an encoder has no perplexity";
    EXPECT_GT(window.resultsView()->rows()[0].mean_cosine, 0.5);
    expect_every_tab_drawn(window, {"allocation"}, "encoder_", clock);
    ASSERT_TRUE(window.showView("allocation"));
    auto* tabs = window.findChild<QTabWidget*>();
    bool says_why = false;
    for (auto* label : tabs->currentWidget()->findChildren<QLabel*>())
        says_why = says_why || label->text().contains("encoder");
    EXPECT_TRUE(says_why) << "the IPRS tab does not say why it is empty";
    restore(*window.methodPanel(), initial);
}

// Issue 41 item 2: the Tensor-Train tab opens on the candidate the method panel's tt
// runs (its eps picked from the table so that it compresses, at the balanced shape),
// not on eps 0.1, which does not compress, and says so. The panel keeps its method.
TEST(Workbench, TheTensorTrainTabOpensOnThePanelsCompressingChoice)
{
    MainWindow window;
    window.setAskBeforeDiscarding(false);
    const PanelChoice initial = panel_choice(*window.methodPanel());
    {
        const QSignalBlocker quiet(window.methodPanel());
        window.methodPanel()->setMethod("pca"); // tt's default is not picked on load
    }
    open_bundled(window);
    window.showView("tt");
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    const auto* tt = window.tensorTrainView();
    const int i = tt->selected();
    ASSERT_GE(i, 0);
    const auto& c = tt->data().candidates[i];
    const double eps = window.methodPanel()->request("tt").eps;
    EXPECT_DOUBLE_EQ(c.eps, eps) << "the tab shows the panel's eps";
    EXPECT_LT(c.ratio, 1.0) << "eps " << c.eps << " at " << c.shape.toStdString();
    const auto balanced = embedlab::balanced_tt_shape(128, "tt");
    EXPECT_EQ(c.shape, QString("%1x%2x%3").arg(balanced[0]).arg(balanced[1]).arg(balanced[2]));
    EXPECT_FALSE(tt->summary().contains("NOT COMPRESSING")) << tt->summary().toStdString();
    EXPECT_TRUE(tt->summary().contains("The method panel's tt runs this candidate"))
        << tt->summary().toStdString();
    EXPECT_EQ(window.methodPanel()->method(), "pca");
    restore(*window.methodPanel(), initial);
}

// Issue 41 item 5: plots keep a readable size: the empty Results tab (the method
// panel above it) does not squeeze the Pareto plot, nor does a tall Jobs dock or
// its splitter dragged to the table; every tab's plots likewise.
TEST(Workbench, PlotsKeepAReadableSizeBesideThePanelDocksAndSplitters)
{
    MainWindow window;
    window.setAskBeforeDiscarding(false);
    window.resize(1100, 780);
    window.setAttribute(Qt::WA_DontShowOnScreen);
    window.show();
    window.showView("results");
    QApplication::processEvents();
    auto* plot = window.resultsView()->plot();
    auto readable = [](QCustomPlot* p) { return p->height() >= 240 && p->width() >= 320; };
    EXPECT_TRUE(readable(plot)) << "Pareto plot " << plot->width() << " x " << plot->height();
    auto* dock = window.findChild<QDockWidget*>("jobs");
    ASSERT_NE(dock, nullptr);
    window.resizeDocks({dock}, {600}, Qt::Vertical);
    QApplication::processEvents();
    EXPECT_TRUE(readable(plot)) << "beside a tall dock: " << plot->width() << " x " << plot->height();
    QSplitter* split = nullptr;
    for (auto* s : window.resultsView()->findChildren<QSplitter*>())
        if (s->orientation() == Qt::Vertical)
            split = s;
    ASSERT_NE(split, nullptr);
    split->setSizes({10000, 0}); // the table dragged over the plot
    QApplication::processEvents();
    EXPECT_TRUE(readable(plot)) << "splitter dragged: " << plot->width() << " x " << plot->height();
    for (const QString& name : MainWindow::viewNames()) {
        window.showView(name);
        QApplication::processEvents();
        for (auto* p : window.findChildren<QCustomPlot*>()) {
            if (p->isVisible()) {
                EXPECT_TRUE(readable(p)) << name.toStdString() << ": " << p->width() << " x " << p->height();
            }
        }
    }
}

// Issue 41 item 8: after saving a session, the quit prompt counts only the rows
// added since (not every row); the Pareto y axis is saved in the session, and a
// session without it (before issue 41) still opens, keeping the plot's axis.
TEST(Workbench, TheQuitPromptCountsUnsavedRowsAndTheSessionKeepsTheParetoAxis)
{
    QTemporaryDir tmp;
    const QString file = tmp.filePath("session.embedlab.json");
    MainWindow window;
    const PanelChoice initial = panel_choice(*window.methodPanel());
    window.setAttribute(Qt::WA_DontShowOnScreen);
    window.show();
    for (int k : {8, 16, 32, 64}) {
        embedlab::RunSummary r;
        r.method = "pca";
        r.parameters = "rank " + std::to_string(k);
        r.part = "token_embedding";
        r.ratio = k / 128.0;
        r.ppl = 40.0 + 64.0 / k;
        r.ppl_original = 40.0;
        r.delta_ln_ppl = std::log(r.ppl / 40.0);
        window.resultsView()->addRow(r);
        if (k == 32) {
            // The user's y axis, as chosen in its boxes.
            for (auto* box : window.resultsView()->findChildren<QComboBox*>()) {
                if (box->findText("KL (nats)") >= 0)
                    box->setCurrentIndex(box->findText("KL (nats)"));
                if (box->findText("symlog") >= 0)
                    box->setCurrentIndex(box->findText("symlog"));
            }
            ASSERT_TRUE(window.saveSession(file)); // 3 rows saved, then 1 added
        }
    }
    QString asked;
    QTimer::singleShot(0, [&] {
        if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
            asked = box->text();
            box->button(QMessageBox::Cancel)->click();
        }
    });
    window.close();
    EXPECT_EQ(asked, "1 results row is not saved. Save the session first?");
    EXPECT_TRUE(window.isVisible()) << "Cancel keeps the window";
    window.setAskBeforeDiscarding(false);

    auto y_axis = [](const MainWindow& w) {
        QStringList chosen;
        for (auto* box : w.resultsView()->findChildren<QComboBox*>())
            if (box->findText("KL (nats)") >= 0 || box->findText("symlog") >= 0)
                chosen << box->currentText();
        return chosen;
    };
    MainWindow other;
    other.setAskBeforeDiscarding(false);
    ASSERT_TRUE(other.openSession(file));
    EXPECT_EQ(other.resultsView()->rows().size(), 3u);
    EXPECT_EQ(y_axis(other), (QStringList{"KL (nats)", "symlog"}));

    // A session written before issue 41: no y axis; it opens and the plot keeps its own.
    QFile f(file);
    ASSERT_TRUE(f.open(QIODevice::ReadOnly));
    QJsonObject old = QJsonDocument::fromJson(f.readAll()).object();
    f.close();
    for (const auto& key : old.keys())
        if (key.startsWith("pareto"))
            old.remove(key);
    const QString old_file = tmp.filePath("old.embedlab.json");
    embedlab::app::write_file(old_file.toStdString(), QJsonDocument(old).toJson().toStdString());
    MainWindow third;
    third.setAskBeforeDiscarding(false);
    ASSERT_TRUE(third.openSession(old_file));
    EXPECT_EQ(third.resultsView()->rows().size(), 3u);
    EXPECT_EQ(y_axis(third), (QStringList{"Δ ln PPL", "linear"}));
    restore(*window.methodPanel(), initial);
}

// Issue 41 item 12: a request as the embedlab-cli compress line (compress_command), run
// through sh (shell_command_line's quoting), writes what the engine writes for the same
// request: the same method parameters, energy model, seed and evaluation.
TEST(Reproduce, CompressCommandRunsTheSameRequest)
{
    namespace fs = std::filesystem;
    const embedlab::test::TextSlices texts(20000, 4000);
    const std::string model = embedlab::default_model_path().string();
    std::vector<embedlab::CompressionRequest> requests{
        {.model = model, .method = "pca", .rank = 16, .eval_text = texts.eval, .ctx = 32, .stride = 16},
        {.model = model, .method = "lle", .freq_text = texts.fit, .keep_ratio = 0.9, .k = 8},
        {.model = model, .method = "tt", .shape = {4, 4, 8}, .ranks = {1, 4, 6, 1}, .nu = 2.5},
        {.model = model,
         .method = "svd",
         .rank = 8,
         .eval_text = texts.eval,
         .ctx = 64,
         .stride = 64,
         .divergence = true},
        // An encoder's row: the engine's pseudo-perplexity (issue 61 items 5-6).
        {.model =
             (std::filesystem::path(EMBEDLAB_SOURCE_DIR) / "tests/data/encoders/distilbert-mlm").string(),
         .method = "pca",
         .rank = 16,
         .eval_text = texts.eval,
         .eval_tokens = 64,
         .divergence = true},
    };
    // The manifest's parts a request decides.
    const auto decided = [](const nlohmann::ordered_json& m) {
        nlohmann::ordered_json d = {
            {"parameters", m.at("parameters")},
            {"energy_model", m.at("accounting").value("energy_model", nlohmann::ordered_json())},
            {"seed", m.at("seed")}};
        if (m.contains("evaluation"))
            for (const char* key : {"text", "tokens", "ctx", "stride", "kind"}) // an encoder's: no stride
                d["evaluation"][key] = m["evaluation"].value(key, nlohmann::ordered_json());
        d["divergence"] = m.contains("evaluation") && m["evaluation"].contains("divergence");
        return d;
    };
    embedlab::test::TempDir dir;
    for (size_t i = 0; i < requests.size(); ++i) {
        const auto& request = requests[i];
        SCOPED_TRACE(request.method);
        std::vector<std::string> omitted;
        const std::string out = (dir / ("it's out " + std::to_string(i))).string();
        auto argv = embedlab::cli::compress_command(request, out, &omitted);
        EXPECT_TRUE(omitted.empty());
        ASSERT_GE(argv.size(), 5u);
        EXPECT_EQ(argv[0], "embedlab-cli");
        EXPECT_EQ(argv[1], "compress");
        EXPECT_EQ(argv[2], request.model);
        EXPECT_EQ(argv[3], "--method");
        EXPECT_EQ(argv[4], request.method);
        argv[0] = EMBEDLAB_CLI_PATH;
        argv.insert(argv.end(), {"--json", "--quiet"});
        const fs::path printed = dir / "printed.json";
        const std::string line = embedlab::cli::shell_command_line(argv) + " >" +
                                 embedlab::test::quote(printed.string()) + " 2>&1 </dev/null";
        ASSERT_EQ(std::system(line.c_str()), 0) << line << "\n" << embedlab::test::read_text(printed);
        const auto manifest = nlohmann::ordered_json::parse(embedlab::test::read_text(printed));
        const auto engine = embedlab::export_run(embedlab::run_compression(request),
                                                 dir / ("engine " + std::to_string(i)), {});
        EXPECT_EQ(decided(manifest), decided(engine)) << line;
        if (engine.contains("evaluation") && engine["evaluation"].value("kind", "") == "pseudo-perplexity") {
            const double ppl = engine["evaluation"]["compressed"]["ppl"].get<double>();
            EXPECT_NEAR(manifest["evaluation"]["compressed"]["ppl"].get<double>(), ppl, 1e-9 * ppl) << line;
            EXPECT_EQ(manifest["evaluation"]["tokens"], 64) << line;
        }
    }
    // What compress has no flag for is named, not dropped silently.
    std::vector<std::string> omitted;
    const auto argv = embedlab::cli::compress_command({.model = model,
                                                       .method = "lle",
                                                       .freq_text = texts.fit,
                                                       .k = 8,
                                                       .lora_rank = 4,
                                                       .eval_tokens = 100,
                                                       .seed = 3},
                                                      "out", &omitted);
    EXPECT_EQ(omitted, (std::vector<std::string>{"lora_rank", "seed"})) << "eval_tokens is --eval-tokens";
    EXPECT_EQ(std::count(argv.begin(), argv.end(), "--seed"), 0);
    EXPECT_EQ(embedlab::cli::shell_command_line({"a b", "it's", "--x=1,2", ""}),
              "'a b' 'it'\\''s' --x=1,2 ''");
}

// The results row's menu copies the run as the CLI line, the job file's JSON and the
// Python call.
TEST(Reproduce, ARowCopiesAsCommandJsonAndPython)
{
    MainWindow window;
    open_bundled(window);
    auto* results = window.resultsView();
    ASSERT_GT(window.runCompression("pca", 16, 0), 0);
    ASSERT_TRUE(wait_for([&] { return window.jobs().idle(); }));
    ASSERT_EQ(results->rows().size(), 1u);
    results->selectRow(0);
    auto request = window.methodPanel()->request("pca"); // what runCompression("pca", 16, 0) ran
    request.rank = 16;
    request.model = embedlab::app::default_model();
    auto copy = [&](const char* name) {
        auto* action = window.findChild<QAction*>(name);
        EXPECT_NE(action, nullptr) << name;
        if (!action)
            return QString();
        QGuiApplication::clipboard()->clear();
        action->trigger();
        return QGuiApplication::clipboard()->text();
    };
    const QString command = copy("copy_command");
    EXPECT_TRUE(command.startsWith("embedlab-cli compress ")) << command.toStdString();
    EXPECT_TRUE(command.contains("--method pca --rank 16")) << command.toStdString();
    // The panel's eval_tokens is compress's --eval-tokens (issue 61 item 5); the output is
    // named by the model and the settings, so two rows' lines do not collide.
    ASSERT_GT(request.eval_tokens, 0);
    EXPECT_EQ(command.toStdString(),
              embedlab::cli::shell_command_line(embedlab::cli::compress_command(
                  request, std::filesystem::path(request.model).filename().string() + "-pca-rank-16")));
    const QString json = copy("copy_json_request");
    const auto parsed = nlohmann::ordered_json::parse(json.toStdString());
    // A compress job as `embedlab-cli worker --job` takes it: kind and out beside the request.
    EXPECT_EQ(parsed["kind"], "compress");
    EXPECT_EQ(parsed["out"], std::filesystem::path(request.model).filename().string() + "-pca-rank-16");
    auto fields = parsed;
    fields.erase("kind");
    fields.erase("out");
    EXPECT_EQ(fields, embedlab::request_json(request));
    EXPECT_EQ(embedlab::request_json(embedlab::request_from_json(parsed)), fields);
    const QString python = copy("copy_python");
    EXPECT_TRUE(python.startsWith("import embedlab\nrun = embedlab.compress(\"" +
                                  QString::fromStdString(request.model) + "\", \"pca\", rank=16"))
        << python.toStdString();
    EXPECT_TRUE(python.endsWith(")\nprint(run.summary)\n")) << python.toStdString();
    // A deleted row's request goes with it; a row from no job here copies nothing.
    results->removeRow(0);
    results->addRow(embedlab::RunSummary{.method = "pca", .parameters = "rank 8"});
    results->selectRow(0);
    EXPECT_TRUE(window.rowText(0, MainWindow::RowText::Command).isEmpty());
}
