// Hover read-outs: the value under the cursor as a tooltip, what a reader of a
// plot expects from any plotting tool. Each view says what is under a pixel
// (hoverText); this wires it to the mouse. The text is laid out by the view
// from the numbers it was given; nothing is computed here.
#pragma once

#include <functional>

#include <QPointF>
#include <QString>

class QCustomPlot;

namespace embedlab::views {

// Shows text(pixel) as a tooltip while the mouse moves over `plot` ("" hides it).
void install_hover(QCustomPlot* plot, std::function<QString(const QPointF& pixel)> text);

// The index of the point nearest `pixel` among (x[i], y[i]) drawn on `plot`'s
// main axes, -1 when none lies within `radius` pixels. Linear: 50k points take
// well under a millisecond.
int nearest_point(const QCustomPlot* plot, const QPointF& pixel, const double* x, const double* y, int n,
                  double radius);

} // namespace embedlab::views
