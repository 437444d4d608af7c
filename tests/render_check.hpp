// Renders a widget offscreen, saves the PNG next to the test binary (to look
// at) and measures how much is drawn: the share of pixels that differ from the
// background, and how many distinct colours appear.
#pragma once

#include <QApplication>
#include <QImage>
#include <QSet>
#include <QString>
#include <QWidget>
#include <qcustomplot.h>

namespace embedlab::test {

struct RenderStats {
    double drawn = 0; // share of pixels unlike the top-left (background) pixel
    int colours = 0;  // distinct RGB values
    QSize size;
};

// The same measures for an image already rendered (e.g. a PNG a tool wrote).
inline RenderStats image_stats(const QImage& rendered)
{
    const QImage image = rendered.convertToFormat(QImage::Format_RGB32);
    RenderStats s;
    s.size = image.size();
    const QRgb background = image.pixel(0, 0);
    QSet<QRgb> colours;
    qint64 differing = 0;
    for (int y = 0; y < image.height(); ++y)
        for (int x = 0; x < image.width(); ++x) {
            const QRgb p = image.pixel(x, y);
            differing += p != background;
            colours.insert(p);
        }
    s.drawn = static_cast<double>(differing) / (static_cast<double>(image.width()) * image.height());
    s.colours = static_cast<int>(colours.size());
    return s;
}

inline RenderStats render_to_png(QWidget& widget, const QString& file, QSize size = {1000, 700})
{
    widget.resize(size);
    widget.setAttribute(Qt::WA_DontShowOnScreen);
    widget.show();
    QApplication::processEvents(); // layouts settle; then every plot draws at its final size
    for (auto* plot : widget.findChildren<QCustomPlot*>())
        plot->replot();
    const QImage image = widget.grab().toImage().convertToFormat(QImage::Format_RGB32);
    image.save(file);
    return image_stats(image);
}

} // namespace embedlab::test
