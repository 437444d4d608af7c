// Shared by neighbour_graph_view.cpp and neighbour_map.cpp (private to the view):
// the cosine bands' colours, the graphs' order, and the haloed label item.
#pragma once

#include <QColor>
#include <QSharedPointer>
#include <QString>

class QCustomPlot;
class QCPItemText;
class QCPColorGradient;
class QCPAxisTickerText;

namespace embedlab::views::neighbour_map {

// Rare tokens are drawn in bands of reconstruction cosine; graph kFirstBand + b is
// band b (b = 0 the worst), and the worst band is drawn last.
struct Band {
    double below;
    const char* name;
    QColor colour;
};
inline const Band kBands[] = {{0.5, "rare, cos < 0.5", {214, 39, 40}},
                              {0.7, "cos 0.5–0.7", {255, 127, 14}},
                              {0.8, "cos 0.7–0.8", {188, 189, 34}},
                              {0.9, "cos 0.8–0.9", {44, 160, 44}},
                              {2.0, "cos ≥ 0.9", {31, 119, 180}}};
constexpr int kBandCount = 5;
constexpr int kFirstBand = 1;              // graph 0: common tokens
constexpr int kSelection = 1 + kBandCount; // graph: the selected token and its neighbours
constexpr double kScaleLow = 0.4;          // the colour bar's bottom: the first band is "below 0.5"
inline const QColor kCommonGrey(110, 110, 110, 160);

QCPColorGradient cosine_gradient();
QSharedPointer<QCPAxisTickerText> cosine_ticks();
QString csv_quoted(const QString& text);

// A text item drawn over a white halo (its glyphs stroked in white first), so a
// label reads on dense points. A QCPItemText to every caller.
QCPItemText* halo_text(QCustomPlot* plot);
bool has_halo(const QCPItemText* text);

} // namespace embedlab::views::neighbour_map
