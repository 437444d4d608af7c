#include "parameter_breakdown_chart.hpp"

#include <QVBoxLayout>
#include <qcustomplot.h>

#include "plot_interaction.hpp"
#include "plot_view.hpp"

namespace embedlab::views {

ParameterBreakdownChart::ParameterBreakdownChart(QWidget* parent) : DataPlotView(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(plot_);
    // Two bar series: the highlighted part gets its own colour so it reads at a glance.
    bars_ = new QCPBars(plot_->xAxis, plot_->yAxis);
    bars_->setBrush(QColor(120, 144, 176));
    bars_->setPen(Qt::NoPen);
    highlight_ = new QCPBars(plot_->xAxis, plot_->yAxis);
    highlight_->setBrush(QColor(214, 96, 77));
    highlight_->setPen(Qt::NoPen);
    plot_->yAxis->setLabel("parameters (millions)");
    keep_readable_size(plot_); // a scrolled Model tab leaves it no more
    // The parts span decades (norms of thousands beside tables of millions): a log
    // axis on request. The parts are categories: zoom and pan the counts only.
    install_navigation(plot_)->addLogToggle(plot_->yAxis, "parameter axis");
    plot_->axisRect()->setRangeDrag(Qt::Vertical);
    plot_->axisRect()->setRangeZoom(Qt::Vertical);
}

void ParameterBreakdownChart::draw()
{
    QVector<double> keys, values, hkeys, hvalues;
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    double top = 0;
    for (int i = 0; i < data_.bars.size(); ++i) {
        const double millions = data_.bars[i].count / 1e6;
        ticker->addTick(i + 1, data_.bars[i].label);
        (i == data_.highlighted ? hkeys : keys).push_back(i + 1);
        (i == data_.highlighted ? hvalues : values).push_back(millions);
        top = std::max(top, millions);
    }
    bars_->setData(keys, values);
    highlight_->setData(hkeys, hvalues);
    plot_->xAxis->setTicker(ticker);
    plot_->xAxis->setTickLabelRotation(30);
    plot_->xAxis->setRange(0.3, data_.bars.size() + 0.7);
    plot_->yAxis->setRange(0, top > 0 ? top * 1.1 : 1);
    plot_->replot();
}

} // namespace embedlab::views
