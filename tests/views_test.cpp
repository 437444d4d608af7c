// Views are fed plain structs; these tests check that what is drawn is what was given.
#include <QApplication>
#include <QFile>
#include <QSet>
#include <QTemporaryDir>
#include <gtest/gtest.h>
#include <qcustomplot.h>

#include "figure_export.hpp"
#include "gui_test_support.hpp"
#include "parameter_breakdown_chart.hpp"
#include "rank_allocation_view.hpp"
#include "render_check.hpp"
#include "spectrum_view.hpp"

using embedlab::views::ParameterBreakdownChart;
using embedlab::views::ParameterBreakdownData;

namespace {

QCPBars* barsAt(QCustomPlot* plot, int i)
{
    return qobject_cast<QCPBars*>(plot->plottable(i));
}

TEST(ParameterBreakdownChart, DrawsEveryPartInMillionsWithTheHighlightSeparate)
{
    ParameterBreakdownChart chart;
    ParameterBreakdownData data;
    data.bars = {{"token embedding", 6432896}, {"attention", 264192}, {"MLP", 526336}};
    data.highlighted = 0;
    chart.setData(data);

    QCustomPlot* plot = chart.plot();
    ASSERT_EQ(plot->plottableCount(), 2);
    QCPBars* normal = barsAt(plot, 0);
    QCPBars* highlight = barsAt(plot, 1);
    ASSERT_EQ(highlight->data()->size(), 1);
    EXPECT_DOUBLE_EQ(highlight->data()->at(0)->key, 1.0);
    EXPECT_NEAR(highlight->data()->at(0)->value, 6.432896, 1e-9);
    ASSERT_EQ(normal->data()->size(), 2);
    EXPECT_NEAR(normal->data()->at(1)->value, 0.526336, 1e-9);
    EXPECT_GE(plot->yAxis->range().upper, 6.432896);
}

TEST(ParameterBreakdownChart, EmptyDataGivesAnEmptyButValidPlot)
{
    ParameterBreakdownChart chart;
    chart.setData({});
    EXPECT_EQ(barsAt(chart.plot(), 0)->data()->size(), 0);
    EXPECT_EQ(barsAt(chart.plot(), 1)->data()->size(), 0);
    EXPECT_GT(chart.plot()->yAxis->range().upper, 0);
}

embedlab::views::SpectrumData four_components()
{
    embedlab::views::SpectrumData d;
    d.eigenvalues = {8, 4, 2, 0};
    d.explained = {8 / 14.0, 12 / 14.0, 1, 1};
    d.params_at_rank = {105, 210, 315, 420};
    d.flops_at_rank = {210, 420, 630, 840};
    d.original_params = 400;
    return d;
}

TEST(SpectrumView, DrawsTheGivenSpectrumAndTheRankSummary)
{
    embedlab::views::SpectrumView view;
    view.setData(four_components());
    QCustomPlot* plot = view.plot();
    ASSERT_EQ(plot->graphCount(), 2);
    ASSERT_EQ(plot->graph(0)->data()->size(), 4);
    EXPECT_DOUBLE_EQ(plot->graph(0)->data()->at(0)->value, 8.0);
    EXPECT_GT(plot->graph(0)->data()->at(3)->value, 0.0); // a zero eigenvalue stays drawable on the log axis
    EXPECT_EQ(plot->yAxis->scaleType(), QCPAxis::stLogarithmic);
    EXPECT_DOUBLE_EQ(plot->graph(1)->data()->at(1)->value, 12 / 14.0);

    int reported = 0;
    QObject::connect(&view, &embedlab::views::SpectrumView::rankChanged, [&](int k) { reported = k; });
    view.setRank(2);
    EXPECT_EQ(reported, 2);
    const QString s = view.summary();
    EXPECT_TRUE(s.contains("k = 2")) << s.toStdString();
    EXPECT_TRUE(s.contains("0.5250")) << s.toStdString(); // 210 / 400
    EXPECT_TRUE(s.contains("0.8571")) << s.toStdString(); // 12 / 14
    view.setRank(99);                                     // clamped to d
    EXPECT_EQ(view.rank(), 4);
    view.setRank(0);
    EXPECT_EQ(view.rank(), 1);
    view.setData({});
    EXPECT_EQ(view.summary(), "no spectrum");
}

QPen penOf(QCPGraph* g)
{
    return g->pen();
}

TEST(SpectrumView, OverlaysAnotherModelAsSharesOfVariance)
{
    embedlab::views::SpectrumView view;
    view.setData(four_components());
    view.setRank(2);
    view.setOverlays({{"other model", {30, 10}, {}}}); // another d and scale
    QCustomPlot* plot = view.plot();
    ASSERT_EQ(view.overlayGraphs().size(), 1);
    QCPGraph* other = view.overlayGraphs()[0];
    EXPECT_EQ(plot->graphCount(), 3);
    // Each curve over its own total: 8/14 .. for this model, 30/40 and 10/40 for the other.
    EXPECT_DOUBLE_EQ(plot->graph(0)->data()->at(0)->value, 8 / 14.0);
    EXPECT_DOUBLE_EQ(plot->graph(0)->data()->at(2)->value, 2 / 14.0);
    EXPECT_GT(plot->graph(0)->data()->at(3)->value, 0.0); // still drawable on the log axis
    ASSERT_EQ(other->data()->size(), 2);
    EXPECT_DOUBLE_EQ(other->data()->at(0)->value, 0.75);
    EXPECT_DOUBLE_EQ(other->data()->at(1)->value, 0.25);
    EXPECT_TRUE(plot->yAxis->label().contains("share of variance")) << plot->yAxis->label().toStdString();
    EXPECT_EQ(plot->yAxis->scaleType(), QCPAxis::stLogarithmic);
    EXPECT_LE(plot->yAxis->range().lower, 2 / 14.0);
    EXPECT_GE(plot->yAxis->range().upper, 0.75);
    EXPECT_TRUE(plot->legend->hasItemWithPlottable(other));
    EXPECT_EQ(other->name(), "other model");
    // The rank marker and the readout are this model's, unchanged.
    EXPECT_EQ(view.rank(), 2);
    EXPECT_TRUE(view.summary().contains("0.5250")) << view.summary().toStdString();
    EXPECT_DOUBLE_EQ(plot->graph(1)->data()->at(1)->value, 12 / 14.0);

    view.clearOverlays();
    EXPECT_EQ(plot->graphCount(), 2);
    EXPECT_TRUE(view.overlayGraphs().isEmpty());
    EXPECT_DOUBLE_EQ(plot->graph(0)->data()->at(0)->value, 8.0);
    EXPECT_EQ(plot->yAxis->label(), "eigenvalue of the covariance");
}

TEST(SpectrumView, ValueHeadSpectraAreThinSeeThroughAndLegendedByLayer)
{
    embedlab::views::SpectrumView view;
    view.setData(four_components());
    QVector<embedlab::views::SpectrumOverlay> heads;
    for (int layer = 0; layer < 2; ++layer)
        for (int head = 0; head < 3; ++head)
            heads.push_back({QString("layer %1 head %2").arg(layer).arg(head),
                             {4.0 + head, 2.0, 1.0 + layer},
                             QString("layer %1").arg(layer)});
    view.setOverlays(heads);
    const auto graphs = view.overlayGraphs();
    ASSERT_EQ(graphs.size(), 6);
    EXPECT_DOUBLE_EQ(graphs[4]->data()->at(0)->value, 5.0 / 9.0); // layer 1 head 1: 5 / (5 + 2 + 2)
    int legended = 0;
    for (auto* g : graphs)
        legended += view.plot()->legend->hasItemWithPlottable(g);
    EXPECT_EQ(legended, 2); // one entry per layer, not per head
    EXPECT_TRUE(view.plot()->legend->hasItemWithPlottable(graphs[0]));
    EXPECT_TRUE(view.plot()->legend->hasItemWithPlottable(graphs[3]));
    EXPECT_EQ(graphs[0]->name(), "layer 0");
    EXPECT_EQ(graphs[3]->name(), "layer 1");
    const QPen main = penOf(view.plot()->graph(0));
    for (auto* g : graphs) {
        EXPECT_LT(penOf(g).widthF(), main.widthF());
        EXPECT_LT(penOf(g).color().alpha(), 255);
    }
    EXPECT_EQ(penOf(graphs[0]).color(), penOf(graphs[2]).color()); // one colour per layer
    EXPECT_NE(penOf(graphs[0]).color(), penOf(graphs[3]).color());
    // Overlays are drawn behind this model's curve.
    EXPECT_LT(graphs[0]->layer()->index(), view.plot()->graph(0)->layer()->index());

    const auto stats = embedlab::test::render_to_png(view, "spectrum_value_heads.png");
    EXPECT_GT(stats.drawn, 0.05);

    // The figure export still works, in the publication style, with the overlays.
    QTemporaryDir dir;
    const QString svg_file = dir.filePath("spectrum.svg");
    ASSERT_EQ(embedlab::views::exportFigure(view.plot(), svg_file, {}), "");
    QFile svg(svg_file);
    ASSERT_TRUE(svg.open(QIODevice::ReadOnly));
    const QByteArray text = svg.readAll();
    EXPECT_TRUE(text.contains("layer 1")) << "the legend names the layers";
    EXPECT_TRUE(text.contains("share of variance"));
    EXPECT_EQ(view.plot()->graphCount(), 8);
}

embedlab::views::RankAllocationData three_layers()
{
    embedlab::views::RankAllocationData d;
    d.d_head = 32;
    d.normalised = {1.0, 0.4, 0.2};
    for (double r : {0.3, 0.5, 0.9}) {
        embedlab::views::Allocation a;
        a.remaining = r;
        a.w = {std::min(1.0, 2 * r), r / 2, r / 2};
        for (double w : a.w)
            a.ranks.push_back(static_cast<int>(w * 32));
        d.allocations.push_back(a);
    }
    return d;
}

TEST(RankAllocationView, SelectsNearHalfAndOverlaysOnRequest)
{
    embedlab::views::RankAllocationView view;
    view.setData(three_layers());
    EXPECT_EQ(view.selected(), 1); // remaining 0.5
    // importance, the selected IPRS curve, its uniform line
    ASSERT_EQ(view.plot()->graphCount(), 3);
    EXPECT_DOUBLE_EQ(view.plot()->graph(1)->data()->at(0)->value, 1.0);
    EXPECT_DOUBLE_EQ(view.plot()->graph(2)->data()->at(2)->value, 0.5);
    EXPECT_TRUE(view.rankText().contains("layer 1: 8")) << view.rankText().toStdString();
    view.setOverlay(true);
    EXPECT_EQ(view.plot()->graphCount(), 5);
    view.setSelected(7); // clamped
    EXPECT_EQ(view.selected(), 2);
    EXPECT_TRUE(view.rankText().contains("remaining 0.90"));
    view.setData({});
    EXPECT_EQ(view.selected(), -1);
    EXPECT_EQ(view.rankText(), "no allocation");
}

} // namespace

int main(int argc, char** argv)
{
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}

using embedlab::test::settle;

// Issue 23 item 10: hovering says the value under the cursor: eigenvalue index
// and value on the spectrum, layer, importance and rank on the IPRS plot.
TEST(Hover, SpectrumAndAllocationSayTheValueUnderTheCursor)
{
    embedlab::views::SpectrumView spectrum;
    spectrum.setData(four_components());
    settle(spectrum);
    QCustomPlot* p = spectrum.plot();
    const QPointF at(p->xAxis->coordToPixel(2), p->yAxis->coordToPixel(4));
    EXPECT_EQ(spectrum.hoverText(at),
              "eigenvalue 2: 4 (0.286 of the variance); explained up to k = 2: 0.8571");
    EXPECT_EQ(spectrum.hoverText(QPointF(-5, -5)), "") << "outside the axes";

    embedlab::views::RankAllocationView iprs;
    iprs.setData(three_layers());
    settle(iprs);
    QCustomPlot* q = iprs.plot();
    const QString text = iprs.hoverText(QPointF(q->xAxis->coordToPixel(1), q->yAxis->coordToPixel(0.3)));
    EXPECT_TRUE(text.startsWith("layer 1: importance 0.400 of the largest; at average remaining"))
        << text.toStdString();
    EXPECT_TRUE(text.endsWith(" of 32")) << text.toStdString();
}

// Issue 23 item 15: an overlaid model and each layer's value heads all get their
// own colour (stories260K and layer 0 were both green), and log-axis tick labels
// are powers of ten.
TEST(SpectrumView, OverlaidModelsAndLayersNeverShareAColour)
{
    embedlab::views::SpectrumView view;
    view.setData(four_components());
    view.setOverlays({{"stories260K", {5, 3, 1, 0.5}, ""},
                      {"layer 0 head 0", {4, 2, 1, 0.1}, "layer 0"},
                      {"layer 0 head 1", {3, 2, 1, 0.1}, "layer 0"},
                      {"layer 1 head 0", {4, 1, 0.5, 0.1}, "layer 1"}});
    QCustomPlot* plot = view.plot();
    QSet<QRgb> colours;
    for (int i = 2; i < plot->graphCount(); ++i)
        if (plot->graph(i)->name() != "layer 0" || !colours.contains(plot->graph(i)->pen().color().rgb()))
            colours.insert(plot->graph(i)->pen().color().rgb());
    EXPECT_EQ(colours.size(), 3) << "stories260K, layer 0, layer 1";
    EXPECT_EQ(plot->yAxis->numberFormat(), "eb");
}
