// Does a figure read? Draws a plot as exportFigure draws it (drawFigure: the
// same size, style and layout) onto a device that draws nothing but records
// every piece of text QCustomPlot lays out (axis and tick labels at their
// rotation, legend entries, titles, text items, colour-bar labels) with its box
// and the clip it was drawn under. Hidden and screen-only texts are never drawn,
// so never recorded. Then names what a reader would see wrong: a text that
// leaves the canvas, one its clip cuts (a legend entry wider than its cell), and
// two texts that overlap.
//
//   const QStringList problems = views::figureLayoutProblems(view.plot(), {.width_in = 3.5});
//   // e.g. "'originalTT' (tick label at 212,301 61x9) overlaps 'TT' (...)"
#pragma once

#include <QPolygonF>
#include <QRectF>
#include <QString>
#include <QStringList>
#include <QVector>

#include "figure_export.hpp"

class QCustomPlot;

namespace embedlab::views {

struct FigureText {
    QString text;
    QRectF box;      // logical pixels of the figure (the text's advance by its ascent + descent)
    QPolygonF shape; // the same box as drawn (turned with a rotated tick label)
    QRectF clip;     // what it was drawn under (the canvas when unclipped)
    QString where;   // "legend", "axes", "colour bar", "margin": the layout element it sits in
};

// Every text of the figure as drawn at `options`' size.
QVector<FigureText> figureTexts(QCustomPlot* plot, const FigureOptions& options);

// One readable line per problem; empty when every text is inside the canvas,
// uncut and apart from every other. Overlaps and overhangs under `tolerance`
// logical pixels (glyph boxes touching) are not problems.
QStringList figureLayoutProblems(QCustomPlot* plot, const FigureOptions& options, double tolerance = 1.0);

} // namespace embedlab::views
