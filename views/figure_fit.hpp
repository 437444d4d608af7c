// What every figure needs at its size, whatever the view: exportFigure applies
// it (after the publication style and the view's own figure layout) and undoes
// it afterwards. At the figure's size, laid out as QCustomPlot lays it out:
//  - a legend below the axes takes as many columns as fit the width (a smaller
//    type when one column does not), so no entry is cut;
//  - an axis label longer than its axis is broken into lines;
//  - tick labels that would run into each other are thinned (numbers) or turned
//    (categories: 30, 45 then 90 degrees), then thinned;
//  - a tick label reaching past the figure's side (a turned last category) gets
//    room from the axes' margin: QCustomPlot would silently not draw it;
//  - scatter markers shrink with a narrow figure (a single column's points are
//    not blobs).
//
//   { FigureFit fit(plot, QSize(336, 208)); plot->toPainter(&painter, 336, 208); }
#pragma once

#include <QFont>
#include <QMargins>
#include <QPointer>
#include <QSharedPointer>
#include <QSize>
#include <QString>
#include <QVector>

class QCustomPlot;
class QCPAbstractPlottable;
class QCPAxis;
class QCPAxisRect;
class QCPAxisTicker;
class QCPLegend;

namespace embedlab::views {

class FigureFit {
public:
    FigureFit(QCustomPlot* plot, const QSize& size);
    ~FigureFit();
    FigureFit(const FigureFit&) = delete;
    FigureFit& operator=(const FigureFit&) = delete;

private:
    void fitLegends();
    void fitAxisLabels();
    void fitTickLabels();
    void fitTickOverhang();
    void fitMarkers();
    void layOut(); // QCustomPlot's three layout phases at the figure's size

    struct Legend {
        QPointer<QCPLegend> legend;
        int wrap;
        QFont font;
        QList<double> stretch;
    };
    struct Axis {
        QPointer<QCPAxis> axis;
        QString label;
        QFont label_font;
        QSharedPointer<QCPAxisTicker> ticker;
        int tick_count;
        double rotation;
    };
    struct Margins {
        QPointer<QCPAxisRect> rect;
        int auto_sides;
        QMargins margins;
    };
    struct Marker {
        QPointer<QCPAbstractPlottable> plottable;
        double size;
    };
    QCustomPlot* plot_;
    QSize size_;
    QVector<Legend> legends_;
    QVector<Axis> axes_;
    QVector<Marker> markers_;
    QVector<Margins> margins_;
};

} // namespace embedlab::views
