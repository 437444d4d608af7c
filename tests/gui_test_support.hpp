// Helpers for tests of Qt widgets (run with QT_QPA_PLATFORM=offscreen).
#pragma once

#include <QApplication>
#include <QWidget>
#include <cmath>
#include <qcustomplot.h>

#include "fourier_map_view.hpp"

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

// Two Fourier maps over ids 100..100+count: T smooth in the id (neighbour cosine
// 0.99), "original" rough (neighbour cosine 0.1 - wobble * (p % 5)).
inline views::FourierMapData smooth_and_rough_maps(int count, int dim, double wobble = 0)
{
    views::FourierMapData d;
    d.first = 100;
    d.count = count;
    d.dim = dim;
    views::FourierMatrix t{"T", {}, {}}, original{"original", {}, {}};
    for (int p = 0; p < count; ++p)
        for (int i = 0; i < dim; ++i) {
            t.values << std::sin((i / 2 + 1) * 3.14159 * p / count);
            original.values << ((p * 7 + i * 13) % 11 - 5) / 5.0;
        }
    for (int p = 0; p + 1 < count; ++p) {
        t.neighbour << 0.99;
        original.neighbour << 0.1 - wobble * (p % 5);
    }
    d.matrices = {t, original};
    return d;
}

} // namespace embedlab::test
