#include "plot_view.hpp"

#include <QVector>
#include <qcustomplot.h>

#include "embedlab/method_registry.hpp"

namespace embedlab::views {

QColor method_colour(const QString& method)
{
    // Twelve colours that stay apart (the registry's eleven methods, and more by hash).
    static const QVector<QColor> palette{{31, 119, 180}, {214, 39, 40},   {44, 160, 44},   {148, 103, 189},
                                         {255, 127, 14}, {140, 86, 75},   {227, 119, 194}, {23, 190, 207},
                                         {188, 189, 34}, {127, 127, 127}, {0, 0, 128},     {128, 0, 64}};
    // A chain's row (pipeline.hpp's method "chain") is black: no method's colour, hashed or not.
    if (method == QLatin1String("chain"))
        return QColor(0, 0, 0);
    const auto& registry = method_registry();
    for (size_t i = 0; i < registry.size(); ++i)
        if (method == QString::fromLatin1(registry[i].name))
            return palette[static_cast<int>(i % palette.size())];
    return palette[static_cast<int>(qHash(method) % palette.size())];
}

void keep_readable_size(QCustomPlot* plot)
{
    plot->setMinimumSize(kMinPlotWidth, kMinPlotHeight);
}

PlotView::PlotView(QWidget* parent) : QWidget(parent), plot_(new QCustomPlot(this))
{
    keep_readable_size(plot_);
}

QVector<DataTable> PlotView::dataTables() const
{
    return plotDataTables(plot_);
}

} // namespace embedlab::views
