#include "hover.hpp"

#include <QToolTip>
#include <qcustomplot.h>

namespace embedlab::views {

void install_hover(QCustomPlot* plot, std::function<QString(const QPointF& pixel)> text)
{
    plot->setMouseTracking(true);
    QObject::connect(plot, &QCustomPlot::mouseMove, plot, [plot, text = std::move(text)](QMouseEvent* event) {
        const QString shown = text(event->position());
        if (shown.isEmpty())
            QToolTip::hideText();
        else
            QToolTip::showText(event->globalPosition().toPoint(), shown, plot);
    });
}

int nearest_point(const QCustomPlot* plot, const QPointF& pixel, const double* x, const double* y, int n,
                  double radius)
{
    int best = -1;
    double best_d2 = radius * radius;
    for (int i = 0; i < n; ++i) {
        const double dx = plot->xAxis->coordToPixel(x[i]) - pixel.x();
        const double dy = plot->yAxis->coordToPixel(y[i]) - pixel.y();
        const double d2 = dx * dx + dy * dy;
        if (d2 <= best_d2) {
            best_d2 = d2;
            best = i;
        }
    }
    return best;
}

} // namespace embedlab::views
