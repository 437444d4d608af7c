#include "tensor_train_view.hpp"

#include <algorithm>

#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "hover.hpp"
#include "plot_interaction.hpp"

namespace embedlab::views {

namespace {
const QVector<QColor> kPalette{{31, 119, 180}, {214, 39, 40}, {44, 160, 44},   {148, 103, 189},
                               {255, 127, 14}, {140, 86, 75}, {227, 119, 194}, {23, 190, 207}};
const char* kEnergyFormula =
    "Energy E = ν · memory accesses + τ · arithmetic operations (TensorSLM eqs. 2–5; METHODS 5).\n"
    "ω = E_TT / E_original; bars are each energy / E_original. Defaults ν = 5, τ = 1 (ν/τ = 5).";

QDoubleSpinBox* weightSpin(const QString& prefix, double value, QWidget* parent)
{
    auto* spin = new QDoubleSpinBox(parent);
    spin->setPrefix(prefix);
    spin->setRange(0, 1000);
    spin->setDecimals(2);
    spin->setSingleStep(0.5);
    spin->setValue(value);
    spin->setToolTip(kEnergyFormula);
    return spin;
}

bool counted(const TensorTrainCandidate& c)
{
    return c.accesses_original > 0 || c.accesses_tt > 0 || c.accesses_svd > 0 || c.operations_original > 0 ||
           c.operations_tt > 0 || c.operations_svd > 0;
}
} // namespace

TensorTrainEnergy weighedEnergy(const TensorTrainCandidate& c, double nu, double tau)
{
    if (!counted(c)) // only the engine's energies at its own weights
        return {c.energy_original, c.energy_tt, c.energy_svd};
    return {nu * c.accesses_original + tau * c.operations_original,
            nu * c.accesses_tt + tau * c.operations_tt, nu * c.accesses_svd + tau * c.operations_svd};
}

TensorTrainView::TensorTrainView(QWidget* parent)
    : DataPlotView(parent), nu_(weightSpin("ν = ", 5, this)), tau_(weightSpin("τ = ", 1, this)),
      stats_(readout_label(this))
{
    auto* left = plot_->axisRect();
    left->axis(QCPAxis::atBottom)->setLabel("compression ratio (TT values / V d)");
    left->axis(QCPAxis::atLeft)->setLabel("relative error ‖E − Ê‖ / ‖E‖");
    energy_rect_ = new QCPAxisRect(plot_);
    plot_->plotLayout()->addElement(0, 1, energy_rect_);
    plot_->plotLayout()->setColumnStretchFactor(1, 0.6);
    energy_rect_->axis(QCPAxis::atLeft)->setLabel("energy / original (ν·accesses + τ·ops)");
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    ticker->addTicks({1, 2, 3}, {"original", "TT", "SVD (same size)"});
    energy_rect_->axis(QCPAxis::atBottom)->setTicker(ticker);
    energy_rect_->axis(QCPAxis::atBottom)->setRange(0.4, 3.6);
    bars_ = new QCPBars(energy_rect_->axis(QCPAxis::atBottom), energy_rect_->axis(QCPAxis::atLeft));
    bars_->setBrush(QColor(31, 119, 180, 170));
    bars_->setWidth(0.6);
    ring_ = new QCPCurve(plot_->xAxis, plot_->yAxis);
    ring_->setLineStyle(QCPCurve::lsNone);
    ring_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, QPen(Qt::black, 2), Qt::NoBrush, 15));
    // Right of ratio 1 a candidate stores more than the dense table: marked in red
    // (a cross over its point) beside a dashed line at 1, so it is never mistaken
    // for a compression.
    over_one_ = new QCPCurve(plot_->xAxis, plot_->yAxis);
    over_one_->setName("ratio > 1: larger than the table");
    over_one_->setLineStyle(QCPCurve::lsNone);
    over_one_->setScatterStyle(
        QCPScatterStyle(QCPScatterStyle::ssCross, QPen(QColor(176, 0, 0), 2), Qt::NoBrush, 13));
    one_ = new QCPItemStraightLine(plot_);
    one_->point1->setCoords(1, 0);
    one_->point2->setCoords(1, 1);
    one_->setPen(QPen(QColor(176, 0, 0), 1, Qt::DashLine));
    plot_->legend->setVisible(true);
    place_legend_below(plot_, plot_->legend, 5); // under both axes, never over a candidate
    // Ratios and errors span decades across eps: log on request. The energy bars
    // are three categories at a fixed scale.
    auto* navigation = install_navigation(plot_);
    navigation->addLogToggle(plot_->xAxis, "ratio axis");
    navigation->addLogToggle(plot_->yAxis, "error axis");
    energy_rect_->setRangeDrag({});
    energy_rect_->setRangeZoom({});
    ring_->removeFromLegend();
    bars_->removeFromLegend();
    connect(plot_, &QCustomPlot::plottableClick, this,
            [this](QCPAbstractPlottable* p, int index, QMouseEvent*) {
                const int s = static_cast<int>(series_.indexOf(qobject_cast<QCPCurve*>(p)));
                if (s >= 0 && index >= 0 && index < series_rows_[s].size())
                    setSelected(series_rows_[s][index]);
            });

    auto* about = new QLabel(
        "<b>What am I seeing.</b> Each embedding row (length d) is reshaped into a tensor of shape "
        "I<sub>1</sub>×…×I<sub>N</sub> (product d) and split by TT-SVD into cores of size "
        "r<sub>k−1</sub>×I<sub>k</sub>×r<sub>k</sub>; a token then costs Σ r<sub>k−1</sub> I<sub>k</sub> "
        "r<sub>k</sub> values. Left: error against size for each shape as the accuracy eps varies "
        "(click a point). Right: TensorSLM's energy model E = ν · memory accesses + τ · operations "
        "(defaults ν = 5, τ = 1; set them for your device) of the original table, the chosen TT and an "
        "SVD with as many values, each over the original's; ω = E<sub>TT</sub> / E<sub>original</sub>.",
        this);
    about->setWordWrap(true);
    stats_->setToolTip(kEnergyFormula);
    const auto reweigh = [this] { setSelected(selected_); };
    connect(nu_, &QDoubleSpinBox::valueChanged, this, reweigh);
    connect(tau_, &QDoubleSpinBox::valueChanged, this, reweigh);
    auto* row = new QHBoxLayout;
    row->addWidget(nu_);
    row->addWidget(tau_);
    row->addWidget(stats_, 1);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(about);
    layout->addWidget(plot_, 1);
    layout->addLayout(row);
    setData({});
    install_hover(plot_, [this](const QPointF& p) { return hoverText(p); });
}

void TensorTrainView::setComputing(const QString& what)
{
    computing_ = what;
    stats_->setText(summary());
    if (data_.candidates.isEmpty()) {
        show_placeholder(plot_, what);
        plot_->replot(QCustomPlot::rpQueuedReplot);
    }
}

void TensorTrainView::draw()
{
    computing_.clear();
    show_placeholder(plot_, {});
    for (auto* s : series_)
        plot_->removePlottable(s);
    series_.clear();
    series_rows_.clear();
    over_one_->data()->clear();
    double x1 = 0.1, y1 = 0.1;
    for (int i = 0; i < data_.candidates.size(); ++i) {
        const auto& c = data_.candidates[i];
        if (series_.isEmpty() || series_.back()->name() != c.shape) {
            auto* curve = new QCPCurve(plot_->xAxis, plot_->yAxis);
            const QColor colour = kPalette[series_.size() % kPalette.size()];
            curve->setName(c.shape);
            curve->setPen(QPen(colour, 1.2));
            curve->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, colour, colour, 7));
            series_.push_back(curve);
            series_rows_.push_back({});
        }
        series_.back()->addData(series_rows_.back().size(), c.ratio, c.relative_error);
        series_rows_.back().push_back(i);
        if (c.ratio > 1)
            over_one_->addData(c.ratio, c.relative_error);
        x1 = std::max(x1, c.ratio);
        y1 = std::max(y1, c.relative_error);
    }
    plot_->xAxis->setRange(0, x1 * 1.08);
    plot_->yAxis->setRange(0, y1 * 1.08);
    selected_ = -2; // force the update
    // The method panel's candidate; without one (the demo's figure) the most accurate
    // that compresses: a TT storing more than the table is not shown as "the TT".
    int shown = data_.candidates.isEmpty() ? -1 : 0;
    if (data_.chosen >= 0 && data_.chosen < data_.candidates.size())
        shown = static_cast<int>(data_.chosen);
    else
        for (int i = 0; i < data_.candidates.size(); ++i) {
            const auto& c = data_.candidates[i];
            if (c.ratio <= 1 && (data_.candidates[shown].ratio > 1 ||
                                 c.relative_error < data_.candidates[shown].relative_error))
                shown = i;
        }
    setSelected(shown);
}

void TensorTrainView::setSelected(int candidate)
{
    if (candidate < -1 || candidate >= data_.candidates.size())
        candidate = -1;
    const bool changed = candidate != selected_;
    selected_ = candidate;
    ring_->data()->clear();
    bars_->data()->clear();
    // The bar of a candidate that stores more than the table says so (as the legend's
    // "larger than the table"; short, the category labels turn at a single column).
    if (auto ticker = energy_rect_->axis(QCPAxis::atBottom)->ticker().dynamicCast<QCPAxisTickerText>())
        ticker->ticks()[2] = candidate >= 0 && data_.candidates[candidate].ratio > 1 ? "TT (larger)" : "TT";
    if (candidate >= 0) {
        const auto& c = data_.candidates[candidate];
        ring_->addData(c.ratio, c.relative_error);
        const auto e = weighedEnergy(c, nu(), tau());
        const double base = e.original > 0 ? e.original : 1.0;
        bars_->setData({1, 2, 3}, {e.original / base, e.tt / base, e.svd / base}, true);
        energy_rect_->axis(QCPAxis::atLeft)->setRange(0, 1.1 * std::max({1.0, e.tt / base, e.svd / base}));
    }
    stats_->setText(summary());
    plot_->replot(QCustomPlot::rpQueuedReplot);
    if (changed && candidate >= 0)
        emit candidateSelected(candidate);
}

double TensorTrainView::nu() const
{
    return nu_->value();
}

double TensorTrainView::tau() const
{
    return tau_->value();
}

void TensorTrainView::setWeights(double nu, double tau)
{
    const QSignalBlocker block_nu(nu_), block_tau(tau_); // one redraw, not two
    nu_->setValue(nu);
    tau_->setValue(tau);
    setSelected(selected_);
}

QString TensorTrainView::summary() const
{
    if (selected_ < 0)
        return computing_.isEmpty() ? QString("no Tensor-Train candidates") : computing_;
    const auto& c = data_.candidates[selected_];
    const auto e = weighedEnergy(c, nu(), tau());
    const QString weights = counted(c) ? QString("ν %1, τ %2").arg(nu(), 0, 'g', 4).arg(tau(), 0, 'g', 4)
                                       : QString("the engine's ν 5, τ 1");
    const QString warning =
        c.ratio > 1 ? QString("NOT COMPRESSING (ratio > 1: stores %1x the table). ").arg(c.ratio, 0, 'f', 2)
                    : QString();
    const QString estimate =
        data_.fittedRows > 0 && data_.fittedRows < data_.vocab
            ? QString(" (estimated from %1 evenly spaced of %2 rows)").arg(data_.fittedRows).arg(data_.vocab)
            : QString();
    QString panel;
    if (data_.chosen >= 0 && data_.chosen < data_.candidates.size()) {
        const auto& p = data_.candidates[data_.chosen];
        panel =
            data_.chosen == selected_
                ? QString(". The method panel's tt runs this candidate")
                : QString(". The method panel's tt runs shape %1, eps %2").arg(p.shape).arg(p.eps, 0, 'g', 3);
    }
    return warning +
           QString("shape %1, eps %2, ranks %3: ratio %4, relative error %5, mean cosine %6; "
                   "energy at %7: ω = E_TT / E_original = %8, SVD rank %9 %10 of the original")
               .arg(c.shape)
               .arg(c.eps, 0, 'g', 3)
               .arg(c.ranks)
               .arg(c.ratio, 0, 'f', 4)
               .arg(c.relative_error, 0, 'f', 4)
               .arg(c.mean_cosine, 0, 'f', 4)
               .arg(weights)
               .arg(e.original > 0 ? e.tt / e.original : 0.0, 0, 'f', 4)
               .arg(c.svd_rank)
               .arg(e.original > 0 ? e.svd / e.original : 0.0, 0, 'f', 4) +
           estimate + panel;
}

QString TensorTrainView::hoverText(const QPointF& pixel) const
{
    if (data_.candidates.isEmpty() || !plot_->axisRect()->rect().contains(pixel.toPoint()))
        return {};
    std::vector<double> x, y;
    for (const auto& c : data_.candidates) {
        x.push_back(c.ratio);
        y.push_back(c.relative_error);
    }
    const int i = nearest_point(plot_, pixel, x.data(), y.data(), static_cast<int>(x.size()), 8.0);
    if (i < 0)
        return {};
    const auto& c = data_.candidates[i];
    return QString("shape %1, eps %2, ranks %3: ratio %4%5, relative error %6")
        .arg(c.shape)
        .arg(c.eps, 0, 'g', 3)
        .arg(c.ranks)
        .arg(c.ratio, 0, 'f', 4)
        .arg(c.ratio > 1 ? " (larger than the table)" : "")
        .arg(c.relative_error, 0, 'f', 4);
}

QVector<DataTable> TensorTrainView::dataTables() const
{
    DataTable t{"candidates",
                {"candidate", "shape", "ranks", "eps", plot_->xAxis->label(), plot_->yAxis->label(),
                 "mean cosine", "SVD rank", "energy original", "energy TT", "energy SVD", "selected"},
                {}};
    for (int i = 0; i < data_.candidates.size(); ++i) {
        const auto& c = data_.candidates[i];
        const auto e = weighedEnergy(c, nu(), tau()); // at the shown weights, as the bars
        t.rows << QStringList{QString::number(i),
                              c.shape,
                              c.ranks,
                              csvNumber(c.eps),
                              csvNumber(c.ratio),
                              csvNumber(c.relative_error),
                              csvNumber(c.mean_cosine),
                              QString::number(c.svd_rank),
                              csvNumber(e.original),
                              csvNumber(e.tt),
                              csvNumber(e.svd),
                              i == selected_ ? "1" : "0"};
    }
    return QVector<DataTable>{t} + plotDataTables(plot_, energy_rect_);
}

} // namespace embedlab::views
