// What the analysis views have in common: one plain data struct (from the
// engine), laid out on one QCustomPlot. setData() keeps the value and has the
// view draw it; data() and plot() are what the figure export and tests read.
// dataTables() is File > Export data's: the plot's numbers (plot_data_export.hpp).
#pragma once

#include <QColor>
#include <QString>
#include <QWidget>

#include "plot_data_export.hpp"

class QCustomPlot;

namespace embedlab::views {

// Below this a plot's axes cannot be read (tick labels run together, the axis
// label is clipped): layouts, docks and splitters leave every plot at least this.
inline constexpr int kMinPlotWidth = 320, kMinPlotHeight = 240;
void keep_readable_size(QCustomPlot* plot);

// One colour per method in every view and export: the method's place in the
// registry (method_registry.hpp) picks it, so pca is the same blue whatever ran first.
QColor method_colour(const QString& method);

class PlotView : public QWidget {
public:
    QCustomPlot* plot() const { return plot_; }
    // The plotted values as tables (File > Export data). By default every
    // plottable's, read off the plot; a view may name its columns better.
    virtual QVector<DataTable> dataTables() const;

protected:
    explicit PlotView(QWidget* parent); // creates the plot, a child of the view

    QCustomPlot* const plot_;
};

template <class Data> class DataPlotView : public PlotView {
public:
    void setData(const Data& data)
    {
        data_ = data;
        draw();
    }
    const Data& data() const { return data_; }

protected:
    using PlotView::PlotView;
    virtual void draw() = 0; // lays out data_ (after every setData)

    Data data_;
};

} // namespace embedlab::views
