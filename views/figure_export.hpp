// Saving any view's QCustomPlot as a figure: PNG (at a DPI), PDF or SVG, at
// paper size presets, optionally in a clean publication style as a matplotlib
// paper figure looks (white, a black box around each axes, ticks pointing out,
// no grid, 8/7 pt DejaVu Sans on axes, colour bars and legends alike, no legend
// frame). What only the screen needs (a selection ring, a selected plottable's
// highlight) is hidden while the figure is drawn. Files are written with
// QSaveFile (temp + rename), so a figure is complete or absent. A view whose
// figure needs another layout at a size (fewer legend columns, smaller markers)
// registers it with setFigureLayout; drawFigure draws exactly what exportFigure
// writes, for a checker (figure_layout.hpp) to read.
//
//   views::FigureOptions o{.width_in = views::kDoubleColumnInches, .dpi = 300};
//   QString error = views::exportFigure(view.plot(), "fig.pdf", o);   // "" on success
#pragma once

#include <QDialog>
#include <QSize>
#include <QString>
#include <functional>

class QCustomPlot;
class QCPPainter;
class QCPLayer;
class QCPLayerable;
class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QSpinBox;

namespace embedlab::views {

constexpr double kSingleColumnInches = 3.5;
constexpr double kDoubleColumnInches = 7.2;
constexpr double kSlideInches = 10.0;

struct FigureOptions {
    double width_in = kSingleColumnInches;
    double aspect = 0.62; // height / width
    int dpi = 300;        // PNG only; PDF and SVG are vector
    bool publication = true;
};

enum class FigureFormat { Png, Pdf, Svg, Unknown };
FigureFormat figureFormat(const QString& file); // by suffix, case-insensitive

// Marks a plottable, item or layer as on-screen only (a selection ring, a hover
// marker): exportFigure leaves it out and shows it again afterwards.
void setScreenOnly(QCPLayerable* layerable, bool screen_only = true);
void setScreenOnly(QCPLayer* layer, bool screen_only = true);
bool isScreenOnly(const QCPLayerable* layerable);

// Writes `plot` to `file` in the format its suffix names. Returns "" or a
// message naming the file and the problem. The plot is left as it was.
QString exportFigure(QCustomPlot* plot, const QString& file, const FigureOptions& options);

// The figure's size in logical pixels: 96 a inch, at which QCustomPlot's point
// sizes print at their size.
QSize figurePixels(const FigureOptions& options);

// Draws the figure onto `painter` (active, on a device of 96 logical dpi, or
// scaled to it) exactly as exportFigure draws it: the same size, style, layout
// and marks. The plot is left as it was.
void drawFigure(QCustomPlot* plot, QCPPainter* painter, const FigureOptions& options);

// How a view lays its figure out at a size: called with the figure's logical
// pixels before the figure is drawn and with QSize() afterwards (back to the
// window's layout). One per plot; an empty function removes it.
using FigureLayout = std::function<void(const QSize& figure)>;
void setFigureLayout(QCustomPlot* plot, FigureLayout layout);

// Size preset, aspect, DPI and style, for File > Export figure.
class FigureExportDialog : public QDialog {
    Q_OBJECT
public:
    explicit FigureExportDialog(QWidget* parent = nullptr);
    FigureOptions options() const;

private:
    QComboBox* preset_;
    QDoubleSpinBox* aspect_;
    QSpinBox* dpi_;
    QCheckBox* publication_;
};

} // namespace embedlab::views
