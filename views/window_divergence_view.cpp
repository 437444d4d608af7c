#include "window_divergence_view.hpp"

#include <QLabel>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "plot_view.hpp"

namespace embedlab::views {

WindowPanel addWindowPanel(QCPAxisRect* rect)
{
    QCustomPlot* plot = rect->parentPlot();
    QCPAxis* x = rect->axis(QCPAxis::atBottom);
    QCPAxis* kl_axis = rect->axis(QCPAxis::atLeft);
    QCPAxis* top1_axis = rect->axis(QCPAxis::atRight);
    WindowPanel p{rect, plot->addGraph(x, kl_axis), plot->addGraph(x, top1_axis)};
    p.kl->setName("KL (nats/token)");
    p.kl->setPen(QPen(QColor(214, 39, 40), 1.5));
    p.kl->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 5));
    p.top1->setName("top-1 agreement");
    p.top1->setPen(QPen(QColor(31, 119, 180), 1.5, Qt::DashLine));
    p.top1->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
    x->setLabel("evaluation window");
    kl_axis->setLabel("KL (nats/token)");
    top1_axis->setLabel("top-1 agreement");
    top1_axis->setVisible(true);
    top1_axis->setRange(0, 1.05);
    return p;
}

void showWindows(const WindowPanel& p, const embedlab::RunSummary* run)
{
    QVector<double> x, kl, top1;
    if (run)
        for (size_t i = 0; i < run->window_kl.size(); ++i) {
            x << static_cast<double>(i + 1);
            kl << run->window_kl[i];
            if (i < run->window_top1.size())
                top1 << run->window_top1[i];
        }
    p.kl->setData(x, kl, true);
    if (top1.size() == x.size())
        p.top1->setData(x, top1, true);
    else
        p.top1->data()->clear();
    double hi = 0;
    for (double v : kl)
        if (std::isfinite(v))
            hi = std::max(hi, v);
    p.rect->axis(QCPAxis::atBottom)
        ->setRange(0.5, std::max<double>(1.5, static_cast<double>(x.size()) + 0.5));
    p.rect->axis(QCPAxis::atLeft)->setRange(0, hi > 0 ? hi * 1.1 : 1);
}

WindowDivergenceView::WindowDivergenceView(QWidget* parent)
    : QWidget(parent), plot_(new QCustomPlot(this)), note_(new QLabel(this))
{
    panel_ = addWindowPanel(plot_->axisRect());
    kl_ = panel_.kl;
    top1_ = panel_.top1;
    plot_->legend->setVisible(true);
    plot_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
    keep_readable_size(plot_);
    note_->setWordWrap(true);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(note_);
    layout->addWidget(plot_, 1);
    setRun(nullptr);
}

void WindowDivergenceView::setRun(const embedlab::RunSummary* run)
{
    showWindows(panel_, run);
    const auto windows = run ? run->window_kl.size() : size_t{0};
    if (!run)
        note_->setText("Select a row to see its KL from the original per evaluation window.");
    else if (windows == 0)
        note_->setText(
            QString("%1 %2 did not measure its divergence (+ KL vs original): no windows to show.")
                .arg(QString::fromStdString(run->method), QString::fromStdString(run->parameters)));
    else
        note_->setText(
            QString("%1 %2: KL(P<sub>original</sub> || P<sub>compressed</sub>) and top-1 agreement "
                    "in each of its %3 evaluation windows (mean KL %4).")
                .arg(QString::fromStdString(run->method), QString::fromStdString(run->parameters))
                .arg(windows)
                .arg(run->kl_mean, 0, 'f', 4));
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

QString WindowDivergenceView::note() const
{
    return note_->text();
}

} // namespace embedlab::views
