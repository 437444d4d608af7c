// Helpers for tests of Qt widgets (run with QT_QPA_PLATFORM=offscreen).
#pragma once

#include <QApplication>
#include <QWidget>
#include <qcustomplot.h>

namespace embedlab::test {

// Lays the widget out at a window's size, so pixels map to data as on screen.
inline void settle(QWidget& w)
{
    w.resize(1000, 700);
    w.setAttribute(Qt::WA_DontShowOnScreen);
    w.show();
    QApplication::processEvents();
    for (auto* plot : w.findChildren<QCustomPlot*>())
        plot->replot();
}

} // namespace embedlab::test
