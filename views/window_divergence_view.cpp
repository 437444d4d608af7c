#include "window_divergence_view.hpp"

#include <QLabel>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

#include "plot_view.hpp"

namespace embedlab::views {

WindowDivergenceView::WindowDivergenceView(QWidget* parent)
    : QWidget(parent), plot_(new QCustomPlot(this)), note_(new QLabel(this))
{
    kl_ = plot_->addGraph(plot_->xAxis, plot_->yAxis);
    kl_->setName("KL (nats/token)");
    kl_->setPen(QPen(QColor(214, 39, 40), 1.5));
    kl_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 5));
    top1_ = plot_->addGraph(plot_->xAxis, plot_->yAxis2);
    top1_->setName("top-1 agreement");
    top1_->setPen(QPen(QColor(31, 119, 180), 1.5, Qt::DashLine));
    top1_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
    plot_->xAxis->setLabel("evaluation window");
    plot_->yAxis->setLabel("KL (nats/token)");
    plot_->yAxis2->setLabel("top-1 agreement");
    plot_->yAxis2->setVisible(true);
    plot_->yAxis2->setRange(0, 1.05);
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
    QVector<double> x, kl, top1;
    if (run)
        for (size_t i = 0; i < run->window_kl.size(); ++i) {
            x << static_cast<double>(i + 1);
            kl << run->window_kl[i];
            if (i < run->window_top1.size())
                top1 << run->window_top1[i];
        }
    kl_->setData(x, kl, true);
    if (top1.size() == x.size())
        top1_->setData(x, top1, true);
    else
        top1_->data()->clear();
    double hi = 0;
    for (double v : kl)
        if (std::isfinite(v))
            hi = std::max(hi, v);
    plot_->xAxis->setRange(0.5, std::max<double>(1.5, static_cast<double>(x.size()) + 0.5));
    plot_->yAxis->setRange(0, hi > 0 ? hi * 1.1 : 1);
    if (!run)
        note_->setText("Select a row to see its KL from the original per evaluation window.");
    else if (x.isEmpty())
        note_->setText(
            QString("%1 %2 did not measure its divergence (+ KL vs original): no windows to show.")
                .arg(QString::fromStdString(run->method), QString::fromStdString(run->parameters)));
    else
        note_->setText(
            QString("%1 %2: KL(P<sub>original</sub> || P<sub>compressed</sub>) and top-1 agreement "
                    "in each of its %3 evaluation windows (mean KL %4).")
                .arg(QString::fromStdString(run->method), QString::fromStdString(run->parameters))
                .arg(x.size())
                .arg(run->kl_mean, 0, 'f', 4));
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

QString WindowDivergenceView::note() const
{
    return note_->text();
}

} // namespace embedlab::views
