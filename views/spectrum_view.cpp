#include "spectrum_view.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>
#include <qcustomplot.h>

#include "hover.hpp"
#include "plot_interaction.hpp"

namespace embedlab::views {

namespace {

// Overlay colours: none is the main curve's blue or the explained variance's red.
const QVector<QColor> kOverlayPalette{{44, 160, 44},   {148, 103, 189}, {255, 127, 14}, {140, 86, 75},
                                      {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207}};

QColor groupColour(int group, int groups)
{
    if (groups <= kOverlayPalette.size())
        return kOverlayPalette[group];
    return QColor::fromHsvF(0.8 * group / (groups - 1), 0.8, 0.75); // many layers: a hue ramp
}

// Positions 1..n and values, each eigenvalue as a share of the curve's total when
// `shares`. A log axis cannot show zero: values are clamped to a tiny positive floor.
void curvePoints(const QVector<double>& eigenvalues, bool shares, QVector<double>& k, QVector<double>& values)
{
    double total = 0;
    for (double e : eigenvalues)
        total += std::max(e, 0.0);
    const int n = static_cast<int>(eigenvalues.size());
    k.resize(n);
    values.resize(n);
    for (int i = 0; i < n; ++i) {
        k[i] = i + 1;
        const double v = shares ? (total > 0 ? eigenvalues[i] / total : 0.0) : eigenvalues[i];
        values[i] = std::max(v, 1e-12);
    }
}

} // namespace

SpectrumView::SpectrumView(QWidget* parent)
    : DataPlotView(parent), spin_(new QSpinBox(this)), stats_(new QLabel(this))
{
    plot_->addGraph(plot_->xAxis, plot_->yAxis);  // eigenvalues
    plot_->addGraph(plot_->xAxis, plot_->yAxis2); // explained variance
    plot_->graph(0)->setName("eigenvalue");
    plot_->graph(0)->setPen(QPen(QColor(31, 119, 180), 2));
    plot_->graph(1)->setName("cumulative explained variance");
    plot_->graph(1)->setPen(QPen(QColor(214, 39, 40), 2));
    plot_->yAxis->setScaleType(QCPAxis::stLogarithmic);
    plot_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    // Powers of ten in one notation (10⁻⁴, not 0.000 after 1e-3's fixed digits).
    plot_->yAxis->setNumberFormat("eb");
    plot_->yAxis->setNumberPrecision(0);
    plot_->yAxis->setLabel("eigenvalue of the covariance");
    plot_->yAxis2->setVisible(true);
    plot_->yAxis2->setRange(0, 1.02);
    plot_->yAxis2->setLabel("explained variance");
    plot_->xAxis->setLabel("component k");
    plot_->legend->setVisible(true);
    // Under the axes, never over the curves (a 0.5B model's spectrum fills the plot).
    place_legend_below(plot_, plot_->legend, 3);
    // Overlays are drawn behind this model's curves.
    plot_->addLayer("overlays", plot_->layer("main"), QCustomPlot::limBelow);
    marker_ = new QCPItemStraightLine(plot_);
    marker_->setPen(QPen(Qt::darkGray, 1.5, Qt::DashLine));
    // Wheel zoom, drag pan, reset; the eigenvalues log or linear.
    install_navigation(plot_)->addLogToggle(plot_->yAxis, "eigenvalue axis");
    // A press on the marker drags it (and pans nothing); a click elsewhere moves
    // it there; a drag elsewhere pans.
    connect(plot_, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) {
        press_ = e->position();
        const double marker = plot_->xAxis->coordToPixel(rank_);
        dragging_marker_ = e->button() == Qt::LeftButton && std::abs(e->position().x() - marker) <= 6 &&
                           plot_->axisRect()->rect().contains(e->position().toPoint());
        plot_->axisRect()->setRangeDrag(dragging_marker_ ? Qt::Orientations()
                                                         : Qt::Horizontal | Qt::Vertical);
    });
    connect(plot_, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) {
        if (dragging_marker_ && (e->buttons() & Qt::LeftButton))
            dragTo(e);
    });
    connect(plot_, &QCustomPlot::mouseRelease, this, [this](QMouseEvent* e) {
        if (!dragging_marker_ && e->button() == Qt::LeftButton &&
            (e->position() - press_).manhattanLength() <= 4 &&
            plot_->axisRect()->rect().contains(e->position().toPoint()))
            dragTo(e);
        dragging_marker_ = false;
    });
    spin_->setPrefix("rank k = ");
    spin_->setRange(1, 1);
    connect(spin_, &QSpinBox::valueChanged, this, &SpectrumView::setRank);
    stats_->setTextInteractionFlags(Qt::TextSelectableByMouse);

    auto* controls = lay_out_view(
        this,
        "<b>What am I seeing.</b> PCA centres the V×d embedding table E on its mean row μ and "
        "diagonalises the covariance C = (E − 1μ)<sup>T</sup>(E − 1μ) / V; blue are its eigenvalues "
        "λ<sub>1</sub> ≥ λ<sub>2</sub> ≥ … (log scale), red the share of variance the first k directions "
        "keep, Σ<sub>i≤k</sub> λ<sub>i</sub> / Σ λ<sub>i</sub>. Keeping k gives E ≈ 1μ + Z P with Z = "
        "(E − 1μ)U<sub>k</sub> (V×k) and P = U<sub>k</sub><sup>T</sup> (k×d), stored in V k + k d + d values "
        "instead of V d. Drag the dashed marker, click the plot or use the spin box to choose k (the wheel "
        "zooms, a drag pans, a double-click resets; right-click for a linear axis). With overlays (other "
        "models, or FLAT-LLM's per-head value spectra, thin, one colour per layer) every curve is drawn as "
        "its share λ<sub>i</sub> / Σ λ, so tables of different d and scale compare.",
        plot_);
    controls->addWidget(spin_);
    controls->addWidget(stats_, 1);
    install_hover(plot_, [this](const QPointF& p) { return hoverText(p); });
}

void SpectrumView::draw()
{
    const int d = static_cast<int>(data_.eigenvalues.size());
    drawCurves();
    QVector<double> k(d);
    for (int i = 0; i < d; ++i)
        k[i] = i + 1;
    plot_->graph(1)->setData(k, data_.explained.size() == d ? data_.explained : QVector<double>(d, 0.0),
                             true);
    spin_->setRange(1, std::max(d, 1));
    setRank(std::clamp(rank_, 1, std::max(d, 1)));
    plot_->replot();
}

void SpectrumView::setOverlays(const QVector<SpectrumOverlay>& overlays)
{
    overlays_ = overlays;
    for (auto* g : overlay_graphs_)
        plot_->removeGraph(g);
    overlay_graphs_.clear();
    QStringList groups;
    for (const auto& o : overlays)
        if (!o.group.isEmpty() && !groups.contains(o.group))
            groups << o.group;
    // One colour sequence over the models and the layer groups together, so no
    // overlaid model shares a colour with a layer.
    const int models = static_cast<int>(std::count_if(
        overlays.begin(), overlays.end(), [](const SpectrumOverlay& o) { return o.group.isEmpty(); }));
    const int colours = models + static_cast<int>(groups.size());
    int ungrouped = 0;
    for (const auto& o : overlays) {
        auto* g = plot_->addGraph(plot_->xAxis, plot_->yAxis);
        g->setLayer("overlays");
        if (o.group.isEmpty()) {
            g->setName(o.name);
            g->setPen(QPen(groupColour(ungrouped++, colours), 1.6));
        } else { // dozens of heads: thin, see-through, one legend entry per group
            const int group = models + static_cast<int>(groups.indexOf(o.group));
            QColor colour = groupColour(group, colours);
            colour.setAlpha(110);
            g->setName(o.group);
            g->setPen(QPen(colour, 0.9));
            const bool first = std::none_of(overlay_graphs_.begin(), overlay_graphs_.end(),
                                            [&](QCPGraph* h) { return h->name() == o.group; });
            if (!first)
                g->removeFromLegend();
        }
        overlay_graphs_.push_back(g);
    }
    drawCurves();
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

void SpectrumView::drawCurves()
{
    const bool shares = !overlays_.isEmpty();
    // With other models beside it, its curve is named by its model (the file or directory).
    const QString path = data_.label.endsWith('/') ? data_.label.chopped(1) : data_.label;
    const QString model = path.section('/', -1);
    plot_->graph(0)->setName(shares ? (model.isEmpty() ? QString("this model") : model) : "eigenvalue");
    plot_->graph(1)->setName(shares ? "explained variance" : "cumulative explained variance");
    plot_->yAxis->setLabel(shares ? "share of variance λᵢ/Σλ" : "eigenvalue of the covariance");
    double lo = std::numeric_limits<double>::infinity(), hi = 0;
    int longest = static_cast<int>(data_.eigenvalues.size());
    auto draw = [&](QCPGraph* graph, const QVector<double>& eigenvalues) {
        QVector<double> k, values;
        curvePoints(eigenvalues, shares, k, values);
        graph->setData(k, values, true);
        for (double v : values) {
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
        longest = std::max(longest, static_cast<int>(values.size()));
    };
    draw(plot_->graph(0), data_.eigenvalues);
    for (int i = 0; i < overlay_graphs_.size(); ++i)
        draw(overlay_graphs_[i], overlays_[i].eigenvalues);
    plot_->xAxis->setRange(0.5, std::max(longest, 1) + 0.5);
    if (hi > 0) // every value visible, with a margin on the log scale
        plot_->yAxis->setRange(lo / 1.5, hi * 1.5);
}

void SpectrumView::setRank(int k)
{
    const int d = static_cast<int>(data_.eigenvalues.size());
    k = std::clamp(k, 1, std::max(d, 1));
    const bool changed = k != rank_;
    rank_ = k;
    if (spin_->value() != k)
        spin_->setValue(k);
    marker_->point1->setCoords(k, 1); // vertical: same x, two positive y (log axis)
    marker_->point2->setCoords(k, 2);
    stats_->setText(summary());
    plot_->replot(QCustomPlot::rpQueuedReplot);
    if (changed)
        emit rankChanged(k);
}

QString SpectrumView::summary() const
{
    const int i = rank_ - 1;
    if (i < 0 || i >= data_.params_at_rank.size() || i >= data_.explained.size() ||
        i >= data_.flops_at_rank.size())
        return "no spectrum";
    const double params = data_.params_at_rank[i];
    return QString("PCA k = %1: %2 parameters (ratio %3), explained variance %4, %5 FLOPs per token")
        .arg(rank_)
        .arg(QLocale().toString(params, 'f', 0))
        .arg(data_.original_params > 0 ? params / data_.original_params : 0.0, 0, 'f', 4)
        .arg(data_.explained[i], 0, 'f', 4)
        .arg(QLocale().toString(data_.flops_at_rank[i], 'f', 0));
}

void SpectrumView::dragTo(QMouseEvent* event)
{
    setRank(static_cast<int>(std::lround(plot_->xAxis->pixelToCoord(event->position().x()))));
}

QString SpectrumView::hoverText(const QPointF& pixel) const
{
    const int d = static_cast<int>(data_.eigenvalues.size());
    if (d == 0 || !plot_->axisRect()->rect().contains(pixel.toPoint()))
        return {};
    const int k = static_cast<int>(std::lround(plot_->xAxis->pixelToCoord(pixel.x())));
    if (k < 1 || k > d)
        return {};
    double sum = 0;
    for (double v : data_.eigenvalues)
        sum += v;
    QString text = QString("eigenvalue %1: %2 (%3 of the variance)")
                       .arg(k)
                       .arg(data_.eigenvalues[k - 1], 0, 'g', 4)
                       .arg(sum > 0 ? data_.eigenvalues[k - 1] / sum : 0.0, 0, 'g', 3);
    if (k <= data_.explained.size())
        text += QString("; explained up to k = %1: %2").arg(k).arg(data_.explained[k - 1], 0, 'f', 4);
    return text;
}

} // namespace embedlab::views
