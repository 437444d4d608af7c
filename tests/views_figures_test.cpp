// Issue 23 items 11 and 14: the neighbour graph's labels, layers, colour bar,
// neighbour list and coordinate export; figures without screen-only marks, at
// 300 dpi by default, with colour bars as tall as their heatmaps and in the
// same type as every other axis.
#include <QApplication>
#include <QDir>
#include <QFile>
#include <QLabel>
#include <QTableWidget>
#include <QTemporaryDir>
#include <cmath>
#include <gtest/gtest.h>
#include <qcustomplot.h>

#include "embedlab/results.hpp"
#include "figure_export.hpp"
#include "fourier_map_view.hpp"
#include "neighbour_graph_view.hpp"
#include "render_check.hpp"
#include "results_view.hpp"
#include "token_text.hpp"
#include "view_fixtures.hpp"

using namespace embedlab::views;
using embedlab::test::render_to_png;

namespace {

NeighbourGraphData crowded(int k = 8)
{
    return embedlab::test::neighbour_fixture(k);
}

QVector<QCPItemText*> visibleLabels(QCustomPlot* plot)
{
    QVector<QCPItemText*> out;
    for (int i = 0; i < plot->itemCount(); ++i)
        if (auto* text = qobject_cast<QCPItemText*>(plot->item(i)); text && text->visible())
            out << text;
    return out;
}

QRectF box(QCPItemText* text)
{
    return QRectF(text->topLeft->pixelPosition(), text->bottomRight->pixelPosition()).normalized();
}

} // namespace

TEST(NeighbourGraphView, LabelsAvoidEachOtherAtEverySize)
{
    NeighbourGraphView view;
    view.setData(crowded());
    ASSERT_TRUE(view.selectToken(45));
    render_to_png(view, "neighbour_graph_crowded.png");
    QCustomPlot* plot = view.plot();
    QVector<QRectF> first;
    for (const QSize size : {QSize(1000, 700), QSize(336, 208), QSize(1000, 700)}) {
        plot->toPixmap(size.width(), size.height()); // lays out (and places the labels) at that size
        const auto labels = visibleLabels(plot);
        // In a window the crowd gets labels around it; in a single-column figure a
        // neighbour's label is wider than free room, and only the chosen token's is left.
        ASSERT_GE(labels.size(), size.width() == 1000 ? 3 : 1) << size.width();
        const QRect area = plot->axisRect()->rect();
        bool selected_shown = false;
        for (int a = 0; a < labels.size(); ++a) {
            selected_shown = selected_shown || labels[a]->text().startsWith("'rare45' 45");
            EXPECT_TRUE(QRectF(area).contains(box(labels[a]))) << labels[a]->text().toStdString();
            for (int b = a + 1; b < labels.size(); ++b) {
                EXPECT_FALSE(box(labels[a]).intersects(box(labels[b])))
                    << size.width() << ": '" << labels[a]->text().toStdString() << "' covers '"
                    << labels[b]->text().toStdString() << "'";
            }
        }
        EXPECT_TRUE(selected_shown) << "the chosen token is always labelled";
        QVector<QRectF> boxes;
        for (auto* l : labels)
            boxes << box(l);
        if (size.width() == 1000 && first.isEmpty()) {
            first = boxes;
        } else if (size.width() == 1000) {
            EXPECT_EQ(boxes, first) << "the placement is deterministic";
        }
    }
    // At the window's size the heaviest neighbour (weight 8/36, token 7) keeps its label.
    plot->replot();
    bool heaviest = false;
    for (auto* l : visibleLabels(plot))
        heaviest = heaviest || l->text().startsWith("'common7' 7");
    EXPECT_TRUE(heaviest);
}

TEST(NeighbourGraphView, RarePointsOverCommonOnesAndAColourBarForTheCosines)
{
    NeighbourGraphView view;
    view.setData(crowded());
    render_to_png(view, "neighbour_graph_colour_bar.png");
    QCustomPlot* plot = view.plot();
    const int common_layer = plot->graph(0)->layer()->index();
    for (int g = 1; g <= 5; ++g) // the five cosine bands
        EXPECT_GT(plot->graph(g)->layer()->index(), common_layer) << g;
    QCPColorScale* scale = view.colourScale();
    ASSERT_NE(scale, nullptr);
    EXPECT_EQ(scale->dataRange().upper, 1.0);
    // The colour at cosine 0.95 is the "cos >= 0.9" band's, at 0.45 the "< 0.5" band's.
    const QRgb top = scale->gradient().color(0.95, scale->dataRange());
    const QRgb bottom = scale->gradient().color(0.45, scale->dataRange());
    const QRgb middle = scale->gradient().color(0.75, scale->dataRange());
    EXPECT_EQ(QColor(top), plot->graph(5)->scatterStyle().pen().color());
    EXPECT_EQ(QColor(bottom), plot->graph(1)->scatterStyle().pen().color());
    EXPECT_EQ(QColor(middle), plot->graph(3)->scatterStyle().pen().color());
    for (const QSize size : {QSize(1000, 700), QSize(336, 208)}) {
        plot->toPixmap(size.width(), size.height());
        const QRect bar = scale->outerRect();
        EXPECT_GT(bar.width(), 60) << size.width();
        EXPECT_TRUE(QRect(0, 0, size.width(), size.height()).contains(bar)) << size.width();
        EXPECT_FALSE(bar.intersects(plot->axisRect()->outerRect())) << "never over the points";
        EXPECT_FALSE(bar.intersects(plot->legend->outerRect()));
        // The scatter and the histogram end on one line.
        EXPECT_EQ(view.histogramRect()->rect().bottom(), plot->axisRect()->rect().bottom()) << size.width();
        EXPECT_GT(plot->axisRect()->rect().width(), size.width() / 4) << "the scatter keeps its room";
    }
}

TEST(NeighbourGraphView, TheListShowsTheSelectedTokensNeighboursWithTheirWeights)
{
    NeighbourGraphView view;
    const auto d = crowded();
    view.setData(d);
    QTableWidget* list = view.neighbourList();
    ASSERT_NE(list, nullptr);
    EXPECT_EQ(list->rowCount(), 0);
    ASSERT_TRUE(view.search("rare47"));
    ASSERT_EQ(list->rowCount(), d.k);
    const int slot = 7; // rare47 is the 8th rare token
    for (int j = 0; j < d.k; ++j) {
        const int id = d.neighbours[slot * d.k + j];
        EXPECT_EQ(list->item(j, 1)->text(), QString::number(id));
        EXPECT_EQ(list->item(j, 0)->text(), "'" + escaped_token(d.tokens[id]) + "'");
        EXPECT_NEAR(list->item(j, 2)->text().toDouble(), d.weights[slot * d.k + j], 1e-4);
        EXPECT_NEAR(list->item(j, 3)->text().toDouble(), d.neighbour_cosine[slot * d.k + j], 1e-4);
    }
    EXPECT_FALSE(list->item(3, 0)->text().contains('\n'))
        << "escaped: " << list->item(3, 0)->text().toStdString();
    bool named = false;
    for (auto* label : view.findChildren<QLabel*>())
        named = named || (label->text().contains("rare47") && label->text().contains("Neighbours"));
    EXPECT_TRUE(named);
    // Without neighbour cosines the column says so with a dash, not a number.
    auto bare = d;
    bare.neighbour_cosine.clear();
    view.setData(bare);
    ASSERT_TRUE(view.selectToken(41));
    EXPECT_EQ(list->item(0, 3)->text(), QString::fromUtf8("\u2014"));
    view.setData(bare);
    EXPECT_EQ(list->rowCount(), 0) << "a new graph clears the list";
}

TEST(NeighbourGraphView, CoordinatesAndTheSelectionExportAsCsv)
{
    NeighbourGraphView view;
    const auto d = crowded();
    view.setData(d);
    ASSERT_TRUE(view.selectToken(50));
    QTemporaryDir dir;
    const QString file = dir.filePath("coords.csv");
    ASSERT_EQ(view.exportCoordinatesCsv(file), "");
    QFile in(file);
    ASSERT_TRUE(in.open(QIODevice::ReadOnly | QIODevice::Text));
    const QByteArray bytes = in.readAll();
    const QStringList lines = QString::fromUtf8(bytes).split('\n', Qt::SkipEmptyParts);
    ASSERT_EQ(lines.size(), d.x.size() + 1); // one record a line: tokens' newlines are escaped
    EXPECT_EQ(lines[0], "id,token,x,y,kind,selected,weight,cosine,frequency,in_box");
    const auto records = embedlab::csv_records(bytes.toStdString());
    ASSERT_EQ(records.size(), static_cast<size_t>(lines.size()));
    int selected = 0, rare = 0, weighted = 0;
    for (int i = 1; i < lines.size(); ++i) {
        QStringList f;
        for (const auto& field : records[static_cast<size_t>(i)])
            f << QString::fromStdString(field);
        ASSERT_EQ(f.size(), 10) << lines[i].toStdString();
        const int id = f[0].toInt();
        EXPECT_EQ(id, i - 1);
        EXPECT_EQ(f[1], escaped_token(d.tokens[id]));
        EXPECT_EQ(f[2].toDouble(), d.x[id]);
        EXPECT_EQ(f[3].toDouble(), d.y[id]);
        EXPECT_EQ(f[4], id < 40 ? "common" : "rare");
        if (f[5] == "1") {
            ++selected;
            EXPECT_EQ(id, 50);
        } else {
            EXPECT_EQ(f[5], "0");
        }
        rare += f[4] == "rare";
        if (!f[6].isEmpty()) {
            ++weighted;
            EXPECT_DOUBLE_EQ(f[6].toDouble(), d.weights[10 * d.k + id]); // neighbour j is token j
        }
        // Issue 41 item 10: the rare tokens' reconstruction cosine; no frequency given, no box.
        if (id < 40)
            EXPECT_EQ(f[7], "");
        else
            EXPECT_DOUBLE_EQ(f[7].toDouble(), d.cosine[id - 40]);
        EXPECT_EQ(f[8], "");
        EXPECT_EQ(f[9], "0");
    }
    EXPECT_EQ(selected, 1);
    EXPECT_EQ(rare, d.rare.size());
    EXPECT_EQ(weighted, d.k);
    EXPECT_TRUE(lines[4].contains(QString::fromUtf8("\"\u2423the,\u2423\"\"quoted\"\"\\n\"")))
        << lines[4].toStdString();
    EXPECT_EQ(QDir(dir.path()).entryList(QDir::Files), QStringList{"coords.csv"}) << "no temporary left";
    EXPECT_NE(view.exportCoordinatesCsv(dir.filePath("missing/coords.csv")), "");
}

// Issue 23 item 14: what marks a selection on screen is not in the figure; the
// figure is the same with or without it, and the mark is back afterwards.
TEST(FigureExport, NoSelectionRingOrHighlightInTheFigureAndThreeHundredDpiByDefault)
{
    ResultsView view;
    ResultRow a;
    a.method = "pca";
    a.parameters = "rank 16";
    a.ratio = 0.2;
    a.delta_ln_ppl = 0.3;
    a.ppl = 40;
    ResultRow b = a;
    b.parameters = "rank 32";
    b.ratio = 0.4;
    b.delta_ln_ppl = 0.1;
    view.addRow(a);
    view.addRow(b);
    render_to_png(view, "results_selected.png");
    QCustomPlot* plot = view.plot();
    QTemporaryDir dir;
    const FigureOptions defaults;
    ASSERT_EQ(exportFigure(plot, dir.filePath("plain.png"), defaults), "");
    view.selectRow(1);
    // QCustomPlot's own selection highlight too (a user may have clicked a series).
    QCPCurve* pca = view.series("pca");
    ASSERT_NE(pca, nullptr);
    pca->setSelectable(QCP::stWhole);
    pca->setSelection(QCPDataSelection(QCPDataRange(0, 2)));
    plot->replot();
    const QImage on_screen = plot->toPixmap(500, 350).toImage();
    bool box = false; // as matplotlib draws axes: a box (top and right spines), no grid
    const auto seen = QObject::connect(plot, &QCustomPlot::afterLayout, [&] {
        box = plot->xAxis2->visible() && plot->yAxis2->visible() && !plot->xAxis->grid()->visible();
    });
    ASSERT_EQ(exportFigure(plot, dir.filePath("selected.png"), defaults), "");
    QObject::disconnect(seen);
    EXPECT_TRUE(box);
    EXPECT_FALSE(plot->xAxis2->visible()) << "restored";
    const QImage plain(dir.filePath("plain.png")), selected(dir.filePath("selected.png"));
    ASSERT_FALSE(plain.isNull());
    EXPECT_TRUE(plain == selected) << "the selection ring or highlight reached the figure";
    EXPECT_NEAR(selected.dotsPerMeterX(), 11811, 2) << "300 dpi unless asked otherwise";
    EXPECT_NEAR(selected.dotsPerMeterY(), 11811, 2);
    EXPECT_EQ(selected.width(), 1050); // 3.5 in at 300 dpi
    // ... and on screen afterwards, as before.
    EXPECT_TRUE(pca->selected());
    EXPECT_TRUE(plot->toPixmap(500, 350).toImage() == on_screen);
    EXPECT_EQ(FigureExportDialog().options().dpi, 300);
}

namespace {
FourierMapData two_maps()
{
    FourierMapData d;
    d.first = 0;
    d.count = 32;
    d.dim = 8;
    for (const char* name : {"T", "original"}) {
        FourierMatrix m;
        m.name = name;
        for (int i = 0; i < d.count; ++i)
            for (int j = 0; j < d.dim; ++j)
                m.values << std::sin(0.3 * i + j);
        for (int i = 0; i + 1 < d.count; ++i)
            m.neighbour << 0.5;
        d.matrices << m;
    }
    return d;
}
} // namespace

TEST(FigureExport, ColourBarsAreAsTallAsTheirHeatmapsAndSetInTheAxesType)
{
    FourierMapView view;
    view.setData(two_maps());
    render_to_png(view, "fourier_colour_bars.png");
    QCustomPlot* plot = view.plot();
    QVector<QCPColorScale*> scales;
    QVector<QCPAxisRect*> maps;
    for (auto* e : plot->plotLayout()->elements(true)) {
        if (auto* s = qobject_cast<QCPColorScale*>(e))
            scales << s;
        else if (auto* r = qobject_cast<QCPAxisRect*>(e);
                 r && r != view.lineRect() && r != view.neighbourRect())
            maps << r;
    }
    ASSERT_EQ(scales.size(), 2);
    ASSERT_EQ(maps.size(), 2);
    for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(scales[i]->rect().top(), maps[i]->rect().top()) << i;
        EXPECT_EQ(scales[i]->rect().bottom(), maps[i]->rect().bottom()) << i;
    }
    // While the figure is drawn: the colour bar's type is the axes', ticks point
    // out, no grid, a box; afterwards everything is as it was.
    QFont bar_ticks, axis_ticks;
    bool grid = true;
    int tick_in = -1;
    const auto seen = QObject::connect(plot, &QCustomPlot::afterLayout, [&] {
        bar_ticks = scales[0]->axis()->tickLabelFont();
        axis_ticks = maps[0]->axis(QCPAxis::atBottom)->tickLabelFont();
        grid = maps[0]->axis(QCPAxis::atBottom)->grid()->visible();
        tick_in = maps[0]->axis(QCPAxis::atLeft)->tickLengthIn();
    });
    const QFont before = scales[0]->axis()->tickLabelFont();
    QTemporaryDir dir;
    ASSERT_EQ(exportFigure(plot, dir.filePath("f.png"), {}), "");
    QObject::disconnect(seen);
    EXPECT_EQ(bar_ticks, axis_ticks);
    EXPECT_EQ(axis_ticks.pointSizeF(), 7);
    EXPECT_FALSE(grid);
    EXPECT_EQ(tick_in, 0);
    EXPECT_EQ(scales[0]->axis()->tickLabelFont(), before);
    EXPECT_TRUE(maps[0]->axis(QCPAxis::atBottom)->grid()->visible());
}
