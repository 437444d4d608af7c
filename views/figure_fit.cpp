#include "figure_fit.hpp"

#include <QFontMetricsF>
#include <QTransform>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

namespace embedlab::views {

namespace {

// Every axis that shows something: the axis rects' and the colour bars'.
QVector<QCPAxis*> shownAxes(QCustomPlot* plot)
{
    QVector<QCPAxis*> out;
    for (auto* rect : plot->axisRects())
        for (auto* axis : rect->axes())
            if (axis->visible())
                out << axis;
    for (auto* element : plot->plotLayout()->elements(true))
        if (auto* scale = qobject_cast<QCPColorScale*>(element); scale && scale->visible())
            out << scale->axis();
    return out;
}

double axisLength(QCPAxis* axis)
{
    return axis->orientation() == Qt::Horizontal ? axis->axisRect()->width() : axis->axisRect()->height();
}

// `text` broken at spaces into lines no wider than `width` (a word wider stays whole).
QString wrapped(const QString& text, const QFontMetricsF& metrics, double width)
{
    QStringList lines;
    QString line;
    for (const QString& word : text.split(' ', Qt::SkipEmptyParts)) {
        const QString longer = line.isEmpty() ? word : line + ' ' + word;
        if (!line.isEmpty() && metrics.horizontalAdvance(longer) > width) {
            lines << line;
            line = word;
        } else {
            line = longer;
        }
    }
    if (!line.isEmpty())
        lines << line;
    return lines.join('\n');
}

double widest(const QString& text, const QFontMetricsF& metrics)
{
    double w = 0;
    for (const QString& line : text.split('\n'))
        w = std::max(w, metrics.horizontalAdvance(line));
    return w;
}

// The legend's entries in fill order (cells of a grid may be empty).
QVector<QCPLayoutElement*> entries(QCPLegend* legend)
{
    QVector<QCPLayoutElement*> out;
    for (int i = 0; i < legend->elementCount(); ++i)
        if (QCPLayoutElement* e = legend->elementAt(i); e && e->visible())
            out << e;
    return out;
}

// Pixels a legend column gets beyond its entry's width: QCustomPlot measures an entry
// in whole pixels, its text is drawn at fractional advances (a 6.5 pt type).
constexpr int kSlack = 3;

// The legend's width with its entries in `columns` columns, filled row by row.
int legendWidth(QCPLegend* legend, const QVector<QCPLayoutElement*>& items, int columns)
{
    int width = legend->margins().left() + legend->margins().right() +
                legend->columnSpacing() * (columns - 1) + kSlack * columns;
    for (int c = 0; c < columns; ++c) {
        int column = 0;
        for (int i = c; i < items.size(); i += columns)
            column = std::max(column, items[i]->minimumOuterSizeHint().width());
        width += column;
    }
    return width;
}

// Each shown tick label of `axis` as QCPAxisPainterPrivate places it (with a gap of
// a few pixels for reading around it), by tick.
QVector<std::pair<double, QPolygonF>> tickShapes(QCPAxis* axis)
{
    const QFontMetricsF metrics(axis->tickLabelFont());
    const bool horizontal = axis->orientation() == Qt::Horizontal;
    const double rotation = horizontal ? axis->tickLabelRotation() : 0.0;
    const QVector<double> ticks = axis->tickVector();
    const QVector<QString> labels = axis->tickVectorLabels();
    const QCPRange range = axis->range();
    const double slack = 1e-9 * std::abs(range.size());
    QVector<std::pair<double, QPolygonF>> shapes;
    constexpr double gap = 1.5; // on each side: 3 px between two labels
    for (int i = 0; i < std::min(ticks.size(), labels.size()); ++i) {
        if (labels[i].isEmpty() || ticks[i] < std::min(range.lower, range.upper) - slack ||
            ticks[i] > std::max(range.lower, range.upper) + slack)
            continue;
        const QRectF box = metrics.boundingRect(QRectF(), Qt::TextDontClip | Qt::AlignHCenter, labels[i]);
        const double w = box.width(), h = box.height(), at = axis->coordToPixel(ticks[i]);
        QRectF local;
        if (!horizontal)
            local = QRectF(0, -h / 2, w, h);
        else if (rotation == 0)
            local = QRectF(-w / 2, 0, w, h);
        else // turned about the end nearest the axis
            local = rotation > 0 ? QRectF(0, -h / 2, w, h) : QRectF(-w, -h / 2, w, h);
        local.adjust(-gap, -gap, gap, gap);
        QTransform t;
        if (horizontal)
            t.translate(at, 0).rotate(rotation);
        else
            t.translate(0, at);
        shapes.push_back({ticks[i], t.map(QPolygonF(local))});
    }
    return shapes;
}

// Do two neighbouring tick labels of `axis` run into each other?
bool ticksCollide(QCPAxis* axis)
{
    const auto shapes = tickShapes(axis);
    for (int i = 0; i + 1 < shapes.size(); ++i)
        if (shapes[i].second.intersects(shapes[i + 1].second))
            return true;
    return false;
}

} // namespace

FigureFit::FigureFit(QCustomPlot* plot, const QSize& size) : plot_(plot), size_(size)
{
    for (auto* axis : shownAxes(plot))
        axes_.push_back({axis, axis->label(), axis->labelFont(), axis->ticker(),
                         axis->ticker() ? axis->ticker()->tickCount() : 0, axis->tickLabelRotation()});
    fitMarkers();
    layOut();
    fitLegends();
    layOut();
    fitAxisLabels();
    fitTickLabels();
    fitTickOverhang();
}

FigureFit::~FigureFit()
{
    for (const auto& m : markers_) {
        if (auto* graph = qobject_cast<QCPGraph*>(m.plottable.data())) {
            auto style = graph->scatterStyle();
            style.setSize(m.size);
            graph->setScatterStyle(style);
        } else if (auto* curve = qobject_cast<QCPCurve*>(m.plottable.data())) {
            auto style = curve->scatterStyle();
            style.setSize(m.size);
            curve->setScatterStyle(style);
        }
    }
    for (const auto& m : margins_) {
        if (!m.rect)
            continue;
        m.rect->setAutoMargins(QCP::MarginSides(QFlag(m.auto_sides)));
        m.rect->setMargins(m.margins);
    }
    for (const auto& a : axes_) {
        if (!a.axis)
            continue;
        a.axis->setLabel(a.label);
        a.axis->setLabelFont(a.label_font);
        a.axis->setTicker(a.ticker);
        if (a.ticker)
            a.ticker->setTickCount(a.tick_count);
        a.axis->setTickLabelRotation(a.rotation);
    }
    for (const auto& l : legends_) {
        if (!l.legend)
            continue;
        l.legend->setFont(l.font);
        l.legend->setWrap(l.wrap);
        l.legend->setFillOrder(l.legend->fillOrder(), true);
        l.legend->setColumnStretchFactors(l.stretch.size() == l.legend->columnCount()
                                              ? l.stretch
                                              : QList<double>(l.legend->columnCount(), 1.0));
    }
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

void FigureFit::layOut()
{
    // A colour bar in a margin group offers the group its last margins, so margins
    // laid out for the window would stay: it starts from none and takes the group's.
    for (auto* element : plot_->plotLayout()->elements(true))
        if (auto* scale = qobject_cast<QCPColorScale*>(element); scale && !scale->marginGroups().isEmpty())
            scale->setMargins(QMargins());
    const QRect window = plot_->viewport();
    plot_->setViewport(QRect(QPoint(0, 0), size_));
    plot_->plotLayout()->update(QCPLayoutElement::upPreparation);
    plot_->plotLayout()->update(QCPLayoutElement::upMargins);
    plot_->plotLayout()->update(QCPLayoutElement::upLayout);
    plot_->setViewport(window); // toPainter sets the figure's again, and puts this back
}

void FigureFit::fitLegends()
{
    for (auto* element : plot_->plotLayout()->elements(true)) {
        auto* legend = qobject_cast<QCPLegend*>(element);
        // Inset legends (inside an axes) keep their place; the rows below are fitted.
        if (!legend || !legend->visible() || qobject_cast<QCPLayoutInset*>(legend->layout()))
            continue;
        const auto items = entries(legend);
        if (items.isEmpty())
            continue;
        legends_.push_back({legend, legend->wrap(), legend->font(), legend->columnStretchFactors()});
        const int available = legend->outerRect().width();
        // The most columns that fit; a smaller type (to 6 pt, 5 if need be) when one column
        // does not fit, or when it saves a row of a legend three rows deep.
        QFont font = legend->font();
        const double largest = font.pointSizeF() > 0 ? font.pointSizeF() : 8;
        auto columns_at = [&](double points) {
            font.setPointSizeF(points);
            legend->setFont(font);
            for (int n = static_cast<int>(items.size()); n >= 1; --n)
                if (legendWidth(legend, items, n) <= available)
                    return n;
            return 0;
        };
        auto rows = [&](int n) { return n > 0 ? (static_cast<int>(items.size()) + n - 1) / n : 1 << 20; };
        double best_points = largest;
        int columns = columns_at(largest);
        for (double points = largest - 0.5; points >= std::min(largest, 5.0); points -= 0.5) {
            const int n = columns_at(points);
            const bool needed =
                columns == 0 || (points >= 6 && rows(columns) >= 3 && rows(n) < rows(columns));
            if (n > 0 && needed && (columns == 0 || rows(n) < rows(columns))) {
                best_points = points;
                columns = n;
            }
        }
        font.setPointSizeF(best_points);
        legend->setFont(font);
        legend->setWrap(std::max(columns, 1));
        legend->setFillOrder(legend->fillOrder(), true);
        // Each column as wide as its widest entry, the columns together at the left: an
        // empty last column takes the rest (stretch factors in proportion to the widths;
        // maximum sizes would narrow the whole figure, a grid column being as narrow as
        // its narrowest element allows).
        const int n = std::max(columns, 1);
        QList<double> stretch;
        for (int c = 0; c < n; ++c) {
            int width = 0;
            for (int i = c; i < items.size(); i += n)
                width = std::max(width, items[i]->minimumOuterSizeHint().width());
            stretch << width + kSlack;
        }
        stretch << std::max(1, available - legendWidth(legend, items, n) - legend->columnSpacing());
        legend->expandTo(legend->rowCount(), n + 1);
        legend->setColumnStretchFactors(stretch);
    }
}

void FigureFit::fitAxisLabels()
{
    bool changed = false;
    for (auto* axis : shownAxes(plot_)) {
        if (axis->label().isEmpty())
            continue;
        const double room = axisLength(axis) - 4;
        const QString flat = QString(axis->label()).replace('\n', ' ');
        if (room <= 0 || widest(axis->label(), QFontMetricsF(axis->labelFont())) <= room)
            continue;
        // Two lines at most at the axes' type; beyond that a smaller type (to 6 pt), then more lines.
        QFont font = axis->labelFont();
        const double points = font.pointSizeF() > 0 ? font.pointSizeF() : 8;
        QString label = wrapped(flat, QFontMetricsF(font), room);
        for (double p = points - 0.5; label.count('\n') > 1 && p >= std::min(points, 6.0); p -= 0.5) {
            font.setPointSizeF(p);
            label = wrapped(flat, QFontMetricsF(font), room);
        }
        axis->setLabelFont(font);
        axis->setLabel(label);
        changed = true;
    }
    if (changed)
        layOut();
}

void FigureFit::fitTickLabels()
{
    static const double kTurns[] = {30, 45, 90};
    for (auto* axis : shownAxes(plot_)) {
        if (!axis->tickLabels() || !axis->ticker())
            continue;
        for (int attempt = 0; attempt < 10 && ticksCollide(axis); ++attempt) {
            const auto text = axis->ticker().dynamicCast<QCPAxisTickerText>();
            const double turn = std::abs(axis->tickLabelRotation());
            if (text && axis->orientation() == Qt::Horizontal && turn < 90) {
                // Categories: turned further, each label still under its own tick.
                const double next = *std::find_if(std::begin(kTurns), std::end(kTurns),
                                                  [&](double t) { return t > turn + 1e-9; });
                axis->setTickLabelRotation(axis->tickLabelRotation() < 0 ? -next : next);
            } else if (text) { // a label only where it has room after the last one kept
                auto thinned = QSharedPointer<QCPAxisTickerText>::create();
                QPolygonF last;
                for (const auto& [tick, shape] : tickShapes(axis))
                    if (last.isEmpty() || !last.intersects(shape)) {
                        thinned->addTick(tick, text->ticks().value(tick));
                        last = shape;
                    }
                if (thinned->ticks().size() == text->ticks().size() || thinned->ticks().isEmpty())
                    break;
                thinned->setSubTickCount(text->subTickCount());
                axis->setTicker(thinned);
            } else if (axis->ticker()->tickCount() > 2) {
                axis->ticker()->setTickCount(std::max(2, axis->ticker()->tickCount() * 2 / 3));
            } else {
                break;
            }
            layOut();
        }
    }
}

void FigureFit::fitTickOverhang()
{
    // QCPAxisPainterPrivate leaves out a horizontal tick label the viewport would cut;
    // the axes' side margin grows by what the furthest label reaches past the figure.
    bool changed = false;
    for (auto* axis : shownAxes(plot_)) {
        if (axis->orientation() != Qt::Horizontal || !axis->tickLabels() || !axis->axisRect())
            continue;
        double left = 0, right = size_.width();
        for (const auto& [tick, shape] : tickShapes(axis)) {
            left = std::min(left, shape.boundingRect().left());
            right = std::max(right, shape.boundingRect().right());
        }
        const int past_left = static_cast<int>(std::ceil(-left)),
                  past_right = static_cast<int>(std::ceil(right - size_.width()));
        if (past_left <= 0 && past_right <= 0)
            continue;
        QCPAxisRect* rect = axis->axisRect();
        if (std::none_of(margins_.begin(), margins_.end(), [&](const Margins& m) { return m.rect == rect; }))
            margins_.push_back({rect, static_cast<int>(rect->autoMargins().toInt()), rect->margins()});
        QMargins margins = rect->margins(); // as laid out: the automatic ones too
        QCP::MarginSides fixed;
        if (past_left > 0) {
            margins.setLeft(margins.left() + past_left);
            fixed |= QCP::msLeft;
        }
        if (past_right > 0) {
            margins.setRight(margins.right() + past_right);
            fixed |= QCP::msRight;
        }
        rect->setAutoMargins(rect->autoMargins() & ~fixed);
        rect->setMargins(margins);
        changed = true;
    }
    if (changed)
        layOut();
}

void FigureFit::fitMarkers()
{
    // A window-sized marker (7-10 px) in a 3.5 in column covers its neighbours.
    const double scale = std::clamp(size_.width() / 700.0, 0.6, 1.0);
    if (scale >= 1.0)
        return;
    for (int i = 0; i < plot_->plottableCount(); ++i) {
        QCPAbstractPlottable* p = plot_->plottable(i);
        QCPScatterStyle style;
        if (auto* graph = qobject_cast<QCPGraph*>(p))
            style = graph->scatterStyle();
        else if (auto* curve = qobject_cast<QCPCurve*>(p))
            style = curve->scatterStyle();
        else
            continue;
        if (style.isNone())
            continue;
        markers_.push_back({p, style.size()});
        style.setSize(std::max(std::min(3.0, style.size()), style.size() * scale)); // never larger
        if (auto* graph = qobject_cast<QCPGraph*>(p))
            graph->setScatterStyle(style);
        else
            static_cast<QCPCurve*>(p)->setScatterStyle(style);
    }
}

} // namespace embedlab::views
