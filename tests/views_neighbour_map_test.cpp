// Issue 41 item 9: the neighbour map. Box and lasso drags list exactly the
// tokens inside and export them; search rings and labels a common token; the
// colour chooser recolours and the worst token is drawn on top; density
// shading; haloed labels; markers sized for the figure; the t-SNE layout's
// chooser and parameters; 150k tokens.
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <cmath>
#include <gtest/gtest.h>
#include <qcustomplot.h>

#include "embedlab/results.hpp"
#include "gui_test_support.hpp"
#include "neighbour_graph_view.hpp"
#include "neighbour_map_style.hpp"
#include "render_check.hpp"
#include "token_text.hpp"

using embedlab::test::drag;
using embedlab::test::press_key;
using embedlab::test::settle;
using embedlab::views::NeighbourGraphData;
using embedlab::views::NeighbourGraphView;
using embedlab::views::NeighbourMapLayout;

namespace {

// 400 tokens on a 20 x 20 grid of unit steps: token id = 20 y + x; odd ids rare.
NeighbourGraphData grid()
{
    NeighbourGraphData d;
    d.k = 2;
    for (int id = 0; id < 400; ++id) {
        d.x << id % 20;
        d.y << id / 20;
        d.tokens << QString("t%1").arg(id);
        d.frequency << (id % 2 ? id % 3 : 100 + id);
        (id % 2 ? d.rare : d.common) << id;
    }
    for (int i = 0; i < d.rare.size(); ++i) {
        d.neighbours << 0 << 2;
        d.weights << 0.5 << 0.5;
        d.cosine << 0.95 - 0.6 * (i % 7) / 6.0;
    }
    d.histogram = QVector<double>(10, 20);
    return d;
}

QPointF pixel(const NeighbourGraphView& view, double x, double y)
{
    return {view.plot()->xAxis->coordToPixel(x), view.plot()->yAxis->coordToPixel(y)};
}

// Typed as a user types: a key press per character.
void type_text(QWidget* widget, const QString& text)
{
    for (QChar c : text)
        press_key(widget, c.toUpper().unicode(), Qt::NoModifier, QString(c));
}

void click(QWidget* widget)
{
    const QPointF at = widget->rect().center();
    QMouseEvent press(QEvent::MouseButtonPress, at, widget->mapToGlobal(at), Qt::LeftButton, Qt::LeftButton,
                      Qt::NoModifier);
    QApplication::sendEvent(widget, &press);
    QMouseEvent release(QEvent::MouseButtonRelease, at, widget->mapToGlobal(at), Qt::LeftButton, Qt::NoButton,
                        Qt::NoModifier);
    QApplication::sendEvent(widget, &release);
    QApplication::processEvents();
}

// Arrow keys on the focused combo box until `text` is current (or the keys stop moving it).
void choose(QComboBox* combo, const QString& text)
{
    combo->setFocus();
    const int target = combo->findText(text, Qt::MatchStartsWith);
    ASSERT_GE(target, 0) << text.toStdString();
    for (int tries = 0; tries < combo->count() && combo->currentIndex() != target; ++tries)
        press_key(combo, combo->currentIndex() < target ? Qt::Key_Down : Qt::Key_Up);
}

QStringList csv_lines(const QString& file)
{
    QFile in(file);
    EXPECT_TRUE(in.open(QIODevice::ReadOnly | QIODevice::Text));
    return QString::fromUtf8(in.readAll()).split('\n', Qt::SkipEmptyParts);
}

QColor drawn_at(NeighbourGraphView& view, double x, double y)
{
    view.plot()->replot();
    return view.plot()->toPixmap().toImage().pixelColor(pixel(view, x, y).toPoint());
}

bool near(const QColor& a, const QColor& b, int tolerance = 30)
{
    return std::abs(a.red() - b.red()) <= tolerance && std::abs(a.green() - b.green()) <= tolerance &&
           std::abs(a.blue() - b.blue()) <= tolerance;
}

} // namespace

TEST(NeighbourMap, BoxAndLassoDragsListExactlyTheTokensInsideAndExportThem)
{
    NeighbourGraphView view;
    const auto d = grid();
    view.setData(d);
    settle(view);
    QCustomPlot* plot = view.plot();
    const QCPRange x0 = plot->xAxis->range();
    choose(view.dragChooser(), "Drag selects a box");
    // x 3..5, y 3..4: six tokens.
    drag(plot, {pixel(view, 2.5, 2.5), pixel(view, 5.5, 4.5)});
    const QVector<int> box{63, 64, 65, 83, 84, 85};
    EXPECT_EQ(view.selectedTokens(), box);
    EXPECT_EQ(plot->xAxis->range(), x0) << "a selecting drag does not pan";
    QTableWidget* list = view.selectionList();
    ASSERT_EQ(list->rowCount(), 6);
    for (int r = 0; r < 6; ++r) {
        EXPECT_EQ(list->item(r, 1)->text().toInt(), box[r]);
        EXPECT_EQ(list->item(r, 0)->text(), QString("'t%1'").arg(box[r]));
        EXPECT_EQ(list->item(r, 2)->text(), box[r] % 2 ? "rare" : "common");
    }
    EXPECT_EQ(list->horizontalHeaderItem(3)->text(), "cosine");
    EXPECT_NEAR(list->item(0, 3)->text().toDouble(), d.cosine[d.rare.indexOf(63)], 1e-3)
        << "the colour column's value";

    QTemporaryDir dir;
    ASSERT_EQ(view.exportSelectionCsv(dir.filePath("sel.csv")), "");
    const QStringList lines = csv_lines(dir.filePath("sel.csv"));
    ASSERT_EQ(lines.size(), 7);
    EXPECT_EQ(lines[0], "id,token,x,y,kind,cosine,frequency,value");
    for (int r = 0; r < 6; ++r) {
        const auto f = embedlab::csv_records(lines[r + 1].toStdString()).at(0);
        ASSERT_EQ(f.size(), 8u);
        const int id = std::stoi(f[0]);
        EXPECT_EQ(id, box[r]);
        EXPECT_EQ(f[1], "t" + std::to_string(id));
        EXPECT_EQ(std::stod(f[2]), d.x[id]);
        EXPECT_EQ(f[4], id % 2 ? "rare" : "common");
        if (id % 2)
            EXPECT_DOUBLE_EQ(std::stod(f[5]), d.cosine[d.rare.indexOf(id)]);
        else
            EXPECT_EQ(f[5], "") << "a common token has no reconstruction cosine";
        EXPECT_EQ(std::stod(f[6]), d.frequency[id]);
    }
    // The coordinates CSV marks them too, with every rare token's cosine.
    ASSERT_EQ(view.exportCoordinatesCsv(dir.filePath("all.csv")), "");
    const QStringList all = csv_lines(dir.filePath("all.csv"));
    ASSERT_EQ(all.size(), 401);
    EXPECT_EQ(all[0], "id,token,x,y,kind,selected,weight,cosine,frequency,in_box");
    int boxed = 0;
    for (int id = 0; id < 400; ++id) {
        const auto f = embedlab::csv_records(all[id + 1].toStdString()).at(0);
        ASSERT_EQ(f.size(), 10u);
        boxed += f[9] == "1";
        EXPECT_EQ(f[9] == "1", box.contains(id)) << id;
        if (id % 2) {
            EXPECT_DOUBLE_EQ(std::stod(f[7]), d.cosine[d.rare.indexOf(id)]);
        }
    }
    EXPECT_EQ(boxed, 6);

    // A lasso: a triangle; exactly the grid points inside it (worked out here in pixels).
    choose(view.dragChooser(), "Drag draws a lasso");
    const QPointF a = pixel(view, 1.2, 1.2), b = pixel(view, 12.7, 2.3), c = pixel(view, 4.4, 13.6);
    drag(plot, {a, b, c, a + QPointF(1, 0)});
    auto side = [](QPointF p, QPointF q, QPointF r) {
        return (q.x() - p.x()) * (r.y() - p.y()) - (q.y() - p.y()) * (r.x() - p.x());
    };
    QVector<int> inside;
    for (int id = 0; id < 400; ++id) {
        const QPointF p = pixel(view, d.x[id], d.y[id]);
        const double s1 = side(a, b, p), s2 = side(b, c, p), s3 = side(c, a, p);
        if ((s1 > 0 && s2 > 0 && s3 > 0) || (s1 < 0 && s2 < 0 && s3 < 0))
            inside << id;
    }
    ASSERT_GT(inside.size(), 20);
    EXPECT_EQ(view.selectedTokens(), inside);
    EXPECT_EQ(view.selectionList()->rowCount(), inside.size());
    // The outline stays on screen; the figure leaves it out.
    bool outline = false;
    for (int i = 0; i < plot->plottableCount(); ++i)
        outline = outline || (plot->plottable(i)->name() == "selection outline" &&
                              qobject_cast<QCPCurve*>(plot->plottable(i))->data()->size() > 3);
    EXPECT_TRUE(outline);
    // Clear empties it.
    for (auto* button : view.findChildren<QPushButton*>())
        if (button->text() == "Clear")
            click(button);
    EXPECT_TRUE(view.selectedTokens().isEmpty());
    EXPECT_EQ(view.selectionList()->rowCount(), 0);
    // Back to panning: a drag moves the axes again.
    choose(view.dragChooser(), "Drag pans");
    drag(plot, {pixel(view, 10, 10), pixel(view, 12, 10)});
    EXPECT_NE(plot->xAxis->range(), x0);
    EXPECT_TRUE(view.selectedTokens().isEmpty());
}

TEST(NeighbourMap, SearchRingsAndLabelsACommonTokenOverAWhiteHalo)
{
    // A crowd of common tokens around token 0, so the label sits on dense points.
    NeighbourGraphData d;
    d.k = 1;
    for (int id = 0; id < 48400; ++id) { // token 0 at the centre of a 220 x 220 grid 0.01 apart
        d.x << (id == 0 ? 0.0 : -1.1 + 0.01 * (id % 220));
        d.y << (id == 0 ? 0.0 : -1.1 + 0.01 * (id / 220));
        d.tokens << QString("word%1").arg(id);
        (id < 48390 ? d.common : d.rare) << id;
    }
    for (int i = 0; i < 10; ++i) {
        d.neighbours << 0;
        d.weights << 1;
        d.cosine << 0.9;
    }
    d.x << 3 << -3; // corners, so the crowd is a small part of the axes
    d.y << 3 << -3;
    d.tokens << "far1"
             << "far2";
    d.common << 48400 << 48401;
    NeighbourGraphView view;
    view.setData(d);
    settle(view);
    click(view.densityToggle()); // the crowd as one grey image: no gaps between its points
    QLineEdit* box = view.findChild<QLineEdit*>();
    ASSERT_NE(box, nullptr);
    box->setFocus();
    type_text(box, "word0");
    press_key(box, Qt::Key_Return);
    EXPECT_EQ(view.highlightedToken(), 0);
    EXPECT_EQ(view.selectedToken(), -1) << "a common token has no neighbours to show";
    QCustomPlot* plot = view.plot();
    QCPItemText* label = nullptr;
    for (int i = 0; i < plot->itemCount(); ++i)
        if (auto* t = qobject_cast<QCPItemText*>(plot->item(i)); t && t->text() == "'word0' 0")
            label = t;
    ASSERT_NE(label, nullptr);
    EXPECT_TRUE(embedlab::views::neighbour_map::has_halo(label));
    QCPCurve* ring = nullptr;
    for (int i = 0; i < plot->plottableCount(); ++i)
        if (plot->plottable(i)->name() == "searched token")
            ring = qobject_cast<QCPCurve*>(plot->plottable(i));
    ASSERT_NE(ring, nullptr);
    ASSERT_EQ(ring->data()->size(), 1);
    EXPECT_EQ(ring->data()->at(0)->key, d.x[0]);
    bool said = false;
    for (auto* l : view.findChildren<QLabel*>())
        said = said || l->text().contains("token 0 is common");
    EXPECT_TRUE(said);
    // Drawn: inside the label's box, white halo pixels where the crowd's grey would be.
    plot->replot();
    const QImage with = plot->toPixmap().toImage();
    const QRect area = QRectF(label->topLeft->pixelPosition(), label->bottomRight->pixelPosition()).toRect();
    const QString text = label->text();
    label->setText(""); // (hidden, placeLabels would show the searched token's label again)
    const QImage without = plot->toPixmap().toImage();
    label->setText(text);
    int white_with = 0, white_without = 0, dark_with = 0;
    for (int y = area.top(); y <= area.bottom(); ++y)
        for (int x = area.left(); x <= area.right(); ++x) {
            white_with += qGray(with.pixel(x, y)) > 240;
            white_without += qGray(without.pixel(x, y)) > 240;
            dark_with += qGray(with.pixel(x, y)) < 60;
        }
    const int pixels = area.width() * area.height();
    EXPECT_LT(white_without, pixels / 8) << "the label sits on the crowd";
    EXPECT_GT(white_with, white_without + pixels / 10) << "the halo clears the points behind the glyphs";
    EXPECT_GT(dark_with, pixels / 20) << "and the text is drawn over it";
    // A rare token's search selects it (neighbours) and keeps working as before.
    press_key(box, Qt::Key_A, Qt::ControlModifier);
    type_text(box, "word48395");
    press_key(box, Qt::Key_Return);
    EXPECT_EQ(view.selectedToken(), 48395);
    EXPECT_EQ(view.highlightedToken(), 48395);
    EXPECT_TRUE(ring->data()->isEmpty()) << "the selected token has the selection's ring";
}

TEST(NeighbourMap, ColourByRecoloursAndTheWorstIsDrawnOnTop)
{
    NeighbourGraphData d = grid();
    // Token 1 (rare, the worst cosine) under token 3 (rare, the best cosine); token 5
    // (rare, never seen) under token 4 (common, seen 104 times): drawn by id or by
    // band order, the best would cover the worst.
    d.cosine[0] = 0.3;  // token 1
    d.cosine[1] = 0.97; // token 3
    d.x[3] = d.x[1];
    d.y[3] = d.y[1];
    d.frequency[5] = 0;
    d.x[4] = d.x[5];
    d.y[4] = d.y[5];
    d.frequency[7] = 0;
    NeighbourGraphView view;
    view.setData(d);
    settle(view);
    const QColor red(214, 39, 40), blue(31, 119, 180);
    EXPECT_TRUE(view.valueCurves().isEmpty());
    EXPECT_TRUE(near(drawn_at(view, d.x[1], d.y[1]), red)) << "the worst cosine covers the best";
    // The worst band's graph is the last of the point layers' plottables drawn.
    auto* rare_layer = view.plot()->layer("rare");
    ASSERT_NE(rare_layer, nullptr);
    QList<QCPLayerable*> order = rare_layer->children();
    EXPECT_EQ(order.indexOf(view.plot()->graph(1)), order.size() - 1) << "band 0 (cos < 0.5) drawn last";
    EXPECT_LT(order.indexOf(view.plot()->graph(5)), order.indexOf(view.plot()->graph(4)));

    choose(view.colourChooser(), "frequency in the text");
    const auto& curves = view.valueCurves();
    ASSERT_EQ(curves.size(), 6); // no value, then ≥ 100 .. never seen
    EXPECT_FALSE(view.plot()->graph(1)->visible());
    EXPECT_EQ(curves.back()->name(), "never seen");
    int never = 0;
    for (double f : d.frequency)
        never += f == 0;
    EXPECT_EQ(curves.back()->data()->size(), never);
    EXPECT_EQ(curves.back()->scatterStyle().brush().color().rgb(), red.rgb());
    EXPECT_EQ(curves[1]->scatterStyle().brush().color().rgb(), blue.rgb());
    // Token 5 (never seen) covers token 4 (seen 104 times).
    EXPECT_TRUE(near(drawn_at(view, d.x[5], d.y[5]), red));
    const auto ticks = view.colourScale()->axis()->ticker().dynamicCast<QCPAxisTickerText>();
    ASSERT_FALSE(ticks.isNull());
    EXPECT_EQ(ticks->ticks().values(), QStringList({"≥100", "10–99", "2–9", "1", "0"}));

    choose(view.colourChooser(), "rare / common");
    ASSERT_EQ(view.valueCurves().size(), 3);
    EXPECT_EQ(view.valueCurves()[1]->data()->size(), d.common.size());
    EXPECT_EQ(view.valueCurves()[2]->data()->size(), d.rare.size());
    EXPECT_TRUE(near(drawn_at(view, d.x[5], d.y[5]), red)) << "rare over common";

    // Damage values join the chooser and are shown; clearing them goes back to the cosine.
    QVector<double> damage(400);
    for (int id = 0; id < 400; ++id)
        damage[id] = id;
    view.setTokenValues(damage, "KL as target");
    EXPECT_EQ(view.colourChooser()->currentText(), "KL as target");
    ASSERT_EQ(view.valueCurves().size(), 6);
    view.setTokenValues({}, {});
    EXPECT_EQ(view.colourChooser()->findText("KL as target"), -1);
    choose(view.colourChooser(), "reconstruction cosine");
    EXPECT_TRUE(view.valueCurves().isEmpty());
    EXPECT_TRUE(view.plot()->graph(1)->visible());
}

TEST(NeighbourMap, DensityShadingDrawsEveryTokenAsAnImageUnderTheColouredPoints)
{
    auto d = embedlab::test::spiral_neighbour_graph(20000, 10000, 3);
    d.histogram = QVector<double>(10, 1000);
    NeighbourGraphView view;
    view.setData(d);
    settle(view);
    EXPECT_FALSE(view.densityMap()->visible());
    click(view.densityToggle());
    ASSERT_TRUE(view.densityToggle()->isChecked());
    view.plot()->replot();
    EXPECT_TRUE(view.densityMap()->visible());
    EXPECT_FALSE(view.plot()->graph(0)->visible()) << "the common tokens are the image";
    // The image counts every token in view.
    auto* cells = view.densityMap()->data();
    double total = 0;
    for (int x = 0; x < cells->keySize(); ++x)
        for (int y = 0; y < cells->valueSize(); ++y)
            total += std::pow(10.0, cells->cell(x, y)) - 1;
    EXPECT_NEAR(total, 20000, 1);
    // The common tokens' ring (radius 10, outside the rare disc of radius 8) is grey, not white.
    const QColor ring = drawn_at(view, d.x[5], d.y[5]);
    EXPECT_LT(qGray(ring.rgb()), 235);
    EXPECT_TRUE(std::abs(ring.red() - ring.green()) < 12 && std::abs(ring.green() - ring.blue()) < 12)
        << ring.name().toStdString();
    // Coloured points translucent over it, but for the worst band.
    EXPECT_LT(view.plot()->graph(5)->scatterStyle().brush().color().alpha(), 255);
    EXPECT_EQ(view.plot()->graph(1)->scatterStyle().brush().color().alpha(), 255);
    click(view.densityToggle());
    EXPECT_FALSE(view.densityMap()->visible());
    EXPECT_TRUE(view.plot()->graph(0)->visible());
}

TEST(NeighbourMap, MarkersShrinkWithTheFigure)
{
    NeighbourGraphView view;
    view.setData(embedlab::test::spiral_neighbour_graph(2000, 1000, 3));
    settle(view);
    const double window = view.plot()->graph(1)->scatterStyle().size();
    view.plot()->toPixmap(336, 208); // a single-column figure's layout
    const double figure = view.plot()->graph(1)->scatterStyle().size();
    EXPECT_LT(figure, 0.6 * window);
    EXPECT_GE(figure, 1.5);
    view.plot()->toPixmap(1000, 700);
    EXPECT_DOUBLE_EQ(view.plot()->graph(1)->scatterStyle().size(), 4.0);
}

TEST(NeighbourMap, TheTsneLayoutIsAskedForWithItsParametersAndShownWhenItComes)
{
    NeighbourGraphView view;
    const auto d = grid();
    view.setData(d);
    settle(view);
    QVector<QVariantList> asked;
    QObject::connect(&view, &NeighbourGraphView::layoutRequested,
                     [&](double perplexity, int iterations, qint64 seed, int sample) {
                         asked.push_back({perplexity, iterations, seed, sample});
                     });
    auto type = [](QAbstractSpinBox* spin, const QString& text) {
        embedlab::test::type_number(spin, text);
        press_key(spin, Qt::Key_Return);
    };
    type(view.perplexitySpin(), "12");
    type(view.iterationsSpin(), "500");
    type(view.seedSpin(), "7");
    type(view.sampleSpin(), "300");
    QPushButton* run = nullptr;
    for (auto* b : view.findChildren<QPushButton*>())
        if (b->text() == "Compute t-SNE")
            run = b;
    ASSERT_NE(run, nullptr);
    click(run);
    ASSERT_EQ(asked.size(), 1);
    EXPECT_DOUBLE_EQ(asked[0][0].toDouble(), 12);
    EXPECT_EQ(asked[0][1].toInt(), 500);
    EXPECT_EQ(asked[0][2].toLongLong(), 7);
    EXPECT_EQ(asked[0][3].toInt(), 300);
    // Choosing t-SNE with none computed asks too, and stays on PCA meanwhile.
    view.layoutChooser()->setFocus();
    press_key(view.layoutChooser(), Qt::Key_Down);
    EXPECT_EQ(asked.size(), 2);
    EXPECT_EQ(view.layoutChooser()->currentIndex(), 0);
    EXPECT_EQ(view.shownX(), d.x);

    NeighbourMapLayout tsne{"t-SNE", {}, {}, {}, "t-SNE over 300 sampled tokens: perplexity 12."};
    for (int id = 0; id < 400; ++id) {
        tsne.x << -d.y[id];
        tsne.y << d.x[id];
        if (id < 300)
            tsne.sample << id;
    }
    view.setLayout(tsne);
    EXPECT_EQ(view.layoutChooser()->currentIndex(), 1);
    EXPECT_EQ(view.shownX(), tsne.x);
    EXPECT_EQ(view.plot()->xAxis->label(), "t-SNE 1");
    EXPECT_TRUE(view.layoutNote().contains("perplexity 12")) << view.layoutNote().toStdString();
    EXPECT_TRUE(view.layoutNote().contains("100 of the 400 tokens are placed"))
        << view.layoutNote().toStdString();
    // The graph's points, the selection and the CSV follow the layout.
    ASSERT_TRUE(view.selectToken(41));
    QTemporaryDir dir;
    ASSERT_EQ(view.exportCoordinatesCsv(dir.filePath("t.csv")), "");
    const auto f = embedlab::csv_records(csv_lines(dir.filePath("t.csv"))[42].toStdString()).at(0);
    EXPECT_EQ(std::stod(f[2]), tsne.x[41]);
    EXPECT_EQ(std::stod(f[3]), tsne.y[41]);
    // Back to PCA, and a new graph of the same table keeps the t-SNE in the chooser.
    choose(view.layoutChooser(), "PCA");
    EXPECT_EQ(view.shownX(), d.x);
    EXPECT_EQ(view.plot()->xAxis->label(), "principal component 1");
    view.setData(d);
    choose(view.layoutChooser(), "t-SNE");
    EXPECT_EQ(view.shownX(), tsne.x);
    EXPECT_EQ(asked.size(), 2);
    // A layout of another size is refused.
    tsne.x.removeLast();
    view.setLayout(tsne);
    bool refused = false;
    for (auto* l : view.findChildren<QLabel*>())
        refused =
            refused || l->text().contains("The t-SNE layout has 399 points, the graph 400 tokens: not shown");
    EXPECT_TRUE(refused);
    EXPECT_EQ(view.shownX().size(), 400);
}

TEST(NeighbourMap, HundredAndFiftyThousandTokensDrawShadeAndSelect)
{
    auto d = embedlab::test::spiral_neighbour_graph(150000, 75000, 3);
    d.histogram = QVector<double>(40, 3000);
    NeighbourGraphView view;
    view.setData(d);
    click(view.densityToggle());
    settle(view);
    EXPECT_EQ(view.plot()->graphCount(), 7) << "a few graphs, no per-point items";
    EXPECT_EQ(view.plot()->itemCount(), 0);
    int points = 0;
    for (int g = 0; g < 6; ++g)
        points += view.plot()->graph(g)->data()->size();
    EXPECT_EQ(points, 150000);
    choose(view.dragChooser(), "Drag draws a lasso");
    drag(view.plot(), {pixel(view, -2, -2), pixel(view, 3, -2), pixel(view, 3, 3), pixel(view, -2, 3)});
    const int selected = view.selectedTokens().size();
    EXPECT_GT(selected, 2000);
    EXPECT_EQ(view.selectionList()->rowCount(), 2000) << "the list shows the first 2,000";
    for (int id : view.selectedTokens()) {
        ASSERT_GE(view.data().x[id], -2.01);
        ASSERT_LE(view.data().x[id], 3.01);
    }
    const auto stats = embedlab::test::render_to_png(view, "neighbour_map_150k.png");
    EXPECT_GT(stats.colours, 20);
}
