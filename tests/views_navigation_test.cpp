// Issue 23 item 10: every plot zooms with the wheel, pans with a drag and resets
// (double-click or the context menu's "Reset view"); axes whose values span
// decades switch between log and linear; legends sit outside the axes, where
// they never cover data; figure export still draws the moved legends.
#include <QAction>
#include <QApplication>
#include <QMenu>
#include <QMouseEvent>
#include <QTemporaryDir>
#include <QWheelEvent>
#include <cmath>
#include <gtest/gtest.h>
#include <qcustomplot.h>

#include "figure_export.hpp"
#include "fourier_map_view.hpp"
#include "gui_test_support.hpp"
#include "neighbour_graph_view.hpp"
#include "parameter_breakdown_chart.hpp"
#include "plot_interaction.hpp"
#include "rank_allocation_view.hpp"
#include "render_check.hpp"
#include "results_view.hpp"
#include "spectrum_view.hpp"
#include "tensor_train_view.hpp"

using namespace embedlab::views;
using embedlab::test::settle;

namespace {

// A spectrum over four decades, as a trained table's is.
SpectrumData decades_spectrum(int d = 64)
{
    SpectrumData s;
    double total = 0;
    for (int i = 0; i < d; ++i) {
        s.eigenvalues << std::pow(10.0, -4.0 * i / (d - 1));
        total += s.eigenvalues.back();
    }
    double cumulative = 0;
    for (int i = 0; i < d; ++i) {
        cumulative += s.eigenvalues[i];
        s.explained << cumulative / total;
        s.params_at_rank << 100.0 * (i + 1);
        s.flops_at_rank << 200.0 * (i + 1);
    }
    s.original_params = 100.0 * d;
    return s;
}

QPointF centre(QCPAxisRect* rect)
{
    return QRectF(rect->rect()).center();
}

void wheel(QCustomPlot* plot, QPointF at, int steps)
{
    QWheelEvent e(at, plot->mapToGlobal(at), QPoint(), QPoint(0, 120 * steps), Qt::NoButton, Qt::NoModifier,
                  Qt::NoScrollPhase, false);
    QApplication::sendEvent(plot, &e);
    QApplication::processEvents();
}

void drag(QCustomPlot* plot, QPointF from, QPointF to)
{
    QMouseEvent press(QEvent::MouseButtonPress, from, plot->mapToGlobal(from), Qt::LeftButton, Qt::LeftButton,
                      Qt::NoModifier);
    QApplication::sendEvent(plot, &press);
    for (int s = 1; s <= 4; ++s) {
        const QPointF at = from + (to - from) * (s / 4.0);
        QMouseEvent move(QEvent::MouseMove, at, plot->mapToGlobal(at), Qt::NoButton, Qt::LeftButton,
                         Qt::NoModifier);
        QApplication::sendEvent(plot, &move);
    }
    QMouseEvent release(QEvent::MouseButtonRelease, to, plot->mapToGlobal(to), Qt::LeftButton, Qt::NoButton,
                        Qt::NoModifier);
    QApplication::sendEvent(plot, &release);
    QApplication::processEvents();
}

void double_click(QCustomPlot* plot, QPointF at)
{
    QMouseEvent e(QEvent::MouseButtonDblClick, at, plot->mapToGlobal(at), Qt::LeftButton, Qt::LeftButton,
                  Qt::NoModifier);
    QApplication::sendEvent(plot, &e);
    QApplication::processEvents();
}

QAction* log_toggle(QCustomPlot* plot, const QString& name)
{
    PlotNavigation* nav = navigation(plot);
    if (!nav)
        return nullptr;
    for (QAction* a : nav->logToggles())
        if (a->text() == "Logarithmic " + name)
            return a;
    return nullptr;
}

// Every legend in the plot's layout (inset or in a row of its own).
QVector<QCPLegend*> legends(QCustomPlot* plot)
{
    QVector<QCPLegend*> found;
    for (auto* element : plot->plotLayout()->elements(true))
        if (auto* legend = qobject_cast<QCPLegend*>(element); legend && !found.contains(legend))
            found << legend;
    return found;
}

// No legend overlaps the data area of any axes of the plot.
void expect_legends_outside_the_axes(QCustomPlot* plot, const char* view)
{
    SCOPED_TRACE(view);
    const auto all = legends(plot);
    ASSERT_FALSE(all.isEmpty());
    for (QCPLegend* legend : all) {
        if (!legend->visible() || legend->itemCount() == 0)
            continue;
        EXPECT_GT(legend->outerRect().height(), 0);
        for (QCPAxisRect* rect : plot->axisRects())
            EXPECT_FALSE(legend->outerRect().intersects(rect->rect()))
                << "legend " << legend->outerRect().x() << "," << legend->outerRect().y() << " "
                << legend->outerRect().width() << "x" << legend->outerRect().height() << " over axes at "
                << rect->rect().x() << "," << rect->rect().y() << " " << rect->rect().width() << "x"
                << rect->rect().height();
    }
}

// Wheel in zooms both axes of the rect, a drag pans, and double-click and "Reset
// view" each bring back the ranges the view set.
void expect_zoom_pan_reset(QCustomPlot* plot, QCPAxisRect* rect, QPointF drag_from, const char* view,
                           bool vertical_only = false)
{
    SCOPED_TRACE(view);
    PlotNavigation* nav = navigation(plot);
    ASSERT_NE(nav, nullptr) << "no navigation installed";
    EXPECT_TRUE(plot->interactions().testFlag(QCP::iRangeZoom));
    EXPECT_TRUE(plot->interactions().testFlag(QCP::iRangeDrag));
    QCPAxis* x = rect->axis(QCPAxis::atBottom);
    QCPAxis* y = rect->axis(QCPAxis::atLeft);
    const QCPRange x0 = x->range(), y0 = y->range();
    wheel(plot, centre(rect), 2);
    if (vertical_only)
        EXPECT_EQ(x->range(), x0) << "categories do not zoom";
    else
        EXPECT_LT(x->range().size(), 0.95 * x0.size()) << "wheel in zooms in";
    const bool y_log = y->scaleType() == QCPAxis::stLogarithmic;
    EXPECT_LT(y_log ? y->range().upper / y->range().lower : y->range().size(),
              0.95 * (y_log ? y0.upper / y0.lower : y0.size()));
    const QCPRange zoomed_y = y->range();
    drag(plot, drag_from, drag_from + QPointF(40, 30));
    EXPECT_NE(y->range(), zoomed_y) << "a drag pans";
    double_click(plot, drag_from);
    EXPECT_NEAR(x->range().lower, x0.lower, 1e-9 * (1 + std::abs(x0.lower)));
    EXPECT_NEAR(x->range().upper, x0.upper, 1e-9 * (1 + std::abs(x0.upper)));
    EXPECT_NEAR(y->range().lower, y0.lower, 1e-9 * (1 + std::abs(y0.lower)));
    EXPECT_NEAR(y->range().upper, y0.upper, 1e-9 * (1 + std::abs(y0.upper)));
    wheel(plot, centre(rect), -3);
    EXPECT_NE(y->range(), y0);
    nav->resetAction()->trigger();
    EXPECT_NEAR(y->range().lower, y0.lower, 1e-9 * (1 + std::abs(y0.lower)));
    EXPECT_NEAR(y->range().upper, y0.upper, 1e-9 * (1 + std::abs(y0.upper)));
}

ResultRow run(const char* method, double ratio, double delta)
{
    ResultRow r;
    r.method = method;
    r.parameters = "k";
    r.params_after = 1000;
    r.params_before = 10000;
    r.ratio = ratio;
    r.ppl = 10 * std::exp(delta);
    r.ppl_original = 10;
    r.delta_ln_ppl = delta;
    r.mean_cosine = 0.9;
    r.seconds = 1;
    r.host = "local";
    r.model = "/models/tiny";
    return r;
}

NeighbourGraphData few_tokens()
{
    auto d = embedlab::test::spiral_neighbour_graph(400, 100, 3);
    d.histogram = QVector<double>(20, 15);
    d.histogram[19] = 3000; // counts over decades
    return d;
}

} // namespace

TEST(PlotNavigation, WheelZoomsDragPansAndResetRestoresOnEveryView)
{
    SpectrumView spectrum;
    spectrum.setData(decades_spectrum());
    settle(spectrum);
    QCustomPlot* sp = spectrum.plot();
    expect_zoom_pan_reset(sp, sp->axisRect(), centre(sp->axisRect()), "spectrum");
    EXPECT_EQ(spectrum.rank(), 1) << "panning leaves the rank marker where it was";

    RankAllocationView iprs;
    RankAllocationData alloc;
    alloc.d_head = 32;
    alloc.normalised = {1.0, 0.4, 0.2, 0.7};
    for (double r : {0.3, 0.5, 0.9})
        alloc.allocations.push_back({r, {std::min(1.0, 2 * r), r / 2, r / 2, r}, {9, 4, 4, 9}});
    iprs.setData(alloc);
    settle(iprs);
    expect_zoom_pan_reset(iprs.plot(), iprs.plot()->axisRect(), centre(iprs.plot()->axisRect()), "iprs");

    ResultsView results;
    results.addRow(run("pca", 0.05, 0.8));
    results.addRow(run("pca", 0.2, 0.3));
    results.addRow(run("tt", 0.5, 0.1));
    settle(results);
    QCustomPlot* rp = results.plot();
    expect_zoom_pan_reset(rp, rp->axisRect(), centre(rp->axisRect()), "results");

    FourierMapView fourier;
    fourier.setData(embedlab::test::smooth_and_rough_maps(40, 16, 0.02));
    settle(fourier);
    expect_zoom_pan_reset(fourier.plot(), fourier.lineRect(), centre(fourier.lineRect()), "fourier lines");
    QCPAxisRect* heatmap = fourier.plot()->axisRects().first();
    expect_zoom_pan_reset(fourier.plot(), heatmap, centre(heatmap), "fourier heatmap");

    TensorTrainView tt;
    tt.setData(embedlab::test::tensor_train_candidates());
    settle(tt);
    expect_zoom_pan_reset(tt.plot(), tt.plot()->axisRect(), centre(tt.plot()->axisRect()), "tt");

    NeighbourGraphView lle;
    lle.setData(few_tokens());
    settle(lle);
    // Drag from a corner of the scatter, away from any point (a click selects).
    const QRectF scatter = lle.plot()->axisRect()->rect();
    expect_zoom_pan_reset(lle.plot(), lle.plot()->axisRect(), scatter.topLeft() + QPointF(8, 8), "lle");

    ParameterBreakdownChart chart;
    chart.setData({{{"token embedding", 4096000}, {"attention", 262144}, {"norms", 1152}}, 0});
    settle(chart);
    expect_zoom_pan_reset(chart.plot(), chart.plot()->axisRect(), centre(chart.plot()->axisRect()),
                          "parameters", true);
}

// On the spectrum a press on the dashed marker drags the marker, not the axes; a
// click elsewhere puts the marker there.
TEST(PlotNavigation, TheSpectrumMarkerStillDragsAndAClickSetsTheRank)
{
    SpectrumView spectrum;
    spectrum.setData(decades_spectrum());
    spectrum.setRank(10);
    settle(spectrum);
    QCustomPlot* plot = spectrum.plot();
    const QCPRange x0 = plot->xAxis->range();
    const double y = centre(plot->axisRect()).y();
    drag(plot, QPointF(plot->xAxis->coordToPixel(10), y), QPointF(plot->xAxis->coordToPixel(30), y));
    EXPECT_EQ(spectrum.rank(), 30);
    EXPECT_EQ(plot->xAxis->range(), x0) << "dragging the marker does not pan";
    drag(plot, QPointF(plot->xAxis->coordToPixel(50), y), QPointF(plot->xAxis->coordToPixel(50), y));
    EXPECT_EQ(spectrum.rank(), 50) << "a click moves the marker there";
}

TEST(PlotNavigation, LogTogglesSwitchTheScaleOfAxesThatSpanDecades)
{
    SpectrumView spectrum;
    spectrum.setData(decades_spectrum());
    settle(spectrum);
    QCPAxis* y = spectrum.plot()->yAxis;
    QAction* toggle = log_toggle(spectrum.plot(), "eigenvalue axis");
    ASSERT_NE(toggle, nullptr);
    EXPECT_TRUE(toggle->isCheckable());
    EXPECT_TRUE(toggle->isChecked());
    ASSERT_EQ(y->scaleType(), QCPAxis::stLogarithmic);
    std::unique_ptr<QMenu> menu(navigation(spectrum.plot())->contextMenu(nullptr));
    QStringList entries;
    for (QAction* a : menu->actions())
        entries << a->text();
    EXPECT_TRUE(entries.contains("Reset view")) << entries.join(", ").toStdString();
    EXPECT_TRUE(entries.contains("Logarithmic eigenvalue axis")) << entries.join(", ").toStdString();

    toggle->trigger();
    EXPECT_EQ(y->scaleType(), QCPAxis::stLinear);
    EXPECT_FALSE(toggle->isChecked());
    EXPECT_TRUE(y->ticker().dynamicCast<QCPAxisTickerLog>().isNull());
    EXPECT_LE(y->range().lower, 1e-4) << "the linear range shows every eigenvalue";
    EXPECT_GE(y->range().upper, 1.0);
    const QImage linear = spectrum.plot()->toPixmap(600, 400).toImage();
    toggle->trigger();
    EXPECT_EQ(y->scaleType(), QCPAxis::stLogarithmic);
    EXPECT_FALSE(y->ticker().dynamicCast<QCPAxisTickerLog>().isNull());
    EXPECT_EQ(y->numberFormat(), "eb") << "powers of ten, one notation";
    EXPECT_GT(y->range().lower, 0);
    EXPECT_LT(y->range().lower, 1e-4);
    EXPECT_NE(spectrum.plot()->toPixmap(600, 400).toImage(), linear);

    // New data while linear: the linear axis fits it, and the way back to log too.
    toggle->trigger();
    spectrum.setData(decades_spectrum(32));
    toggle->trigger();
    EXPECT_EQ(y->scaleType(), QCPAxis::stLogarithmic);
    EXPECT_GT(y->range().lower, 0);

    // Elsewhere: parameter counts, Pareto ratios, TT ratio and error, histogram counts.
    ParameterBreakdownChart chart;
    chart.setData({{{"token embedding", 4096000}, {"attention", 262144}, {"norms", 1152}}, 0});
    settle(chart);
    QAction* parameters = log_toggle(chart.plot(), "parameter axis");
    ASSERT_NE(parameters, nullptr);
    EXPECT_FALSE(parameters->isChecked());
    parameters->trigger();
    EXPECT_EQ(chart.plot()->yAxis->scaleType(), QCPAxis::stLogarithmic);
    EXPECT_GT(chart.plot()->yAxis->range().lower, 0);
    EXPECT_LT(chart.plot()->yAxis->range().lower, 0.001152) << "the norms' bar is on the axis";

    ResultsView results;
    EXPECT_NE(log_toggle(results.plot(), "ratio axis"), nullptr);
    TensorTrainView tt;
    EXPECT_NE(log_toggle(tt.plot(), "ratio axis"), nullptr);
    EXPECT_NE(log_toggle(tt.plot(), "error axis"), nullptr);
    NeighbourGraphView lle;
    EXPECT_NE(log_toggle(lle.plot(), "histogram counts"), nullptr);
}

TEST(PlotNavigation, LegendsSitOutsideTheAxes)
{
    // The spectrum's legend was inside the axes, over the curve, on a 0.5B model.
    SpectrumView spectrum;
    spectrum.setData(decades_spectrum(896));
    settle(spectrum);
    QCustomPlot* plot = spectrum.plot();
    EXPECT_FALSE(plot->legend->outerRect().intersects(plot->axisRect()->rect()));
    EXPECT_FALSE(plot->legend->outerRect().intersects(plot->axisRect()->outerRect()))
        << "below the tick labels too";
    EXPECT_GT(plot->legend->outerRect().top(), plot->axisRect()->rect().bottom());
    expect_legends_outside_the_axes(plot, "spectrum");
    spectrum.setOverlays({{"other model", decades_spectrum(128).eigenvalues, ""}});
    settle(spectrum);
    expect_legends_outside_the_axes(plot, "spectrum with an overlay");

    FourierMapView fourier; // its legend sat on the neighbour curve, bottom right
    fourier.setData(embedlab::test::smooth_and_rough_maps(40, 16, 0.02));
    settle(fourier);
    expect_legends_outside_the_axes(fourier.plot(), "fourier");

    ResultsView results;
    results.addRow(run("pca", 0.05, 0.8));
    results.addRow(run("tt", 0.9, 1.1));
    settle(results);
    expect_legends_outside_the_axes(results.plot(), "results");

    TensorTrainView tt;
    tt.setData(embedlab::test::tensor_train_candidates());
    settle(tt);
    expect_legends_outside_the_axes(tt.plot(), "tt");
    // Under both axes: the energy bars keep their own column.
    EXPECT_GT(tt.plot()->legend->outerRect().top(), tt.energyBars()->keyAxis()->axisRect()->rect().bottom());

    RankAllocationView iprs;
    RankAllocationData alloc;
    alloc.d_head = 32;
    alloc.normalised = {1.0, 0.4, 0.2};
    alloc.allocations.push_back({0.5, {1.0, 0.25, 0.25}, {32, 8, 8}});
    iprs.setData(alloc);
    settle(iprs);
    expect_legends_outside_the_axes(iprs.plot(), "iprs");
}

// Figure export of a plot whose legend is a row under the axes: drawn in the
// figure in the publication style, and the screen style comes back after.
TEST(PlotNavigation, ExportedFiguresKeepTheLegendBelowTheAxes)
{
    SpectrumView spectrum;
    spectrum.setData(decades_spectrum(896));
    settle(spectrum);
    QCustomPlot* plot = spectrum.plot();
    const QFont screen_font = plot->legend->font();
    QTemporaryDir dir;
    const QString file = dir.filePath("spectrum.png");
    ASSERT_EQ(exportFigure(plot, file, {.width_in = kSingleColumnInches, .dpi = 200}), "");
    QImage image(file);
    ASSERT_FALSE(image.isNull());
    image.save("navigation_spectrum_figure.png"); // next to the test binary, to look at
    const auto stats = embedlab::test::image_stats(image);
    EXPECT_GT(stats.drawn, 0.03);
    EXPECT_GT(stats.colours, 8);
    // The legend's row (below the x axis label) holds ink of both curves' colours.
    bool blue = false, red = false;
    for (int y = image.height() * 8 / 10; y < image.height(); ++y)
        for (int x = 0; x < image.width(); ++x) {
            const QColor c = image.pixelColor(x, y);
            blue = blue || (c.blue() > 150 && c.red() < 80 && c.green() > 90 && c.green() < 150);
            red = red || (c.red() > 180 && c.green() < 80 && c.blue() < 80);
        }
    EXPECT_TRUE(blue && red) << "both legend entries under the axes";
    EXPECT_EQ(plot->legend->font(), screen_font) << "the screen style is restored";
    EXPECT_EQ(plot->legend->borderPen().style(), Qt::NoPen);
}
