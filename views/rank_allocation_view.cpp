#include "rank_allocation_view.hpp"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSlider>
#include <qcustomplot.h>

#include "hover.hpp"
#include "plot_interaction.hpp"

namespace embedlab::views {

RankAllocationView::RankAllocationView(QWidget* parent)
    : DataPlotView(parent), slider_(new QSlider(Qt::Horizontal, this)),
      overlay_(new QCheckBox("all ratios", this)), ranks_(readout_label(this))
{
    plot_->xAxis->setLabel("decoder layer");
    plot_->yAxis->setLabel("remaining rank ratio w");
    plot_->yAxis->setRange(0, 1.05);
    plot_->legend->setVisible(true);
    place_legend_below(plot_, plot_->legend, 5); // never over the curves near w = 1
    install_navigation(plot_);
    slider_->setRange(0, 0);
    connect(slider_, &QSlider::valueChanged, this, &RankAllocationView::setSelected);
    connect(overlay_, &QCheckBox::toggled, this, &RankAllocationView::setOverlay);
    auto* controls = lay_out_view(
        this,
        "<b>What am I seeing.</b> FLAT-LLM scores decoder layer l by how far it turns each token's "
        "hidden state: t<sub>l</sub> = mean over calibration tokens of arccos(cos(x<sub>in</sub>, "
        "x<sub>out</sub>)) / π (grey, dashed, divided by the largest). IPRS (Algorithm 1) hands out the "
        "budget L(1 − s) in proportion, w<sub>l</sub> = t<sub>l</sub> / Σ t · B, fixes any layer above 1 at "
        "1 "
        "and shares the rest again, so the mean of w<sub>l</sub> is the chosen average ratio. Each value "
        "head of layer l keeps r<sub>l</sub> = max(1, ⌊w<sub>l</sub> d<sub>head</sub>⌋) principal "
        "directions; dotted is the uniform allocation at the same average.",
        plot_);
    controls->addWidget(new QLabel("average remaining ratio", this));
    controls->addWidget(slider_, 1);
    controls->addWidget(overlay_);
    layout()->addWidget(ranks_); // under the controls
    install_hover(plot_, [this](const QPointF& p) { return hoverText(p); });
}

void RankAllocationView::draw()
{
    slider_->setRange(0, std::max<int>(0, static_cast<int>(data_.allocations.size()) - 1));
    // Start at the allocation nearest 0.5, the paper's headline setting.
    int best = data_.allocations.isEmpty() ? -1 : 0;
    for (int i = 0; i < data_.allocations.size(); ++i)
        if (std::abs(data_.allocations[i].remaining - 0.5) <
            std::abs(data_.allocations[best].remaining - 0.5))
            best = i;
    selected_ = -2; // force a redraw
    setSelected(best);
}

void RankAllocationView::setSelected(int index)
{
    if (index == selected_)
        return;
    selected_ = data_.allocations.isEmpty()
                    ? -1
                    : std::clamp(index, 0, static_cast<int>(data_.allocations.size()) - 1);
    if (selected_ >= 0 && slider_->value() != selected_)
        slider_->setValue(selected_);
    redraw();
}

void RankAllocationView::setOverlay(bool all)
{
    if (overlay_->isChecked() != all)
        overlay_->setChecked(all);
    redraw();
}

QString RankAllocationView::rankText() const
{
    if (selected_ < 0)
        return "no allocation";
    const auto& a = data_.allocations[selected_];
    QString s = QString("remaining %1, d_head %2 — ranks: ").arg(a.remaining, 0, 'f', 2).arg(data_.d_head);
    for (int l = 0; l < a.ranks.size(); ++l)
        s +=
            QString("%1layer %2: %3 (w %4)").arg(l ? ", " : "").arg(l).arg(a.ranks[l]).arg(a.w[l], 0, 'f', 3);
    return s;
}

void RankAllocationView::redraw()
{
    plot_->clearGraphs();
    plot_->clearItems();
    // Nothing to allocate (an encoder, or no model yet): said in the axes, no ticks.
    const QString empty = !data_.unavailable.isEmpty() ? data_.unavailable
                          : data_.normalised.isEmpty() ? QString("No model analysed yet")
                                                       : QString();
    show_placeholder(plot_, empty);
    plot_->legend->setVisible(empty.isEmpty());
    if (!empty.isEmpty()) {
        ranks_->setText(empty);
        plot_->replot();
        return;
    }
    const int L = static_cast<int>(data_.normalised.size());
    QVector<double> layers(L);
    for (int l = 0; l < L; ++l)
        layers[l] = l;
    auto* importance = plot_->addGraph();
    importance->setName("normalised importance");
    importance->setPen(QPen(Qt::gray, 2, Qt::DashLine));
    importance->setData(layers, data_.normalised, true);
    auto add_curve = [&](int i, bool highlighted) {
        const auto& a = data_.allocations[i];
        auto* g = plot_->addGraph();
        g->setName(QString("IPRS %1").arg(a.remaining, 0, 'f', 2));
        const QColor c = QColor::fromHsvF(0.66 * (1.0 - a.remaining), 0.8, 0.8);
        g->setPen(QPen(c, highlighted ? 3 : 1.2));
        g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, highlighted ? 6 : 3));
        g->setData(layers, a.w, true);
        if (highlighted) { // the uniform allocation at the same average
            auto* u = plot_->addGraph();
            u->setName(QString("uniform %1").arg(a.remaining, 0, 'f', 2));
            u->setPen(QPen(c, 1.5, Qt::DotLine));
            u->setData(layers, QVector<double>(L, a.remaining), true);
        }
    };
    if (overlay_->isChecked())
        for (int i = 0; i < data_.allocations.size(); ++i)
            if (i != selected_)
                add_curve(i, false);
    if (selected_ >= 0)
        add_curve(selected_, true);
    plot_->xAxis->setRange(-0.3, std::max(L - 1, 1) + 0.3);
    plot_->xAxis->ticker()->setTickCount(std::min(std::max(L, 2), 16));
    ranks_->setText(rankText());
    setToolTip(rankText());
    plot_->replot();
}

QString RankAllocationView::hoverText(const QPointF& pixel) const
{
    const int L = static_cast<int>(data_.normalised.size());
    if (L == 0 || !plot_->axisRect()->rect().contains(pixel.toPoint()))
        return {};
    const int l = static_cast<int>(std::lround(plot_->xAxis->pixelToCoord(pixel.x())));
    if (l < 0 || l >= L)
        return {};
    QString text =
        QString("layer %1: importance %2 of the largest").arg(l).arg(data_.normalised[l], 0, 'f', 3);
    if (selected_ >= 0 && selected_ < data_.allocations.size()) {
        const auto& a = data_.allocations[selected_];
        if (l < a.w.size() && l < a.ranks.size())
            text += QString("; at average remaining %1: w %2, rank %3 of %4")
                        .arg(a.remaining, 0, 'f', 2)
                        .arg(a.w[l], 0, 'f', 3)
                        .arg(a.ranks[l])
                        .arg(data_.d_head);
    }
    return text;
}

} // namespace embedlab::views
