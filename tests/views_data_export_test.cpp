// File > Export data (issue 41 item 10): every view's plotted values as CSV,
// read back and compared with the struct the view was given: the same doubles
// (not the screen's rounding), columns named as the axes and legend name them,
// tokens with commas, quotes and line breaks quoted so they read back, a panel
// per file, and a write that fails naming the file. And the results table's undo.
#include <QAbstractItemModel>
#include <QDir>
#include <QFile>
#include <QHash>
#include <QTableView>
#include <QTemporaryDir>
#include <QUndoStack>
#include <cmath>
#include <gtest/gtest.h>
#include <qcustomplot.h>

#include "fourier_map_view.hpp"
#include "gui_test_support.hpp"
#include "parameter_breakdown_chart.hpp"
#include "plot_data_export.hpp"
#include "rank_allocation_view.hpp"
#include "results_view.hpp"
#include "spectrum_view.hpp"
#include "tensor_train_view.hpp"
#include "token_damage_view.hpp"

using namespace embedlab::views;

namespace {

// The tables as File > Export data writes them, read back from the files.
struct Exported {
    QStringList files;
    QVector<QVector<QStringList>> tables; // per file: header, then lines
};

Exported export_and_read(const QVector<DataTable>& tables, const QString& dir,
                         const QString& name = "data.csv")
{
    Exported out;
    const QString error = writeDataTables(tables, QDir(dir).filePath(name), &out.files);
    EXPECT_TRUE(error.isEmpty()) << error.toStdString();
    for (const QString& file : out.files) {
        QFile in(file);
        EXPECT_TRUE(in.open(QIODevice::ReadOnly)) << file.toStdString();
        out.tables << parseCsv(QString::fromUtf8(in.readAll()));
    }
    return out;
}

double number(const QString& cell)
{
    return cell.isEmpty() ? std::nan("") : cell.toDouble();
}

// The lines of `table` whose column `column` is `value`.
QVector<QStringList> where(const QVector<QStringList>& table, int column, const QString& value)
{
    QVector<QStringList> lines;
    for (int i = 1; i < table.size(); ++i)
        if (table[i].value(column) == value)
            lines << table[i];
    return lines;
}

} // namespace

TEST(DataExport, NumbersAreExactAndTokensWithCommasQuotesAndLineBreaksRoundTrip)
{
    for (double v : {0.1, 1.0 / 3.0, -2.5e-17, 6432896.0, 1e300, 0.0})
        EXPECT_EQ(csvNumber(v).toDouble(), v) << csvNumber(v).toStdString();
    EXPECT_EQ(csvNumber(6432896.0), "6432896") << "no exponent, no trailing zeros";
    EXPECT_EQ(csvNumber(std::nan("")), "") << "NaN: an empty cell";
    EXPECT_EQ(csvField("a,\"b\""), "\"a,\"\"b\"\"\"");
    const QStringList tokens{"a,\"b\"", "line\nbreak", " the", "plain", "", "\"", "cr\r\nlf"};
    DataTable t{"tokens", {"token", "value"}, {}};
    for (int i = 0; i < tokens.size(); ++i)
        t.rows << QStringList{tokens[i], csvNumber(i + 0.1)};
    QTemporaryDir dir;
    const auto read = export_and_read({t}, dir.path());
    ASSERT_EQ(read.tables.size(), 1);
    ASSERT_EQ(read.tables[0].size(), tokens.size() + 1);
    EXPECT_EQ(read.tables[0][0], (QStringList{"token", "value"}));
    for (int i = 0; i < tokens.size(); ++i) {
        EXPECT_EQ(read.tables[0][i + 1].value(0), tokens[i]) << i;
        EXPECT_EQ(read.tables[0][i + 1].value(1).toDouble(), i + 0.1);
    }
}

TEST(DataExport, SeveralPanelsGoBesideTheFileAndAFailedWriteNamesIt)
{
    QVector<DataTable> tables{
        {"first", {"a"}, {{"1"}}}, {"KL per window", {"b"}, {{"2"}}}, {"KL per window", {"c"}, {}}};
    QTemporaryDir dir;
    const auto read = export_and_read(tables, dir.path(), "results.csv");
    EXPECT_EQ(read.files, (QStringList{dir.filePath("results.csv"), dir.filePath("results-kl-per-window.csv"),
                                       dir.filePath("results-kl-per-window-2.csv")}));
    EXPECT_EQ(read.tables[1], (QVector<QStringList>{{"b"}, {"2"}}));
    const QString bad = dir.filePath("missing/dir/out.csv");
    const QString error = writeDataTables(tables, bad);
    EXPECT_TRUE(error.startsWith(bad + ": ")) << error.toStdString();
    EXPECT_FALSE(QFile::exists(bad));
    EXPECT_TRUE(writeDataTables({}, dir.filePath("empty.csv")).contains("no data"));
}

TEST(DataExport, SpectrumExportsItsEigenvaluesAndExplainedVarianceAsPlotted)
{
    SpectrumView view;
    SpectrumData d;
    d.eigenvalues = {5.123456789012345, 2.5, 1.0 / 3.0, 0.01};
    d.explained = {0.5947, 0.8849, 0.9988, 1.0};
    d.params_at_rank = d.flops_at_rank = {1, 2, 3, 4};
    view.setData(d);
    QTemporaryDir dir;
    const auto read = export_and_read(view.dataTables(), dir.path());
    ASSERT_EQ(read.tables.size(), 2) << "eigenvalues (left axis), explained variance (right axis)";
    EXPECT_EQ(read.tables[0][0], (QStringList{"series", "component k", "eigenvalue of the covariance"}));
    EXPECT_EQ(read.tables[1][0], (QStringList{"series", "component k", "explained variance"}));
    for (int k = 0; k < 4; ++k) {
        EXPECT_EQ(read.tables[0][k + 1],
                  (QStringList{"eigenvalue", QString::number(k + 1), csvNumber(d.eigenvalues[k])}));
        EXPECT_EQ(number(read.tables[0][k + 1][2]), d.eigenvalues[k]);
        EXPECT_EQ(number(read.tables[1][k + 1][2]), d.explained[k]);
    }
    // With an overlay every curve is drawn as its share: the export says so and has it.
    view.setOverlays({{"other model", {3.0, 1.0}, {}}});
    const auto shares = export_and_read(view.dataTables(), dir.path(), "shares.csv");
    EXPECT_EQ(shares.tables[0][0].value(2), "share of variance λᵢ/Σλ");
    const auto other = where(shares.tables[0], 0, "other model");
    ASSERT_EQ(other.size(), 2);
    EXPECT_DOUBLE_EQ(number(other[0][2]), 0.75);
}

TEST(DataExport, RankAllocationExportsEveryCurveByLayer)
{
    RankAllocationView view;
    RankAllocationData d;
    d.d_head = 64;
    d.normalised = {1.0, 0.42, 0.137};
    d.allocations = {{0.5, {0.7, 0.45, 0.35}, {45, 29, 22}}};
    view.setData(d);
    view.setSelected(0);
    QTemporaryDir dir;
    const auto read = export_and_read(view.dataTables(), dir.path());
    ASSERT_EQ(read.tables.size(), 1);
    EXPECT_EQ(read.tables[0][0], (QStringList{"series", "decoder layer", "remaining rank ratio w"}));
    const auto importance = where(read.tables[0], 0, "normalised importance");
    const auto iprs = where(read.tables[0], 0, "IPRS 0.50");
    ASSERT_EQ(importance.size(), 3);
    ASSERT_EQ(iprs.size(), 3);
    for (int l = 0; l < 3; ++l) {
        EXPECT_EQ(number(importance[l][1]), l);
        EXPECT_EQ(number(importance[l][2]), d.normalised[l]);
        EXPECT_EQ(number(iprs[l][2]), d.allocations[0].w[l]);
    }
    EXPECT_EQ(where(read.tables[0], 0, "uniform 0.50").size(), 3);
}

TEST(DataExport, FourierHeatmapsExportLongFormWithTheirTokens)
{
    FourierMapView view;
    FourierMapData d;
    d.first = 10, d.count = 3, d.dim = 2;
    d.matrices = {{"T", {0.1, -0.2, 0.3, 0.4, -0.5, 0.6}, {0.9, -0.1}},
                  {"original", {1, 2, 3, 4, 5, 6.25}, {0.5, 0.25}}};
    d.tokens = {"a,\"b\"", " the", "x"};
    view.setData(d);
    view.setDimension(1);
    QTemporaryDir dir;
    const auto read = export_and_read(view.dataTables(), dir.path());
    ASSERT_EQ(read.tables.size(), 3) << "heatmaps, the chosen dimension's lines, neighbour cosines";
    const auto& maps = read.tables[0];
    EXPECT_EQ(maps[0], (QStringList{"matrix", "token id", "token", "feature index", "value"}));
    ASSERT_EQ(maps.size(), 1 + 2 * 3 * 2);
    for (int m = 0; m < 2; ++m)
        for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 2; ++j) {
                const QStringList& line = maps[1 + m * 6 + i * 2 + j];
                EXPECT_EQ(line[0], d.matrices[m].name);
                EXPECT_EQ(line[1].toInt(), 10 + i);
                EXPECT_EQ(line[2], d.tokens[i]) << "the token round-trips, comma and quotes included";
                EXPECT_EQ(line[3].toInt(), j);
                EXPECT_EQ(number(line[4]), d.matrices[m].values[i * 2 + j]);
            }
    // The line panel: the chosen dimension of every matrix, by token id.
    EXPECT_EQ(read.tables[1][0], (QStringList{"series", "token id", "value of dimension 1"}));
    const auto t_line = where(read.tables[1], 0, "T");
    ASSERT_EQ(t_line.size(), 3);
    EXPECT_EQ(number(t_line[2][2]), 0.6);
    EXPECT_EQ(read.tables[2][0], (QStringList{"series", "token id p", "cos(row p, row p+1)"}));
    EXPECT_EQ(number(where(read.tables[2], 0, "original")[1][2]), 0.25);
}

TEST(DataExport, TensorTrainExportsEveryCandidateAndTheEnergyBars)
{
    TensorTrainView view;
    TensorTrainData d;
    d.vocab = 512, d.dim = 128;
    TensorTrainCandidate a{"8x16", "1,8,1", 0.1, 0.123456789, 0.05, 0.99, 12, 10, 4, 6};
    TensorTrainCandidate b{"8x16", "1,4,1", 0.3, 0.0625, 0.2, 0.9, 6, 10, 3, 5};
    TensorTrainCandidate c{"4x4x8", "1,4,7,1", 0.3, 1.44, 0.1, 0.95, 40, 10, 12, 11};
    d.candidates = {a, b, c};
    d.chosen = 1;
    view.setData(d);
    QTemporaryDir dir;
    const auto read = export_and_read(view.dataTables(), dir.path());
    ASSERT_EQ(read.tables.size(), 2);
    const auto& t = read.tables[0];
    EXPECT_EQ(t[0].mid(0, 6), (QStringList{"candidate", "shape", "ranks", "eps", view.plot()->xAxis->label(),
                                           view.plot()->yAxis->label()}));
    ASSERT_EQ(t.size(), 4);
    for (int i = 0; i < 3; ++i) {
        const auto& c = d.candidates[i];
        EXPECT_EQ(t[i + 1][1], c.shape);
        EXPECT_EQ(t[i + 1][2], c.ranks) << "a comma inside a cell reads back";
        EXPECT_EQ(number(t[i + 1][3]), c.eps);
        EXPECT_EQ(number(t[i + 1][4]), c.ratio);
        EXPECT_EQ(number(t[i + 1][5]), c.relative_error);
        EXPECT_EQ(t[i + 1].last(), i == 1 ? "1" : "0");
    }
    // The energy bars of the selected candidate, each over the original's.
    const auto& bars = read.tables[1];
    EXPECT_EQ(bars[0], (QStringList{"series", "x", "label", "energy / original (ν·accesses + τ·ops)"}));
    ASSERT_EQ(bars.size(), 4);
    EXPECT_EQ(bars[2][2], "TT");
    EXPECT_EQ(number(bars[2][3]), view.energyBars()->data()->at(1)->value);
}

TEST(DataExport, ParameterBreakdownExportsEachPartWithItsLabel)
{
    ParameterBreakdownChart chart;
    chart.setData({{{"token embedding", 6432896}, {"attention, q/k/v", 1769472}}, 0});
    QTemporaryDir dir;
    const auto read = export_and_read(chart.dataTables(), dir.path());
    ASSERT_EQ(read.tables.size(), 1);
    const auto& t = read.tables[0];
    EXPECT_EQ(t[0], (QStringList{"series", "x", "label", "parameters (millions)"}));
    ASSERT_EQ(t.size(), 3);
    // The highlighted part is its own series; values as plotted (millions).
    QHash<QString, double> by_label;
    for (int i = 1; i < t.size(); ++i)
        by_label[t[i][2]] = number(t[i][3]);
    EXPECT_EQ(by_label.value("token embedding"), 6432896 / 1e6);
    EXPECT_EQ(by_label.value("attention, q/k/v"), 1769472 / 1e6);
}

TEST(DataExport, TokenDamageExportsEveryBucketAndRun)
{
    TokenDamageView view;
    TokenDamageData d;
    d.buckets = {"0", "1", "2-3"};
    d.runs = {{"pca rank 13",
               {100, 50, 20},
               {0, 50, 45},
               {std::nan(""), 0.25, 0.125},
               {0.3, 0.2, 0.1},
               {0.5, 0.75, 0.9},
               0.2},
              {"lle, k = 5",
               {100, 50, 20},
               {0, 50, 45},
               {std::nan(""), 0.5, 0.0625},
               {0.3, 0.4, 0.1},
               {0.6, 0.7, 0.8},
               0.3}};
    view.setData(d);
    QTemporaryDir dir;
    const auto read = export_and_read(view.dataTables(), dir.path());
    const auto& t = read.tables.value(0);
    ASSERT_EQ(t.size(), 7);
    EXPECT_EQ(t[0], (QStringList{"bucket", "run", "tokens", "positions", "mean cosine", "KL as target",
                                 "KL as input"}));
    const auto lle = where(t, 1, "lle, k = 5");
    ASSERT_EQ(lle.size(), 3);
    EXPECT_EQ(lle[2][0], "2-3");
    EXPECT_EQ(number(lle[2][5]), 0.0625);
    EXPECT_TRUE(lle[0][5].isEmpty()) << "no position: empty, not 0";
    EXPECT_EQ(number(lle[1][4]), 0.7);
}

TEST(DataExport, ParetoExportsEveryPlottedRowAndTheSelectedRowsWindows)
{
    ResultsView view;
    auto run = [](const char* method, const char* params, double ratio, double dl) {
        embedlab::RunSummary r;
        r.method = method, r.parameters = params, r.model = "/models/tiny,gpt", r.part = "token_embedding";
        r.ratio = ratio, r.delta_ln_ppl = dl, r.ppl = std::exp(dl) * 40, r.params_before = 1000;
        r.params_after = static_cast<int64_t>(ratio * 1000);
        return r;
    };
    auto a = run("pca", "rank 16", 0.125, 0.3),
         b = run("tt", "shape 4x4x8, eps 0.3, ranks 1,4,6,1", 0.0625, 0.7),
         c = run("pca", "rank 64", 0.5, 0.05);
    c.window_kl = {0.1, 0.2, 0.15};
    for (const auto& r : {a, b, c})
        view.addRow(r);
    view.setYAxis("Δ ln PPL", true);
    view.resize(900, 700);
    view.show();
    view.selectRow(2); // shows its KL per window
    QTemporaryDir dir;
    const auto read = export_and_read(view.dataTables(), dir.path(), "results.csv");
    ASSERT_EQ(read.files.size(), 2) << "the Pareto plot, then the selected row's KL per window";
    const auto& t = read.tables[0];
    EXPECT_EQ(t[0], (QStringList{"row", "method", "parameters", "model", "part",
                                 "compression ratio (compressed / original parameters)", "Δ ln PPL",
                                 "Δ ln PPL (symlog, as drawn)", "on Pareto front"}));
    ASSERT_EQ(t.size(), 4);
    for (int i = 1; i < t.size(); ++i) {
        const int row = t[i][0].toInt() - 1;
        const auto& r = view.rows()[row];
        EXPECT_EQ(t[i][1].toStdString(), r.method);
        EXPECT_EQ(t[i][2].toStdString(), r.parameters) << "commas in the parameters read back";
        EXPECT_EQ(t[i][3].toStdString(), r.model);
        EXPECT_EQ(number(t[i][5]), r.ratio);
        EXPECT_EQ(number(t[i][6]), r.delta_ln_ppl);
        EXPECT_EQ(number(t[i][7]), ResultsView::symlogOf(r.delta_ln_ppl));
        EXPECT_EQ(t[i][8], "1") << "all three are on the front";
    }
    const auto& windows = read.tables[1];
    EXPECT_EQ(windows[0], (QStringList{"series", "evaluation window", "KL (nats/token)"}));
    ASSERT_EQ(windows.size(), 4);
    EXPECT_EQ(number(windows[2][2]), 0.2);
}

// Issue 41 item 13: a deleted row comes back on undo at its place with the same
// cells (its "(repeat)" mark included), rowRestored saying where; two deletes undo
// in reverse order; clear() forgets what could be undone.
TEST(ResultsView, UndoPutsDeletedRowsBackInPlaceWithTheirCells)
{
    ResultsView view;
    auto run = [](const char* params, double ratio) {
        embedlab::RunSummary r;
        r.method = "pca", r.parameters = params, r.model = "/models/tiny", r.eval_text = "sample.txt";
        r.ratio = ratio, r.delta_ln_ppl = 1 - ratio, r.ppl = 40, r.ppl_original = 38, r.params_before = 1000;
        return r;
    };
    for (const auto& r : {run("rank 8", 0.1), run("rank 16", 0.2), run("rank 8", 0.1), run("rank 32", 0.4)})
        view.addRow(r);
    auto text = [&] { return embedlab::test::model_text(view.table()->model()); };
    const auto before = text();
    ASSERT_EQ(before.size(), 5) << "the original's row and four runs";
    EXPECT_TRUE(before[3][1].endsWith("(repeat)"));
    std::vector<int> restored;
    QObject::connect(&view, &ResultsView::rowRestored, [&](int row) { restored.push_back(row); });
    view.removeRow(2); // the repeat
    view.removeRow(0);
    ASSERT_EQ(view.rows().size(), 2u);
    EXPECT_EQ(view.rows()[0].parameters, "rank 16");
    view.undoStack()->undo();
    view.undoStack()->undo();
    EXPECT_EQ(restored, (std::vector<int>{0, 2})) << "last deleted, first restored";
    EXPECT_EQ(text(), before);
    ASSERT_EQ(view.rows().size(), 4u);
    EXPECT_EQ(view.rows()[3].parameters, "rank 32");
    EXPECT_EQ(view.series("pca")->dataCount(), 4) << "the plot has them again";
    view.undoStack()->redo();
    EXPECT_EQ(view.rows().size(), 3u) << "redo deletes again";
    view.clear();
    EXPECT_FALSE(view.undoStack()->canUndo());
}
