#include "spectrum_view.hpp"

#include <algorithm>

#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>
#include <QVBoxLayout>
#include <qcustomplot.h>

namespace embedlab::views {

SpectrumView::SpectrumView(QWidget* parent)
    : QWidget(parent), plot_(new QCustomPlot(this)), spin_(new QSpinBox(this)), stats_(new QLabel(this))
{
    plot_->addGraph(plot_->xAxis, plot_->yAxis);  // eigenvalues
    plot_->addGraph(plot_->xAxis, plot_->yAxis2); // explained variance
    plot_->graph(0)->setName("eigenvalue");
    plot_->graph(0)->setPen(QPen(QColor(31, 119, 180), 2));
    plot_->graph(1)->setName("cumulative explained variance");
    plot_->graph(1)->setPen(QPen(QColor(214, 39, 40), 2));
    plot_->yAxis->setScaleType(QCPAxis::stLogarithmic);
    plot_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
    plot_->yAxis->setLabel("eigenvalue of the covariance");
    plot_->yAxis2->setVisible(true);
    plot_->yAxis2->setRange(0, 1.02);
    plot_->yAxis2->setLabel("explained variance");
    plot_->xAxis->setLabel("component k");
    plot_->legend->setVisible(true);
    plot_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignRight | Qt::AlignVCenter);
    marker_ = new QCPItemStraightLine(plot_);
    marker_->setPen(QPen(Qt::darkGray, 1.5, Qt::DashLine));
    // Press or drag on the plot moves the marker.
    connect(plot_, &QCustomPlot::mousePress, this, &SpectrumView::dragTo);
    connect(plot_, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) {
        if (e->buttons() & Qt::LeftButton)
            dragTo(e);
    });
    spin_->setPrefix("rank k = ");
    spin_->setRange(1, 1);
    connect(spin_, &QSpinBox::valueChanged, this, &SpectrumView::setRank);
    stats_->setTextInteractionFlags(Qt::TextSelectableByMouse);

    auto* about = new QLabel(
        "<b>What am I seeing.</b> PCA centres the V×d embedding table E on its mean row μ and "
        "diagonalises the covariance C = (E − 1μ)<sup>T</sup>(E − 1μ) / V; blue are its eigenvalues "
        "λ<sub>1</sub> ≥ λ<sub>2</sub> ≥ … (log scale), red the share of variance the first k directions "
        "keep, Σ<sub>i≤k</sub> λ<sub>i</sub> / Σ λ<sub>i</sub>. Keeping k gives E ≈ 1μ + Z P with Z = "
        "(E − 1μ)U<sub>k</sub> (V×k) and P = U<sub>k</sub><sup>T</sup> (k×d), stored in V k + k d + d values "
        "instead of V d. Drag the dashed marker (or use the spin box) to choose k.",
        this);
    about->setWordWrap(true);
    auto* row = new QHBoxLayout;
    row->addWidget(spin_);
    row->addWidget(stats_, 1);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(about);
    layout->addWidget(plot_, 1);
    layout->addLayout(row);
}

void SpectrumView::setData(const SpectrumData& data)
{
    data_ = data;
    const int d = static_cast<int>(data.eigenvalues.size());
    QVector<double> k(d), values(d);
    for (int i = 0; i < d; ++i) {
        k[i] = i + 1;
        // A log axis cannot show zero: clamp to a tiny positive floor.
        values[i] = std::max(data.eigenvalues[i], 1e-12);
    }
    plot_->graph(0)->setData(k, values, true);
    plot_->graph(1)->setData(k, data.explained.size() == d ? data.explained : QVector<double>(d, 0.0), true);
    plot_->xAxis->setRange(0.5, std::max(d, 1) + 0.5);
    if (d > 0) { // every eigenvalue visible, with a margin on the log scale
        const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
        plot_->yAxis->setRange(*lo / 1.5, *hi * 1.5);
    }
    spin_->setRange(1, std::max(d, 1));
    setRank(std::clamp(rank_, 1, std::max(d, 1)));
    plot_->replot();
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

} // namespace embedlab::views
