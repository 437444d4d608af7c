#include "plot_view.hpp"

#include <qcustomplot.h>

namespace embedlab::views {

PlotView::PlotView(QWidget* parent) : QWidget(parent), plot_(new QCustomPlot(this)) {}

} // namespace embedlab::views
