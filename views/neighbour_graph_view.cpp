#include "neighbour_graph_view.hpp"

#include "token_text.hpp"

#include <algorithm>
#include <cmath>

#include <QFontMetrics>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "hover.hpp"

namespace embedlab::views {

namespace {

// Rare tokens are drawn in bands of reconstruction cosine, worst first.
struct Band {
    double below;
    const char* name;
    QColor colour;
};
const Band kBands[] = {{0.5, "rare, cos < 0.5", {214, 39, 40}},
                       {0.7, "cos 0.5–0.7", {255, 127, 14}},
                       {0.8, "cos 0.7–0.8", {188, 189, 34}},
                       {0.9, "cos 0.8–0.9", {44, 160, 44}},
                       {2.0, "cos ≥ 0.9", {31, 119, 180}}};
constexpr int kBandCount = 5;
constexpr int kFirstBand = 1;              // graph 0: common tokens
constexpr int kSelection = 1 + kBandCount; // graph: the selected token and its neighbours

} // namespace

NeighbourGraphView::NeighbourGraphView(QWidget* parent)
    : QWidget(parent), plot_(new QCustomPlot(this)), search_(new QLineEdit(this)), stats_(new QLabel(this))
{
    auto* common = plot_->addGraph();
    common->setName("common (kept)");
    // Common tokens are few: draw them above the rare ones so they stay visible.
    plot_->addLayer("common", plot_->layer("main"), QCustomPlot::limAbove);
    common->setLayer("common");
    common->setLineStyle(QCPGraph::lsNone);
    common->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, QColor(110, 110, 110, 160), 3));
    for (const auto& band : kBands) {
        auto* g = plot_->addGraph();
        g->setName(band.name);
        g->setLineStyle(QCPGraph::lsNone);
        g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, band.colour, 4));
    }
    auto* selection = plot_->addGraph();
    selection->setLineStyle(QCPGraph::lsNone);
    selection->setScatterStyle(
        QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(Qt::black, 1.5), Qt::NoBrush, 9));
    selection->removeFromLegend();
    plot_->addLayer("selection", plot_->layer("common"), QCustomPlot::limAbove);
    selection->setLayer("selection");
    plot_->xAxis->setLabel("principal component 1");
    plot_->yAxis->setLabel("principal component 2");
    plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    // Top: the scatter and the histogram side by side; under both, the legend.
    // Outside the axis rect it can never hide the selected token's edges and labels.
    auto* scatter = plot_->axisRect();
    auto* top = new QCPLayoutGrid;
    plot_->plotLayout()->take(scatter);
    plot_->plotLayout()->addElement(0, 0, top);
    top->addElement(0, 0, scatter); // first, so plot_->axisRect() stays the scatter
    scatter->insetLayout()->take(plot_->legend);
    plot_->plotLayout()->addElement(1, 0, plot_->legend);
    plot_->plotLayout()->setRowStretchFactor(1, 0.001); // as tall as its entries need
    plot_->plotLayout()->setRowSpacing(0);
    plot_->legend->setVisible(true);
    plot_->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
    plot_->legend->setWrap(3); // 2 rows of 3: narrow enough for a single-column figure
    plot_->legend->setBorderPen(Qt::NoPen);
    plot_->legend->setFont(QFont(font().family(), 8));
    plot_->legend->setMargins(QMargins(4, 0, 4, 2));
    plot_->legend->setIconSize(10, 10); // the points are dots: a small swatch says it
    plot_->legend->setIconTextPadding(3);

    hist_rect_ = new QCPAxisRect(plot_);
    hist_rect_->setRangeDrag({});
    hist_rect_->setRangeZoom({});
    top->addElement(0, 1, hist_rect_);
    top->setColumnStretchFactor(1, 0.45);
    // Two short lines, and an axis at least as wide as the longest: the label is
    // centred on the axis, so it stays inside the figure even at single-column width.
    QCPAxis* cosine_axis = hist_rect_->axis(QCPAxis::atBottom);
    cosine_axis->setLabel("reconstruction\ncosine");
    QFont label_font = cosine_axis->labelFont();
    label_font.setPointSizeF(std::max(label_font.pointSizeF(), 9.0)); // covers the export's 8 pt type
    const QFontMetrics metrics(label_font);
    hist_rect_->setMinimumSize(
        metrics.boundingRect(QRect(), Qt::TextDontClip, cosine_axis->label()).width() + 4, 0);
    hist_rect_->axis(QCPAxis::atLeft)->setLabel("rare tokens");
    hist_ = new QCPBars(hist_rect_->axis(QCPAxis::atBottom), hist_rect_->axis(QCPAxis::atLeft));
    hist_->setBrush(QColor(31, 119, 180, 170));
    hist_->setPen(QPen(QColor(31, 119, 180)));
    hist_->removeFromLegend();

    connect(plot_, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) { press_ = e->position(); });
    connect(plot_, &QCustomPlot::mouseRelease, this, &NeighbourGraphView::clicked);
    search_->setPlaceholderText("rare token (exact: \u2423 or a space for spaces, \\n) or id");
    auto* go = new QPushButton("Show neighbours", this);
    connect(search_, &QLineEdit::returnPressed, this, [this] { search(search_->text()); });
    connect(go, &QPushButton::clicked, this, [this] { search(search_->text()); });
    stats_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    stats_->setWordWrap(true);
    auto* about = new QLabel(
        "<b>What am I seeing.</b> Tokens seen often in a frequency text are common and kept exactly; "
        "each rare token y is rebuilt from its k most similar common tokens: with unit-norm rows, solve "
        "G w = 1 for the local Gram G<sub>jl</sub> = (y − x<sub>j</sub>)·(y − x<sub>l</sub>), normalise "
        "the weights to sum 1, and rescale Σ α<sub>j</sub> x<sub>j</sub> to ‖y‖. Every token is shown on "
        "the first two principal components; click or search a rare token to see its neighbours "
        "(edge width = weight).",
        this);
    about->setWordWrap(true);
    auto* row = new QHBoxLayout;
    row->addWidget(search_);
    row->addWidget(go);
    row->addWidget(stats_, 1);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(about);
    layout->addWidget(plot_, 1);
    layout->addLayout(row);
    install_hover(plot_, [this](const QPointF& p) { return hoverText(p); });
}

void NeighbourGraphView::setData(const NeighbourGraphData& data)
{
    data_ = data;
    const int V = static_cast<int>(data.x.size());
    rare_slot_.fill(-1, V);
    for (int i = 0; i < data.rare.size(); ++i)
        if (data.rare[i] >= 0 && data.rare[i] < V)
            rare_slot_[data.rare[i]] = i;
    QVector<double> cx, cy;
    for (int id : data.common)
        if (id >= 0 && id < V && data.y.size() == V) {
            cx << data.x[id];
            cy << data.y[id];
        }
    plot_->graph(0)->setData(cx, cy);
    QVector<QVector<double>> bx(kBandCount), by(kBandCount);
    for (int i = 0; i < data.rare.size(); ++i) {
        const int id = data.rare[i];
        if (id < 0 || id >= V || data.y.size() != V)
            continue;
        const double c = i < data.cosine.size() ? data.cosine[i] : 0.0;
        int b = 0;
        while (b + 1 < kBandCount && c >= kBands[b].below)
            ++b;
        bx[b] << data.x[id];
        by[b] << data.y[id];
    }
    for (int b = 0; b < kBandCount; ++b)
        plot_->graph(kFirstBand + b)->setData(bx[b], by[b]);
    plot_->rescaleAxes();
    plot_->xAxis->scaleRange(1.05);
    plot_->yAxis->scaleRange(1.05);

    const int bins = static_cast<int>(data.histogram.size());
    QVector<double> centres, counts;
    double top = 1;
    const double width = bins > 0 ? (1.0 - data.hist_lo) / bins : 1.0;
    for (int i = 0; i < bins; ++i) {
        centres << data.hist_lo + (i + 0.5) * width;
        counts << data.histogram[i];
        top = std::max(top, data.histogram[i]);
    }
    hist_->setWidth(width);
    hist_->setData(centres, counts, true);
    hist_rect_->axis(QCPAxis::atBottom)->setRange(data.hist_lo, 1.0);
    hist_rect_->axis(QCPAxis::atLeft)->setRange(0, top * 1.08);
    selected_ = -1;
    drawSelection();
}

int NeighbourGraphView::rareTokenAt(const QPointF& pixel, double radius) const
{
    int best = -1;
    double best_d2 = radius * radius;
    for (int id : data_.rare) {
        if (id < 0 || id >= data_.x.size())
            continue;
        const double dx = plot_->xAxis->coordToPixel(data_.x[id]) - pixel.x();
        const double dy = plot_->yAxis->coordToPixel(data_.y[id]) - pixel.y();
        if (dx * dx + dy * dy < best_d2) {
            best_d2 = dx * dx + dy * dy;
            best = id;
        }
    }
    return best;
}

void NeighbourGraphView::clicked(QMouseEvent* event)
{
    const QPointF p = event->position();
    if ((p - press_).manhattanLength() > 4 || !plot_->axisRect()->rect().contains(p.toPoint()))
        return; // a drag, or outside the scatter
    const int id = rareTokenAt(p);
    if (id >= 0)
        selectToken(id);
}

bool NeighbourGraphView::selectToken(int id)
{
    if (id < 0 || id >= rare_slot_.size() || rare_slot_[id] < 0)
        return false;
    selected_ = id;
    drawSelection();
    emit tokenSelected(id);
    return true;
}

bool NeighbourGraphView::search(const QString& typed)
{
    // Exactly the token typed (" the" is not "the"; '␣' and \n notation accepted),
    // then a token id.
    const QString text = unescaped_token(typed);
    for (int rare : data_.rare)
        if (rare < data_.tokens.size() && data_.tokens[rare] == text)
            return selectToken(rare);
    bool numeric = false;
    const int id = typed.toInt(&numeric);
    if (numeric && !typed.contains(' '))
        return selectToken(id);
    const auto common = std::find(data_.tokens.begin(), data_.tokens.end(), text);
    stats_->setText("'" + escaped_token(text) + "' is not a rare token" +
                    (common != data_.tokens.end()
                         ? QString(" (token %1 is common)").arg(common - data_.tokens.begin())
                         : QString()));
    return false;
}

void NeighbourGraphView::drawSelection()
{
    plot_->clearItems();
    plot_->setCurrentLayer("selection"); // edges and labels above every point
    QVector<double> sx, sy;
    if (selected_ >= 0) {
        const int slot = rare_slot_[selected_];
        const QPointF y(data_.x[selected_], data_.y[selected_]);
        sx << y.x();
        sy << y.y();
        double top = 1e-12;
        for (int j = 0; j < data_.k; ++j)
            top = std::max(top, std::abs(data_.weights.value(slot * data_.k + j)));
        auto label = [this](int id, const QPointF& at, const QString& extra) {
            auto* text = new QCPItemText(plot_);
            text->position->setCoords(at);
            text->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
            text->setPadding(QMargins(4, 0, 0, 2));
            text->setText(
                (id < data_.tokens.size() ? "'" + escaped_token(data_.tokens[id]) + "' " : QString()) +
                QString::number(id) + extra);
            text->setFont(QFont(font().family(), 8));
        };
        for (int j = 0; j < data_.k; ++j) {
            const int n = data_.neighbours.value(slot * data_.k + j, -1);
            if (n < 0 || n >= data_.x.size())
                continue;
            const double w = data_.weights.value(slot * data_.k + j);
            const QPointF at(data_.x[n], data_.y[n]);
            auto* edge = new QCPItemLine(plot_);
            edge->start->setCoords(y);
            edge->end->setCoords(at);
            edge->setPen(QPen(w >= 0 ? QColor(40, 40, 40, 200) : QColor(214, 39, 40, 200),
                              0.8 + 4.0 * std::abs(w) / top));
            label(n, at, QString(" (α %1)").arg(w, 0, 'f', 2));
            sx << at.x();
            sy << at.y();
        }
        label(selected_, y, "");
    }
    plot_->graph(kSelection)->setData(sx, sy);
    stats_->setText(summary());
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

QString NeighbourGraphView::summary() const
{
    if (data_.x.isEmpty())
        return "no neighbour graph";
    double mean = 0;
    for (double c : data_.cosine)
        mean += c;
    mean = data_.cosine.isEmpty() ? 0.0 : mean / data_.cosine.size();
    QString s = QString("%1 common, %2 rare tokens, k = %3; mean rare reconstruction cosine %4")
                    .arg(data_.common.size())
                    .arg(data_.rare.size())
                    .arg(data_.k)
                    .arg(mean, 0, 'f', 4);
    if (selected_ >= 0)
        s += QString(". Token %1%2: reconstruction cosine %3")
                 .arg(selected_)
                 .arg(selected_ < data_.tokens.size() ? " '" + escaped_token(data_.tokens[selected_]) + "'"
                                                      : QString())
                 .arg(data_.cosine.value(rare_slot_[selected_]), 0, 'f', 4);
    return s;
}

QString NeighbourGraphView::hoverText(const QPointF& pixel) const
{
    if (data_.x.isEmpty() || !plot_->axisRect()->rect().contains(pixel.toPoint()))
        return {};
    const int id = nearest_point(plot_, pixel, data_.x.constData(), data_.y.constData(),
                                 static_cast<int>(std::min(data_.x.size(), data_.y.size())), 6.0);
    if (id < 0)
        return {};
    QString text = QString("id %1").arg(id);
    if (id < data_.tokens.size())
        text = "'" + escaped_token(data_.tokens[id]) + "' " + text;
    const int slot = id < rare_slot_.size() ? rare_slot_[id] : -1;
    if (slot >= 0)
        return text + QString(": rare, rebuilt with cosine %1 (click for its neighbours)")
                          .arg(data_.cosine.value(slot), 0, 'f', 4);
    return text + ": common (kept as a row)";
}

} // namespace embedlab::views
