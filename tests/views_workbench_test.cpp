// The workbench's newer views (results, Fourier map, Tensor-Train, LLE graph)
// and figure export: each renders something, draws what it was given, and
// answers clicks and searches with the right row or token.
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QFontMetrics>
#include <QHash>
#include <QLabel>
#include <QMouseEvent>
#include <QSet>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTemporaryDir>
#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <qcustomplot.h>

#include "embedlab/method_registry.hpp"
#include "figure_export.hpp"
#include "fourier_map_view.hpp"
#include "gui_test_support.hpp"
#include "neighbour_graph_view.hpp"
#include "rank_allocation_view.hpp"
#include "render_check.hpp"
#include "results_view.hpp"
#include "spectrum_view.hpp"
#include "tensor_train_view.hpp"
#include "token_text.hpp"
#include "window_divergence_view.hpp"

using namespace embedlab::views;
using embedlab::test::render_to_png;
using embedlab::test::settle;

namespace {

ResultRow row(std::string method, std::string parameters, int64_t params, double ratio, double ppl,
              double delta, double cosine, double seconds, std::string host)
{
    ResultRow r;
    r.method = std::move(method);
    r.parameters = std::move(parameters);
    r.params_after = params;
    r.ratio = ratio;
    r.ppl = ppl;
    r.delta_ln_ppl = delta;
    r.mean_cosine = cosine;
    r.seconds = seconds;
    r.host = std::move(host);
    return r;
}

std::vector<ResultRow> three_runs()
{
    return {
        row("pca", "rank 16", 806272, 0.1254, 61.2, 0.412, 0.83, 3.5, "hostA"),
        row("tt", "shape 4x4x8, eps 0.3, ranks 1,4,6,1", 2211308, 0.344, 48.0, 0.169, 0.95, 7.25, "hostA"),
        row("pca", "rank 64", 3225000, 0.5017, 44.1, 0.081, 0.97, 3.0, "host \"B\"")};
}

// Left click at a data point's pixel, as a user would.
void click(QCustomPlot* plot, QCPAxis* x, QCPAxis* y, double key, double value)
{
    const QPointF at(x->coordToPixel(key), y->coordToPixel(value));
    QMouseEvent press(QEvent::MouseButtonPress, at, plot->mapToGlobal(at), Qt::LeftButton, Qt::LeftButton,
                      Qt::NoModifier);
    QMouseEvent release(QEvent::MouseButtonRelease, at, plot->mapToGlobal(at), Qt::LeftButton, Qt::NoButton,
                        Qt::NoModifier);
    QApplication::sendEvent(plot, &press);
    QApplication::sendEvent(plot, &release);
}

// A flat row has no embedding cosine: the table shows a dash, CSV an empty
// field, JSON null, and both read back as NaN (not 0).
TEST(ResultsView, AMissingNumberStaysMissingThroughTheExports)
{
    ResultsView view;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    view.addRow(
        row("flat", "remaining 0.5, iprs, ranks 21,13,14,16", 40000, 0.5, 31.5, 0.1, nan, 2.0, "host"));
    EXPECT_EQ(view.table()->model()->index(0, 6).data().toString(), QString::fromUtf8("\u2013"));
    // Divergence not measured: dashes in the KL and top-1 columns; measured: the numbers.
    EXPECT_EQ(view.table()->model()->headerData(9, Qt::Horizontal).toString(), "KL (nats)");
    EXPECT_EQ(view.table()->model()->index(0, 9).data().toString(), QString::fromUtf8("\u2013"));
    auto measured = row("pca", "rank 32", 40000, 0.25, 33.0, 0.2, 0.9, 1.0, "host");
    measured.kl_mean = 0.1215;
    measured.top1_agreement = 0.7624;
    view.addRow(measured);
    EXPECT_EQ(view.table()->model()->index(1, 9).data().toString(), "0.1215");
    EXPECT_EQ(view.table()->model()->index(1, 10).data().toString(), "0.7624");
    view.clear();
    view.addRow(
        row("flat", "remaining 0.5, iprs, ranks 21,13,14,16", 40000, 0.5, 31.5, 0.1, nan, 2.0, "host"));
    const auto csv = embedlab::results_csv(view.rows());
    const auto json = embedlab::results_json(view.rows());
    EXPECT_NE(csv.find(",0.10000000000000001,,2,"), std::string::npos) << csv;
    EXPECT_NE(json.find("\"cosine\": null"), std::string::npos) << json;
    for (const auto& back : {embedlab::results_from_csv(csv), embedlab::results_from_json(json)}) {
        ASSERT_EQ(back.size(), 1u);
        EXPECT_TRUE(std::isnan(back[0].mean_cosine));
        EXPECT_DOUBLE_EQ(back[0].ratio, 0.5);
        EXPECT_DOUBLE_EQ(back[0].ppl, 31.5);
    }
}

TEST(ResultsView, TableSortsNumericallyAndExportsRoundTrip)
{
    ResultsView view;
    for (const auto& r : three_runs())
        view.addRow(r);
    const auto stats = render_to_png(view, "results_view.png");
    EXPECT_GT(stats.drawn, 0.05);
    EXPECT_GT(stats.colours, 20);

    QTableView* table = view.table();
    ASSERT_EQ(table->model()->rowCount(), 3);
    table->sortByColumn(3, Qt::DescendingOrder); // ratio
    EXPECT_EQ(table->model()->index(0, 1).data().toString(), "rank 64");
    EXPECT_EQ(table->model()->index(2, 1).data().toString(), "rank 16");
    table->sortByColumn(2, Qt::AscendingOrder); // params: numbers, not text ("806,272" < "2,211,308")
    EXPECT_EQ(table->model()->index(0, 1).data().toString(), "rank 16");

    const auto csv = embedlab::results_csv(view.rows());
    const auto from_csv = embedlab::results_from_csv(csv);
    const auto from_json = embedlab::results_from_json(embedlab::results_json(view.rows()));
    ASSERT_EQ(from_csv.size(), 3u);
    ASSERT_EQ(from_json.size(), 3u);
    const auto runs = three_runs();
    for (int i = 0; i < 3; ++i)
        for (const auto& back : {from_csv[i], from_json[i]}) {
            const auto& r = runs[i];
            EXPECT_EQ(back.method, r.method);
            EXPECT_EQ(back.parameters, r.parameters); // commas survive the CSV quoting
            EXPECT_EQ(back.host, r.host);             // and so do quotes
            EXPECT_EQ(back.params_after, r.params_after);
            EXPECT_DOUBLE_EQ(back.ratio, r.ratio);
            EXPECT_DOUBLE_EQ(back.ppl, r.ppl);
            EXPECT_DOUBLE_EQ(back.delta_ln_ppl, r.delta_ln_ppl);
            EXPECT_DOUBLE_EQ(back.mean_cosine, r.mean_cosine);
            EXPECT_DOUBLE_EQ(back.seconds, r.seconds);
        }
    // The first nine columns are those of every earlier export; more follow.
    EXPECT_EQ(csv.rfind("method,parameters,params,ratio,ppl,delta_ln_ppl,cosine,seconds,host,part,", 0), 0u);
}

TEST(ResultsView, ParetoHasOneSeriesPerMethodAndAClickSelectsTheRow)
{
    ResultsView view;
    for (const auto& r : three_runs())
        view.addRow(r);
    render_to_png(view, "results_pareto.png");
    QCPCurve* pca = view.series("pca");
    ASSERT_NE(pca, nullptr);
    ASSERT_NE(view.series("tt"), nullptr);
    EXPECT_EQ(view.series("flat"), nullptr);
    ASSERT_EQ(pca->data()->size(), 2);
    EXPECT_DOUBLE_EQ(pca->data()->at(1)->key, 0.5017); // point 1 of pca is row 2
    EXPECT_DOUBLE_EQ(pca->data()->at(1)->value, 0.081);

    std::vector<int> selected;
    QObject::connect(&view, &ResultsView::rowSelected, [&](int row) { selected.push_back(row); });
    QCustomPlot* plot = view.plot();
    click(plot, plot->xAxis, plot->yAxis, 0.5017, 0.081);
    EXPECT_EQ(view.selectedRow(), 2);
    click(plot, plot->xAxis, plot->yAxis, 0.344, 0.169);
    EXPECT_EQ(view.selectedRow(), 1);
    EXPECT_EQ(selected, (std::vector<int>{2, 1}));
    // The table follows: its current row is the selected run.
    const QModelIndex current = view.table()->currentIndex();
    EXPECT_EQ(view.table()->model()->index(current.row(), 0).data().toString(), "tt");
    view.pointClicked(pca, 0);
    EXPECT_EQ(view.selectedRow(), 0);
    view.clear();
    EXPECT_EQ(view.selectedRow(), -1);
    EXPECT_EQ(view.series("pca"), nullptr);
}

TEST(ResultsView, DrawsTheParetoFrontBehindTheMethodSeries)
{
    ResultsView view;
    EXPECT_EQ(view.frontSeries()->data()->size(), 0);
    auto rows = three_runs();
    rows.push_back(
        row("svd", "rank 64", 3225000, 0.6, 47.0, 0.2, 0.96, 2.0, "hostA")); // beaten by pca rank 64
    for (const auto& r : rows)
        view.addRow(r);
    render_to_png(view, "results_pareto_front.png");
    QCPGraph* front = view.frontSeries();
    EXPECT_EQ(front->name(), "Pareto front");
    EXPECT_EQ(view.front(), (std::vector<int>{0, 1, 2}));
    ASSERT_EQ(front->data()->size(), 3);
    EXPECT_DOUBLE_EQ(front->data()->at(0)->key, 0.1254);
    EXPECT_DOUBLE_EQ(front->data()->at(2)->key, 0.5017);
    EXPECT_DOUBLE_EQ(front->data()->at(2)->value, 0.081);
    EXPECT_EQ(front->lineStyle(), QCPGraph::lsStepLeft);
    EXPECT_EQ(front->pen().style(), Qt::DashLine);
    EXPECT_TRUE(view.plot()->legend->hasItemWithPlottable(front));
    EXPECT_TRUE(view.plot()->legend->visible());
    // Behind: the same layer, drawn before every method series.
    QCPCurve* svd = view.series("svd");
    ASSERT_NE(svd, nullptr);
    ASSERT_EQ(front->layer(), svd->layer());
    const auto& drawn = front->layer()->children();
    EXPECT_LT(drawn.indexOf(front), drawn.indexOf(view.series("pca")));
    EXPECT_LT(drawn.indexOf(front), drawn.indexOf(svd));
    // A click on the dominated svd point still selects its row, not the front.
    QCustomPlot* plot = view.plot();
    click(plot, plot->xAxis, plot->yAxis, 0.6, 0.2);
    EXPECT_EQ(view.selectedRow(), 3);
    view.clear();
    EXPECT_EQ(front->data()->size(), 0);
    EXPECT_FALSE(view.plot()->legend->hasItemWithPlottable(front));
    EXPECT_FALSE(view.plot()->legend->visible());
}

// Issue 23 item 2: rows of different models never share a table view, a plot or
// a front unasked, and a flat row (ratio of the attention values) has a front of
// its own beside the embedding methods'.
TEST(ResultsView, FrontsArePerModelAndPerCompressedPart)
{
    ResultsView view;
    auto a = three_runs();
    for (auto& r : a)
        r.model = "/models/tinygpt2-f16";
    for (const auto& r : a)
        view.addRow(r);
    auto flat = row("flat", "remaining 0.5", 1000, 0.05, 45.0, 0.05, NAN, 9.0, "hostA");
    flat.model = "/models/tinygpt2-f16";
    flat.part = "attention_values";
    view.addRow(flat); // would dominate every embedding row if it shared their front
    EXPECT_EQ(view.modelFilter(), "") << "one model: every row";
    ASSERT_EQ(view.shownGroups().size(), 2u);
    EXPECT_EQ(view.front(), (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(view.shownGroups()[1].front, (std::vector<int>{3}));
    EXPECT_EQ(view.shownGroups()[1].part, "attention_values");

    auto b = row("pca", "rank 8", 400000, 0.06, 300.0, 1.9, 0.7, 2.0, "hostA");
    b.model = "/models/stories260K.gguf";
    const int b_row = view.addRow(b);
    // A second model: the view shows the model just run, alone.
    EXPECT_EQ(view.modelFilter(), "/models/stories260K.gguf");
    EXPECT_EQ(view.table()->model()->rowCount(), 1);
    EXPECT_EQ(view.table()->model()->index(0, 12).data().toString(), "stories260K.gguf");
    ASSERT_EQ(view.shownGroups().size(), 1u);
    EXPECT_EQ(view.front(), (std::vector<int>{b_row}));
    ASSERT_NE(view.series("pca"), nullptr);
    EXPECT_EQ(view.series("pca")->data()->size(), 1);
    EXPECT_EQ(view.series("tt"), nullptr);

    // Every model: one front per model and part, named by model.
    view.setModelFilter("");
    EXPECT_EQ(view.table()->model()->rowCount(), 5);
    ASSERT_EQ(view.shownGroups().size(), 3u);
    EXPECT_EQ(view.frontSeries()->name(), "Pareto front — tinygpt2-f16");
    view.setModelFilter("/models/tinygpt2-f16");
    EXPECT_EQ(view.table()->model()->rowCount(), 4);
    EXPECT_EQ(view.series("pca")->data()->size(), 2);
    render_to_png(view, "results_per_model.png");
}

// The teaching panel: a "What am I seeing" label with the method's formula.
QString about_text(const QWidget& view)
{
    for (auto* label : view.findChildren<QLabel*>())
        if (label->text().contains("What am I seeing"))
            return label->text();
    return {};
}

TEST(TeachingPanels, SpectrumAndAllocationExplainTheirMethod)
{
    SpectrumView spectrum;
    const QString pca = about_text(spectrum);
    EXPECT_TRUE(pca.contains("1μ + Z P")) << pca.toStdString();
    EXPECT_TRUE(pca.contains("V k + k d + d")) << pca.toStdString();
    RankAllocationView allocation;
    const QString iprs = about_text(allocation);
    EXPECT_TRUE(iprs.contains("arccos(cos(x<sub>in</sub>, x<sub>out</sub>)) / π")) << iprs.toStdString();
    EXPECT_TRUE(iprs.contains("L(1 − s)")) << iprs.toStdString();
}

TEST(FourierMapView, DrawsAHeatmapPerMatrixAndTheChosenDimension)
{
    FourierMapView view;
    auto data = embedlab::test::smooth_and_rough_maps(64, 16);
    data.note = "no fitted fourier model";
    view.setData(data);
    const auto stats = render_to_png(view, "fourier_map_view.png");
    EXPECT_GT(stats.drawn, 0.2);
    EXPECT_GT(stats.colours, 50);
    QList<QCPColorMap*> maps;
    for (int i = 0; i < view.plot()->plottableCount(); ++i)
        if (auto* m = qobject_cast<QCPColorMap*>(view.plot()->plottable(i)))
            maps << m;
    ASSERT_EQ(maps.size(), 2);
    EXPECT_EQ(maps[0]->data()->keySize(), 64);
    EXPECT_EQ(maps[0]->data()->valueSize(), 16);
    EXPECT_DOUBLE_EQ(maps[1]->data()->cell(3, 5), ((3 * 7 + 5 * 13) % 11 - 5) / 5.0);
    EXPECT_EQ(maps[0]->keyAxis()->range().lower, 99.5); // ids 100..163

    view.setDimension(5);
    EXPECT_EQ(view.dimension(), 5);
    QCPGraph* line = view.plot()->graph(0); // T at dimension 5 against the id
    ASSERT_EQ(line->data()->size(), 64);
    EXPECT_DOUBLE_EQ(line->data()->at(10)->key, 110);
    EXPECT_DOUBLE_EQ(line->data()->at(10)->value, std::sin(3 * 3.14159 * 10 / 64));
    EXPECT_EQ(line->keyAxis()->axisRect(), view.lineRect());
    view.setDimension(999);
    EXPECT_EQ(view.dimension(), 15);
    EXPECT_TRUE(view.summary().contains("T 0.9900")) << view.summary().toStdString();
    EXPECT_TRUE(view.summary().contains("original 0.1000"));
    view.setData({});
    EXPECT_EQ(view.summary(), "no token map");
}

TEST(TensorTrainView, PlotsErrorAgainstRatioPerShapeAndEnergyBars)
{
    TensorTrainView view;
    view.setData(embedlab::test::tensor_train_candidates());
    const auto stats = render_to_png(view, "tensor_train_view.png");
    EXPECT_GT(stats.drawn, 0.05);
    EXPECT_EQ(view.selected(), 0);
    ASSERT_EQ(view.energyBars()->data()->size(), 3);
    EXPECT_DOUBLE_EQ(view.energyBars()->data()->at(0)->value, 1.0);
    EXPECT_DOUBLE_EQ(view.energyBars()->data()->at(1)->value, 0.36);
    EXPECT_DOUBLE_EQ(view.energyBars()->data()->at(2)->value, 0.5);
    // Click the second shape's eps 0.5 point: candidate 5.
    click(view.plot(), view.plot()->xAxis, view.plot()->yAxis, 0.25, 0.5);
    EXPECT_EQ(view.selected(), 5);
    EXPECT_TRUE(view.summary().contains("shape 4x4x8, eps 0.5")) << view.summary().toStdString();
    EXPECT_DOUBLE_EQ(view.energyBars()->data()->at(1)->value, 0.2);
    // Without the model's counts the engine's energies stand, whatever nu says.
    view.nuSpin()->setValue(2);
    EXPECT_DOUBLE_EQ(view.energyBars()->data()->at(1)->value, 0.2);
    EXPECT_TRUE(view.summary().contains("the engine's ν 5, τ 1")) << view.summary().toStdString();
    view.setData({});
    EXPECT_EQ(view.summary(), "no Tensor-Train candidates");
}

TEST(TensorTrainView, NuAndTauReWeighTheEnergyBarsLive)
{
    TensorTrainCandidate c{"8x16", "1,4,1", 0.3, 0.2, 0.25, 0.9, 10, 0, 0, 0};
    c.accesses_original = 1000;
    c.operations_original = 0; // a lookup: memory only
    c.accesses_tt = 200;
    c.operations_tt = 300;
    c.accesses_svd = 250;
    c.operations_svd = 400;
    TensorTrainData d;
    d.candidates = {c};
    TensorTrainView view;
    view.setData(d);
    EXPECT_DOUBLE_EQ(view.nu(), 5);
    EXPECT_DOUBLE_EQ(view.tau(), 1);
    auto expect_bars = [&](double nu, double tau) {
        const double original = nu * 1000 + tau * 0;
        ASSERT_EQ(view.energyBars()->data()->size(), 3);
        EXPECT_DOUBLE_EQ(view.energyBars()->data()->at(0)->value, 1.0);
        EXPECT_DOUBLE_EQ(view.energyBars()->data()->at(1)->value, (nu * 200 + tau * 300) / original);
        EXPECT_DOUBLE_EQ(view.energyBars()->data()->at(2)->value, (nu * 250 + tau * 400) / original);
    };
    expect_bars(5, 1); // 0.26, 0.33
    EXPECT_TRUE(view.summary().contains("ω = E_TT / E_original = 0.2600")) << view.summary().toStdString();
    view.nuSpin()->setValue(2); // as the user would: the bars follow at once
    expect_bars(2, 1);          // 0.35, 0.45
    EXPECT_DOUBLE_EQ(view.energyBars()->data()->at(1)->value, 0.35);
    view.tauSpin()->setValue(3);
    expect_bars(2, 3); // 0.65, 0.85
    EXPECT_TRUE(view.summary().contains("ν 2, τ 3: ω = E_TT / E_original = 0.6500"))
        << view.summary().toStdString();
    EXPECT_GE(view.energyBars()->valueAxis()->range().upper, 1.0);
    view.setWeights(5, 1);
    expect_bars(5, 1);
    EXPECT_DOUBLE_EQ(view.nuSpin()->value(), 5);

    const auto e = weighedEnergy(c, 5, 1);
    EXPECT_DOUBLE_EQ(e.original, 5000);
    EXPECT_DOUBLE_EQ(e.tt, 1300);
    EXPECT_DOUBLE_EQ(e.svd, 1650);
    EXPECT_TRUE(view.nuSpin()->toolTip().contains("E = ν · memory accesses + τ · arithmetic operations"));
    EXPECT_TRUE(about_text(view).contains("E = ν · memory accesses + τ · operations"))
        << about_text(view).toStdString();
    const auto stats = render_to_png(view, "tensor_train_weights.png");
    EXPECT_GT(stats.drawn, 0.05);
}

// 50k tokens: 2k common on a circle, 48k rare in a disc; rare token r's
// neighbours are the k common tokens after it.
NeighbourGraphData fifty_thousand_tokens(int k)
{
    auto d = embedlab::test::spiral_neighbour_graph(50000, 2000, k);
    d.histogram = QVector<double>(40, 1200);
    return d;
}

TEST(NeighbourGraphView, FiftyThousandPointsInAFewGraphsAndEdgesForTheChosenToken)
{
    NeighbourGraphView view;
    view.setData(fifty_thousand_tokens(5));
    const auto stats = render_to_png(view, "neighbour_graph_view.png");
    EXPECT_GT(stats.drawn, 0.1);
    EXPECT_GT(stats.colours, 20);
    // One graph for common tokens, five cosine bands, one for the selection: no per-point items.
    EXPECT_EQ(view.plot()->graphCount(), 7);
    EXPECT_EQ(view.plot()->itemCount(), 0);
    int points = 0;
    for (int g = 0; g < 6; ++g)
        points += view.plot()->graph(g)->data()->size();
    EXPECT_EQ(points, 50000);

    EXPECT_FALSE(view.selectToken(10)); // common
    EXPECT_EQ(view.selectedToken(), -1);
    ASSERT_TRUE(view.search("tok2007"));
    EXPECT_EQ(view.selectedToken(), 2007);
    // k edges, k + 1 labels and each label's leader line (shown only for a label placed apart)
    EXPECT_EQ(view.plot()->itemCount(), 5 + 6 + 6);
    auto* edge = qobject_cast<QCPItemLine*>(view.plot()->item(0));
    ASSERT_NE(edge, nullptr);
    EXPECT_DOUBLE_EQ(edge->end->coords().x(), view.data().x[7]); // rare slot 7's first neighbour is 7
    EXPECT_TRUE(view.summary().contains("reconstruction cosine 0.3490")) << view.summary().toStdString();
    ASSERT_TRUE(view.search("30000"));
    EXPECT_EQ(view.selectedToken(), 30000);
    EXPECT_FALSE(view.search("no such token"));
    // A click on a rare point picks it.
    const QPointF at(view.plot()->xAxis->coordToPixel(view.data().x[45000]),
                     view.plot()->yAxis->coordToPixel(view.data().y[45000]));
    const int hit = view.rareTokenAt(at, 1.0);
    EXPECT_EQ(hit, 45000);
}

// The rare token farthest towards the scatter's top-left corner, where an inset
// legend would sit.
int top_left_rare(const NeighbourGraphData& d)
{
    int best = d.rare[0];
    for (int id : d.rare)
        if (d.y[id] - d.x[id] > d.y[best] - d.x[best])
            best = id;
    return best;
}

QVector<QCPItemText*> labels(QCustomPlot* plot)
{
    QVector<QCPItemText*> out;
    for (int i = 0; i < plot->itemCount(); ++i)
        if (auto* text = qobject_cast<QCPItemText*>(plot->item(i)))
            out << text;
    return out;
}

// Issue 23 item 7: " the" and "the" are different tokens and look different;
// whitespace tokens are escaped in labels, and search is exact.
TEST(NeighbourGraphView, TokensAreShownEscapedAndSearchedExactly)
{
    NeighbourGraphData d;
    d.tokens = {"a", "b", "the", " the", "\n", "x\ty"};
    d.x = {0, 1, 2, 3, 4, 5};
    d.y = {0, 1, 0, 1, 0, 1};
    d.common = {0, 1};
    d.rare = {2, 3, 4, 5};
    d.k = 2;
    d.neighbours = {0, 1, 0, 1, 0, 1, 0, 1};
    d.weights = {0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
    d.cosine = {0.9, 0.8, 0.7, 0.6};
    d.histogram = {4};
    NeighbourGraphView view;
    view.setData(d);
    ASSERT_TRUE(view.search(" the"));
    EXPECT_EQ(view.selectedToken(), 3);
    ASSERT_TRUE(view.search("the"));
    EXPECT_EQ(view.selectedToken(), 2);
    ASSERT_TRUE(view.search(QString::fromUtf8("\u2423the"))); // the notation the labels use
    EXPECT_EQ(view.selectedToken(), 3);
    EXPECT_TRUE(view.summary().contains(QString::fromUtf8("'\u2423the'"))) << view.summary().toStdString();
    ASSERT_TRUE(view.search("\\n"));
    EXPECT_EQ(view.selectedToken(), 4);
    EXPECT_TRUE(view.summary().contains("'\\n'")) << view.summary().toStdString();
    EXPECT_FALSE(view.summary().contains('\n'));
    for (int i = 0; i < view.plot()->itemCount(); ++i) {
        if (auto* label = qobject_cast<QCPItemText*>(view.plot()->item(i))) {
            EXPECT_FALSE(label->text().contains('\n')) << "a label never breaks";
        }
    }
    ASSERT_TRUE(view.search("x\\ty"));
    EXPECT_EQ(view.selectedToken(), 5);
    EXPECT_TRUE(view.search("4")) << "an id";
    EXPECT_FALSE(view.search("a")) << "common";
    EXPECT_EQ(embedlab::views::escaped_token("\x01 a\\"), QString::fromUtf8("\\x01\u2423a\\\\"));
    EXPECT_EQ(embedlab::views::unescaped_token(embedlab::views::escaped_token("\x01 a\\\t\r")),
              "\x01 a\\\t\r");
}

TEST(NeighbourGraphView, LegendSitsOutsideTheScatterSoItNeverHidesTheSelection)
{
    NeighbourGraphView view;
    view.setData(fifty_thousand_tokens(5));
    const int chosen = top_left_rare(view.data());
    ASSERT_TRUE(view.selectToken(chosen));
    render_to_png(view, "neighbour_graph_legend.png");
    QCustomPlot* plot = view.plot();
    QCPAxisRect* scatter = plot->axisRect();
    ASSERT_NE(scatter, view.histogramRect());
    ASSERT_TRUE(plot->legend->visible());
    EXPECT_GE(plot->legend->itemCount(), 1); // common tokens; the rare ones' colours: the colour bar
    for (const QSize size : {QSize(1000, 700), QSize(336, 208)}) { // the window, and a single-column figure
        plot->toPixmap(size.width(), size.height());               // lays the plot out at that size
        const QRect legend = plot->legend->outerRect();
        EXPECT_FALSE(legend.isEmpty());
        EXPECT_FALSE(legend.intersects(scatter->rect())) << size.width();
        const auto texts = labels(plot);
        ASSERT_EQ(texts.size(), 6); // the chosen token and its 5 neighbours
        for (auto* text : texts) {
            const QPointF at = text->position->pixelPosition();
            EXPECT_TRUE(scatter->rect().contains(at.toPoint())); // the labels are on the scatter ...
            EXPECT_FALSE(legend.contains(at.toPoint()));         // ... and none under the legend
        }
        const QPointF token(scatter->axis(QCPAxis::atBottom)->coordToPixel(view.data().x[chosen]),
                            scatter->axis(QCPAxis::atLeft)->coordToPixel(view.data().y[chosen]));
        EXPECT_FALSE(legend.contains(token.toPoint()));
    }
}

TEST(NeighbourGraphView, HistogramLabelFitsASingleColumnFigure)
{
    NeighbourGraphView view;
    view.setData(fifty_thousand_tokens(5));
    ASSERT_TRUE(view.search("tok2007"));
    render_to_png(view, "neighbour_graph_window.png");
    QCustomPlot* plot = view.plot();
    const int width = qRound(kSingleColumnInches * 96), height = qRound(kSingleColumnInches * 0.62 * 96);
    plot->toPixmap(width, height); // the layout exportFigure uses at this preset
    QCPAxis* axis = view.histogramRect()->axis(QCPAxis::atBottom);
    const QRect inner = view.histogramRect()->rect();
    // QCustomPlot centres the label on the axis; its box is what the text needs.
    QRect label = QFontMetrics(axis->labelFont()).boundingRect(QRect(), Qt::TextDontClip, axis->label());
    label.moveCenter(QPoint(inner.center().x(), label.center().y()));
    EXPECT_GE(label.left(), 0) << label.left();
    EXPECT_LE(label.right(), width - 1) << label.right() << " of " << width;
    EXPECT_LE(label.width(), inner.width());
    EXPECT_LE(view.histogramRect()->outerRect().bottom(), height);

    // The exported figure: nothing is cut at its right edge, where the label used to be.
    const FigureOptions o{.width_in = kSingleColumnInches, .aspect = 0.62, .dpi = 150, .publication = true};
    ASSERT_EQ(exportFigure(plot, "neighbour_graph_single_column.png", o), ""); // kept next to the binary
    const QImage png = QImage("neighbour_graph_single_column.png").convertToFormat(QImage::Format_RGB32);
    ASSERT_FALSE(png.isNull());
    int dark = 0;
    for (int y = 0; y < png.height(); ++y)
        for (int x = png.width() - 3; x < png.width(); ++x)
            dark += qGray(png.pixel(x, y)) < 160;
    EXPECT_EQ(dark, 0);
}

TEST(FigureExport, WritesPngAtTheDpiPdfAndSvgAndRestoresTheStyle)
{
    TensorTrainView view;
    TensorTrainData d;
    d.candidates.push_back({"8x16", "1,4,1", 0.3, 0.2, 0.25, 0.9, 10, 100, 30, 40});
    view.setData(d);
    QCustomPlot* plot = view.plot();
    const QFont before = plot->xAxis->labelFont();
    const QImage rendered = plot->toPixmap(400, 300).toImage();
    QTemporaryDir dir;
    FigureOptions o{.width_in = kSingleColumnInches, .aspect = 0.6, .dpi = 300, .publication = true};
    ASSERT_EQ(exportFigure(plot, dir.filePath("f.png"), o), "");
    const QImage png(dir.filePath("f.png"));
    EXPECT_EQ(png.width(), 1050);      // 3.5 in at 300 dpi
    EXPECT_NEAR(png.height(), 630, 1); // 2.1 in, to the pixel the logical layout rounds to
    EXPECT_NEAR(png.dotsPerMeterX() * 0.0254, 300, 1);
    o.width_in = kDoubleColumnInches;
    ASSERT_EQ(exportFigure(plot, dir.filePath("f.pdf"), o), "");
    ASSERT_EQ(exportFigure(plot, dir.filePath("f.svg"), o), "");
    QFile pdf(dir.filePath("f.pdf")), svg(dir.filePath("f.svg"));
    ASSERT_TRUE(pdf.open(QIODevice::ReadOnly));
    ASSERT_TRUE(svg.open(QIODevice::ReadOnly));
    EXPECT_TRUE(pdf.read(5) == "%PDF-");
    const QByteArray svg_text = svg.readAll();
    EXPECT_TRUE(svg_text.contains("<svg"));
    EXPECT_TRUE(svg_text.contains("relative error")) << "axis labels are text in the SVG";
    EXPECT_EQ(plot->xAxis->labelFont(), before);
    // Issue 23 item 1: the background came back as an empty texture brush, so the plot
    // stopped clearing (old marks piled up, other tabs showed through).
    EXPECT_TRUE(plot->toPixmap(400, 300).toImage() == rendered)
        << "the plot renders differently after an export";
    EXPECT_TRUE(exportFigure(plot, dir.filePath("f.bmp"), o).contains("unknown figure format"));
    EXPECT_EQ(QDir(dir.path()).entryList(QDir::Files).size(), 3); // nothing half-written
}

} // namespace

// Issue 23 item 10: hover on the neighbour graph names the token and its id, on
// the Pareto plot the run, on the TT plot the candidate.
TEST(Hover, NeighboursResultsAndTensorTrainSayWhatIsUnderTheCursor)
{
    NeighbourGraphView graph;
    auto data = fifty_thousand_tokens(5);
    graph.setData(data);
    settle(graph);
    const int rare = data.rare[7], common = data.common[3];
    auto pixel = [&](int id) {
        return QPointF(graph.plot()->xAxis->coordToPixel(data.x[id]),
                       graph.plot()->yAxis->coordToPixel(data.y[id]));
    };
    const QString on_rare = graph.hoverText(pixel(rare));
    EXPECT_TRUE(on_rare.contains(QString("id %1").arg(rare))) << on_rare.toStdString();
    EXPECT_TRUE(on_rare.contains("rare, rebuilt with cosine")) << on_rare.toStdString();
    const QString on_common = graph.hoverText(pixel(common));
    EXPECT_TRUE(on_common.contains(": common")) << on_common.toStdString();

    ResultsView results;
    for (const auto& r : three_runs())
        results.addRow(r);
    settle(results);
    QCustomPlot* p = results.plot();
    EXPECT_EQ(results.hoverText(QPointF(p->xAxis->coordToPixel(0.344), p->yAxis->coordToPixel(0.169))),
              QString::fromUtf8(
                  "tt shape 4x4x8, eps 0.3, ranks 1,4,6,1: ratio 0.3440, PPL 48, \u0394 ln PPL 0.1690 "
                  "((unknown model))"));

    TensorTrainView tt;
    TensorTrainData candidates;
    candidates.candidates = {
        {.shape = "4x4x8", .ranks = "1,4,7,1", .eps = 0.3, .ratio = 1.44, .relative_error = 0.1},
        {.shape = "4x4x8", .ranks = "1,3,4,1", .eps = 0.7, .ratio = 0.67, .relative_error = 0.3}};
    tt.setData(candidates);
    settle(tt);
    QCustomPlot* t = tt.plot();
    EXPECT_EQ(
        tt.hoverText(QPointF(t->xAxis->coordToPixel(1.44), t->yAxis->coordToPixel(0.1))),
        "shape 4x4x8, eps 0.3, ranks 1,4,7,1: ratio 1.4400 (larger than the table), relative error 0.1000");
}

// Issue 23 item 12: the original model's row is in the table with the first run
// of a model on a text; a run repeating earlier settings is marked; a row can be
// deleted (later indices move down, and the view says so).
TEST(ResultsView, BaselineRowRepeatsMarkedAndRowsDeleted)
{
    ResultsView view;
    auto runs = three_runs();
    for (auto& r : runs) {
        r.model = "/models/tinygpt2-f16";
        r.eval_text = "sample.txt";
        r.params_before = 6432896;
        r.ppl_original = 40.0;
    }
    for (const auto& r : runs)
        view.addRow(r);
    view.addRow(runs[0]); // the same settings again
    auto* table = view.table()->model();
    ASSERT_EQ(table->rowCount(), 5) << "the original's row and four runs";
    EXPECT_EQ(table->index(0, 0).data().toString(), "original");
    EXPECT_EQ(table->index(0, 3).data().toString(), "1.0000");
    EXPECT_EQ(table->index(0, 4).data().toString(), "40.000");
    EXPECT_EQ(view.rows().size(), 4u) << "the original is not a run";
    EXPECT_EQ(table->index(4, 1).data().toString(), "rank 16 (repeat)");
    EXPECT_FALSE(table->index(1, 1).data().toString().contains("repeat"));

    std::vector<int> removed;
    QObject::connect(&view, &ResultsView::rowRemoved, [&](int row) { removed.push_back(row); });
    view.selectRow(2);
    view.removeRow(1);
    EXPECT_EQ(removed, std::vector<int>{1});
    ASSERT_EQ(view.rows().size(), 3u);
    EXPECT_EQ(view.rows()[1].parameters, "rank 64");
    EXPECT_EQ(view.selectedRow(), 1) << "the selection follows its row";
    EXPECT_EQ(table->rowCount(), 4);
    EXPECT_EQ(view.series("tt"), nullptr);
}

// Issue 19 item 5 / issue 23 item 10: the Pareto plot's y axis can be KL, 1 − top-1
// or PPL instead of Δ ln PPL, on a symlog scale so one far-off run (a failed fit at
// Δ ln PPL 30) does not squash the others; the fronts follow the metric.
TEST(ResultsView, TheParetoYAxisTakesAnyMetricOnASymlogScale)
{
    ResultsView view;
    auto rows = three_runs();
    rows[0].kl_mean = 0.30, rows[1].kl_mean = 0.05, rows[2].kl_mean = 0.20; // rank 64 has more KL than tt
    rows[0].top1_agreement = 0.6, rows[1].top1_agreement = 0.9, rows[2].top1_agreement = 0.8;
    auto outlier = row("fourier", "steps 10", 1000, 0.01, 1e13, 30.0, 0.1, 1.0, "hostA");
    for (const auto& r : rows)
        view.addRow(r);
    view.addRow(outlier);
    EXPECT_EQ(view.front(), (std::vector<int>{3, 0, 1, 2})) << "by delta ln PPL";

    view.setYAxis("KL (nats)", false);
    QCPCurve* pca = view.series("pca");
    ASSERT_NE(pca, nullptr);
    EXPECT_DOUBLE_EQ(pca->data()->at(1)->value, 0.20);
    EXPECT_EQ(view.front(), (std::vector<int>{0, 1})) << "rank 64 is beaten on KL by tt; fourier has no KL";
    EXPECT_EQ(view.plot()->yAxis->label(), "KL (nats)");

    view.setYAxis("1 − top-1 agreement", false);
    EXPECT_NEAR(view.series("tt")->data()->at(0)->value, 0.1, 1e-12);

    view.setYAxis("Δ ln PPL", true);
    EXPECT_DOUBLE_EQ(ResultsView::symlogOf(0), 0.0);
    EXPECT_DOUBLE_EQ(ResultsView::symlogOf(-0.01), -std::log10(2.0));
    EXPECT_DOUBLE_EQ(view.series("fourier")->data()->at(0)->value, ResultsView::symlogOf(30.0));
    EXPECT_LT(view.plot()->yAxis->range().upper, 4.0) << "the outlier sits at about 3.5, not 30";
    EXPECT_EQ(view.plot()->yAxis->label(), "Δ ln PPL (symlog)");
    render_to_png(view, "results_symlog.png");
}

// Issue 38 item 4: the x axis is the bytes ratio by default, where a quantised table
// (values ratio 1) sits at its bits over the input's and a factorisation is read against
// it at equal bytes: the quantised tables are a baseline, joined by a dashed line in
// order of bytes. The bytes column; rows without bytes (here flat) are left off that
// axis, and its label says so; the values ratio is one choice away.
TEST(ResultsView, TheParetoXAxisTakesTheBytesAsStored)
{
    ResultsView view;
    view.setBaselineMethods({"quant"});
    auto pca = row("pca", "rank 18", 578432, 0.1412, 133.08, 0.4619, 0.46, 0.1, "hostA");
    pca.bytes_before = 16384000, pca.bytes_after = 2313728;
    auto q8 = row("quant", "type q8_0", 4096000, 1.0, 83.87, 0.0001, 0.9999, 0.1, "hostA");
    q8.bytes_before = 16384000, q8.bytes_after = 4352000;
    auto q4 = row("quant", "type q4_0", 4096000, 1.0, 84.44, 0.0070, 0.996, 0.1, "hostA");
    q4.bytes_before = 16384000, q4.bytes_after = 2304000;
    auto flat = row("flat", "remaining 0.5", 100000, 0.5, 90.0, 0.07, 0.9, 1.0, "hostA"); // no bytes
    for (auto* r : {&pca, &q8, &q4, &flat})
        r->params_before = 4096000, r->ppl_original = 83.86, r->model = "tinyllama", r->eval_text = "t.txt";
    flat.part = "attention_values";
    for (const auto& r : {pca, q8, q4, flat})
        view.addRow(r);
    EXPECT_DOUBLE_EQ(view.series("quant")->data()->at(1)->key, 2304000.0 / 16384000) << "bytes by default";
    EXPECT_EQ(view.series("quant")->name(), "quant (baseline)");
    EXPECT_EQ(view.baselineLine("pca"), nullptr);
    QCPGraph* line = view.baselineLine("quant");
    ASSERT_NE(line, nullptr);
    ASSERT_EQ(line->data()->size(), 2);
    EXPECT_DOUBLE_EQ(line->data()->at(0)->key, 2304000.0 / 16384000) << "in order of bytes: q4_0 first";
    EXPECT_DOUBLE_EQ(line->data()->at(1)->value, 0.0001);
    EXPECT_TRUE(view.plot()->xAxis->label().endsWith("1 run without bytes not drawn"))
        << view.plot()->xAxis->label().toStdString();
    view.setXAxis("parameter ratio");
    EXPECT_DOUBLE_EQ(view.series("quant")->data()->at(1)->key, 1.0) << "the values ratio when chosen";
    EXPECT_TRUE(view.plot()->xAxis->label().startsWith("compression ratio"));
    view.addRow(q4);
    EXPECT_DOUBLE_EQ(view.series("quant")->data()->at(2)->key, 1.0) << "a chosen axis stays";
    view.removeRow(4);
    view.setXAxis("bytes ratio");
    EXPECT_DOUBLE_EQ(view.series("quant")->data()->at(1)->key, 2304000.0 / 16384000);
    EXPECT_DOUBLE_EQ(view.series("pca")->data()->at(0)->key, 2313728.0 / 16384000);
    EXPECT_TRUE(std::isnan(view.series("flat")->data()->at(0)->key)) << "flat has no bytes";
    EXPECT_EQ(view.front(), (std::vector<int>{2, 1})) << "q4_0 beats pca k 18 at fewer bytes";
    EXPECT_TRUE(view.plot()->xAxis->label().startsWith("bytes ratio"));
    auto* table = view.table()->model();
    const int bytes = table->columnCount() - 1;
    EXPECT_EQ(table->headerData(bytes, Qt::Horizontal).toString(), "bytes");
    EXPECT_EQ(table->index(3, bytes).data(Qt::ToolTipRole).toString(),
              "bytes ratio 0.1406 (before: 16384000)");
    EXPECT_EQ(table->index(5, 0).data().toString(), "flat");
    EXPECT_EQ(table->index(5, bytes).data().toString(), "") << "flat's bytes are not known";

    // Bits per byte (issue 60): its own column beside bytes, the original's in the tooltip,
    // and a y axis of its difference from the original.
    ResultsView bpb;
    auto tokens = pca;
    tokens.bits_per_byte = 1.25, tokens.bits_per_byte_original = 1.125;
    bpb.addRow(tokens);
    auto* cells = bpb.table()->model();
    const int bits = cells->columnCount() - 2;
    EXPECT_EQ(cells->headerData(bits, Qt::Horizontal).toString(), "bits/byte");
    EXPECT_EQ(cells->index(0, 0).data().toString(), "original");
    EXPECT_EQ(cells->index(0, bits).data().toString(), "1.1250");
    EXPECT_EQ(cells->index(1, bits).data().toString(), "1.2500");
    EXPECT_EQ(cells->index(1, bits).data(Qt::ToolTipRole).toString(), "the original: 1.1250");
    bpb.setYAxis("Δ bits per byte", false);
    EXPECT_DOUBLE_EQ(bpb.series("pca")->data()->at(0)->value, 0.125);

    // The user's pick in the x axis box (the keyboard, as a user picks it) holds at once:
    // it once lost its first pick to the default rule, which redrew before `activated`.
    ResultsView picked;
    picked.addRow(pca);
    QComboBox* x_box = nullptr;
    for (auto* box : picked.findChildren<QComboBox*>())
        if (box->findText("parameter ratio") >= 0)
            x_box = box;
    ASSERT_NE(x_box, nullptr);
    ASSERT_EQ(x_box->currentText(), "bytes ratio");
    embedlab::test::press_key(x_box, Qt::Key_Up);
    EXPECT_EQ(x_box->currentText(), "parameter ratio");
    EXPECT_DOUBLE_EQ(picked.series("pca")->data()->at(0)->key, 0.1412) << "the values ratio, as picked";
    picked.addRow(q4);
    EXPECT_EQ(x_box->currentText(), "parameter ratio") << "a picked axis stays";

    ResultsView values_only; // rows without bytes (files from before issue 38): the values ratio
    values_only.addRow(flat);
    EXPECT_DOUBLE_EQ(values_only.series("flat")->data()->at(0)->key, 0.5);
    EXPECT_TRUE(values_only.plot()->xAxis->label().startsWith("compression ratio"));
    render_to_png(view, "results_bytes_axis.png");
}

// Issue 19 item 5: the task accuracy column (and the original's beside it), the
// Pareto plot's "1 − task accuracy" axis, and the selected row's KL per window.
TEST(ResultsView, ShowsTaskAccuracyAndTheSelectedRowsKlPerWindow)
{
    ResultsView view;
    auto measured = row("pca", "rank 16", 40000, 0.25, 33.0, 0.2, 0.9, 1.0, "host");
    measured.model = "m";
    measured.params_before = 160000;
    measured.ppl_original = 30.0;
    measured.kl_mean = 0.12;
    measured.top1_agreement = 0.8;
    measured.window_kl = {0.1, 0.3, 0.05, 0.2, 0.15};
    measured.window_top1 = {0.9, 0.6, 0.95, 0.7, 0.8};
    measured.task = "sst2";
    measured.task_accuracy = 0.515;
    measured.task_accuracy_original = 0.53;
    measured.task_n = 200;
    auto plain = row("svd", "rank 16", 40000, 0.25, 34.0, 0.25, 0.9, 1.0, "host");
    plain.model = "m";
    plain.params_before = 160000;
    plain.ppl_original = 30.0;
    view.addRow(plain); // the original's row comes first, before any task was measured
    view.addRow(measured);
    auto* table = view.table()->model();
    EXPECT_EQ(table->headerData(11, Qt::Horizontal).toString(), "task acc");
    ASSERT_EQ(table->rowCount(), 3);
    EXPECT_EQ(table->index(0, 0).data().toString(), "original");
    EXPECT_EQ(table->index(0, 11).data().toString(), "0.5300") << "the original's accuracy, filled in later";
    EXPECT_EQ(table->index(1, 11).data().toString(), QString::fromUtf8("\u2013")) << "no task measured";
    EXPECT_EQ(table->index(2, 11).data().toString(), "0.5150");
    EXPECT_TRUE(table->index(2, 11).data(Qt::ToolTipRole).toString().contains("sst2 on 200 examples"));
    // The y axis may show the task: 1 - accuracy (lower is better, as for every choice).
    view.setYAxis(QString::fromUtf8("1 − task accuracy"), false);
    EXPECT_EQ(view.plot()->yAxis->label(), QString::fromUtf8("1 − task accuracy"));
    ASSERT_NE(view.series("pca"), nullptr);
    ASSERT_EQ(view.series("pca")->dataCount(), 1);
    EXPECT_NEAR(view.series("pca")->data()->at(0)->value, 0.485, 1e-12);

    // Selecting the measured row plots one point per evaluation window.
    auto* windows = view.windowView();
    ASSERT_NE(windows, nullptr);
    EXPECT_EQ(windows->klGraph()->dataCount(), 0);
    EXPECT_FALSE(windows->isVisibleTo(&view)) << "nothing selected: no empty plot";
    view.selectRow(1);
    EXPECT_TRUE(windows->isVisibleTo(&view));
    ASSERT_EQ(windows->klGraph()->dataCount(), 5);
    EXPECT_EQ(windows->top1Graph()->dataCount(), 5);
    EXPECT_DOUBLE_EQ(windows->klGraph()->data()->at(1)->value, 0.3);
    EXPECT_DOUBLE_EQ(windows->top1Graph()->data()->at(4)->value, 0.8);
    EXPECT_TRUE(windows->note().contains("5 evaluation windows")) << windows->note().toStdString();
    view.selectRow(0); // no divergence measured: an empty plot that says why
    EXPECT_EQ(windows->klGraph()->dataCount(), 0);
    EXPECT_TRUE(windows->note().contains("did not measure")) << windows->note().toStdString();
    EXPECT_FALSE(windows->isVisibleTo(&view));
    view.selectRow(-1);
    EXPECT_EQ(windows->klGraph()->dataCount(), 0);
}

// Issue 41 item 4: a method has one colour whatever ran first (the shared map every
// view and export uses); with every model shown, each model has a marker shape of its
// own, and its Pareto front is labelled with its name and carries that shape.
TEST(ResultsView, OneColourPerMethodAndAMarkerAndLabelledFrontPerModel)
{
    auto colour = [](QCPCurve* c) { return c ? c->scatterStyle().brush().color() : QColor(); };
    ResultsView tt_first, pca_first;
    const auto runs = three_runs(); // pca, tt, pca
    tt_first.addRow(runs[1]);
    tt_first.addRow(runs[0]);
    pca_first.addRow(runs[0]);
    pca_first.addRow(runs[1]);
    EXPECT_EQ(colour(tt_first.series("tt")), colour(pca_first.series("tt")));
    EXPECT_EQ(colour(tt_first.series("pca")), colour(pca_first.series("pca")));
    EXPECT_NE(colour(tt_first.series("pca")), colour(tt_first.series("tt")));
    ResultsView every; // a row of each method of the registry: each its own colour
    for (const auto& m : embedlab::method_registry())
        every.addRow(row(m.name, "", 1000, 0.5, 50.0, 0.2, 0.9, 1.0, "hostA"));
    QSet<QRgb> colours;
    for (const auto& m : embedlab::method_registry())
        if (QCPCurve* c = every.series(QString::fromLatin1(m.name)))
            colours.insert(colour(c).rgb());
    EXPECT_EQ(colours.size(), static_cast<qsizetype>(embedlab::method_registry().size()));

    ResultsView view;
    for (const char* model : {"/models/tinygpt2-f16", "/models/stories260K.gguf"})
        for (const auto& r : runs) {
            auto x = r;
            x.model = model;
            view.addRow(x);
        }
    view.setModelFilter("");
    settle(view);
    QHash<QString, QCPCurve*> curves;
    for (int i = 0; i < view.plot()->plottableCount(); ++i)
        if (auto* c = qobject_cast<QCPCurve*>(view.plot()->plottable(i)); c && !c->name().isEmpty())
            curves.insert(c->name(), c);
    QCPCurve* pca_a = curves.value("pca — tinygpt2-f16");
    QCPCurve* pca_b = curves.value("pca — stories260K.gguf");
    QCPCurve* tt_b = curves.value("tt — stories260K.gguf");
    ASSERT_TRUE(pca_a && pca_b && tt_b) << QStringList(curves.keys()).join(", ").toStdString();
    EXPECT_EQ(colour(pca_a), colour(pca_b)) << "the method's colour";
    EXPECT_NE(pca_a->scatterStyle().shape(), pca_b->scatterStyle().shape()) << "each model its marker";
    EXPECT_EQ(pca_b->scatterStyle().shape(), tt_b->scatterStyle().shape());
    EXPECT_EQ(pca_a->data()->size(), 2);
    ASSERT_EQ(view.shownGroups().size(), 2u);
    QStringList fronts;
    QSet<int> front_shapes;
    for (int i = 0; i < view.plot()->graphCount(); ++i)
        if (view.plot()->graph(i)->name().startsWith("Pareto front")) {
            fronts << view.plot()->graph(i)->name();
            front_shapes.insert(view.plot()->graph(i)->scatterStyle().shape());
        }
    fronts.sort();
    EXPECT_EQ(fronts, (QStringList{"Pareto front — stories260K.gguf", "Pareto front — tinygpt2-f16"}));
    EXPECT_EQ(front_shapes.size(), 2) << "the fronts are told apart by their model's marker";
    render_to_png(view, "results_every_model.png");
}
