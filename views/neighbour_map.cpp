// The neighbour graph's map (neighbour_graph_view.hpp): the colour columns and
// their drawing order, the density image, marker sizes for the figure, the
// layouts (PCA, t-SNE), the box / lasso drag with its list and CSV, and the
// haloed labels.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <QCheckBox>
#include <QComboBox>
#include <QFileDialog>
#include <QHeaderView>
#include <QLabel>
#include <QMessageBox>
#include <QMouseEvent>
#include <QSaveFile>
#include <QSignalBlocker>
#include <QTableWidget>
#include <qcustomplot.h>

#include "neighbour_graph_view.hpp"
#include "neighbour_map_style.hpp"
#include "token_text.hpp"

namespace embedlab::views {

namespace neighbour_map {

QCPColorGradient cosine_gradient()
{
    QCPColorGradient bands;
    bands.clearColorStops();
    bands.setColorInterpolation(QCPColorGradient::ciRGB);
    bands.setLevelCount(600); // sharp steps between the bands
    double lower = kScaleLow;
    for (const auto& band : kBands) {
        const double upper = std::min(band.below, 1.0);
        bands.setColorStopAt((lower - kScaleLow) / (1.0 - kScaleLow), band.colour);
        bands.setColorStopAt((upper - kScaleLow) / (1.0 - kScaleLow) - 1e-6, band.colour);
        lower = upper;
    }
    return bands;
}

QSharedPointer<QCPAxisTickerText> cosine_ticks()
{
    auto ticks = QSharedPointer<QCPAxisTickerText>::create();
    ticks->addTicks({kScaleLow, 0.5, 0.7, 0.8, 0.9, 1.0}, {"", "0.5", "0.7", "0.8", "0.9", "1"});
    return ticks;
}

QString csv_quoted(const QString& text)
{
    return '"' + QString(text).replace('"', "\"\"") + '"';
}

namespace {

// QCPItemText's drawing, with the text first stroked in white around its glyphs.
class HaloText : public QCPItemText {
public:
    using QCPItemText::QCPItemText;

protected:
    void draw(QCPPainter* painter) override
    {
        const QPointF pos(position->pixelPosition());
        QTransform transform = painter->transform();
        transform.translate(pos.x(), pos.y());
        if (!qFuzzyIsNull(rotation()))
            transform.rotate(rotation());
        painter->setFont(mainFont());
        const int flags = Qt::TextDontClip | textAlignment();
        QRect text_rect = painter->fontMetrics().boundingRect(0, 0, 0, 0, flags, text());
        QRect box =
            text_rect.adjusted(-padding().left(), -padding().top(), padding().right(), padding().bottom());
        const QPointF at = getTextDrawPoint(QPointF(0, 0), box, positionAlignment());
        text_rect.moveTopLeft(at.toPoint() + QPoint(padding().left(), padding().top()));
        box.moveTopLeft(at.toPoint());
        if (!transform.mapRect(box.adjusted(-3, -3, 3, 3))
                 .intersects(painter->transform().mapRect(clipRect())))
            return;
        painter->setTransform(transform);
        painter->setBrush(Qt::NoBrush);
        painter->setPen(QPen(QColor(255, 255, 255, 235)));
        for (int a = 0; a < 12; ++a) { // a 1.5 px ring of white copies: the halo
            const double angle = a * M_PI / 6;
            painter->drawText(QRectF(text_rect).translated(1.5 * std::cos(angle), 1.5 * std::sin(angle)),
                              flags, text());
        }
        painter->setPen(QPen(mainColor()));
        painter->drawText(text_rect, flags, text());
    }
};

} // namespace

QCPItemText* halo_text(QCustomPlot* plot)
{
    return new HaloText(plot);
}

bool has_halo(const QCPItemText* text)
{
    return dynamic_cast<const HaloText*>(text) != nullptr;
}

} // namespace neighbour_map

using namespace neighbour_map;

namespace {

// 'r' rare, 'c' common, 'o' other, per token id.
QVector<char> kinds(const NeighbourGraphData& d, int V)
{
    QVector<char> kind(V, 'o');
    for (int id : d.common)
        if (id >= 0 && id < V)
            kind[id] = 'c';
    for (int id : d.rare)
        if (id >= 0 && id < V)
            kind[id] = 'r';
    return kind;
}

QString kind_name(char kind)
{
    return kind == 'r' ? "rare" : kind == 'c' ? "common" : "other";
}

QCPCurve* band_curve(QCustomPlot* plot, const QString& name, const QColor& colour, double size)
{
    auto* c = new QCPCurve(plot->xAxis, plot->yAxis);
    c->setName(name);
    c->setLayer("rare");
    c->setLineStyle(QCPCurve::lsNone);
    c->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, colour, size));
    return c;
}

// The same marker at another size and opacity.
void restyle(QCPAbstractPlottable* p, double size, int alpha)
{
    QCPScatterStyle style;
    if (auto* g = qobject_cast<QCPGraph*>(p))
        style = g->scatterStyle();
    else if (auto* c = qobject_cast<QCPCurve*>(p))
        style = c->scatterStyle();
    style.setSize(size);
    if (alpha >= 0) {
        QColor colour = style.pen().color();
        colour.setAlpha(alpha);
        style.setPen(QPen(colour));
        style.setBrush(colour);
    }
    if (auto* g = qobject_cast<QCPGraph*>(p))
        g->setScatterStyle(style);
    else if (auto* c = qobject_cast<QCPCurve*>(p))
        c->setScatterStyle(style);
}

} // namespace

void NeighbourGraphView::setTokenValues(const QVector<double>& values, const QString& label)
{
    values_ = values;
    values_label_ = values.isEmpty() ? QString() : label;
    {
        const QSignalBlocker block(colour_);
        const int at = colour_->findData(Values);
        const bool was_shown = at >= 0 && at == colour_->currentIndex();
        if (at >= 0)
            colour_->removeItem(at);
        if (!values_label_.isEmpty()) {
            colour_->addItem(values_label_, Values);
            colour_->setCurrentIndex(colour_->count() - 1);
        } else if (was_shown || colour_->currentIndex() < 0) {
            colour_->setCurrentIndex(std::max(0, colour_->findData(Cosine)));
        }
    }
    drawValues();
    fillChosenList();
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

QVector<double> NeighbourGraphView::columnValues(int column) const
{
    const int V = static_cast<int>(lx_.size());
    QVector<double> v(V, std::nan(""));
    switch (column) {
    case Cosine:
        for (int i = 0; i < data_.rare.size() && i < data_.cosine.size(); ++i)
            if (data_.rare[i] >= 0 && data_.rare[i] < V)
                v[data_.rare[i]] = data_.cosine[i];
        break;
    case Frequency:
        if (data_.frequency.size() == V)
            v = data_.frequency;
        break;
    case RareCommon:
        for (int id : data_.common)
            if (id >= 0 && id < V)
                v[id] = 0;
        for (int id : data_.rare)
            if (id >= 0 && id < V)
                v[id] = 1;
        break;
    default:
        if (values_.size() == V)
            v = values_;
    }
    return v;
}

QString NeighbourGraphView::columnName(int column) const
{
    switch (column) {
    case Cosine:
        return "cosine";
    case Frequency:
        return "frequency";
    case RareCommon:
        return "rare";
    default:
        return values_label_;
    }
}

void NeighbourGraphView::drawCosineBands()
{
    const int V = static_cast<int>(std::min(lx_.size(), ly_.size()));
    QVector<double> cx, cy;
    for (int id : data_.common)
        if (id >= 0 && id < V) {
            cx << lx_[id];
            cy << ly_[id];
        }
    plot_->graph(0)->setData(cx, cy);
    QVector<QVector<double>> bx(kBandCount), by(kBandCount);
    for (int i = 0; i < data_.rare.size(); ++i) {
        const int id = data_.rare[i];
        if (id < 0 || id >= V)
            continue;
        const double c = i < data_.cosine.size() ? data_.cosine[i] : 0.0;
        int b = 0;
        while (b + 1 < kBandCount && c >= kBands[b].below)
            ++b;
        bx[b] << lx_[id];
        by[b] << ly_[id];
    }
    for (int b = 0; b < kBandCount; ++b)
        plot_->graph(kFirstBand + b)->setData(bx[b], by[b]);
}

void NeighbourGraphView::drawValues()
{
    for (auto* curve : value_curves_)
        plot_->removePlottable(curve);
    value_curves_.clear();
    const int V = static_cast<int>(std::min(lx_.size(), ly_.size()));
    const int column = colour_->currentData().isValid() ? colour_->currentData().toInt() : Cosine;
    const QVector<double> values = column == Cosine ? QVector<double>() : columnValues(column);
    const bool shown = column != Cosine && values.size() == V && V > 0 &&
                       std::any_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
    const bool density = density_toggle_->isChecked() && V > 0;
    density_->setVisible(density);
    density_key_.clear();
    // With the density image, the background (common tokens, tokens without a value)
    // is the image: only the coloured points are drawn over it.
    for (int g = 0; g < kSelection; ++g)
        plot_->graph(g)->setVisible(!shown && !(g == 0 && density));
    if (shown || density)
        plot_->graph(0)->removeFromLegend();
    else if (!plot_->legend->hasItemWithPlottable(plot_->graph(0)))
        plot_->graph(0)->addToLegend();
    if (!shown) {
        scale_label_->setText("rare, by cosine:");
        scale_->setGradient(cosine_gradient());
        scale_->axis()->setTicker(cosine_ticks());
        scale_->setDataRange(QCPRange(kScaleLow, 1.0));
        styleMarkers();
        return;
    }
    // Each token's band (-1: no value) and badness; drawn band by band, best first,
    // each band in ascending badness, so the worst token is the last point drawn.
    struct Spec {
        QString name;
        QColor colour;
    };
    QVector<Spec> bands;
    QVector<int> band(V, -1);
    QVector<double> badness(V, 0.0);
    QString none = "no value";
    auto ticks = QSharedPointer<QCPAxisTickerText>::create();
    auto five = [](int b) { return kBands[kBandCount - 1 - b].colour; }; // blue (best) .. red (worst)
    if (column == Values) {
        static const struct {
            double rank;
            const char* name;
        } kRanks[] = {{0.5, "below the median"},
                      {0.8, "median–80 %"},
                      {0.95, "80–95 %"},
                      {0.99, "95–99 %"},
                      {1.0, "worst 1 %"}};
        QVector<int> order;
        for (int id = 0; id < V; ++id)
            if (std::isfinite(values[id]))
                order << id;
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return values[a] < values[b]; });
        int from = 0;
        for (int b = 0; b < 5; ++b) {
            bands.push_back({kRanks[b].name, five(b)});
            const int to =
                b == 4 ? static_cast<int>(order.size()) : static_cast<int>(kRanks[b].rank * order.size());
            for (int i = from; i < to; ++i) {
                band[order[i]] = b;
                badness[order[i]] = values[order[i]];
            }
            ticks->addTick(b, QString::number(values[order[std::min<int>(from, order.size() - 1)]], 'g', 2));
            from = to;
        }
        ticks->addTick(5, QString::number(values[order.back()], 'g', 2));
        none = "no value (never a target)";
    } else if (column == Frequency) {
        // Rarer is worse: the tokens the text hardly has are what LLE rebuilds.
        static const struct {
            double at_least;
            const char* name;
            const char* tick;
        } kCounts[] = {{100, "seen ≥ 100 times", "≥100"},
                       {10, "seen 10–99 times", "10–99"},
                       {2, "seen 2–9 times", "2–9"},
                       {1, "seen once", "1"},
                       {-1e300, "never seen", "0"}};
        for (int b = 0; b < 5; ++b) {
            bands.push_back({kCounts[b].name, five(b)});
            ticks->addTick(b + 0.5, kCounts[b].tick);
        }
        for (int id = 0; id < V; ++id)
            if (std::isfinite(values[id])) {
                int b = 0;
                while (values[id] < kCounts[b].at_least)
                    ++b;
                band[id] = b;
                badness[id] = -values[id];
            }
    } else { // rare / common
        bands = {{"common (kept)", kCommonGrey}, {"rare (rebuilt)", kBands[0].colour}};
        bands[0].colour.setAlpha(255);
        ticks->addTick(0.5, "common");
        ticks->addTick(1.5, "rare");
        for (int id = 0; id < V; ++id)
            if (std::isfinite(values[id]))
                band[id] = static_cast<int>(values[id]);
        none = "neither (not in the split)";
    }
    QVector<int> order(V);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
        return band[a] != band[b] ? band[a] < band[b] : badness[a] < badness[b];
    });
    const int nb = static_cast<int>(bands.size());
    QVector<QVector<double>> t(nb + 1), x(nb + 1), y(nb + 1);
    for (int id : order) {
        const int c = band[id] + 1; // 0: no value
        t[c] << t[c].size();
        x[c] << lx_[id];
        y[c] << ly_[id];
    }
    auto* missing = band_curve(plot_, none, QColor(170, 170, 170, 140), 3);
    missing->setData(t[0], x[0], y[0], true);
    missing->setVisible(!density);
    if (t[0].isEmpty() || density)
        missing->removeFromLegend();
    value_curves_ << missing;
    QCPColorGradient gradient;
    gradient.clearColorStops();
    gradient.setLevelCount(600);
    for (int b = 0; b < nb; ++b) {
        auto* c = band_curve(plot_, bands[b].name, bands[b].colour, b + 1 == nb ? 5 : 4);
        c->setData(t[b + 1], x[b + 1], y[b + 1], true);
        c->removeFromLegend(); // the colour bar says which values a colour is
        value_curves_ << c;
        gradient.setColorStopAt(b / double(nb), bands[b].colour);
        gradient.setColorStopAt((b + 1) / double(nb) - 1e-6, bands[b].colour);
    }
    scale_label_->setText(column == Values ? values_label_ + ", by rank:" : colour_->currentText() + ":");
    scale_->setGradient(gradient);
    scale_->axis()->setTicker(ticks);
    scale_->setDataRange(QCPRange(0, nb));
    styleMarkers();
}

void NeighbourGraphView::styleMarkers()
{
    // Markers for the size the axes have (a single-column figure is a third of a
    // window): never blobs; and translucent over the density image but for the worst.
    const QRect r = plot_->axisRect()->rect();
    const double f = r.isEmpty() ? 1.0 : std::clamp(std::min(r.width(), r.height()) / 420.0, 0.45, 1.0);
    const bool density = density_toggle_->isChecked();
    // Over the density image a band is translucent, the more so the more its points
    // would cover the axes (150k points of one band: mostly see-through); the worst
    // band only for that reason, the others at most 150 of 255.
    const double area = std::max(1.0, static_cast<double>(r.width()) * r.height());
    auto alpha = [&](int points, double size, bool worst) {
        if (!density)
            return 255;
        const int crowded =
            static_cast<int>(std::clamp(255 * area / (3.0 * points * size * size + 1), 50.0, 255.0));
        return worst ? crowded : std::min(crowded, 150);
    };
    restyle(plot_->graph(0), 3 * f, -1);
    for (int b = 0; b < kBandCount; ++b) {
        QCPGraph* g = plot_->graph(kFirstBand + b);
        restyle(g, 4 * f, alpha(g->data()->size(), 4 * f, b == 0));
    }
    for (int i = 0; i < value_curves_.size(); ++i) {
        const bool worst = i + 1 == value_curves_.size();
        const double size = (i == 0 ? 3 : worst ? 5 : 4) * f;
        restyle(value_curves_[i], size, i == 0 ? 140 : alpha(value_curves_[i]->data()->size(), size, worst));
    }
    // Rings on a box / lasso selection, but not on thousands: they would bury the
    // points; the outline (and its shading) marks the region then.
    QCPScatterStyle rings = chosen_rings_->scatterStyle();
    rings.setShape(chosen_rings_->data()->size() > 2000 ? QCPScatterStyle::ssNone
                                                        : QCPScatterStyle::ssCircle);
    chosen_rings_->setScatterStyle(rings);
    restyle(plot_->graph(kSelection), 9 * std::max(f, 0.7), -1);
    restyle(chosen_rings_, 6 * f, -1);
    restyle(highlight_ring_, 12 * std::max(f, 0.7), -1);
}

void NeighbourGraphView::binDensity()
{
    if (!density_->visible())
        return;
    const QRect r = plot_->axisRect()->rect();
    const QCPRange xr = plot_->xAxis->range(), yr = plot_->yAxis->range();
    const QString key = QString("%1 %2 %3 %4 %5 %6")
                            .arg(xr.lower)
                            .arg(xr.upper)
                            .arg(yr.lower)
                            .arg(yr.upper)
                            .arg(r.width())
                            .arg(r.height());
    if (key == density_key_ || r.isEmpty())
        return;
    density_key_ = key;
    // Cells of 2 px over what is shown: counts, on a log scale, empty cells clear.
    const int nx = std::max(1, r.width() / 2), ny = std::max(1, r.height() / 2);
    QVector<int> count(nx * ny, 0);
    const int V = static_cast<int>(std::min(lx_.size(), ly_.size()));
    for (int id = 0; id < V; ++id) {
        const int cx = static_cast<int>(std::floor((lx_[id] - xr.lower) / xr.size() * nx));
        const int cy = static_cast<int>(std::floor((ly_[id] - yr.lower) / yr.size() * ny));
        if (cx >= 0 && cx < nx && cy >= 0 && cy < ny)
            ++count[cy * nx + cx];
    }
    auto* data = density_->data();
    data->setSize(nx, ny);
    data->setRange(QCPRange(xr.lower + xr.size() / nx / 2, xr.upper - xr.size() / nx / 2),
                   QCPRange(yr.lower + yr.size() / ny / 2, yr.upper - yr.size() / ny / 2));
    double top = 1e-9;
    for (int cy = 0; cy < ny; ++cy)
        for (int cx = 0; cx < nx; ++cx) {
            const double v = std::log10(1.0 + count[cy * nx + cx]);
            top = std::max(top, v);
            data->setCell(cx, cy, v);
            data->setAlpha(cx, cy, count[cy * nx + cx] > 0 ? 255 : 0);
        }
    density_->setDataRange(QCPRange(0, top));
}

void NeighbourGraphView::requestLayout()
{
    layout_note_->setText(QString("t-SNE: computing over %1 tokens (perplexity %2, %3 iterations, seed %4)…")
                              .arg(sample_->value())
                              .arg(perplexity_->value())
                              .arg(iterations_->value())
                              .arg(seed_->value()));
    emit layoutRequested(perplexity_->value(), iterations_->value(), seed_->value(), sample_->value());
}

void NeighbourGraphView::showLayout(int index)
{
    if (index < 0)
        return;
    if (index >= layouts_.size()) { // t-SNE chosen, none yet: ask for one; PCA meanwhile
        {
            const QSignalBlocker block(layout_);
            layout_->setCurrentIndex(0);
        }
        if (!data_.x.isEmpty())
            requestLayout();
        return;
    }
    const NeighbourMapLayout& l = layouts_[index];
    lx_ = l.x;
    ly_ = l.y;
    plot_->xAxis->setLabel(l.name + " 1");
    plot_->yAxis->setLabel(l.name + " 2");
    layout_note_->setText(layoutNote());
    lasso_.clear();
    outline_->data()->clear(); // drawn in the other layout's coordinates
    drawCosineBands();
    drawValues();
    if (!lx_.isEmpty()) {
        const auto [x0, x1] = std::minmax_element(lx_.begin(), lx_.end());
        const auto [y0, y1] = std::minmax_element(ly_.begin(), ly_.end());
        auto range = [](double lo, double hi) {
            const double half = hi > lo ? (hi - lo) / 2 * 1.05 : 1.0, mid = (lo + hi) / 2;
            return QCPRange(mid - half, mid + half);
        };
        plot_->xAxis->setRange(range(*x0, *x1));
        plot_->yAxis->setRange(range(*y0, *y1));
    }
    drawSelection();
    drawChosen();
    fillChosenList();
}

void NeighbourGraphView::setLayout(const NeighbourMapLayout& layout)
{
    if (layout.x.size() != data_.x.size() || layout.y.size() != data_.x.size()) {
        layout_note_->setText(QString("The %1 layout has %2 points, the graph %3 tokens: not shown.")
                                  .arg(layout.name)
                                  .arg(layout.x.size())
                                  .arg(data_.x.size()));
        return;
    }
    layouts_.resize(1);
    layouts_ << layout;
    const QSignalBlocker block(layout_);
    layout_->setCurrentIndex(1);
    showLayout(1);
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

QString NeighbourGraphView::layoutNote() const
{
    const int shown = layout_->currentIndex();
    if (shown <= 0 || shown >= layouts_.size())
        return layouts_.isEmpty() || data_.x.isEmpty() ? QString() : layouts_[0].parameters;
    const NeighbourMapLayout& l = layouts_[shown];
    QString note = l.parameters;
    if (!l.sample.isEmpty() && l.sample.size() < l.x.size())
        note += QString(" (%1 of the %2 tokens are placed, not part of the t-SNE.)")
                    .arg(l.x.size() - l.sample.size())
                    .arg(l.x.size());
    return note;
}

void NeighbourGraphView::pressed(QMouseEvent* event)
{
    press_ = event->position();
    dragging_ = drag_->currentIndex() != Pan && event->button() == Qt::LeftButton &&
                plot_->axisRect()->rect().contains(press_.toPoint());
    if (dragging_)
        lasso_ = {press_};
}

void NeighbourGraphView::moved(QMouseEvent* event)
{
    if (!dragging_)
        return;
    const QPointF p = event->position();
    if (drag_->currentIndex() == Box)
        lasso_ = QPolygonF(QRectF(press_, p).normalized());
    else if (lasso_.isEmpty() || (p - lasso_.back()).manhattanLength() >= 2)
        lasso_ << p;
    QVector<double> t, x, y;
    for (const QPointF& q : lasso_) {
        t << t.size();
        x << plot_->xAxis->pixelToCoord(q.x());
        y << plot_->yAxis->pixelToCoord(q.y());
    }
    if (!x.isEmpty()) { // closed
        t << t.size();
        x << x.front();
        y << y.front();
    }
    outline_->setData(t, x, y, true);
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

QVector<int> NeighbourGraphView::tokensInside(const QPolygonF& polygon) const
{
    QVector<int> out;
    if (polygon.size() < 3)
        return out;
    const QRectF bounds = polygon.boundingRect();
    const int V = static_cast<int>(std::min(lx_.size(), ly_.size()));
    for (int id = 0; id < V; ++id) {
        const QPointF p(plot_->xAxis->coordToPixel(lx_[id]), plot_->yAxis->coordToPixel(ly_[id]));
        if (bounds.contains(p) && polygon.containsPoint(p, Qt::OddEvenFill))
            out << id;
    }
    return out;
}

void NeighbourGraphView::setSelection(const QVector<int>& ids)
{
    chosen_.clear();
    for (int id : ids)
        if (id >= 0 && id < lx_.size())
            chosen_ << id;
    std::sort(chosen_.begin(), chosen_.end());
    chosen_.erase(std::unique(chosen_.begin(), chosen_.end()), chosen_.end());
    drawChosen();
    fillChosenList();
    if (!chosen_.isEmpty())
        side_->setCurrentIndex(1); // the list of what was just selected
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

void NeighbourGraphView::drawChosen()
{
    QVector<double> t, x, y;
    for (int id : chosen_)
        if (id < lx_.size()) {
            t << t.size();
            x << lx_[id];
            y << ly_[id];
        }
    chosen_rings_->setData(t, x, y, true);
}

void NeighbourGraphView::fillChosenList()
{
    constexpr int kListed = 2000; // a table of 100k rows takes seconds; the CSV has them all
    const int column = colour_->currentData().isValid() ? colour_->currentData().toInt() : Cosine;
    const QVector<double> values = columnValues(column);
    const QVector<char> kind = kinds(data_, static_cast<int>(lx_.size()));
    chosen_list_->setUpdatesEnabled(false);
    chosen_list_->setRowCount(0);
    chosen_list_->setHorizontalHeaderItem(3, new QTableWidgetItem(columnName(column)));
    const int rows = static_cast<int>(std::min<qsizetype>(chosen_.size(), kListed));
    chosen_list_->setRowCount(rows);
    for (int r = 0; r < rows; ++r) {
        const int id = chosen_[r];
        auto cell = [](const QString& text, bool number) {
            auto* item = new QTableWidgetItem(text);
            if (number)
                item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            return item;
        };
        chosen_list_->setItem(
            r, 0,
            cell(id < data_.tokens.size() ? "'" + escaped_token(data_.tokens[id]) + "'" : QString(), false));
        chosen_list_->setItem(r, 1, cell(QString::number(id), true));
        chosen_list_->setItem(r, 2, cell(kind_name(kind[id]), false));
        chosen_list_->setItem(r, 3,
                              cell(id < values.size() && std::isfinite(values[id])
                                       ? QString::number(values[id], 'g', 4)
                                       : QString::fromUtf8("\u2014"),
                                   true));
    }
    chosen_list_->setUpdatesEnabled(true);
    if (chosen_.isEmpty())
        chosen_title_->setText(data_.x.isEmpty()
                                   ? QString()
                                   : "<b>Selection</b>: none. Choose a box or lasso drag under the "
                                     "map and drag over the points.");
    else
        chosen_title_->setText(QString("<b>Selection</b>: %1 token%2%3")
                                   .arg(chosen_.size())
                                   .arg(chosen_.size() == 1 ? "" : "s")
                                   .arg(chosen_.size() > kListed
                                            ? QString(" (the first %1 listed; the CSV has all)").arg(kListed)
                                            : QString()));
}

QString NeighbourGraphView::exportSelectionCsv(const QString& file) const
{
    QSaveFile out(file);
    if (!out.open(QIODevice::WriteOnly | QIODevice::Text))
        return file + ": " + out.errorString();
    const QVector<double> cosine = columnValues(Cosine), value = columnValues(Values);
    const QVector<char> kind = kinds(data_, static_cast<int>(lx_.size()));
    QByteArray text = "id,token,x,y,kind,cosine,frequency,value\n";
    for (int id : chosen_) {
        const QString line =
            QString::number(id) + ',' +
            csv_quoted(id < data_.tokens.size() ? escaped_token(data_.tokens[id]) : QString()) + ',' +
            QString::number(lx_[id], 'g', 17) + ',' + QString::number(ly_[id], 'g', 17) + ',' +
            kind_name(kind[id]) + ',' +
            (std::isfinite(cosine[id]) ? QString::number(cosine[id], 'g', 17) : QString()) + ',' +
            (id < data_.frequency.size() ? QString::number(data_.frequency[id], 'g', 17) : QString()) + ',' +
            (std::isfinite(value[id]) ? QString::number(value[id], 'g', 17) : QString()) + '\n';
        text += line.toUtf8();
    }
    if (out.write(text) != text.size() || !out.commit())
        return file + ": " + out.errorString();
    return {};
}

void NeighbourGraphView::exportSelectionInteractively()
{
    if (chosen_.isEmpty()) {
        QMessageBox::information(this, "Export selection", "Nothing is selected: drag a box or lasso first.");
        return;
    }
    const QString file =
        QFileDialog::getSaveFileName(this, "Export selection", "neighbour_selection.csv", "CSV (*.csv)");
    if (file.isEmpty())
        return;
    const QString error = exportSelectionCsv(file);
    if (!error.isEmpty())
        QMessageBox::warning(this, "Export selection", error);
    else
        stats_->setText(QString("%1 selected tokens written to %2").arg(chosen_.size()).arg(file));
}

} // namespace embedlab::views
