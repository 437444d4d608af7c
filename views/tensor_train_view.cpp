#include "tensor_train_view.hpp"

#include <algorithm>

#include <QLabel>
#include <QVBoxLayout>
#include <qcustomplot.h>

namespace embedlab::views {

namespace {
const QVector<QColor> kPalette{{31, 119, 180}, {214, 39, 40}, {44, 160, 44},   {148, 103, 189},
                               {255, 127, 14}, {140, 86, 75}, {227, 119, 194}, {23, 190, 207}};
}

TensorTrainView::TensorTrainView(QWidget* parent)
    : QWidget(parent), plot_(new QCustomPlot(this)), stats_(new QLabel(this))
{
    auto* left = plot_->axisRect();
    left->axis(QCPAxis::atBottom)->setLabel("compression ratio (TT values / V d)");
    left->axis(QCPAxis::atLeft)->setLabel("relative error ‖E − Ê‖ / ‖E‖");
    energy_rect_ = new QCPAxisRect(plot_);
    plot_->plotLayout()->addElement(0, 1, energy_rect_);
    plot_->plotLayout()->setColumnStretchFactor(1, 0.6);
    energy_rect_->axis(QCPAxis::atLeft)->setLabel("energy / original (ν + τ terms)");
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
    plot_->legend->setVisible(true);
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
        "(click a point). Right: TensorSLM's energy model (memory ν, arithmetic τ, ν/τ = 5) "
        "of the original table, the chosen TT and an SVD with as many values.",
        this);
    about->setWordWrap(true);
    stats_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* layout = new QVBoxLayout(this);
    layout->addWidget(about);
    layout->addWidget(plot_, 1);
    layout->addWidget(stats_);
    setData({});
}

void TensorTrainView::setData(const TensorTrainData& data)
{
    data_ = data;
    for (auto* s : series_)
        plot_->removePlottable(s);
    series_.clear();
    series_rows_.clear();
    double x1 = 0.1, y1 = 0.1;
    for (int i = 0; i < data.candidates.size(); ++i) {
        const auto& c = data.candidates[i];
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
        x1 = std::max(x1, c.ratio);
        y1 = std::max(y1, c.relative_error);
    }
    plot_->xAxis->setRange(0, x1 * 1.08);
    plot_->yAxis->setRange(0, y1 * 1.08);
    selected_ = -2; // force the update
    setSelected(data.candidates.isEmpty() ? -1 : 0);
}

void TensorTrainView::setSelected(int candidate)
{
    if (candidate < -1 || candidate >= data_.candidates.size())
        candidate = -1;
    const bool changed = candidate != selected_;
    selected_ = candidate;
    ring_->data()->clear();
    bars_->data()->clear();
    if (candidate >= 0) {
        const auto& c = data_.candidates[candidate];
        ring_->addData(c.ratio, c.relative_error);
        const double base = c.energy_original > 0 ? c.energy_original : 1.0;
        bars_->setData({1, 2, 3}, {c.energy_original / base, c.energy_tt / base, c.energy_svd / base}, true);
        energy_rect_->axis(QCPAxis::atLeft)
            ->setRange(0, 1.1 * std::max({1.0, c.energy_tt / base, c.energy_svd / base}));
    }
    stats_->setText(summary());
    plot_->replot(QCustomPlot::rpQueuedReplot);
    if (changed && candidate >= 0)
        emit candidateSelected(candidate);
}

QString TensorTrainView::summary() const
{
    if (selected_ < 0)
        return "no Tensor-Train candidates";
    const auto& c = data_.candidates[selected_];
    return QString("shape %1, eps %2, ranks %3: ratio %4, relative error %5, mean cosine %6; "
                   "energy TT %7 and SVD rank %8 %9 of the original")
        .arg(c.shape)
        .arg(c.eps, 0, 'g', 3)
        .arg(c.ranks)
        .arg(c.ratio, 0, 'f', 4)
        .arg(c.relative_error, 0, 'f', 4)
        .arg(c.mean_cosine, 0, 'f', 4)
        .arg(c.energy_original > 0 ? c.energy_tt / c.energy_original : 0.0, 0, 'f', 4)
        .arg(c.svd_rank)
        .arg(c.energy_original > 0 ? c.energy_svd / c.energy_original : 0.0, 0, 'f', 4);
}

} // namespace embedlab::views
